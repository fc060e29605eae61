"""The Lagrangian bound of a budgeted choice, minimised over its multiplier: the kernel of every node
bound of the certified searches (model A's ratio, :mod:`.branch_and_bound`; the re-planners' per-round
objective, :mod:`spinlib.online.round_problem`).

For M nodes at once, each user k picks one length L from its box; a length is worth ``val[e, m, L, k]``
and needs ``cost[e, m, L, k] >= 0`` of a budget ``B``, at each of E "ends" (the ends of a node's makespan
interval). For every multiplier ``mu >= 0``::

    Phi_m(mu) = max_e [ sum_k max_L ( val[e, m, L, k] - mu cost[e, m, L, k] ) + mu B + const[e, m] ]

is an upper bound on ``max_e [ sum_k val + const ]`` over the choices that fit the budget at that end
(the term ``mu (B - sum cost)`` is ``>= 0`` there). ``Phi`` is convex and piecewise linear in ``mu``; its
right slope at ``mu`` is ``B - used(mu)`` with ``used`` the cost of the choice at the larger end (at a tie,
the end of the larger slope). :func:`minimise_budget_dual` minimises it per node by the intersection of
tangents (Kelley's cutting planes in one dimension, exact at a vertex); inside the bracket only the
users whose choice differs between its two multipliers are evaluated (the others keep theirs exactly,
:func:`_ends_between`), so the search costs a few dense passes however many steps it takes:

* ``mu = 0``: if the choice fits (``used <= B``) the minimum is there (slope ``>= 0``), the node is
  ``done``;
* ``mu_hi`` above every exchange rate ``(val - val_lo) / (cost - cost_lo)`` of every end: everyone takes the
  cheapest length of its box (``lo``); beyond it every end is a line, and if the larger one still
  descends (its cheapest needs exceed B at that end), ``mu_hi`` moves to where it meets an ascending one;
* between the bracket ``mu_lo`` (over budget) and ``mu_hi`` (under budget) the tangents' crossing is tried
  next; the search stops at a vertex (the crossing is on ``Phi``: the minimum), when the best value found
  is within ``mu_tol (|Phi| + s)`` of the tangents' lower bound on the minimum (``s = max_e |const[e]|``),
  or after ``n_mu`` steps, or (``stop_above_zero``) once that lower bound is above 0. Every ``Phi``
  evaluated is a valid bound; the search only chooses a good one.

The arrays are laid out ``[E, M, P, K]`` (``P = L_max + 1`` lengths, users last as the rate models take
them); only the nodes still searching are evaluated at each step. A caller may pass only the first
``P'`` lengths, :func:`useful_lengths`, when the needs increase over the boxes (:func:`costs_increase`):
the longer ones are dominated (worth no more than a shorter, cheaper one), no multiplier picks them,
and the answer is the same bit for bit (tested), for fewer passes over shorter arrays.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..validation import ValidationError


@dataclass(frozen=True)
class BudgetDual:
    """What :func:`minimise_budget_dual` found for M nodes of K users.

    phi : [M] the smallest ``Phi(mu)`` evaluated (a valid upper bound; nodes not ``ok``: undefined).
    x_under : [M, K] the choice at the under-budget end of the bracket (``mu = 0`` when ``done``).
    x_over : [M, K] the choice at the over-budget end (``mu = 0`` when ``done``).
    used_under, used_over : [M] their costs at the larger end.
    done : [M] the budget does not bind (the choice at ``mu = 0`` fits).
    mu : [M] the multiplier of ``phi`` (0 when ``done``).
    above : [M] the search stopped because ``min Phi > 0`` was proven (``stop_above_zero``; else all False).
    """

    phi: np.ndarray
    x_under: np.ndarray
    x_over: np.ndarray
    used_under: np.ndarray
    used_over: np.ndarray
    done: np.ndarray
    mu: np.ndarray
    above: np.ndarray


def costs_increase(cost, inbox) -> bool:
    """Whether every user's need strictly increases with its length over its box, at every end and node
    (``cost`` [E, M, P, K]; ``inbox`` [M, P, K], each user's box, contiguous lengths).

    Checked, not assumed (a rate model's needs increase in exact arithmetic): it is the premise of
    :func:`useful_lengths`. A box with a hole fails the check."""
    box = np.asarray(inbox)
    starts = box[..., 1:, :] & ~box[..., :-1, :]
    if np.any(starts.sum(axis=-2) + box[..., 0, :] > 1):  # more than one run of lengths
        return False
    both = box[..., 1:, :] & box[..., :-1, :]
    return bool(np.all((cost[..., 1:, :] > cost[..., :-1, :]) | ~both))


def useful_lengths(val, lo_idx, increasing: bool) -> int:
    """``P'``: the lengths :func:`minimise_budget_dual` must see. ``val`` [M, P, K] (or [E, M, P, K]), ``-inf``
    outside the box; ``lo_idx`` [M, K] the first length of each box; ``increasing``: whether the needs
    increase strictly over the boxes (:func:`costs_increase`; else every length, ``P' = P``).

    With increasing needs, no length ``p >= P'`` is any user's choice at any multiplier, at any end.

    Such a length has a shorter one ``q`` with ``val_q >= val_p`` and ``cost_q < cost_p``, so
    ``val_q - mu cost_q >= val_p - mu cost_p`` for every ``mu >= 0`` *in floating point too* (rounded
    products and differences are monotone), and the first best length wins a tie: ``p`` is never
    picked. Nor does it set the cold start's top multiplier: its exchange rate against the cheapest
    length is at most ``max(q's, 0)`` (``q`` is not the cheapest, else ``val_p <= val_lo`` and the rate is
    ``<= 0``; the top multiplier is at least 0). This needs ``lo_idx`` to be the first length of each box,
    as the callers' ``argmax`` of the box makes it, and ``P' > max(lo_idx)`` (kept, for every node, searched
    or not). Dropping the lengths ``p >= P'`` therefore changes no bit of :func:`minimise_budget_dual`'s
    answer and shortens each of its passes (the long lengths of a saturating ``E[N](L)`` are dominated)."""
    v = np.asarray(val)
    if not increasing:
        return v.shape[-2]
    run = v[..., 0, :].copy()  # the best value of the shorter lengths
    last = 0
    for p in range(1, v.shape[-2]):
        v_p = v[..., p, :]
        if np.any(v_p > run):
            last = p
        np.maximum(run, v_p, out=run)
    return max(last + 1, int(np.max(lo_idx, initial=0)) + 1)


def _ends(val, cost, B: float, const, mu):
    """Per end: the choice [E, m, K], ``Phi_e(mu)`` [E, m], its cost [E, m], and each user's value and cost
    at its choice [E, m, K] (kept for :func:`_ends_between`), for the nodes of ``val``/``cost`` [E, m, P, K],
    ``const`` [E, m], ``mu`` [m].

    The scores are laid out length-major ([P, E, m, K]: each length's block contiguous), their maximum
    taken over the lengths, and the first length reaching it picked (as ``argmax`` does): an ``argmax``
    over the strided length axis and a four-index gather copy the whole score, and a running maximum
    with masked copies branches on every element (bit-identical to both; measured 2-3x and ~7x faster)."""
    E, m, P, K = val.shape
    if not np.all(np.isfinite(mu)):  # the argmax form, exact for any mu (never met: the callers' mu are finite;
        # with finite mu and finite cost no score is NaN, where the first maximum below equals argmax bit for bit)
        score = val - mu[None, :, None, None] * cost
        idx = np.argmax(score, axis=2)
        at = (np.arange(E)[:, None, None], np.arange(m)[None, :, None], idx, np.arange(K)[None, None, :])
        return idx, score[at].sum(axis=-1) + mu[None] * B + const, cost[at].sum(axis=-1), val[at], cost[at]
    m3 = mu[None, :, None]
    score = np.empty((P, E, m, K))  # length-major: each length's [E, m, K] score is one contiguous block
    for p in range(P):
        np.multiply(m3, cost[:, :, p, :], out=score[p])
        np.subtract(val[:, :, p, :], score[p], out=score[p])
    top = score.max(axis=0)
    idx = np.zeros((E, m, K), dtype=np.intp)
    for p in range(P - 1, -1, -1):  # the first best length wins a tie: the shorter ones are written last
        np.copyto(idx, p, where=score[p] == top)
    best = np.take_along_axis(score, idx[None], axis=0)[0]  # (the first best's own value: 0.0 and -0.0 tie)
    at = idx[:, :, None, :]
    need = np.take_along_axis(cost, at, axis=2)[:, :, 0, :]
    worth = np.take_along_axis(val, at, axis=2)[:, :, 0, :]
    return idx, best.sum(axis=-1) + mu[None] * B + const, need.sum(axis=-1), worth, need


def _ends_between(val, cost, B: float, const, mu, sel, idx_lo, idx_hi, val_lo, cost_lo):
    """:func:`_ends` for the nodes ``sel`` at ``mu`` inside their brackets, evaluating only the users whose
    choice at an end differs between the bracket's two multipliers (``idx_lo``, ``idx_hi`` [E, M, K]; the
    value and cost at the ``idx_lo`` choice: ``val_lo``, ``cost_lo`` [E, M, K]).

    A user whose choice ``L`` is the same at ``mu_lo`` and ``mu_hi`` keeps it in between, exactly: its
    best value ``f(mu) = max_L (val - mu cost)`` is convex, so it lies below the chord through its two
    ends, which is the line ``val_L - mu cost_L`` itself, and above that line by definition."""
    E, _, _, K = val.shape
    lo, hi = np.take(idx_lo, sel, axis=1), np.take(idx_hi, sel, axis=1)  # [E, s, K]
    frozen = lo == hi
    if frozen.mean() < 0.5:  # most users still move: the dense pass is cheaper
        return _ends(val[:, sel], cost[:, sel], B, const[:, sel], mu)
    n = len(sel)
    v_lo, c_lo = np.take(val_lo, sel, axis=1), np.take(cost_lo, sel, axis=1)
    v_at = np.where(frozen, v_lo, 0.0)
    c_at = np.where(frozen, c_lo, 0.0)
    ea, ja, ka = np.nonzero(~frozen)
    rows_v = val[ea, sel[ja], :, ka]  # [n_active, P]
    rows_c = cost[ea, sel[ja], :, ka]
    score = rows_v - mu[ja, None] * rows_c
    pick = np.argmax(score, axis=1)
    r = np.arange(len(ea))
    group = ea * n + ja
    idx = lo
    idx[ea, ja, ka] = pick
    v_lo[ea, ja, ka], c_lo[ea, ja, ka] = rows_v[r, pick], rows_c[r, pick]
    best = np.bincount(group, score[r, pick], minlength=E * n).reshape(E, n)
    need = np.bincount(group, rows_c[r, pick], minlength=E * n).reshape(E, n)
    phi = v_at.sum(axis=-1) - mu[None] * c_at.sum(axis=-1) + best + mu[None] * B + const[:, sel]
    return idx, phi, c_at.sum(axis=-1) + need, v_lo, c_lo


def _larger(idx, phi, used):
    """The larger end's choice [m, K], ``Phi`` [m] and cost [m] (ties: the larger slope ``B - used``)."""
    out_idx, out_phi, out_used = idx[0], phi[0], used[0]
    for e in range(1, len(phi)):
        take = (phi[e] > out_phi) | ((phi[e] == out_phi) & (used[e] < out_used))
        out_idx = np.where(take[:, None], idx[e], out_idx)
        out_phi = np.where(take, phi[e], out_phi)
        out_used = np.where(take, used[e], out_used)
    return out_idx, out_phi, out_used


def _cold_start(val, cost, B: float, const, lo_idx, ok):
    """The bracket of the nodes given (module docstring): the choice at ``mu = 0`` (``done`` where it fits),
    and ``mu_hi`` above every exchange rate, moved to the lowest crossing while the larger end descends.
    Returns ``(done, lo, hi)`` with ``lo`` the tuple ``(mu, phi, used, idx of the larger end, idx of every end,
    each user's value and cost at that choice)`` and ``hi`` the same without the last two."""
    E, M, P, K = val.shape
    zero = np.zeros(M)
    ends0 = _ends(val, cost, B, const, zero)
    idx0, phi0, used0 = _larger(*ends0[:3])
    done = used0 <= B
    # a multiplier above every positive exchange rate of every end: everyone takes its cheapest length
    lo3 = lo_idx[None, :, None, :]
    v_min = np.take_along_axis(val, lo3, 2)  # [E, M, 1, K]
    c_min = np.take_along_axis(cost, lo3, 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = (val - v_min) / (cost - c_min)
    ratio = np.where(np.isfinite(val) & (cost > c_min), ratio, 0.0)
    mu_hi = np.maximum(ratio.max(axis=(0, 2, 3)), 0.0) * (1 + 1e-9) + 1e-300
    ends_hi = _ends(val, cost, B, const, mu_hi)
    idx_hi, phi_hi, used_hi = _larger(*ends_hi[:3])
    # beyond mu_hi every end is the line p_e + s_e (mu - mu_hi); if the larger one descends (its cheapest
    # needs exceed B), the minimum of their maximum is where it meets an ascending one (the lowest crossing)
    ce = c_min[:, :, 0].sum(axis=-1)  # [E, M]
    s = B - ce
    for _ in range(2):
        desc = ~done & ok & (used_hi > B)
        if not desc.any():
            break
        p = v_min[:, :, 0].sum(axis=-1) - mu_hi * ce + mu_hi * B + const
        step = np.full(M, np.inf)
        for a in range(E):
            for b in range(E):
                with np.errstate(divide="ignore", invalid="ignore"):
                    x = (p[a] - p[b]) / (s[b] - s[a])
                step = np.where((s[a] < 0) & (s[b] >= 0) & np.isfinite(x) & (x > 0), np.minimum(step, x), step)
        move = desc & np.isfinite(step)
        if not move.any():
            break
        mu_hi = np.where(move, (mu_hi + np.where(move, step, 0.0)) * (1 + 1e-12) + 1e-300, mu_hi)
        ends_hi = _ends(val, cost, B, const, mu_hi)
        idx_hi, phi_hi, used_hi = _larger(*ends_hi[:3])
    return done, (zero, phi0, used0, idx0, ends0[0], ends0[3], ends0[4]), (mu_hi, phi_hi, used_hi, idx_hi, ends_hi[0])


def minimise_budget_dual(val, cost, B: float, const, lo_idx, ok, *, n_mu: int = 40,
                         mu_tol: float = 0.0, mu_guess=None, guess_width: float = 0.05,
                         stop_above_zero: bool = False) -> BudgetDual:
    """``min_{mu >= 0} Phi(mu)`` per node by the intersection of tangents (module docstring).

    Parameters
    ----------
    val : float array [E, M, P, K]
        Worth of each length at each end; ``-inf`` outside the node's box.
    cost : float array [E, M, P, K]
        Its need of the budget (``>= 0``, finite; ``0`` outside the box).
    B : float
        The budget (same unit as ``cost``).
    const : float array [E, M]
        Constant term of each end.
    lo_idx : int array [M, K]
        The cheapest length of each user's box (its choice at a large ``mu``).
    ok : bool array [M]
        Nodes to search (the others are carried along and their outputs are meaningless).
    n_mu : int
        Steps of the tangent search after the bracket.
    mu_tol : float
        Relative stop (module docstring); 0 searches to a vertex or ``n_mu``.
    mu_guess : float array [M], optional
        A multiplier near the minimum (a parent node's, the previous Dinkelbach step's; ``nan``: none).
        The search first tries the bracket ``mu_guess (1 -+ guess_width)`` (``0 < guess_width < 1``): where the choice is over
        budget at its lower end and fits at its upper end, the minimum lies inside and both the
        ``mu = 0`` pass and the exchange-rate bracket are skipped (the users that do not move between
        the two ends are then never evaluated again). Elsewhere the search starts cold. The guess
        changes only where the search looks first, never the validity of the bound.
    stop_above_zero : bool
        Stop a node's search once the tangents' lower bound on its minimum is ``> 0`` (``above``): for a
        caller that only needs to know that no multiplier brings ``Phi`` to 0 or below (a node that stays
        open), not the minimum itself. Its ``phi`` is then the best value found so far, still a valid bound.

    Returns
    -------
    BudgetDual
        ``mu`` [M]: the multiplier of ``phi`` (a guess for a related search).
    """
    E, M, P, K = val.shape
    if not 0.0 < guess_width < 1.0:  # a multiplier below 0 would not give a bound
        raise ValidationError(f"guess_width must be in (0, 1), got {guess_width!r}")
    scale = np.abs(const).max(axis=0)  # [M]
    done = np.zeros(M, dtype=bool)
    mu_lo, phi_lo, used_lo = np.zeros(M), np.full(M, np.inf), np.zeros(M)
    mu_hi, phi_hi, used_hi = np.zeros(M), np.full(M, np.inf), np.zeros(M)
    idx_lo, idx_hi = np.zeros((M, K), dtype=np.intp), np.zeros((M, K), dtype=np.intp)
    ends_lo, ends_hi = np.zeros((E, M, K), dtype=np.intp), np.zeros((E, M, K), dtype=np.intp)
    val_lo, cost_lo = np.zeros((E, M, K)), np.zeros((E, M, K))  # each user's value and cost at ends_lo
    warm = np.zeros(M, dtype=bool)
    if mu_guess is not None:
        g = np.broadcast_to(np.asarray(mu_guess, dtype=float), (M,))
        W = np.flatnonzero(ok & np.isfinite(g) & (g > 0))
        if W.size:
            # (every node guessed, the usual case: no copy of the [E, M, P, K] arrays)
            v, c, k = (val, cost, const) if W.size == M else (val[:, W], cost[:, W], const[:, W])
            ma, mb = g[W] * (1 - guess_width), g[W] * (1 + guess_width)
            with np.errstate(over="ignore", invalid="ignore"):  # a huge guess: mu cost overflows, the node goes cold
                ea, eb = _ends(v, c, B, k, ma), _ends(v, c, B, k, mb)
            (ia, pa, ua), (ib, pb, ub) = _larger(*ea[:3]), _larger(*eb[:3])
            hit = (ua > B) & (ub <= B) & np.isfinite(pa) & np.isfinite(pb)  # (a guess so large that mu cost overflows: cold)
            H = W[hit]
            warm[H] = True
            mu_lo[H], phi_lo[H], used_lo[H], idx_lo[H], ends_lo[:, H] = ma[hit], pa[hit], ua[hit], ia[hit], ea[0][:, hit]
            val_lo[:, H], cost_lo[:, H] = ea[3][:, hit], ea[4][:, hit]
            mu_hi[H], phi_hi[H], used_hi[H], idx_hi[H], ends_hi[:, H] = mb[hit], pb[hit], ub[hit], ib[hit], eb[0][:, hit]
    C = np.flatnonzero(~warm)
    if C.size:  # (the copy of a broadcast val pays for itself: the passes over it run faster; measured)
        d, lo_s, hi_s = _cold_start(val[:, C], cost[:, C], B, const[:, C], lo_idx[C], ok[C])
        done[C] = d
        mu_lo[C], phi_lo[C], used_lo[C], idx_lo[C], ends_lo[:, C], val_lo[:, C], cost_lo[:, C] = lo_s
        mu_hi[C], phi_hi[C], used_hi[C], idx_hi[C], ends_hi[:, C] = hi_s
    phi_best = np.where(done, phi_lo, np.minimum(phi_lo, phi_hi))
    mu_best = np.where(done | (phi_lo <= phi_hi), mu_lo, mu_hi)
    live = ~done & ok & (used_hi <= B)
    above = np.zeros(M, dtype=bool)
    for _ in range(n_mu):
        sel = np.flatnonzero(live)
        if not sel.size:
            break
        s_lo, s_hi = B - used_lo[sel], B - used_hi[sel]  # slopes (< 0 and >= 0)
        m_lo, m_hi = mu_lo[sel], mu_hi[sel]
        with np.errstate(divide="ignore", invalid="ignore"):
            mu_x = (phi_hi[sel] - phi_lo[sel] + s_lo * m_lo - s_hi * m_hi) / (s_lo - s_hi)
        bad = ~np.isfinite(mu_x) | (mu_x <= m_lo) | (mu_x >= m_hi)
        mu_x = np.where(bad, 0.5 * (m_lo + m_hi), mu_x)
        line = phi_lo[sel] + s_lo * (mu_x - m_lo)
        ends_x = _ends_between(val, cost, B, const, mu_x, sel, ends_lo, ends_hi, val_lo, cost_lo)
        idx_x, phi_x, used_x = _larger(*ends_x[:3])
        better = phi_x < phi_best[sel]
        phi_best[sel] = np.where(better, phi_x, phi_best[sel])
        mu_best[sel] = np.where(better, mu_x, mu_best[sel])
        vertex = phi_x <= line + 1e-13 * (np.abs(line) + scale[sel])
        over = used_x > B
        lo_s, hi_s = sel[over & ~vertex], sel[~over & ~vertex]
        lo_x, hi_x = over & ~vertex, ~over & ~vertex
        mu_lo[lo_s], phi_lo[lo_s], used_lo[lo_s], idx_lo[lo_s] = mu_x[lo_x], phi_x[lo_x], used_x[lo_x], idx_x[lo_x]
        mu_hi[hi_s], phi_hi[hi_s], used_hi[hi_s], idx_hi[hi_s] = mu_x[hi_x], phi_x[hi_x], used_x[hi_x], idx_x[hi_x]
        ends_lo[:, lo_s], ends_hi[:, hi_s] = ends_x[0][:, lo_x], ends_x[0][:, hi_x]
        val_lo[:, lo_s], cost_lo[:, lo_s] = ends_x[3][:, lo_x], ends_x[4][:, lo_x]
        near = phi_best[sel] - line <= mu_tol * (np.abs(phi_best[sel]) + scale[sel])
        live[sel] = ~vertex & ~near & ((mu_hi[sel] - mu_lo[sel]) > 1e-14 * mu_hi[sel])
        if stop_above_zero:  # min Phi >= line > 0 (the minimum is in the bracket, above both tangents;
            # ``line`` is their crossing only where that fell inside the bracket, not ``bad``)
            up = live[sel] & (line > 0) & ~bad
            above[sel[up]] = True
            live[sel[up]] = False
    return BudgetDual(phi_best, np.where(done[:, None], idx_lo, idx_hi), idx_lo,
                      np.where(done, used_lo, used_hi), used_lo, done, mu_best, above)


__all__ = ["BudgetDual", "costs_increase", "minimise_budget_dual", "useful_lengths"]
