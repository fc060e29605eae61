"""Notebook 12's study (spinlib.studies.real_models): the compute-only speed-up against a direct
formula on fresh random instances, its limits, and the readers of earlier claims and benchmarks."""
import numpy as np
import pytest

from spinlib.studies.real_models import (best_speedup, breakeven_grid, compute_speedup, earlier_claims,
                                         read_benchmark)
from spinlib.validation import ValidationError


def _direct(alpha, L, t_d, t0, t1, K, per):
    """The speed-up written out by hand, one instance at a time (no library kernel)."""
    en = sum(alpha ** i for i in range(L + 1))
    pos = (L + 1) if per == "position" else 1
    return en * (t0 + t1 * K) / (L * t_d + t0 + t1 * K * pos)


@pytest.mark.parametrize("per", ["position", "device"])
def test_speedup_and_its_best_length_match_the_direct_formula(per):
    rng = np.random.default_rng(np.random.SeedSequence().entropy)
    for _ in range(200):
        a, t_d, t0, t1 = rng.uniform(0, 0.99), rng.uniform(1e-3, 0.3), rng.uniform(1e-3, 0.5), rng.uniform(0, 0.05)
        K = int(rng.integers(1, 60))
        direct = [_direct(a, L, t_d, t0, t1, K, per) for L in range(26)]
        assert np.allclose(compute_speedup(a, np.arange(26), t_d, t0, t1, K, per), direct, rtol=1e-12)
        S, L = best_speedup(a, t_d, t0, t1, K, per)
        assert S == pytest.approx(max(direct), rel=1e-12) and direct[L] == pytest.approx(S, rel=1e-12)
        assert S >= 1.0 - 1e-12  # L = 0 is plain decoding
        if per == "device":  # a server that charges per device never loses to one that charges per position
            assert S >= best_speedup(a, t_d, t0, t1, K, "position")[0] - 1e-12


def test_limits_and_the_grid():
    assert compute_speedup(0.8, 0, 0.1, 0.2, 0.01, 10) == pytest.approx(1.0)
    # free drafts and a free verification: E[N](L) tokens per round
    assert compute_speedup(0.5, 3, 0.0, 1.0, 0.0, 4) == pytest.approx(1 + 0.5 + 0.25 + 0.125)
    # costlier drafts never help
    assert np.all(np.diff(compute_speedup(0.8, 4, np.linspace(0, 1, 11), 0.2, 0.01, 5)) < 0)
    g = breakeven_grid(0.8, 10, [0.1, 2.0], [0.0, 0.5])
    assert g.shape == (2, 2) and g[0, 0] > 1 and g[0, 0] >= g[1, 0] and g[0, 0] >= g[0, 1]
    with pytest.raises(ValidationError, match="per must be one of"):
        compute_speedup(0.8, 2, 0.1, 0.2, 0.01, 3, per="token")


def test_earlier_claims_and_benchmarks_come_from_this_run_or_the_committed_one(tmp_path):
    got = earlier_claims(["05_acceptance_measurement"], results=tmp_path)
    assert got and all(r["source"] == "committed run" and r["notebook"] == "05_acceptance_measurement"
                       for r in got.values())
    with pytest.raises(ValidationError, match="no claims of notebook"):
        earlier_claims(["99_nothing"], results=tmp_path)
    assert "comparisons" in read_benchmark("engine_throughput", results=tmp_path)
    with pytest.raises(ValidationError, match="no benchmark"):
        read_benchmark("nothing", results=tmp_path)
