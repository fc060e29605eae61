"""The certified-search engine (:mod:`spinlib.control.search`) and the node bounds it relies on.

* The engine is problem-agnostic: a 0/1 knapsack written as a :class:`NodeSearch` in this file is
  certified against brute force on generated instances (every status, the node budget).
* Model (A)'s node bound (:func:`sync_node_bounds`) is valid on random makespan intervals and
  boxes, against the exhaustive maximum over the node, for the two-end (tangent) bound and the
  one-end bound; the tangent bound's slack shrinks with the square of the interval's width.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from spinlib import random_scenario
from spinlib.acceptance import tokens_table
from spinlib.channel import RateModel
from spinlib.control.bandwidth import min_makespan_bandwidth
from spinlib.control.branch_and_bound import sync_node_bounds
from spinlib.control.search import Certificate, Incumbent, best_first, relative_gap
from spinlib.rounds import sync_goodput
from spinlib.validation import ValidationError
from helpers import fresh_seed


class Knapsack:
    """max v.x s.t. w.x <= C, x in {0,1}^n; nodes fix a prefix of the items (LP bound: greedy by v/w)."""

    def __init__(self, v, w, C):
        order = np.argsort(-v / w)
        self.v, self.w, self.C = v[order], w[order], C
        self.order = order

    def evaluate(self, X):
        X = np.asarray(X, float)
        return np.where(X @ self.w <= self.C, X @ self.v, -np.inf)

    def _lp(self, x, depth):
        val, cap = float(x[:depth] @ self.v[:depth]), self.C - float(x[:depth] @ self.w[:depth])
        if cap < 0:
            return -np.inf, x
        fill = x.copy()
        for i in range(depth, len(self.v)):
            take = min(1.0, cap / self.w[i])
            val += take * self.v[i]
            cap -= take * self.w[i]
            fill[i] = 1 if take == 1.0 else 0
            if take < 1.0:
                break
        return val, fill

    def root(self, inc):
        return {"x": np.zeros((1, len(self.v)), int), "depth": np.zeros(1, int)}

    def expand(self, nodes, inc):
        ub, closed = [], -np.inf
        for x, d in zip(nodes["x"], nodes["depth"]):
            if d == len(self.v):
                closed = max(closed, float(inc.offer(x[None])[0]))
                ub.append(-np.inf)
                continue
            val, fill = self._lp(x, d)
            inc.offer(fill[None])
            ub.append(val)
        return {"x": nodes["x"], "depth": nodes["depth"], "ub": np.array(ub)}, closed, len(ub)

    def split(self, p, inc):
        xs, ds = [], []
        for x, d in zip(p["x"], p["depth"]):
            for bit in (0, 1):
                c = x.copy()
                c[d] = bit
                xs.append(c)
                ds.append(d + 1)
        return {"x": np.array(xs), "depth": np.array(ds)}


@pytest.mark.parametrize("seed", range(12))
def test_engine_certifies_a_problem_it_was_not_written_for(seed):
    rng = np.random.default_rng([23, seed])
    n = int(rng.integers(4, 11))
    v, w = rng.uniform(1, 10, n), rng.uniform(1, 10, n)
    C = float(rng.uniform(0.2, 0.8) * w.sum())
    prob = Knapsack(v, w, C)
    best = max(float(np.array(x) @ prob.v) for x in itertools.product((0, 1), repeat=n)
               if np.array(x) @ prob.w <= C)
    res = best_first(prob, np.zeros(n, int), 0.0, gap=0.0, batch=int(rng.integers(1, 5)))
    assert res.status == "optimal" and res.value == pytest.approx(best, rel=1e-12)
    assert res.upper_bound >= best * (1 - 1e-12) and res.certificate.gap <= 1e-12
    # a node budget stops it with a bound that still holds and a gap that says how far it got
    short = best_first(prob, np.zeros(n, int), 0.0, gap=0.0, max_nodes=1, batch=1)
    assert short.upper_bound >= best * (1 - 1e-12) and short.value <= best * (1 + 1e-12)
    assert short.status in ("node_limit", "optimal")
    assert short.certificate.gap == pytest.approx(relative_gap(short.value, short.upper_bound))
    with pytest.raises(Exception):  # the certificate is frozen
        short.certificate.gap = 0.0  # type: ignore[misc]


def test_incumbent_keeps_the_best_and_the_threshold_includes_the_gap():
    inc = Incumbent(np.zeros(1), 1.0, lambda X: X[:, 0], gap=0.5)
    assert inc.threshold == 1.5
    inc.offer(np.array([[0.5], [3.0], [2.0]]))
    assert inc.value == 3.0 and inc.x[0] == 3.0 and inc.threshold == 4.5
    info = Certificate(2.0, 0.5, "optimal", 7, 0.25).info_for(1.0, optimal_gap=1e-9)
    assert info == {"upper_bound": 2.0, "gap": 0.5, "bnb_nodes": 7, "bnb_time_s": 0.25, "status": "gap_limit",
                    "search": "branch-and-bound"}
    # a point above a stale bound: the bound is raised to it and the gap is 0
    assert Certificate(1.0, 0.0, "node_limit", 3, 0.1).info_for(1.5, 1e-9)["upper_bound"] == 1.5
    assert Certificate(1.0, 0.0, "optimal", 3, 0.1).info_for(1.0, 1e-9)["status"] == "optimal"


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("tangent", [True, False])
def test_sync_node_bound_holds_on_random_nodes(seed, tangent):
    rng = np.random.default_rng([2023, seed, tangent])
    K = int(rng.integers(2, 5))
    L_max = int(rng.integers(3, 6))
    s = random_scenario(K, seed=rng, access_latency_s=float(rng.uniform(0.0, 0.2)))
    rates = RateModel.of(s)
    table = tokens_table(s, L_max)
    allL = np.array(list(itertools.product(range(L_max + 1), repeat=K)))
    D, _ = min_makespan_bandwidth(s, allL, rates)
    F = sync_goodput(s, allL, table[np.arange(K), allL], D)
    drafting = D > 0
    lo_D, hi_D = float(D[drafting].min()), float(D[drafting].max())
    for _ in range(8):
        a, b = np.sort(rng.uniform(np.log(lo_D) - 0.1, np.log(hi_D) + 0.1, 2))
        if rng.random() < 0.3:  # narrow intervals, where the tangent bound matters most
            b = a + rng.uniform(1e-4, 1e-2)
        Dl, Dh = np.exp(a), np.exp(b)
        lo = rng.integers(0, L_max + 1, K)
        hi = np.maximum(lo, rng.integers(0, L_max + 1, K))
        inside = np.all((allL >= lo) & (allL <= hi), axis=1) & (D >= Dl) & (D <= Dh)
        theta0 = float(rng.uniform(0.5, 1.5) * F.max())
        r = sync_node_bounds(s, rates, table, np.array([Dl]), np.array([Dh]), lo[None], hi[None], theta0,
                             tangent=tangent)
        if inside.any():
            assert r.upper[0] >= F[inside].max() * (1 - 1e-12), (Dl, Dh, lo, hi)
        if r.upper[0] > -np.inf:  # the under-budget choice's goodput bound (candidates skipped below it)
            at = np.flatnonzero(np.all(allL == r.x_feas[0], axis=1))[0]
            assert r.x_feas_upper[0] >= F[at] * (1 - 1e-12), (Dl, Dh, lo, hi)


def test_the_candidates_goodput_bound_holds_on_fresh_random_nodes():
    """``x_feas_upper`` (the makespan of the under-budget choice is at least where its needs' tangents at
    ``D_hi`` reach the band) is never below that choice's exact goodput: fresh random nodes, K = 2..40,
    wide and narrow intervals, boxes anywhere; the bound is also informative (within 2 % on at least ten
    choices) and ``inf`` for the one-end bound, which has no tangents."""
    from spinlib.control.branch_and_bound import SyncSearch
    from helpers import fresh_seed

    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    checked, tight = 0, 0
    for i in range(60):
        K, L_max, M = int(rng.integers(2, 41)), int(rng.choice([8, 16])), int(rng.integers(1, 9))
        s = random_scenario(K, seed=[seed % (1 << 32), i], access_latency_s=float(10 ** rng.uniform(-3, -0.5)))
        rates, table = RateModel.of(s), tokens_table(s, L_max)
        d = float(np.max(s.tau + s.payload.bits_per_token / rates.rate(np.full(K, s.radio.bandwidth_hz / K))))
        Dl = np.exp(rng.uniform(np.log(0.3 * d), np.log(L_max * d), M))
        Dh = Dl * np.where(rng.random(M) < 0.5, 1 + 10 ** rng.uniform(-5, -2, M), rng.uniform(1.01, 3.0, M))
        lo = rng.integers(0, 4, (M, K))
        hi = np.minimum(lo + rng.integers(0, L_max + 1, (M, K)), L_max)
        theta = float(rng.uniform(0.3, 1.5)) * float(table[:, 3].sum()) / (3 * d + 3 * K * s.server.t1_s_per_token)
        r = sync_node_bounds(s, rates, table, Dl, Dh, lo, hi, theta)
        ok = r.upper > -np.inf
        G = SyncSearch(s, rates, table).evaluate(r.x_feas[ok]) if ok.any() else np.zeros(0)
        where = f"seed {seed}, instance {i} (K={K}, M={M})"
        assert np.all(r.x_feas_upper[ok] >= G * (1 - 1e-12)), where
        checked += int(ok.sum())
        tight += int(np.sum(r.x_feas_upper[ok] <= G * 1.02))
        assert np.all(sync_node_bounds(s, rates, table, Dl, Dh, lo, hi, theta, tangent=False).x_feas_upper == np.inf)
    assert checked >= 100 and tight >= 10, f"seed {seed}: {checked} choices checked, {tight} tight"


def test_tangent_bound_slack_is_second_order_in_the_interval():
    s = random_scenario(40, seed=5, access_latency_s=0.05)
    rates, table = RateModel.of(s), tokens_table(s, 12)
    from spinlib.control.heterogeneous import solve_heterogeneous_sync
    a = solve_heterogeneous_sync(s, 12)
    G, D = a.goodput_tokens_per_s, a.info["makespan_s"]
    K = s.num_users
    slack = {}
    for tangent in (True, False):
        for rel in (1e-2, 1e-3):
            r = sync_node_bounds(s, rates, table, np.array([D * (1 - rel)]), np.array([D * (1 + rel)]),
                                 np.zeros((1, K), int), np.full((1, K), 12), G, n_dinkelbach=6, tangent=tangent)
            slack[tangent, rel] = r.upper[0] / G - 1
            assert slack[tangent, rel] >= -1e-12
    # first order: ten times narrower, about ten times less slack; second order: about a hundred
    assert slack[False, 1e-2] / slack[False, 1e-3] < 20
    assert slack[True, 1e-2] / max(slack[True, 1e-3], 1e-15) > 30
    assert slack[True, 1e-3] < slack[False, 1e-3]


def test_gap_is_checked_in_one_line():
    prob = Knapsack(np.ones(3), np.ones(3), 2.0)
    from spinlib.control.search import check_gap
    for bad in (-1e-3, 1.0, float("nan")):
        with pytest.raises(ValidationError, match="gap"):
            check_gap(bad)
    assert best_first(prob, np.zeros(3, int), 0.0).value == 2.0


def test_exhaustive_search_and_its_size_test(rng):
    """``exhaustive`` returns the first best point of the space in any chunking, certified with gap 0;
    ``few_vectors`` agrees with the exact power, including at the limit and for huge K."""
    from spinlib.control.search import exhaustive, few_vectors, length_vectors

    for _ in range(20):
        K, L_max = int(rng.integers(1, 4)), int(rng.integers(1, 6))
        X = length_vectors(K, L_max)
        assert X.shape == ((L_max + 1) ** K, K) and len({tuple(r) for r in X}) == len(X)
        w = rng.normal(size=K)
        value = lambda A: np.round(A @ w, 1)  # ties on purpose
        v = value(X)
        res = exhaustive(value, X, chunk=int(rng.integers(1, 50)))
        assert res.value == v.max() and tuple(res.x) == tuple(X[int(np.argmax(v))])
        c = res.certificate
        assert (c.upper_bound, c.gap, c.status, c.nodes, c.method) == (v.max(), 0.0, "optimal", 0, "exhaustive")
        n = (L_max + 1) ** K
        assert few_vectors(K, L_max, n) and not few_vectors(K, L_max, n - 1)
    assert not few_vectors(100_000, 16, 5_000) and few_vectors(0, 16, 1)


def test_node_bounds_drop_only_lengths_that_change_no_bit(monkeypatch):
    """Model (A)'s node bounds and the per-round problem's, with the dominated long lengths dropped
    (the default) and with every length searched (``useful_lengths`` patched to keep them all): every
    field of every node equal bit for bit, feasible or not (boxes that do not fit the band, empty
    batches), at several ratios and on both ends of the interval."""
    import spinlib.control.branch_and_bound as bb
    import spinlib.online.round_problem as rp
    from spinlib.control.lagrangian import useful_lengths

    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    dropped = []

    def counting(val, lo_idx, increasing):
        P_u = useful_lengths(val, lo_idx, increasing)
        dropped.append(P_u < np.shape(val)[-2])
        return P_u

    for i in range(10):
        K, L_max, M = int(rng.integers(2, 30)), int(rng.choice([8, 16])), int(rng.integers(0, 7))
        s = random_scenario(K, seed=[seed % (1 << 32), i], access_latency_s=0.05)
        rates, table = RateModel.of(s), tokens_table(s, L_max)
        d = float(np.max(s.tau + s.payload.bits_per_token / rates.rate(np.full(K, s.radio.bandwidth_hz / K))))
        Dl = np.exp(rng.uniform(np.log(d), np.log(L_max * d), M))
        Dh = Dl * rng.uniform(1.0001, 2.0, M)
        lo = rng.integers(0, 4, (M, K))
        hi = np.minimum(lo + rng.integers(0, L_max + 1, (M, K)), L_max)
        theta = float(rng.uniform(0.3, 1.5)) * float(table[:, 3].sum()) / (3 * d + 3 * K * s.server.t1_s_per_token)
        u = np.cumsum(rng.uniform(0, 1, (K, L_max + 1)) * 0.8 ** np.arange(L_max + 1), axis=1)
        u[:, 0] = 0.0
        w = rng.uniform(-1, 3, K)
        c0 = rp.round_constant_s(s)
        args_rp = (u, w, 5.0, c0, rates, s.tau, s.payload.bits_per_token, s.radio.bandwidth_hz, Dl, Dh, lo, hi)
        monkeypatch.setattr(bb, "useful_lengths", counting)
        monkeypatch.setattr(rp, "useful_lengths", counting)
        short = [sync_node_bounds(s, rates, table, Dl, Dh, lo, hi, theta, tangent=t) for t in (True, False)]
        short_rp = rp._node_bounds(*args_rp)
        keep_all = lambda val, lo_idx, increasing: np.shape(val)[-2]  # noqa: E731
        monkeypatch.setattr(bb, "useful_lengths", keep_all)
        monkeypatch.setattr(rp, "useful_lengths", keep_all)
        full = [sync_node_bounds(s, rates, table, Dl, Dh, lo, hi, theta, tangent=t) for t in (True, False)]
        full_rp = rp._node_bounds(*args_rp)
        where = f"seed {seed}, instance {i} (K={K}, M={M})"
        for a, b in zip(short, full):
            for f in ("upper", "x_feas", "frac_user", "split_at", "lo", "hi", "mu"):
                assert getattr(a, f).tobytes() == getattr(b, f).tobytes(), f"{where}: {f}"
        for a, b in zip(short_rp, full_rp):
            assert np.asarray(a).tobytes() == np.asarray(b).tobytes(), where
    assert sum(dropped) >= 5, f"seed {seed}: lengths dropped in only {sum(dropped)} searches"
