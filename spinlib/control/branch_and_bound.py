"""Certified upper bounds and branch-and-bound for the synchronous ragged batch (model A).

The problem (see :mod:`.heterogeneous`)::

    G* = max_{L in {0..L_max}^K}  F(L),   F(L) = sum_k N_k(L_k) / ( D*(L) + c0 + t1 sum_k L_k )

with ``c0 = t0 + t1 K + T_fb + T_acc`` [s] and ``D*(L)`` the smallest drafting + uplink makespan
that the budget allows: ``D*(L) = min { D : sum_k b_k(L_k, D) <= B }`` with
``b_k(L, D) = R_k^{-1}( L S / (D - L tau_k) )`` [Hz] (0 for L = 0, inf when out of reach).
``b_k`` increases in ``L`` and decreases in ``D``, so ``sum_k b_k(L_k, D) <= B`` iff ``D >= D*(L)``,
and ``D*`` is non-decreasing in every ``L_k``.

Node relaxation
---------------
A node is a makespan interval ``[D_lo, D_hi]`` and a box ``lo_k <= L_k <= hi_k``; it stands for the
length vectors of the box with ``D*(L)`` in the interval. For such an L,
``sum_k b_k(L_k, D_hi) <= sum_k b_k(L_k, D*(L)) <= B`` and the denominator is at least
``D_lo + c0 + t1 sum_k L_k``. Hence ``F(L) <= max { sum_k N_k(L_k) / (den0 + t1 sum_k L_k) :
L in box, sum_k b_k(L_k, D_hi) <= B }`` with ``den0 = D_lo + c0``: a ratio over a multiple-choice
knapsack. For any ``theta`` and any multiplier ``mu >= 0`` on the budget, every L of the node has

    num(L) - theta den(L) <= Phi(theta, mu) = sum_k max_{L in box_k} [ N_k(L) - theta t1 L - mu b_k(L, D_hi) ]
                                           + mu B - theta den0,

(the budget term ``mu (B - sum b) >= 0`` was added), and dividing by ``den(L)`` in
``[den_min, den_max] = den0 + t1 [sum lo, sum hi]``::

    F(L) <= U(theta, mu) = theta + Phi / den_min   if Phi >= 0,   theta + Phi / den_max   if Phi < 0.

So *every* pair (theta, mu) gives a valid bound; the solver only chooses good ones: mu minimises the
convex piecewise-linear ``Phi(theta, .)`` (intersection-of-tangents search, exact at a vertex), and
theta follows Dinkelbach's iteration from the incumbent (the bound converges to the Lagrangian,
i.e. LP, bound of the ratio problem). The bandwidth needs are computed at ``D_hi`` and scaled by
``1 - 1e-12`` and ``D_lo`` by ``1 - 1e-12`` so that the rounding of the rate inversion (~1e-13
relative) cannot make the relaxation tighter than the problem.

Tightening: ``D*`` is monotone, so a node's interval is cut to ``[D*(lo), D*(hi)]``; a length whose
need at ``D_hi`` does not fit beside the other users' smallest needs is removed from the box.

Root
----
The makespan axis is cut into geometric intervals over ``[d1, D_top]``: every ``L != 0`` has
``D*(L) >= min_k (tau_k + S / R_k(B))`` = d1 (no user gets more than B), and
``D*(L) <= L_max max_k (tau_k + S / R_k(B / K))`` (the equal split among the drafting users gives
each at least B / K); vectors with ``D*(L) > sum_k N_k(L_max) / G_inc - c0`` cannot beat the
incumbent, so D_top is the smaller of the two. ``L = 0`` (D = 0) is evaluated directly.

Branch and bound
----------------
Best-first, in batches (the top nodes by bound are split together and their children bounded in
one vectorised pass). A node is split on the makespan (at the relaxed solution's own makespan when
it is inside the interval, else at the midpoint) while the interval's share of the denominator is
at least half the node's gap, and otherwise on a user whose two Lagrangian choices differ (the
fractional user of the knapsack relaxation). Boxes of at most ``enum_max`` vectors are enumerated
with their exact bandwidth split (the exact maximum over the box: a valid bound, and a candidate).
A node is discarded when its bound is ``<= G_inc (1 + gap)``; each bounded node also offers its
under-budget Lagrangian choice (feasible at ``D_hi``) as a candidate, evaluated exactly. The upper
bound returned is ``max(G_inc, bounds of every discarded or open node)``: each vector of
``{0..L_max}^K`` lies in a node that was enumerated, discarded with a bound, or is still open.
"""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import numpy as np

