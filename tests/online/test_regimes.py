"""Issue 25's regime studies: where BALANCE's hybrid pays, and the critical delay with its interval."""
from __future__ import annotations

import math

import numpy as np
import pytest

from spinlib.studies.balance import REGIME_REGION, hybrid_regime_point, hybrid_regime_study
from spinlib.studies.online import critical_delay_intervals, critical_delay_two_points
from spinlib.online.stopping import RoundCosts, critical_delay


def test_hybrid_regime_records_are_exact_and_reproducible():
    a = hybrid_regime_study(12, 4)
    assert a == hybrid_regime_study(12, 4)
    assert a[:5] == hybrid_regime_study(5, 4)  # a point depends only on (seed, point)
    for r in a:
        assert r["balance"] >= max(r["ad-only"], r["sd-only"])  # the exact optimum covers both single modes
        assert r["balance"] <= r["K"] and r["balance_ad"] + r["balance_sd"] == r["balance"]
        lo, hi = REGIME_REGION["memory_gb"]
        assert lo <= r["memory_gb"] <= hi and r["alpha_low"] <= r["alpha_high"]


def test_hybrid_regime_point_seed_matters():
    import numpy.random as npr
    s = {"num_users": 40, "memory_gb": 40.0, "token_budget_ms": (5.0, 50.0), "output_tokens": (32, 128),
         "prompt_tokens": (32, 64), "alpha_range": (0.6, 0.9), "draft_length": 4}
    r1 = hybrid_regime_point(s, npr.SeedSequence(1))
    assert r1 == hybrid_regime_point(s, npr.SeedSequence(1))


@pytest.mark.parametrize("seed", range(20))
def test_two_point_critical_delay_equals_the_closed_form_on_a_line(seed):
    rng = np.random.default_rng([4, seed])
    S = np.concatenate([[1.0], np.sort(rng.uniform(0.01, 1.0, 3))[::-1]])
    t_d, t0, t1 = rng.uniform(0.001, 0.2), rng.uniform(0.0, 0.3), rng.uniform(0.0, 0.02)
    a = critical_delay(S, RoundCosts(t_d, t0, t1, 0.0))
    b = critical_delay_two_points(S, t_d, t0 + 2 * t1, t0 + 3 * t1)
    assert b == pytest.approx(a, rel=1e-9, abs=1e-12)
    assert math.isinf(critical_delay_two_points(np.array([1.0, 0.5, 0.0]), t_d, 0.1, 0.1))


def test_critical_delay_interval_is_reproducible_and_brackets_its_replicates():
    r = critical_delay_intervals(["smollm2-rtn3g16"], n_boot=60, seed=3)["smollm2-rtn3g16"]
    again = critical_delay_intervals(["smollm2-rtn3g16"], n_boot=60, seed=3)["smollm2-rtn3g16"]
    assert r == again
    reps = np.array(r["replicates_s"])
    assert r["ci_low_s"] <= np.median(reps) <= r["ci_high_s"] and len(reps) == 60
    assert r["fit_rms_residual_s"] > 0 and np.isfinite(r["D_c_two_points_s"])


def test_optimal_length_interval_rides_on_the_same_replicates():
    # the point L* is brute force's on the pair's point timings and pooled survival; the delays do not move the
    # critical delay's replicates (one generator stream); L* is non-decreasing in D at the point and at both ends
    from spinlib.online.measured import pair_timings, pooled_survival
    from spinlib.online.stopping import brute_force_length

    pair, Ds = "qwen-coder", (0.05, 0.5, 5.0)
    r = critical_delay_intervals([pair], n_boot=60, seed=3, lengths_at_s=Ds)[pair]
    plain = critical_delay_intervals([pair], n_boot=60, seed=3)[pair]
    assert r["replicates_s"] == plain["replicates_s"] and plain["L_star_at"] == {}
    tim = pair_timings(pair)
    S = pooled_survival(pair, 12)
    at = [r["L_star_at"][str(D)] for D in Ds]
    for D, v in zip(Ds, at):
        assert v["L"] == brute_force_length(S, RoundCosts(tim["t_d"], tim["t0"], tim["t1"], D))[0]
        assert 1 <= v["ci_low"] <= v["ci_high"] <= 12 and 0 <= v["share_same"] <= 1
    for key in ("L", "ci_low", "ci_high"):
        assert [v[key] for v in at] == sorted(v[key] for v in at)
    assert at[-1]["L"] > at[0]["L"]
