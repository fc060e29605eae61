"""The allocation studies (spinlib.studies.allocation): the measured preset's gain intervals."""
import pytest


def test_measured_preset_gain_intervals_are_reproducible_and_bracket_nothing_impossible():
    """The interval carried from the measurements: same seed, same answer; the point estimate is the committed
    preset's gain on the same cells (solved here independently); gains >= 0 (server-only is feasible)."""
    import numpy as np

    from spinlib.control import solve
    from spinlib.studies.allocation import measured_preset_gain_intervals
    from spinlib.presets import MEASURED_PRESET, get_preset, random_scenario

    r1 = measured_preset_gain_intervals(MEASURED_PRESET, num_users=1, n_cells=3, n_boot=6, seed=4)
    assert r1 == measured_preset_gain_intervals(MEASURED_PRESET, num_users=1, n_cells=3, n_boot=6, seed=4)
    cells = [int(x) for x in np.random.SeedSequence(4).spawn(2)[0].generate_state(3)]
    mp = get_preset(MEASURED_PRESET)
    g = np.mean([solve(s, "heterogeneous-sync").goodput_tokens_per_s / solve(s, "server-only").goodput_tokens_per_s - 1
                 for s in (random_scenario(1, c, mp) for c in cells)])
    assert r1["gain"]["value"] == pytest.approx(g, rel=1e-12, abs=1e-15)
    assert len(r1["replicates"]) == 6 and min(r1["replicates"]) >= -1e-9
    for k in ("gain", "drafting", "L_max"):
        assert r1[k]["lo"] <= r1[k]["hi"]
