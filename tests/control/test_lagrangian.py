"""The multiplier search of every node bound (:func:`spinlib.control.lagrangian.minimise_budget_dual`)
against an independent reference: the same dual written as a linear program and solved by HiGHS.

``min_{mu >= 0} max_e [sum_k max_{L in box} (val - mu cost) + mu B + const_e]`` is the LP
``min t`` over ``(mu, y, t)`` with ``y_ek >= val_ekL - mu cost_ekL`` and
``t >= sum_k y_ek + mu B + const_e``. On fresh random instances (seed printed on failure;
``SPINLIB_TEST_SEED`` replays one), one and two ends, with the costs increasing in the length as
the needs are: the kernel's value is never below the LP's minimum (it is a value of the dual, so a
valid bound) and within 1e-7 of it (the search ends at the vertex), the under-budget choice fits
the budget and costs what the kernel says, and a node whose choice at ``mu = 0`` fits is ``done``.
The same holds for a search started from a guess of the multiplier (``mu_guess``: the minimum's own
multiplier, a multiple of it, a random one): a guess changes where the search looks, never its answer.
"""

import numpy as np
import pytest
from scipy.optimize import linprog

from spinlib.control.lagrangian import minimise_budget_dual
from spinlib.validation import ValidationError
from helpers import fresh_seed


def draw(rng):
    """E ends, M nodes, P lengths, K users: boxes, increasing costs, a budget between the cheapest and
    the dearest choice."""
    E, M, P, K = int(rng.integers(1, 3)), int(rng.integers(1, 6)), int(rng.integers(2, 7)), int(rng.integers(1, 7))
    steps = rng.exponential(1.0, (E, M, P, K))
    steps[:, :, 0] = 0.0
    cost = np.cumsum(steps, axis=2)
    if E == 2:  # a second end needs at least as much (a tangent's extra need, growing with L)
        cost[1] = cost[0] + np.cumsum(rng.exponential(0.3, (M, P, K)), axis=1) * (np.arange(P) > 0)[None, :, None]
    val = rng.normal(0, 2, (E, M, P, K)) + np.arange(P)[None, None, :, None] * rng.uniform(0, 2)
    lo = rng.integers(0, P, (M, K))
    hi = np.minimum(lo + rng.integers(0, P, (M, K)), P - 1)
    Ls = np.arange(P)[None, :, None]
    inbox = (Ls >= lo[:, None, :]) & (Ls <= hi[:, None, :])
    val = np.where(inbox[None], val, -np.inf)
    cost = np.where(inbox[None], cost, 0.0)
    cheap = np.take_along_axis(cost, lo[None, :, None, :], 2)[:, :, 0].sum(axis=-1).max(axis=0)
    dear = np.take_along_axis(cost, hi[None, :, None, :], 2)[:, :, 0].sum(axis=-1).max(axis=0)
    B = float(np.max(cheap + rng.uniform(0, 1.2) * (dear - cheap)))
    const = rng.normal(0, 3, (E, M))
    return val, cost, B, const, lo, cheap <= B


def lp_minimum(val, cost, B, const, m) -> float:
    """``min_mu Phi`` of node m as a linear program (module docstring)."""
    E, _, P, K = val.shape
    nv = 2 + E * K  # mu, t, y[e, k]
    c = np.zeros(nv)
    c[1] = 1.0
    A, b = [], []
    for e in range(E):
        row = np.zeros(nv)
        row[0], row[1] = B, -1.0
        row[2 + e * K: 2 + (e + 1) * K] = 1.0
        A.append(row)
        b.append(-const[e, m])
        for k in range(K):
            for L in range(P):
                if np.isfinite(val[e, m, L, k]):
                    row = np.zeros(nv)
                    row[0], row[2 + e * K + k] = -cost[e, m, L, k], -1.0
                    A.append(row)
                    b.append(-val[e, m, L, k])
    bounds = [(0, None)] + [(None, None)] * (nv - 1)
    res = linprog(c, A_ub=np.array(A), b_ub=np.array(b), bounds=bounds, method="highs")
    assert res.status == 0, res.message
    return float(res.fun)


def guesses(rng, d, M):
    """No guess, the search's own multiplier, a multiple of it (near and far), and random ones (or none)."""
    yield "none", None
    yield "its own", d.mu
    f = rng.choice([0.97, 1.02, 0.5, 3.0])
    yield f"x{f}", d.mu * f
    yield "random", np.where(rng.random(M) < 0.8, rng.exponential(1.0, M), np.nan)
    yield "extreme", rng.choice([0.0, -1.0, np.inf, 1e308, 1e-300], M)


def test_kernel_matches_the_lp_on_fresh_instances():
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    checked = 0
    for i in range(150):
        val, cost, B, const, lo, ok = draw(rng)
        cold = minimise_budget_dual(val, cost, B, const, lo, ok)
        refs = {m: lp_minimum(val, cost, B, const, m) for m in np.flatnonzero(ok)}
        for name, g in guesses(rng, cold, len(ok)):
            checked += check_against_lp(minimise_budget_dual(val, cost, B, const, lo, ok, mu_guess=g),
                                        val, cost, B, lo, const, refs, f"seed {seed}, instance {i}, guess {name}")
    assert checked >= 1000, f"seed {seed}: only {checked} nodes checked"


def test_a_guess_width_outside_0_1_is_one_line():
    rng = np.random.default_rng(0)
    val, cost, B, const, lo, ok = draw(rng)
    for w in (0.0, 1.0, 1.5, -0.1):
        with pytest.raises(ValidationError, match="guess_width must be in"):
            minimise_budget_dual(val, cost, B, const, lo, ok, mu_guess=np.ones(len(ok)), guess_width=w)


def check_against_lp(d, val, cost, B, lo, const, refs, label) -> int:
    """The kernel's answer ``d`` against the LP minimum ``refs[m]`` of every searched node m."""
    E, M, P, K = val.shape
    checked = 0
    for m, ref in refs.items():
        where = f"{label}, node {m}: E={E} P={P} K={K}"
        scale = 1.0 + abs(ref) + np.abs(const[:, m]).max()
        assert d.phi[m] >= ref - 1e-9 * scale, where
        assert d.phi[m] <= ref + 1e-7 * scale, where
        # the under-budget choice: in the box, within the budget at its end, and its cost as reported
        x = d.x_under[m]
        assert np.all((x >= lo[m]) & np.isfinite(val[0, m, x, np.arange(K)])), where
        used = cost[:, m, x, np.arange(K)].sum(axis=-1)
        assert np.any(np.isclose(used, d.used_under[m], rtol=1e-12, atol=0)), where
        assert d.used_under[m] <= B, where
        at0 = np.argmax(val[:, m], axis=1)  # the choices at mu = 0
        if cost[:, m, at0, np.arange(K)].sum(axis=-1).max() <= B:
            assert d.done[m], where
        # the multiplier reported is the one of the value reported
        at = np.max(np.max(val[:, m] - d.mu[m] * cost[:, m], axis=1).sum(axis=-1) + d.mu[m] * B + const[:, m])
        assert np.isclose(at, d.phi[m], rtol=1e-9, atol=1e-9 * scale), where
        checked += 1
    return checked
