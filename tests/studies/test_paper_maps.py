"""The papers' claim-map point functions (spinlib.studies.paper_maps): each checked against an
independent computation of the same cell (the optimiser order, the exhaustive optimum, the exhaustive mode
choice), and an unknown axis is one line."""
import numpy as np
import pytest

from spinlib.studies.paper_maps import paper1_gain_point, paper2_dl_side_point
from spinlib.validation import ValidationError


def test_paper1_point_respects_the_optimiser_order_and_checks_its_axes():
    for cell in ({"bandwidth_mhz": 2.0, "heterogeneity": 1.0, "num_users": 4}, {"heterogeneity": 0.0, "num_users": 3}):
        r = paper1_gain_point(cell, 11, L_max=8)
        assert r["gain_het"] >= r["gain_hom"] - 1e-9 >= -2e-9  # heterogeneous >= homogeneous >= agnostic
    with pytest.raises(ValidationError, match="unknown axes"):
        paper1_gain_point({"bandwidth": 1.0}, 0)


def test_paper2_point_reports_the_dl_side_and_checks_its_axes():
    r = paper2_dl_side_point({"dl_power_dbm": 46.0, "cell_radius_m": 1500.0, "num_users": 4}, 5)
    assert 0.0 <= r["dl_share"] <= 1.0 and 0 <= r["drafting"] <= 4
    assert np.isnan(r["far_dl_db"]) == (r["dl_share"] in (0.0, 1.0) or r["drafting"] == 0)
    with pytest.raises(ValidationError, match="unknown axes"):
        paper2_dl_side_point({"radius": 1.0}, 0)


@pytest.mark.parametrize("seed", range(4))
def test_paper1_compensation_point_detects_both_directions(seed):
    """The homogeneous split gives a slower or farther user more bandwidth (a theorem of equal finish
    times: every user compensated on fresh random cells); a *faster* draft must read as not compensated."""
    from spinlib.studies.paper_maps import paper1_compensation_point

    rng = np.random.default_rng([27, seed])
    cell = {"num_users": int(rng.integers(2, 30)), "bandwidth_mhz": float(rng.choice([1.0, 10.0, 40.0])),
            "heterogeneity": float(rng.uniform(0, 1))}
    assert paper1_compensation_point(cell, seed)["compensated"] == 1.0
    r = paper1_compensation_point(cell, seed, draft_step=1 / 1.2, loss_step_db=-2.0)
    assert r["compensated_compute"] == 0.0 and r["compensated_channel"] == 0.0
    with pytest.raises(ValidationError, match="unknown axes"):
        paper1_compensation_point({"users": 3}, 0)


@pytest.mark.parametrize("seed", range(3))
def test_paper1_rewards_point_agrees_with_the_exhaustive_optimum(seed):
    """On 3 users identical except alpha, the point's verdict for model A equals the monotonicity of the
    exhaustive optimum (an independent reference) of the same cell."""
    from spinlib import User, random_scenario
    from spinlib.control import solve
    from spinlib.studies.paper_maps import paper1_rewards_point

    cell = {"num_users": 3, "bandwidth_mhz": float([1.0, 5.0, 20.0][seed])}
    r = paper1_rewards_point(cell, seed)
    s = random_scenario(3, seed=seed, preset="llama2-7b-l4", bandwidth_hz=cell["bandwidth_mhz"] * 1e6)
    alphas = np.sort(np.random.default_rng(seed).uniform(0.3, 0.95, 3))
    u0 = s.users[0]
    s = s.replace(users=tuple(User(0.004, float(a), u0.channel_gain, u0.tx_power_w) for a in alphas))
    x = solve(s, "exhaustive", L_max=16)
    mono = bool(np.all(np.diff(x.b) >= -1e-6 * s.radio.bandwidth_hz) and np.all(np.diff(x.L) >= 0))
    assert r["rewards_sync"] == float(mono)
    with pytest.raises(ValidationError, match="unknown axes"):
        paper1_rewards_point({"alpha": 3}, 0)


@pytest.mark.parametrize("seed", range(4))
def test_paper2_structure_point_is_the_exhaustive_comparison(seed):
    from spinlib.control import uldl as U
    from spinlib.studies.paper_maps import paper2_structure_point
    from spinlib.presets import random_uldl_scenario

    cell = {"num_users": 3 + seed, "dl_power_dbm": 20.0 + 8 * seed}
    r = paper2_structure_point(cell, seed)
    assert 0.0 <= r["gap"] < 1 and r["structure_optimal"] == float(r["gap"] <= 1e-9)
    rng = np.random.default_rng(seed)
    s = random_uldl_scenario(cell["num_users"], rng)
    from spinlib.channel import dbm_to_w
    import dataclasses
    s = s.replace(downlink=dataclasses.replace(s.downlink, power_w=float(dbm_to_w(cell["dl_power_dbm"]))))
    L = rng.integers(0, 9, cell["num_users"])
    assert r["drafting"] == int((L > 0).sum())
    _, G_x = U.exhaustive_modes(U.Problem(s, 8), L)
    _, G_s, _ = U.structured_modes(U.Problem(s, 8), L, index="marginal")
    assert r["gap"] == pytest.approx(max(0.0, 1 - G_s / G_x), abs=1e-12)
    with pytest.raises(ValidationError, match="unknown axes"):
        paper2_structure_point({"power": 3}, 0)
