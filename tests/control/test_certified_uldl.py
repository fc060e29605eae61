"""Certified optimality of ``uldl-optimal`` (:mod:`spinlib.control.branch_and_bound_uldl`).

On random UL/DL cells drawn from a fresh seed (printed on failure; ``SPINLIB_TEST_SEED`` replays
one), with the policy's default parameters: the reported upper bound is never below the joint
(modes x lengths) optimum of ``exhaustive_joint`` (1e-9 relative), the goodput never above it, and
whenever the policy reports ``gap <= 1e-6`` (its default tolerance) its goodput is within 1e-6 of
the optimum. The node bound is checked directly: on random nodes (D, E, n_DL boxes and item sets)
every item vector whose exact (D*, E*, n_DL) lies in the node has goodput <= the node's bound.
The full 500-instance campaign is ``benchmarks/certified_optimality.py --policy uldl-optimal``.
"""
import itertools

import numpy as np
import pytest

from spinlib import evaluate
from spinlib.control import solve
from spinlib.control import uldl as U
from spinlib.control.branch_and_bound_uldl import item_vectors, make_items, tighten, uldl_node_bounds
from spinlib.presets import random_uldl_scenario
from spinlib.validation import ValidationError
from helpers import fresh_seed

TOL = 1e-9


@pytest.mark.campaign
def test_uldl_certificate_matches_joint_exhaustive():
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for i in range(14):
        K = (2, 3, 3, 4)[i % 4]
        L_max = (8, 16, 8, 6)[i % 4]
        latency = float(10 ** rng.uniform(-3, 0))
        s = random_uldl_scenario(K, np.random.default_rng(int(rng.integers(1 << 31))), access_latency_s=latency)
        opt = U.exhaustive_joint(s, L_max)[0]
        a = solve(s, "uldl-optimal", L_max=L_max, exhaustive_max=0)  # the heuristic and the branch-and-bound
        G, ub, gap = a.goodput_tokens_per_s, a.info["upper_bound"], a.info["gap"]
        where = f"seed {seed}, cell {i}: K={K}, L_max={L_max}"
        assert G <= opt * (1 + TOL), where
        assert ub >= opt * (1 - TOL), where
        assert G == pytest.approx(evaluate(s, a).goodput_tokens_per_s, rel=1e-9), where
        assert gap == pytest.approx((ub - G) / ub, abs=1e-15), where
        if gap <= 1e-6:
            assert G >= opt * (1 - 1e-6), where
        assert a.info["heuristic_goodput"] <= G * (1 + 1e-12), where


def test_tiny_cells_are_enumerated():
    """Up to EXHAUSTIVE_MAX_VECTORS distinct (mode, length) pairs, (2 L_max + 1)^K, uldl-optimal evaluates
    every pair (fresh random cells, default parameters): the joint optimum, gap 0, search "exhaustive"."""
    from spinlib.control.search import EXHAUSTIVE_MAX_VECTORS

    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for i in range(4):
        K, L_max = (2, 3, 2, 4)[i], (16, 8, 4, 4)[i]
        s = random_uldl_scenario(K, np.random.default_rng(int(rng.integers(1 << 31))))
        a = solve(s, "uldl-optimal", L_max=L_max)
        where = f"seed {seed}, cell {i}: K={K}, L_max={L_max}"
        small = (2 * L_max + 1) ** K <= EXHAUSTIVE_MAX_VECTORS
        assert a.info["search"] == ("exhaustive" if small else "branch-and-bound"), where
        if small:
            G, L, ul = U.exhaustive_joint(s, L_max)
            assert a.draft_lengths == tuple(int(x) for x in L), where
            assert a.goodput_tokens_per_s == pytest.approx(G, rel=1e-12), where
            assert a.info["gap"] == 0.0 and a.info["status"] == "optimal", where


def test_uldl_node_bound_covers_every_vector_of_the_node():
    """Random nodes of small problems: every vector inside a node is below the node's bound."""
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for trial in range(6):
        K, L_max = int(rng.integers(2, 4)), 3
        s = random_uldl_scenario(K, np.random.default_rng(int(rng.integers(1 << 31))))
        prob = U.Problem(s, L_max)
        items = make_items(prob)
        I = items.L.shape[0]
        base = np.ones((I, K), bool)
        base[L_max + 1:] = items.n[L_max + 1:] > 0
        vecs = np.array(list(itertools.product(*[np.flatnonzero(base[:, k]) for k in range(K)])))
        L, ul = item_vectors(items, vecs)
        G, D, E, _, _ = prob.solve_continuous(L, ul)
        n = items.n[vecs, np.arange(K)].sum(axis=1)
        dl = n >= 1
        M = 12
        al = np.broadcast_to(base, (M, I, K)).copy()
        al &= rng.random((M, I, K)) < 0.8
        al[:, 0, :] |= rng.random((M, K)) < 0.5
        for m in range(M):  # no empty set
            for k in range(K):
                if not al[m, :, k].any():
                    al[m, rng.choice(np.flatnonzero(base[:, k])), k] = True
        Dq = np.quantile(D[dl], rng.random((M, 2)))
        Eq = np.quantile(E[dl], rng.random((M, 2)))
        Dl, Dh = Dq.min(axis=1), Dq.max(axis=1)
        El, Eh = Eq.min(axis=1), Eq.max(axis=1)
        nl = rng.integers(1, K + 1, M).astype(float)
        nh = np.minimum(nl + rng.integers(0, 2, M), K).astype(float)
        theta = rng.uniform(0.5, 1.5, M) * G.max()
        res = uldl_node_bounds(prob, items, Dl, Dh, El, Eh, nl, nh, al, theta)
        Dl2, Dh2, El2, Eh2, keep = tighten(prob, items, Dl, Dh, El, Eh, nl, nh, al)
        for m in range(M):
            inside = al[m][vecs, np.arange(K)].all(axis=1) & (n >= nl[m]) & (n <= nh[m]) \
                & (D >= Dl[m]) & (D <= Dh[m]) & (E >= El[m]) & (E <= Eh[m])
            where = f"seed {seed}, trial {trial}, node {m}"
            if inside.any():
                assert res.upper[m] >= G[inside].max() * (1 - TOL), where
                assert keep[m], where  # tightening never drops a node that holds a vector
                assert (D[inside] >= Dl2[m] * (1 - 1e-9)).all() and (D[inside] <= Dh2[m] * (1 + 1e-9)).all(), where
                assert (E[inside] >= El2[m] * (1 - 1e-9)).all() and (E[inside] <= Eh2[m] * (1 + 1e-9)).all(), where


def test_uldl_parameters_and_budgets():
    s = random_uldl_scenario(6, np.random.default_rng(3))
    full = solve(s, "uldl-optimal", L_max=8)
    quick = solve(s, "uldl-optimal", L_max=8, max_nodes=0)
    assert quick.info["status"] in ("node_limit", "optimal")
    assert quick.info["upper_bound"] >= full.goodput_tokens_per_s * (1 - TOL)
    timed = solve(s, "uldl-optimal", L_max=8, time_limit_s=0)
    assert timed.info["upper_bound"] >= full.goodput_tokens_per_s * (1 - TOL)
    for bad in ({"gap": -1.0}, {"time_limit_s": float("nan")}, {"max_nodes": -1}, {"max_nodes": 1.5}):
        with pytest.raises(ValidationError):
            solve(s, "uldl-optimal", L_max=8, **bad)
