"""The notebooks' randomised studies are :class:`spinlib.study.Study` instances (issue 23, item 4): one master
seed, the same seeds at every point (common random numbers), records that carry their point and seed, and
records that do not depend on where the tasks ran. Each study is also checked for a property its common
seeds give it (the same cell under every fading model, the same instance at every memory size, ...).
"""
from __future__ import annotations

import pytest

import spinlib.study as study_module
from spinlib.studies import allocation as A
from spinlib.studies import balance as B
from spinlib.studies import replanning as R
from spinlib.study import study_seeds
from helpers import fresh_seed

TIMING_FIELDS = ("_ms_", "_ms", "t_optimal", "t_exhaustive")  # wall-clock fields: timings, not results


def _scenario():
    from spinlib import random_scenario

    return random_scenario(3, 7)


# name -> (function, arguments without the seed, the point parameter(s) each record carries, n_seeds)
STUDIES = {
    "exhaustive_gaps": (A.exhaustive_gaps, dict(n=2, L_max=4), ("preset", "L_max"), 2),
    "uldl_structure_check": (A.uldl_structure_check, dict(n=3, L_max=4), ("L_max",), 3),
    "uldl_length_check": (A.uldl_length_check, dict(n=1), ("K_pair",), 1),
    "mc_vs_closed_form": (A.mc_vs_closed_form, dict(scenario=_scenario(), L_values=[0, 2], n_rounds=300), ("L",), 1),
    "testbed_agreement": (A.testbed_agreement, dict(policies=["homogeneous", "uldl-optimal"], n_scenarios=2, rounds=200),
                          ("uplink",), 2),
    "queueing_gap": (A.queueing_gap, dict(Ks=[1, 3], seeds_per_K=2, rounds=200, L_max=6), ("K",), 2),
    "fading_gains": (A.fading_gains, dict(policies=["homogeneous", "server-only"], n_scenarios=2, rounds=200,
                                          num_users=3, L_max=6), ("fading",), 2),
    "served_sweep": (B.served_sweep, dict(knob="memory_gb", values=[20, 80], n_seeds=2, num_users=12,
                                          milp_max_users=12), ("x",), 2),
    "ratio_campaign": (B.ratio_campaign, dict(n_instances=3, k_max=8), ("k_max",), 3),
    "hybrid_regime_study": (B.hybrid_regime_study, dict(n_points=3), ("region",), 3),
    "replan_under_fading": (R.replan_under_fading, dict(n_cells=2, num_users=2, rounds=20,
                                                        controllers=("plan-on-average", "server-only")), ("fading",), 2),
}


def _results(records):
    return [{k: v for k, v in r.items() if not any(t in k for t in TIMING_FIELDS)} for r in records]


@pytest.fixture(autouse=True)
def _stores(tmp_path, monkeypatch):
    monkeypatch.setattr(study_module, "STORES", tmp_path / "records")


@pytest.mark.parametrize("name", sorted(STUDIES))
def test_a_study_uses_one_master_seed_and_its_records_do_not_depend_on_where_they_ran(name):
    fn, kw, params, n_seeds = STUDIES[name]
    seed = fresh_seed() % 1000
    recs = fn(**kw, seed=seed, n_jobs=1)
    seeds = study_seeds(seed, n_seeds)
    points = {tuple(r[p] for p in params) for r in recs}
    for pt in points:  # every point ran on the study's seeds, the same seeds at every point
        assert sorted({r["seed"] for r in recs if tuple(r[p] for p in params) == pt}) == sorted(seeds), (name, pt)
    assert _results(fn(**kw, seed=seed, n_jobs=2)) == _results(recs)
    assert not list((study_module.STORES).glob("*.jsonl")), "a finished study leaves no store"


def test_fading_gains_plays_the_same_cells_under_every_fading_model():
    """The prediction is the average channel's, so a cell's prediction is the same under every fading model;
    the static channel's emulation is near it (unbiased testbed)."""
    recs = A.fading_gains(["homogeneous", "heterogeneous-sync"], 2, 400, fresh_seed() % 1000, num_users=4, n_jobs=1)
    by = {}
    for r in recs:
        by.setdefault((r["seed"], r["policy"]), set()).add(r["predicted"])
    assert by and all(len(v) == 1 for v in by.values())
    assert len(recs) == 3 * 2 * 2