from ..channel import RateModel
from ..rounds import sync_goodput, sync_round_time
from ..scenario import Scenario, ValidationError, check_nonnegative
from .bandwidth import min_makespan_bandwidth, required_bandwidth

SAFETY = 1e-12  # relative slack against rounding in the rate inversion (see module docstring)


@dataclass
class BoundResult:
    """Node bounds of :func:`sync_node_bounds` (M nodes, K users).

    upper : [M] valid upper bound on F over the node [token/s] (-inf: empty node).
    x_feas : [M, K] the under-budget Lagrangian choice (fits the budget at D_hi).
    frac_user : [M] a user whose over- and under-budget choices differ (-1: none).
    split_at : [M] the length to split that user's box after (children ``<= m`` and ``> m``).
    lo, hi : [M, K] the tightened boxes.
    """

    upper: np.ndarray
    x_feas: np.ndarray
    frac_user: np.ndarray
    split_at: np.ndarray
    lo: np.ndarray
    hi: np.ndarray


def sync_node_bounds(scenario: Scenario, rates: RateModel, table: np.ndarray, D_lo, D_hi, lo, hi, theta0,
                     n_dinkelbach: int = 3, n_mu: int = 40) -> BoundResult:
    """Lagrangian/Dinkelbach upper bounds of model (A) on M nodes at once (see the module docstring).

    Parameters
    ----------
    table : [K, L_max+1] ``E[N_k](L)``.
    D_lo, D_hi : [M] makespan interval [s].
    lo, hi : [M, K] int boxes.
    theta0 : float or [M] first ratio tried [token/s] (the incumbent goodput): a node whose bound at
        ``theta0`` is already below ``theta0`` is settled by one multiplier search.
    """
    K, P = table.shape
    M = len(D_lo)
    tau, S, B = scenario.tau, scenario.payload.bits_per_token, scenario.radio.bandwidth_hz
    t1 = scenario.server.t1_s_per_token
    c0 = float(sync_round_time(scenario, 0.0, 0.0))
    Ls = np.arange(P)
    rows = np.arange(M)[:, None]
    cols = np.arange(K)[None, :]
    cost = required_bandwidth(rates, S, Ls[None, :, None], tau[None, None, :], np.asarray(D_hi)[:, None, None])
    cost = cost * (1.0 - SAFETY)
    inbox = (Ls[None, :, None] >= lo[:, None, :]) & (Ls[None, :, None] <= hi[:, None, :]) & np.isfinite(cost)
    # smallest need of every user (its lowest length in the box; costs increase with L)
    c_min = np.min(np.where(inbox, cost, np.inf), axis=1)  # [M, K]
    base = c_min.sum(axis=1)
    ok = np.isfinite(base) & (base <= B)
    with np.errstate(invalid="ignore"):
        inbox &= (cost - c_min[:, None, :] + base[:, None, None]) <= B * (1 + 1e-15)
    inbox &= ok[:, None, None]
    any_in = inbox.any(axis=1)  # [M, K]
    ok &= any_in.all(axis=1)
    lo2 = np.where(any_in, np.argmax(inbox, axis=1), lo)
    hi2 = np.where(any_in, P - 1 - np.argmax(inbox[:, ::-1, :], axis=1), hi)
    cost = np.where(inbox, cost, 0.0)
    den0 = np.asarray(D_lo) * (1.0 - SAFETY) + c0
    den_min = den0 + t1 * lo2.sum(axis=1)
    den_max = den0 + t1 * hi2.sum(axis=1)
    Nt = table.T[None]  # [1, P, K]

    def choose(val, mu):
        score = np.where(inbox, val - mu[:, None, None] * cost, -np.inf)
        idx = np.argmax(score, axis=1)  # [M, K]
        best = score[rows, idx, cols]
        used = cost[rows, idx, cols].sum(axis=1)
        return idx, best.sum(axis=1), used

    theta = np.broadcast_to(np.asarray(theta0, dtype=float), (M,)).copy()
    upper = np.full(M, np.inf)
    x_feas = lo2.copy()
    x_over = lo2.copy()
    for _ in range(n_dinkelbach):
        val = Nt - theta[:, None, None] * t1 * Ls[None, :, None]  # [M, P, K]
        zero = np.zeros(M)
        idx0, best0, used0 = choose(val, zero)
        phi0 = best0 - theta * den0
        done = used0 <= B
        # mu above every positive exchange rate: everyone takes its cheapest length
        v_min = val[rows, lo2, cols]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = (val - v_min[:, None, :]) / (cost - c_min[:, None, :])
        ratio = np.where(inbox & (cost > c_min[:, None, :]), ratio, 0.0)
        mu_hi = np.maximum(ratio.max(axis=(1, 2)), 0.0) * (1 + 1e-9) + 1e-300
        idx_hi, best_hi, used_hi = choose(val, mu_hi)
        phi_hi = best_hi + mu_hi * B - theta * den0
        mu_lo, phi_lo, used_lo, idx_lo = zero, phi0, used0, idx0
        phi_best = np.where(done, phi0, np.minimum(phi0, phi_hi))
        live = ~done & ok
        for _ in range(n_mu):
            if not live.any():
                break
            s_lo, s_hi = B - used_lo, B - used_hi  # slopes (< 0 and >= 0)
            with np.errstate(divide="ignore", invalid="ignore"):
                mu_x = (phi_hi - phi_lo + s_lo * mu_lo - s_hi * mu_hi) / (s_lo - s_hi)
            bad = ~np.isfinite(mu_x) | (mu_x <= mu_lo) | (mu_x >= mu_hi)
            mu_x = np.where(bad, 0.5 * (mu_lo + mu_hi), mu_x)
            line = phi_lo + s_lo * (mu_x - mu_lo)
            idx_x, best_x, used_x = choose(val, mu_x)
            phi_x = best_x + mu_x * B - theta * den0
            phi_best = np.where(live, np.minimum(phi_best, phi_x), phi_best)
            vertex = phi_x <= line + 1e-13 * (np.abs(line) + theta * den0)
            over = used_x > B
            upd_lo = live & over & ~vertex
            upd_hi = live & ~over & ~vertex
            mu_lo = np.where(upd_lo, mu_x, mu_lo)
            phi_lo = np.where(upd_lo, phi_x, phi_lo)
            used_lo = np.where(upd_lo, used_x, used_lo)
            idx_lo = np.where(upd_lo[:, None], idx_x, idx_lo)
            mu_hi = np.where(upd_hi, mu_x, mu_hi)
            phi_hi = np.where(upd_hi, phi_x, phi_hi)
            used_hi = np.where(upd_hi, used_x, used_hi)
            idx_hi = np.where(upd_hi[:, None], idx_x, idx_hi)
            live &= ~vertex & ((mu_hi - mu_lo) > 1e-14 * mu_hi)
        bound = np.where(phi_best >= 0, theta + phi_best / den_min, theta + phi_best / den_max)
        upper = np.minimum(upper, bound)
        x_feas = np.where(done[:, None], idx0, idx_hi)
        x_over = np.where(done[:, None], idx0, idx_lo)
        # Dinkelbach: the ratio of the knapsack-LP point mixing the two choices on the budget
        with np.errstate(divide="ignore", invalid="ignore"):
            lam = np.where(done, 0.0, np.clip((B - used_hi) / (used_lo - used_hi), 0.0, 1.0))
        num = lam * table[cols, x_over].sum(axis=1) + (1 - lam) * table[cols, x_feas].sum(axis=1)
        den = den0 + t1 * (lam * x_over.sum(axis=1) + (1 - lam) * x_feas.sum(axis=1))
        new_theta = num / den
        if not np.any(ok & (phi_best > 0) & (new_theta > theta * (1 + 1e-15))):
            break
        theta = np.where(phi_best > 0, np.maximum(theta, new_theta), theta)
    upper = np.where(ok, upper, -np.inf)
    diff = x_over != x_feas
    frac_user = np.where(diff.any(axis=1), np.argmax(diff, axis=1), -1)
    fk = np.maximum(frac_user, 0)
    split_at = np.minimum(x_over[np.arange(M), fk], x_feas[np.arange(M), fk])
    return BoundResult(upper, x_feas, frac_user, split_at, lo2, hi2)


