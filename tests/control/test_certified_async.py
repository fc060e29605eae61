"""Certified optimality of ``heterogeneous-async`` (model B) and the joint UL/DL reference.

heterogeneous-async: on random instances drawn from a fresh seed (printed on failure; set
``SPINLIB_TEST_SEED`` to replay one) the reported upper bound is never below the exhaustive
optimum (1e-9 relative), the goodput never above it, and whenever the policy reports
``gap <= 1e-9`` its goodput equals the exhaustive optimum to 1e-9 relative. The node bound of
:mod:`spinlib.control.branch_and_bound_async` is also checked on random sub-boxes (with and without
reduced-cost fixing), Shannon and linear rates.

uldl-exhaustive: never below ``uldl-optimal`` and never below any single (mode, length) pair's
goodput, checked by an independent loop over every pair through :func:`spinlib.rounds.evaluate`.
"""
import itertools

import numpy as np
import pytest

from spinlib import Allocation, evaluate, random_scenario
from spinlib.acceptance import tokens_table
from spinlib.channel import RateModel
from spinlib.control import solve
from spinlib.control import uldl as U
from spinlib.control.branch_and_bound import enumerate_boxes
from spinlib.control.branch_and_bound_async import async_node_bounds, multiplier_bracket
from spinlib.control.heterogeneous import evaluate_async_lengths
from spinlib.experiments import payload_of
from spinlib.presets import get_preset, random_uldl_scenario
from spinlib.validation import ValidationError
from helpers import fresh_seed

TOL = 1e-9
PRESETS = ("llama2-7b-l4", "qwen-7b-l4")
PAYLOADS = ("ids", "topk-8", "full")


def draw_instance(rng):
    """K in 2..4, a preset, access latency log-uniform in [1 ms, 1 s], a payload, L_max in {8, 16}."""
    K = int(rng.integers(2, 5))
    preset = str(rng.choice(PRESETS))
    payload = payload_of(str(rng.choice(PAYLOADS)), get_preset(preset).vocab_size)
    latency = float(10 ** rng.uniform(-3, 0))
    s = random_scenario(K, seed=int(rng.integers(1 << 31)), preset=preset, access_latency_s=latency, payload=payload)
    return s, int(rng.choice([8, 16]))


@pytest.mark.campaign
def test_async_certificate_matches_exhaustive():
    """60 fresh random instances: proven-optimal answers are optimal, bounds are bounds."""
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    proven = 0
    for i in range(60):
        s, L_max = draw_instance(rng)
        ex = solve(s, "exhaustive-async", L_max=L_max).goodput_tokens_per_s
        a = solve(s, "heterogeneous-async", L_max=L_max, exhaustive_max=0)  # the branch-and-bound, not enumeration
        G, ub, gap = a.goodput_tokens_per_s, a.info["upper_bound"], a.info["gap"]
        where = f"seed {seed}, instance {i}: K={s.num_users} L_max={L_max} G={G!r} ub={ub!r} opt={ex!r}"
        assert G == pytest.approx(evaluate(s, a).goodput_tokens_per_s, rel=1e-9), where
        assert G <= ex * (1 + TOL), where
        assert ub >= ex * (1 - TOL), where
        assert gap == pytest.approx((ub - G) / ub, rel=1e-12, abs=1e-300), where
        assert a.info["status"] in ("optimal", "node_limit", "time_limit"), where
        if gap <= TOL:
            proven += 1
            assert G >= ex * (1 - TOL), where
            assert a.info["status"] == "optimal", where
    assert proven >= 55, f"seed {seed}: only {proven} of 60 instances proven optimal"


def test_async_node_bound_covers_every_vector_of_the_box():
    """Random boxes: ``max(upper, cut_max)`` >= the best vector of the box (exact bandwidth each),
    with no pruning threshold and with one that lets reduced-cost fixing cut lengths."""
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for i in range(25):
        K, L_max = int(rng.integers(1, 5)), int(rng.choice([4, 8]))
        s = random_scenario(K, seed=int(rng.integers(1 << 31)), preset=str(rng.choice(PRESETS)),
                            access_latency_s=float(10 ** rng.uniform(-3, 0)),
                            rate_model="linear" if i % 3 == 2 else None)
        rates, table = RateModel.of(s), tokens_table(s, L_max)
        a, b = rng.integers(0, L_max + 1, (2, 5, K))
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        lo[0], hi[0] = 0, L_max
        exact = np.array([evaluate_async_lengths(s, enumerate_boxes(lo[m:m + 1], hi[m:m + 1]), table, rates)[0].max()
                          for m in range(5)])
        for prune_at in (-np.inf, float(exact.min()) * (1 + 1e-3)):
            res = async_node_bounds(s, rates, table, lo, hi, multiplier_bracket(s, rates, table), prune_at)
            cover = np.maximum(res.upper, res.cut_max)
            assert np.all(cover >= exact * (1 - 1e-12)), f"seed {seed}, instance {i}: {cover} < {exact}"
            assert np.all((res.lo >= lo) & (res.hi <= hi))