def test_served_sweep_meets_the_same_users_at_every_memory_size():
    """Common seeds: the same instance at every memory size, so the exact optimum (BALANCE on the grid) never
    serves fewer users with more memory, and K is the same."""
    recs = B.served_sweep("memory_gb", [16, 30, 80], 3, fresh_seed() % 1000, num_users=25, milp_max_users=0,
                          policies=("balance", "ad-only"), n_jobs=1)
    for s in {r["seed"] for r in recs}:
        mine = sorted((r for r in recs if r["seed"] == s), key=lambda r: r["x"])
        assert len({r["K"] for r in mine}) == 1
        served = [r["balance"] for r in mine]
        assert served == sorted(served), served


def test_testbed_agreement_draws_fdma_and_uldl_cells_of_the_same_size():
    recs = A.testbed_agreement(["homogeneous"], 3, 200, fresh_seed() % 1000, n_jobs=1)
    K = {(r["uplink"], r["seed"]): r["K"] for r in recs}
    assert {u for u, _ in K} == {"fdma", "ul/dl"}
    assert all(K[("fdma", s)] == K[("ul/dl", s)] for _, s in K)


def test_a_bad_knob_is_one_line():
    from spinlib.validation import ValidationError

    with pytest.raises(ValidationError, match="knob must be one of"):
        B.served_sweep("memory", [1], 1, 0)


def test_an_arena_study_gathers_the_replicates_of_run_arena():
    """Each replicate of arena_study is run_arena on the task's seed: the same rows, the regret curves at the
    kept rounds, the same best fixed lengths; the summary is the arena's over those rows; the records do not
    depend on where the replicates ran."""
    import numpy as np

    from spinlib.online.arena import ArenaConfig, Delay, run_arena
    from spinlib.studies.online import arena_study, curve_points, pair_streams, pair_timings

    cfg = ArenaConfig(rounds=120, users=2, L_max=5, delay=Delay("exponential", 0.1), **pair_timings("qwen-coder"))
    ctrls = ["ucb-specstop", "fixed:L=3"]
    seed, pts = fresh_seed() % 1000, curve_points(120)
    res = arena_study("test", "qwen-coder", ctrls, cfg, n_seeds=3, seed=seed, curve_rounds=pts, n_jobs=1)
    assert res.labels == ctrls and len(res.rows) == 3 * 2
    for i, s in enumerate(study_seeds(seed, 3)):
        one = run_arena(ctrls, pair_streams("qwen-coder"), cfg, seed=s, n_seeds=1)
        mine = [r for r in res.rows if r["seed"] == s]
        assert [{**r, "seed": 0} for r in mine] == one.rows
        for lab in ctrls:
            assert np.array_equal(res.regret_fixed[lab][i], one.regret_fixed[lab][0, pts])
            assert np.array_equal(res.regret_clairvoyant[lab][i], one.regret_clairvoyant[lab][0, pts])
        assert res.best_fixed_L[i] == one.best_fixed_L[0]
    par = arena_study("test", "qwen-coder", ctrls, cfg, n_seeds=3, seed=seed, curve_rounds=pts, n_jobs=2)
    assert par.rows == res.rows
    summ = res.summary()
    for lab in ctrls:
        mean = np.mean([r["user_goodput_tokens_per_s"] for r in res.rows if r["controller"] == lab])
        assert summ.loc[lab, "user_goodput_tokens_per_s"] == pytest.approx(mean, rel=1e-12)


def test_the_drift_study_keeps_the_offline_oracle_in_its_rows():
    """Notebook 10 measures the learners against the best fixed length in hindsight of the drift run: every row
    of the drift run carries it (the tuning run needs no oracle)."""
    from spinlib.studies.online import drift_study

    d = drift_study("qwen-coder", levels_s=[0.05, 1.0], period=40, h_grid=[0.5, 0.9], rounds=160, users=2, n_seeds=2,
                    seed=fresh_seed() % 1000, n_jobs=1)
    assert d["rows"] and all(r["best_fixed_tokens_per_s"] > 0 and "regret_fixed_s" in r for r in d["rows"])
    assert all("best_fixed_tokens_per_s" not in r for r in d["tuning_rows"])