def enumerate_boxes(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """All integer vectors of the boxes ``lo``..``hi`` ([M, K]), stacked: [sum of box sizes, K]."""
    out = []
    for a, b in zip(lo, hi):
        free = np.flatnonzero(b > a)
        base = np.tile(a, (int(np.prod(b[free] - a[free] + 1)), 1))
        if free.size:
            grid = np.array(list(itertools.product(*[range(a[k], b[k] + 1) for k in free])), dtype=int)
            base[:, free] = grid
        out.append(base)
    return np.vstack(out) if out else np.zeros((0, lo.shape[1]), dtype=int)


@dataclass
class BnBResult:
    """Outcome of :func:`branch_and_bound_sync`."""

    L: np.ndarray  # [K] best lengths found
    goodput: float  # F(L) [token/s]
    upper_bound: float  # certified bound on G* [token/s]
    status: str  # "optimal" (gap <= tolerance), "node_limit" or "time_limit"
    nodes: int  # nodes bounded
    time_s: float


def check_gap(gap) -> float:
    """The requested relative gap tolerance as a float in [0, 1) (one line otherwise: a gap of 1 or more
    certifies any point, so it would make the search do nothing)."""
    gap = check_nonnegative("gap", gap)
    if gap >= 1:
        raise ValidationError(f"gap must be in [0, 1) (a relative tolerance), got {gap!r}")
    return gap


def certified_status(status: str, gap: float, optimal_gap: float) -> str:
    """The status a solver reports: ``"optimal"`` only when the achieved relative ``gap`` is within the
    solver's optimality tolerance ``optimal_gap`` (its default); a search that closed every node at a
    looser requested tolerance reports ``"gap_limit"`` (like a MIP solver's gap stop), never "optimal".
    ``"node_limit"`` and ``"time_limit"`` pass through."""
    return "gap_limit" if status == "optimal" and gap > optimal_gap else status


def branch_and_bound_sync(scenario: Scenario, rates: RateModel, table: np.ndarray, L_inc, G_inc: float, *,
                          gap: float = 1e-9, time_limit_s: float = 10.0, max_nodes: int | None = None, batch: int = 64, enum_max: int = 16,
                          n_root: int = 16) -> BnBResult:
    """Best-first branch-and-bound of model (A) from the incumbent ``(L_inc, G_inc)``.

    Parameters
    ----------
    table : [K, L_max+1] ``E[N_k](L)``.
    gap : relative tolerance: nodes whose bound is ``<= G_inc (1 + gap)`` are discarded.
    time_limit_s : wall-clock budget [s]; on expiry the open nodes' bounds enter the upper bound.
    max_nodes : node budget (``None``: none); on reaching it the search stops as on a time limit,
        with status ``"node_limit"``. A node budget is reproducible, a time limit is not.
    batch : nodes split per vectorised pass.
    enum_max : boxes with at most this many vectors are enumerated exactly.
    n_root : geometric makespan intervals of the root partition.

    Returns
    -------
    BnBResult
        ``goodput >= G_inc``; ``upper_bound >= G*`` (module docstring).
    """
    t_start = time.perf_counter()
    K, P = table.shape
    L_max = P - 1
    tau, S, B = scenario.tau, scenario.payload.bits_per_token, scenario.radio.bandwidth_hz
    t1 = scenario.server.t1_s_per_token
    c0 = float(sync_round_time(scenario, 0.0, 0.0))
    best_L, best_G = np.array(L_inc, dtype=int), float(G_inc)
    closed_max = best_G  # largest bound of every node closed so far (enumerated or discarded)
    nodes = 0

    def offer(Ls_cand):
        nonlocal best_L, best_G
        if len(Ls_cand) == 0:
            return np.zeros(0)
        D, _ = min_makespan_bandwidth(scenario, Ls_cand, rates)
        G = sync_goodput(scenario, Ls_cand, table[np.arange(K), Ls_cand], D)
        i = int(np.argmax(G))
        if G[i] > best_G:
            best_L, best_G = Ls_cand[i].copy(), float(G[i])
        return G

    # root partition of the makespan axis: every L != 0 has D*(L) >= min_k (tau_k + S / R_k(B))
    with np.errstate(divide="ignore"):
        d1 = float(np.min(tau + S / rates.rate(np.full(K, B))))
        d_eq = float(np.max(tau + S / rates.rate(np.full(K, B / K))))
    D_top = L_max * d_eq  # equal split among the drafting users: b_k >= B / K
    n_max = float(table[:, -1].sum())
    D_top = min(D_top, n_max / best_G - c0) if best_G > 0 else D_top
    offer(np.zeros((1, K), dtype=int))  # the point D = 0 (nobody drafts)
    if not (np.isfinite(D_top) and D_top > d1):
        ub = max(best_G, closed_max)
        return BnBResult(best_L, best_G, ub, "optimal", 0, time.perf_counter() - t_start)
    edges = np.geomspace(d1 * (1 - SAFETY), D_top, n_root + 1)
    Dl, Dh = edges[:-1], edges[1:]
    lo = np.zeros((n_root, K), dtype=int)
    hi = np.full((n_root, K), L_max, dtype=int)

    # open-node storage
    o_Dl = np.zeros(0)
    o_Dh = np.zeros(0)
    o_lo = np.zeros((0, K), dtype=int)
    o_hi = np.zeros((0, K), dtype=int)
    o_ub = np.zeros(0)
    o_frac = np.zeros(0, dtype=int)
    o_split = np.zeros(0, dtype=int)
    o_Dx = np.zeros(0)

    status = "optimal"
    while True:
        # ---- tighten and bound the new nodes (Dl, Dh, lo, hi) ----
        if len(Dl):
            Dlo_box, _ = min_makespan_bandwidth(scenario, lo, rates)
            Dhi_box, _ = min_makespan_bandwidth(scenario, hi, rates)
            Dl = np.maximum(Dl, np.asarray(Dlo_box) * (1 - SAFETY))
            Dh = np.minimum(Dh, np.asarray(Dhi_box))
            keep = Dl <= Dh
            Dl, Dh, lo, hi = Dl[keep], Dh[keep], lo[keep], hi[keep]
            log_size = np.log(hi - lo + 1).sum(axis=1)
            small = log_size <= np.log(enum_max) + 1e-9
            if small.any():
                G = offer(enumerate_boxes(lo[small], hi[small]))
                if G.size:
                    closed_max = max(closed_max, float(G.max()))
                Dl, Dh, lo, hi = Dl[~small], Dh[~small], lo[~small], hi[~small]
        if len(Dl):
            res = sync_node_bounds(scenario, rates, table, Dl, Dh, lo, hi, best_G * (1 + gap))
            nodes += len(Dl)
            feas = res.upper > -np.inf
            offer(res.x_feas[feas])
            Dx = np.zeros(len(Dl))
            if feas.any():
                Dx[feas], _ = min_makespan_bandwidth(scenario, res.x_feas[feas], rates)
            live = res.upper > best_G * (1 + gap)
            closed_max = max(closed_max, float(np.max(res.upper[~live], initial=-np.inf)))
            o_Dl = np.concatenate([o_Dl, Dl[live]])
            o_Dh = np.concatenate([o_Dh, Dh[live]])
            o_lo = np.vstack([o_lo, res.lo[live]])
            o_hi = np.vstack([o_hi, res.hi[live]])
            o_ub = np.concatenate([o_ub, res.upper[live]])
            o_frac = np.concatenate([o_frac, res.frac_user[live]])
            o_split = np.concatenate([o_split, res.split_at[live]])
            o_Dx = np.concatenate([o_Dx, Dx[live]])
        # ---- discard what the incumbent beats ----
        keep = o_ub > best_G * (1 + gap)
        if not keep.all():
            closed_max = max(closed_max, float(np.max(o_ub[~keep])))
            o_Dl, o_Dh, o_lo, o_hi, o_ub, o_frac, o_split, o_Dx = (
                a[keep] for a in (o_Dl, o_Dh, o_lo, o_hi, o_ub, o_frac, o_split, o_Dx))
        if len(o_ub) == 0:
            break
        if max_nodes is not None and nodes >= max_nodes:
            status = "node_limit"
            break
        if time.perf_counter() - t_start > time_limit_s:
            status = "time_limit"
            break
        # ---- split the best nodes ----
        take = np.argsort(-o_ub)[:batch]
        rest = np.ones(len(o_ub), dtype=bool)
        rest[take] = False
        pDl, pDh, plo, phi, pub, pfrac, psplit, pDx = (
            a[take] for a in (o_Dl, o_Dh, o_lo, o_hi, o_ub, o_frac, o_split, o_Dx))
        o_Dl, o_Dh, o_lo, o_hi, o_ub, o_frac, o_split, o_Dx = (
            a[rest] for a in (o_Dl, o_Dh, o_lo, o_hi, o_ub, o_frac, o_split, o_Dx))
        node_gap = (pub - best_G) / pub
        w_rel = (pDh - pDl) / (pDl + c0 + t1 * plo.sum(axis=1))
        width = phi - plo
        by_user = (pfrac >= 0) & ((w_rel <= 0.5 * node_gap) | (w_rel < 1e-13))
        by_D = ~by_user & (w_rel >= 1e-13)
        # neither (~by_user & ~by_D): integral relaxation on a tight interval -> split the widest user in half
        k_user = np.where(by_user, pfrac, np.argmax(width, axis=1))
        rk = np.arange(len(take))
        m_user = np.where(by_user, psplit, plo[rk, k_user] + (width[rk, k_user] - 1) // 2)
        inside = (pDx > pDl + 0.02 * (pDh - pDl)) & (pDx < pDh - 0.02 * (pDh - pDl))
        D_cut = np.where(inside, pDx * (1 - 1e-11), 0.5 * (pDl + pDh))
        n = len(take)
        Dl = np.concatenate([pDl, np.where(by_D, D_cut, pDl)])
        Dh = np.concatenate([np.where(by_D, D_cut, pDh), pDh])
        lo = np.vstack([plo, plo.copy()])
        hi = np.vstack([phi, phi.copy()])
        us = ~by_D
        r = np.flatnonzero(us)
        hi[r, k_user[r]] = m_user[r]
        lo[n + r, k_user[r]] = m_user[r] + 1

    ub = max(best_G, closed_max, float(np.max(o_ub, initial=-np.inf)))
    return BnBResult(best_L, best_G, ub, status, nodes, time.perf_counter() - t_start)


__all__ = ["sync_node_bounds", "branch_and_bound_sync", "BoundResult", "BnBResult"]
