"""Notebook 09's studies (spinlib.studies.balance): the hybrid-regime records are exact and reproducible,
and the claim map's gain is the regime point's."""
import numpy as np
import pytest

from spinlib.studies.balance import REGIME_REGION, hybrid_regime_point, hybrid_regime_study
from spinlib.validation import ValidationError


@pytest.mark.parametrize("seed", range(4))
def test_balance_hybrid_point_is_the_regime_point_and_never_negative(seed):
    """The map's gain is (BALANCE - better single mode) / K of the same instance hybrid_regime_point
    solves (defaults = the generator's), >= 0, and an unknown axis is one line."""
    from spinlib.balance import random_instance, solve_balance
    from spinlib.studies.balance import HYBRID_MAP_DEFAULTS, balance_hybrid_point

    rng = np.random.default_rng(seed)
    K = int(rng.integers(5, 60))
    cell = {"num_users": K, "memory_gb": float(rng.choice([20.0, 40.0, 80.0])), "budget_ms_low": 5.0}
    r = balance_hybrid_point(cell, seed)
    assert r["hybrid_gain"] >= 0 and r["hybrid_gain"] * K == r["hybrid_gain_users"]
    kw = dict(memory_gb=cell["memory_gb"], token_budget_ms=(5.0, 5.0 * HYBRID_MAP_DEFAULTS["budget_spread"]),
              output_tokens=(32, 512), prompt_tokens=(64, 2048), alpha_range=(0.3, 0.9), draft_length=4)
    inst = random_instance(K, np.random.default_rng(np.random.SeedSequence(seed)), **kw)
    best = max(solve_balance(inst, "ad-only").served, solve_balance(inst, "sd-only").served)
    assert r["best_single_share"] == best / K
    with pytest.raises(ValidationError, match="unknown axes"):
        balance_hybrid_point({"users": 3}, 0)


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


def test_balance_rounds_check_counts_are_consistent_and_reproducible(tmp_path):
    """The drawn-rounds check (a Study over the policies): one record per policy and instance, counts that
    fit together (deadlines met <= user-plays, AD-only deterministic: every deadline met, no late play,
    AD completions at the analysis's time), the same records from the same seed."""
    from spinlib.studies.balance import balance_rounds_check

    recs = balance_rounds_check(["ad-only", "sd-only", "greedy"], 10, 2, 6, 3, n_jobs=1, store_dir=tmp_path)
    again = balance_rounds_check(["ad-only", "sd-only", "greedy"], 10, 2, 6, 3, n_jobs=1, store_dir=tmp_path)
    assert recs == again and len(recs) == 3 * 2
    for r in recs:
        assert 0 <= r["met"] <= r["user_plays"] == 6 * r["served"], r
        assert r["served"] == r["ad_users"] + r["sd_users"] and 0 <= r["late_plays"] <= 6, r
        assert r["ad_max_rel_gap"] <= 1e-12, r
        if r["policy"] == "ad-only":
            assert r["met"] == r["user_plays"] and r["late_plays"] == 0 and r["sd_users"] == 0, r
        if r["sd_users"]:
            assert 0.9 < r["sd_ratio_sum"] / r["sd_users"] < 1.5, r