def test_async_parameters_time_limit_and_large_K():
    """``gap``/``time_limit_s`` are declared and checked; time_limit_s = 0 still bounds the root;
    K = 1000 answers within its node budget with a valid gap, never below the homogeneous optimum."""
    s = random_scenario(32, seed=5, preset="qwen-7b-l4", access_latency_s=0.2)
    exact = solve(s, "heterogeneous-async")
    assert exact.info["status"] == "optimal" and exact.info["gap"] <= TOL
    quick = solve(s, "heterogeneous-async", time_limit_s=0)
    assert quick.info["upper_bound"] >= exact.goodput_tokens_per_s * (1 - TOL)
    loose = solve(s, "heterogeneous-async", gap=1e-3)
    assert loose.info["gap"] <= 1e-3 and loose.info["upper_bound"] >= exact.goodput_tokens_per_s * (1 - TOL)
    for bad in ({"gap": -1.0}, {"time_limit_s": float("nan")}):
        with pytest.raises(ValidationError):
            solve(s, "heterogeneous-async", **bad)
    with pytest.raises(ValidationError, match="takes no parameter"):
        solve(s, "heterogeneous-async", gapp=1e-3)
    big = random_scenario(1000, seed=11, preset="llama2-7b-l4", access_latency_s=0.2)
    a = solve(big, "heterogeneous-async")  # its speed: benchmarks/solver_scaling.py
    assert a.info["status"] in ("optimal", "node_limit")
    assert 0.0 <= a.info["gap"] < 0.05 and a.info["upper_bound"] >= a.goodput_tokens_per_s
    assert a.goodput_tokens_per_s >= a.info["homogeneous_goodput"] * (1 - 1e-12)
    assert a.goodput_tokens_per_s == pytest.approx(evaluate(big, a).goodput_tokens_per_s, rel=1e-9)


def brute_force_uldl(s, L_max):
    """Every (modes, lengths) pair, one allocation at a time through rounds.evaluate."""
    K = s.num_users
    prob = U.Problem(s, L_max)
    best = -np.inf
    for ul in itertools.product([False, True], repeat=K):
        for L in itertools.product(range(L_max + 1), repeat=K):
            G, _, _, b, p = prob.solve_continuous(np.array(L)[None], np.array(ul)[None])
            a = Allocation(L, tuple(b[0]), modes=tuple("UL" if u else "DL" for u in ul),
                           dl_power_w=tuple(np.where(ul, 0.0, p[0])))
            best = max(best, evaluate(s, a).goodput_tokens_per_s)
    return best


@pytest.mark.campaign
def test_uldl_exhaustive_is_the_joint_optimum():
    """K <= 3 cells: uldl-exhaustive >= uldl-optimal and >= every (mode, length) pair's goodput
    (independent loop, evaluate() on each pair's allocation); equal to the loop's best."""
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for i in range(8):
        K = (1, 2, 3, 3)[i % 4]
        L_max = 3 if K == 3 else 4
        s = random_uldl_scenario(K, rng)
        x = solve(s, "uldl-exhaustive", L_max=L_max)
        where = f"seed {seed}, cell {i}: K={K}"
        assert x.goodput_tokens_per_s == pytest.approx(evaluate(s, x).goodput_tokens_per_s, rel=1e-9), where
        assert x.goodput_tokens_per_s >= solve(s, "uldl-optimal", L_max=L_max).goodput_tokens_per_s * (1 - 1e-12), where
        assert x.goodput_tokens_per_s == pytest.approx(brute_force_uldl(s, L_max), rel=1e-9), where


def test_uldl_exhaustive_refuses_sizes_above_the_cap():
    rng = np.random.default_rng(0)
    with pytest.raises(ValidationError, match=r"K = 6, L_max = 8") as e:
        solve(random_uldl_scenario(6, rng), "uldl-exhaustive")
    assert "\n" not in str(e.value) and "3,000,000" in str(e.value)
    with pytest.raises(ValidationError, match="accepts at most 10 users"):
        solve(random_uldl_scenario(11, rng), "uldl-exhaustive", L_max=1)
    assert U.EXHAUSTIVE_MAX_USERS == 10 and 4**10 <= U.EXHAUSTIVE_MAX_COMBINATIONS < 4**11
    with pytest.raises(ValidationError, match="L_max"):
        solve(random_uldl_scenario(2, rng), "uldl-exhaustive", L_max=0)
