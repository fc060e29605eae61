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

Two speed-ups are exact, and are tested for it bit for bit: the per-end choice (``_ends``) against the
``argmax`` over the lengths written out here, on instances full of ties (small integers, signed zeros,
empty boxes); and dropping the long lengths that no multiplier picks (:func:`useful_lengths`, under
:func:`costs_increase`) against the search over every length.
"""

import numpy as np
import pytest
from scipy.optimize import linprog

from spinlib.control.lagrangian import _ends, costs_increase, minimise_budget_dual, useful_lengths
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


def test_stopping_above_zero_is_proven_and_keeps_a_valid_bound():
    """``stop_above_zero``: fresh random instances whose constants are shifted so that each node's LP
    minimum is a ``delta`` of either sign (``1e-9`` to ``10`` times its scale; a shift of every end's
    constant moves ``Phi`` exactly): a node flagged ``above`` always has ``delta > 0`` (a flag on a node
    whose minimum is below 0 fails), its value is still a value of the dual (never below the minimum), and
    a node not flagged is searched to the minimum as before (within 1e-7). With and without a guess; the
    flag must be raised on some nodes with ``delta > 0`` (about 10 of 400 here: most searches reach the
    vertex first), and only with the option."""
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    flagged = positive = 0
    for i in range(150):
        val, cost, B, const, lo, ok = draw(rng)
        const = const.copy()
        delta = {}
        for m in np.flatnonzero(ok):
            ref = lp_minimum(val, cost, B, const, m)
            delta[m] = float(rng.choice([-1.0, 1.0]) * 10 ** rng.uniform(-9, 1) * (1.0 + abs(ref)))
            const[:, m] += delta[m] - ref
        cold = minimise_budget_dual(val, cost, B, const, lo, ok)
        assert not cold.above.any()
        for name, g in (("none", None), ("its own", cold.mu * rng.choice([0.5, 0.97, 2.0]))):
            d = minimise_budget_dual(val, cost, B, const, lo, ok, mu_guess=g, stop_above_zero=True)
            where = f"seed {seed}, instance {i}, guess {name}"
            for m, dm in delta.items():
                scale = 1.0 + np.abs(const[:, m]).max()
                assert d.phi[m] >= dm - 1e-9 * scale, f"{where}, node {m}"
                positive += dm > 0
                if d.above[m]:
                    flagged += 1
                    assert dm > 0, f"{where}, node {m}: flagged above with LP minimum {dm}"
                else:
                    assert d.phi[m] <= dm + 1e-7 * scale, f"{where}, node {m}"
            assert not np.any(d.above & ~ok), where
    assert positive >= 200 and flagged >= 3, f"seed {seed}: {flagged} of {positive} nodes flagged"


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


def argmax_ends(val, cost, B, const, mu):
    """The per-end choice by ``argmax`` over the lengths (the first best wins), written out."""
    E, m, P, K = val.shape
    score = val - mu[None, :, None, None] * cost
    idx = np.argmax(score, axis=2)
    pick = lambda a: np.take_along_axis(a, idx[:, :, None, :], axis=2)[:, :, 0, :]
    return idx, pick(score).sum(axis=-1) + mu[None] * B + const, pick(cost).sum(axis=-1), pick(val), pick(cost)


def test_the_per_end_choice_is_argmax_bit_for_bit_on_ties():
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    ties = 0
    for i in range(300):
        E, m, P, K = (int(rng.integers(1, 3)), int(rng.integers(1, 5)), int(rng.integers(1, 8)),
                      int(rng.integers(1, 9)))
        val = rng.integers(-3, 4, (E, m, P, K)).astype(float)
        val[rng.random(val.shape) < 0.2] = -np.inf  # outside the box (a whole box may be empty)
        val[val == 0] *= rng.choice([1.0, -1.0], int((val == 0).sum()))  # signed zeros tie
        cost = rng.integers(0, 3, (E, m, P, K)).astype(float)
        mu = rng.choice([0.0, 0.5, 1.0, 2.0], m)
        const = rng.normal(0, 1, (E, m))
        got, want = _ends(val, cost, 1.5, const, mu), argmax_ends(val, cost, 1.5, const, mu)
        for a, b in zip(got, want):
            assert a.tobytes() == b.tobytes(), f"seed {seed}, instance {i}"
        score = val - mu[None, :, None, None] * cost
        ties += int(((score == score.max(axis=2, keepdims=True)).sum(axis=2) > 1).sum())
    assert ties > 100, f"seed {seed}: only {ties} ties drawn"


def saturating(rng):
    """:func:`draw` with a value that rises and then falls in the length (as ``E[N](L) - theta t1 L``):
    the long lengths are dominated."""
    val, cost, B, const, lo, ok = draw(rng)
    E, M, P, K = val.shape
    Ls = np.arange(P)[None, None, :, None]
    peak = rng.uniform(0, P / 3, (1, M, 1, K))
    bump = -rng.uniform(0.5, 2.0) * (Ls - peak) ** 2 + rng.normal(0, 0.1, val.shape)
    return np.where(np.isfinite(val), bump, -np.inf), cost, B, const, lo, ok


def test_dropping_the_dominated_lengths_changes_no_bit():
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    trimmed = 0
    for i in range(300):
        val, cost, B, const, lo, ok = saturating(rng) if i % 5 else draw(rng)
        P = val.shape[2]
        inbox = np.isfinite(val[0])
        assert costs_increase(cost, inbox), f"seed {seed}, instance {i}"  # draw's needs increase
        Pu = useful_lengths(val, lo, True)
        assert useful_lengths(val, lo, False) == P  # needs not known to increase: every length
        trimmed += Pu < P
        for mu in (np.zeros(len(ok)), rng.exponential(1.0, len(ok)), rng.exponential(100.0, len(ok))):
            assert _ends(val, cost, B, const, mu)[0].max() < Pu, f"seed {seed}, instance {i}: a long length picked"
        for g in (None, rng.exponential(1.0, len(ok))):
            full = minimise_budget_dual(val, cost, B, const, lo, ok, mu_guess=g)
            short = minimise_budget_dual(val[:, :, :Pu], cost[:, :, :Pu], B, const, lo, ok, mu_guess=g)
            for f in ("phi", "x_under", "x_over", "used_under", "used_over", "done", "mu"):
                a, b = getattr(full, f), getattr(short, f)
                sel = ok if f != "done" else slice(None)
                assert np.asarray(a)[sel].tobytes() == np.asarray(b)[sel].tobytes(), f"seed {seed}, instance {i}: {f}"
    assert trimmed > 15, f"seed {seed}: only {trimmed} instances had a dominated tail"


def test_costs_increase_refuses_a_flat_step_and_a_box_with_a_hole():
    cost = np.cumsum(np.ones((1, 1, 5, 2)), axis=2)
    box = np.ones((1, 5, 2), dtype=bool)
    assert costs_increase(cost, box)
    flat = cost.copy()
    flat[0, 0, 3, 1] = flat[0, 0, 2, 1]
    assert not costs_increase(flat, box)
    hole = box.copy()
    hole[0, 2, 0] = False
    assert not costs_increase(cost, hole)
    outside = cost.copy()
    outside[0, 0, 4, 0] = 0.0  # a need outside the box is not compared
    part = box.copy()
    part[0, 4, 0] = False
    assert costs_increase(outside, part)
