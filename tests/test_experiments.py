"""The experiment pipeline: open registry, one evaluator, sweeps on joblib and Dask, cached calls."""
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from spinlib import evaluate, random_scenario
from spinlib.cache import cached_call
from spinlib.control import POLICIES, declared_subset, register_policy, solve, unregister_policy
from spinlib.emulator import EmulatorConfig, emulate
from spinlib.experiments import (frame, gain_table, make_scenario, make_uldl_scenario, paper1_specs, spec, sweep,
                                 uldl_specs, wide)
from spinlib.presets import random_uldl_scenario
from spinlib.rounds import Allocation
from spinlib.validation import ValidationError


# a user policy, defined here and never inside spinlib: half the users draft 2 tokens, equal bandwidth
@register_policy("test-half-drafters", "test: the first half of the users draft L tokens, equal bandwidth")
def half_drafters(scenario, L: int = 2, round_model: str = "sync"):
    K = scenario.num_users
    lengths = [L if k < max(1, K // 2) else 0 for k in range(K)]
    n = sum(x > 0 for x in lengths)
    b = [scenario.radio.bandwidth_hz / n if x > 0 else 0.0 for x in lengths]
    a = Allocation(tuple(lengths), tuple(b), round_model, "test-half-drafters")
    return Allocation(a.draft_lengths, a.bandwidth_hz, round_model, "test-half-drafters",
                      evaluate(scenario, a).goodput_tokens_per_s)


_MARKER = os.environ.get("SPINLIB_TEST_KILL_MARKER", "")


@register_policy("test-dies-once", "test: kills its worker process the first time it runs (lost-worker test)")
def dies_once(scenario, marker: str = ""):
    if marker and not Path(marker).exists():
        Path(marker).write_text("killed")
        os._exit(1)  # the worker dies mid-sweep
    return solve(scenario, "equal", draft_length=3)


def test_solve_is_strict():
    s = random_scenario(3, seed=1)
    with pytest.raises(ValidationError, match="takes no parameter 'L_maxx'"):
        solve(s, "homogeneous", L_maxx=3)
    with pytest.raises(ValidationError, match="takes no parameter 'round_model'"):
        solve(s, "homogeneous", round_model="async")
    with pytest.raises(ValidationError, match="must be a spinlib Scenario"):
        solve({"users": []}, "homogeneous")
    with pytest.raises(ValidationError, match="policy must be one of"):
        solve(s, "no-such-policy")


def test_register_refuses_what_it_cannot_check():
    with pytest.raises(TypeError, match=r"\*\*kwargs"):
        register_policy("test-bad", "swallows arguments")(lambda scenario, **_: None)
    with pytest.raises(TypeError, match="needs a default"):
        def f(scenario, L):
            return None
        register_policy("test-bad2", "no default")(f)
    with pytest.raises(ValidationError, match="already registered"):
        register_policy("homogeneous", "clash")(lambda scenario: None)
    assert "test-bad" not in POLICIES and "test-bad2" not in POLICIES


def test_every_policy_reports_what_evaluate_gives():
    """One evaluator: every registered policy's goodput equals evaluate() of its allocation."""
    rng = np.random.default_rng(2024)
    settings = {"L_max": 5, "draft_length": 3}
    for i in range(6):
        s1 = random_scenario(int(rng.integers(1, 5)), seed=int(rng.integers(1 << 30)),
                             preset=["llama2-7b-l4", "qwen-7b-l4"][i % 2])
        s2 = random_uldl_scenario(int(rng.integers(1, 5)), rng)
        for name, pol in POLICIES.items():
            if name.startswith("test-"):
                continue
            uldl = pol.family == "paper2" or name == "uldl-exhaustive"
            for s in (s2,) if uldl else (s1, s2):
                models = ("sync", "async") if "round_model" in pol.params else (None,)
                for m in models:
                    kw = declared_subset(name, {**settings, **({"round_model": m} if m else {})})
                    a = solve(s, name, **kw)
                    assert a.goodput_tokens_per_s == pytest.approx(evaluate(s, a).goodput_tokens_per_s, rel=1e-9), \
                        (name, kw)


def test_user_policy_runs_through_sweep_evaluate_and_emulate():
    s = random_scenario(4, seed=5)
    a = solve(s, "test-half-drafters", L=3)
    assert a.draft_lengths == (3, 3, 0, 0)
    assert evaluate(s, a).goodput_tokens_per_s == pytest.approx(a.goodput_tokens_per_s, rel=1e-12)
    r = emulate(s, a, EmulatorConfig(rounds=2000, seed=1), confidence=0.999)
    assert r.ci_low <= r.predicted_tokens_per_s <= r.ci_high
    recs = sweep(make_scenario, "num_users", [2, 4], n_seeds=2, seed=1, n_jobs=1, progress=False,
                 specs=[spec("test-half-drafters", L=2), spec("test-half-drafters", label="half/async", L=2,
                                                          round_model="async"), spec("server-only")])
    w = wide(recs)
    assert set(w.columns) >= {"test-half-drafters", "half/async", "server-only"} and len(w) == 4
    with pytest.raises(ValidationError, match="takes no parameter 'L_max'"):
        spec("test-half-drafters", L_max=3)


def test_records_are_long_and_tables_agree():
    recs = sweep(make_scenario, "bandwidth_mhz", [5, 20], n_seeds=2, seed=3, n_jobs=1, progress=False,
                 specs=paper1_specs(L_max=8))
    assert {r["metric"] for r in recs} == {"goodput", "server_utilisation", "capacity_limited_goodput"}
    assert all(set(r) == {"knob", "x", "seed", "policy", "round_model", "metric", "value"} for r in recs)
    w = wide(recs)
    assert (w["heterogeneous-sync"] >= w["homogeneous"] * (1 - 1e-12)).all()
    g = gain_table(recs, ["heterogeneous-sync"], ["agnostic/sync"])
    assert g.max_gain.iloc[0] == pytest.approx((w["heterogeneous-sync"] / w["agnostic/sync"] - 1).max())
    f = frame(recs, relative_to="server-only/sync")
    assert np.allclose(f[f.policy == "server-only/sync"].goodput, 1.0)
    u = sweep(make_uldl_scenario, "num_users", [2], n_seeds=1, seed=0, n_jobs=1, progress=False,
              specs=uldl_specs(L_max=6))
    assert any(r["metric"] == "ul_share" for r in u)


def test_sweep_does_not_depend_on_workers():
    kw = dict(n_seeds=2, seed=7, specs=paper1_specs(L_max=6), progress=False)
    one = sweep(make_scenario, "num_users", [2, 3, 5], n_jobs=1, **kw)
    two = sweep(make_scenario, "num_users", [2, 3, 5], n_jobs=2, **kw)
    assert json.dumps(one) == json.dumps(two)


@pytest.fixture(scope="module")
def cluster():
    import cloudpickle
    from distributed import LocalCluster

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=50) as c:
        yield c


@pytest.mark.campaign
def test_sweep_on_a_local_dask_cluster_equals_the_sequential_sweep(cluster):
    kw = dict(n_seeds=2, seed=11, specs=paper1_specs(L_max=6) + [spec("test-half-drafters")], progress=False)
    seq = sweep(make_scenario, "heterogeneity", [0.0, 0.5, 1.0], n_jobs=1, **kw)
    dist = sweep(make_scenario, "heterogeneity", [0.0, 0.5, 1.0], scheduler=cluster.scheduler_address, **kw)
    assert json.dumps(seq) == json.dumps(dist)


def test_a_lost_worker_loses_or_duplicates_no_record(cluster, tmp_path):
    marker = tmp_path / "killed"
    kw = dict(n_seeds=3, seed=2, specs=[spec("test-dies-once", marker=str(marker)), spec("server-only")],
              progress=False)
    dist = sweep(make_scenario, "num_users", [2, 3], scheduler=cluster.scheduler_address, **kw)
    assert marker.exists(), "a worker must have died during the sweep"
    seq = sweep(make_scenario, "num_users", [2, 3], n_jobs=1, **kw)  # marker exists now: nobody dies
    assert json.dumps(seq) == json.dumps(dist)
    keys = [(r["x"], r["seed"], r["policy"], r["metric"]) for r in dist]
    assert len(keys) == len(set(keys)) == 2 * 3 * 2 * 3


def test_cached_call_keys_on_bound_arguments(tmp_path):
    calls = []

    def f(a, b=2, n_jobs=1):
        calls.append((a, b))
        return {"sum": a + b}

    assert cached_call(f, 1, cache_dir=tmp_path) == {"sum": 3}
    assert cached_call(f, 1, b=2, n_jobs=4, cache_dir=tmp_path) == {"sum": 3}  # same key: defaults, n_jobs
    assert calls == [(1, 2)]
    assert cached_call(f, 1, b=5, cache_dir=tmp_path) == {"sum": 6}
    assert cached_call(f, 1, version=2, cache_dir=tmp_path) == {"sum": 3}
    assert len(calls) == 3
    # a corrupt or foreign entry is recomputed, never trusted
    for bad in ("[1, 2]", '"text"', "{not json", '{"name": "f", "config": {}, "value": 1}'):
        for p in tmp_path.glob("f-*.json"):
            p.write_text(bad)
        assert cached_call(f, 1, cache_dir=tmp_path) == {"sum": 3}
    assert cached_call(f, 1, recompute=True, cache_dir=tmp_path) == {"sum": 3}


def test_unregister():
    register_policy("test-temp", "temporary")(lambda scenario: solve(scenario, "server-only"))
    assert "test-temp" in POLICIES
    unregister_policy("test-temp")
    assert "test-temp" not in POLICIES


def test_sweeps_that_differ_only_in_a_setting_stay_apart():
    """Two presets on the same knob, values and seeds: every point keeps its own row."""
    kw = dict(n_seeds=2, seed=0, specs=[spec("server-only"), spec("homogeneous", L_max=6)], n_jobs=1, progress=False)
    a = sweep(make_scenario, "heterogeneity", [0.0, 1.0], preset="llama2-7b-l4", **kw)
    b = sweep(make_scenario, "heterogeneity", [0.0, 1.0], preset="qwen-7b-l4", **kw)
    w = wide(a + b)
    assert len(w) == 8 and set(w["preset"]) == {"llama2-7b-l4", "qwen-7b-l4"}
    g = gain_table(a + b, ["homogeneous"], ["server-only"])
    ratio = w["homogeneous"] / w["server-only"] - 1
    assert g.mean_gain.iloc[0] == pytest.approx(ratio.mean())
    assert len(frame(a + b)) == 16
