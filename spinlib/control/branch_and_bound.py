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

Two-end bound (the default). ``b_k(L, D)`` is convex and decreasing in D (``R_k^{-1}`` is convex
and increasing for a concave rate, ``L S / (D - L tau)`` convex and decreasing), so its tangent at
``D_hi`` is below it: ``b_k(L, D) >= b_k(L, D_hi) + s_kL (D_hi - D)`` with ``s_kL = -db_k/dD(D_hi)``.
With these linear needs, for fixed (theta, mu) the right-hand side of the inequality above,
taken at the node's own makespan ``D*(L)`` instead of ``D_lo``, is a maximum of functions linear
in D, hence convex in D, and its maximum over ``[D_lo, D_hi]`` is at an end::

    Phi(theta, mu) = max_{D in {D_lo, D_hi}} sum_k max_{L in box_k} [ N_k(L) - theta t1 L - mu bt_k(L, D) ]
                                             + mu B - theta (D + c0)

(``bt`` the tangent needs; exact at ``D_hi``), with ``den(L)`` in ``[D_lo + c0 + t1 sum lo,
D_hi + c0 + t1 sum hi]``. Its slack is second order in the interval's width (the one-end bound's
is first order), so far fewer makespan splits certify a gap (the two are measured side by side in
``benchmarks/certified_scaling.py``). ``Phi`` is still convex and
piecewise linear in mu, and the same search minimises it.

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
it is inside the interval, else at the midpoint; ``d_split="midpoint"``: always at the midpoint) while the interval's share of the denominator is
at least half the node's gap, and otherwise on a user whose two Lagrangian choices differ (the
fractional user of the knapsack relaxation). Boxes of at most ``enum_max`` vectors are enumerated
with their exact bandwidth split (the exact maximum over the box: a valid bound, and a candidate).
A node is discarded when its bound is ``<= G_inc (1 + gap)``; each bounded node also offers its
under-budget Lagrangian choice (feasible at ``D_hi``) as a candidate, evaluated exactly (with the
midpoint split, whose cuts need no makespans, only where its goodput bound ``x_feas_upper`` exceeds the
incumbent: a choice below it cannot be taken). The upper bound returned is ``max(G_inc, bounds of every discarded or open node)``: each vector of
``{0..L_max}^K`` lies in a node that was enumerated, discarded with a bound, or is still open.

At thousands of users two options save most of the time (``benchmarks/certified_scaling.py``):
``refine_open=False`` stops a node's multiplier search once the node is proven to stay open (no bound of
its relaxation reaches the incumbent's threshold, so it would be split whatever its bound) and keeps the
best value found so far, and ``per_node=True`` bounds each node by its own call, on
threads: a node's bound then depends on that node alone, so the answer is the same bit for bit on any
number of threads. :func:`spinlib.control.heterogeneous.sync_search_settings` chooses them by K.
"""
from __future__ import annotations

import itertools
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields

import numpy as np

from ..channel import RateModel
from ..rounds import sync_goodput, sync_round_time
from ..scenario import Scenario
from ..validation import ValidationError, check_int_range
from .bandwidth import accurate_rate_derivative, min_makespan_bandwidth, required_bandwidth
from .lagrangian import costs_increase, minimise_budget_dual, useful_lengths
from .search import Incumbent, SearchResult, best_first

SAFETY = 1e-12  # relative slack against rounding in the rate inversion (see module docstring)
D_SPLITS = ("relaxed", "midpoint")  # where a makespan split cuts (SyncSearch.split)


@dataclass
class BoundResult:
    """Node bounds of :func:`sync_node_bounds` (M nodes, K users).

    upper : [M] valid upper bound on F over the node [token/s] (-inf: empty node).
    x_feas : [M, K] the under-budget Lagrangian choice (fits the budget at D_hi).
    frac_user : [M] a user whose over- and under-budget choices differ (-1: none).
    split_at : [M] the length to split that user's box after (children ``<= m`` and ``> m``).
    lo, hi : [M, K] the tightened boxes.
    mu : [M] the budget multiplier of the first Dinkelbach step (the children's first guess).
    x_feas_upper : [M] an upper bound on the exact goodput of ``x_feas`` [token/s] (``inf``: none, with the
        one-end bound and at an empty or infeasible node): its makespan is at least ``D_hi - (B - sum_k b_k(x_k, D_hi)) / sum_k s_k`` (the needs'
        tangents at ``D_hi``, ``s_k = -db_k/dD``, lie below the convex needs and must reach B at the
        makespan; the slack taken ``>= 0``) and at least every drafting user's ``x_k tau_k``.
    """

    upper: np.ndarray
    x_feas: np.ndarray
    frac_user: np.ndarray
    split_at: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    mu: np.ndarray
    x_feas_upper: np.ndarray


def sync_node_bounds(scenario: Scenario, rates: RateModel, table: np.ndarray, D_lo, D_hi, lo, hi, theta0,
                     n_dinkelbach: int = 3, n_mu: int = 40, tangent: bool = True, mu_tol: float = 1e-12,
                     mu0=None, warm: bool = True, refine_open: bool = True) -> BoundResult:
    """Lagrangian/Dinkelbach upper bounds of model (A) on M nodes at once (see the module docstring).

    Parameters
    ----------
    table : [K, L_max+1] ``E[N_k](L)``.
    D_lo, D_hi : [M] makespan interval [s].
    lo, hi : [M, K] int boxes.
    theta0 : float or [M] first ratio tried [token/s] (the incumbent goodput): a node whose bound at
        ``theta0`` is already below ``theta0`` is settled by one multiplier search.
    tangent : use the two-end bound with the needs' tangents at ``D_hi`` (slack second order in the
        interval's width); ``False``: the one-end bound (needs at ``D_hi``, makespan at ``D_lo``; first order).
    mu_tol : the multiplier search stops when the best ``Phi`` found is within ``mu_tol (|Phi| + theta den)``
        of the tangents' lower bound on its minimum (any multiplier gives a valid bound; this only
        decides how close to the best one the search goes).
    mu0 : [M] a first guess of the budget multiplier (the parent node's; ``nan``: none); each later
        Dinkelbach step starts from the previous step's multiplier (:func:`minimise_budget_dual`'s
        ``mu_guess``: where to look first, never what is valid).
    warm : ``False``: every multiplier search starts cold (``mu0`` ignored; the reference).
    refine_open : ``False``: a node proven to stay open (at a ratio ``theta >= theta0``, the multiplier
        search's lower bound on ``min_mu Phi(theta, mu)`` is ``> 0``, so every bound of this relaxation
        exceeds ``theta0``) keeps the best value its multiplier search found up to that proof instead of
        searching on for the smallest, and asks for no further Dinkelbach step (in a batch, the steps go on
        while another node asks for one, and re-search it). Its bound is looser, its choices ``x_feas``
        those of the part-searched bracket. Default ``True``: every bound is refined.

    Where the needs increase over every box (:func:`spinlib.control.lagrangian.costs_increase`; else
    every length is searched), each multiplier search sees only the lengths up to the last one that
    some user's value still rises to, and at least up to every box's first length
    (:func:`spinlib.control.lagrangian.useful_lengths`; exact, the same bound bit for bit).
    """
    K, P = table.shape
    M = len(D_lo)
    tau, S, B = scenario.tau, scenario.payload.bits_per_token, scenario.radio.bandwidth_hz
    t1 = scenario.server.t1_s_per_token
    c0 = float(sync_round_time(scenario, 0.0, 0.0))
    Ls = np.arange(P)
    cols = np.arange(K)[None, :]
    Dl = np.asarray(D_lo, dtype=float)
    Dh = np.asarray(D_hi, dtype=float)
    need = required_bandwidth(rates, S, Ls[None, :, None], tau[None, None, :], Dh[:, None, None])
    cost = need * (1.0 - SAFETY)
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
    # the ends of the makespan interval: e = 0 at D_hi (needs b(L, D_hi)), e = 1 at D_lo (needs from
    # the tangent at D_hi, b(D_hi) + s (D_hi - D_lo) <= b(D_lo), s = -db/dD(D_hi) >= 0: b is convex in D)
    den0 = [Dh * (1.0 - SAFETY) + c0, Dl * (1.0 - SAFETY) + c0]
    costs = [cost]
    if tangent:
        Lf = Ls[None, :, None].astype(float)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            slack = Dh[:, None, None] - Lf * tau[None, None, :]
            s = (Lf * S / slack) / (slack * accurate_rate_derivative(rates, need))
        s = np.where(inbox & (Lf > 0) & np.isfinite(s) & (s > 0), s, 0.0) * (1.0 - 1e-9)
        costs.append(cost + s * (Dh - Dl)[:, None, None])
    else:  # the one-end relaxation: needs at D_hi with the makespan of D_lo
        den0 = [den0[1]]
    den_min = den0[-1] + t1 * lo2.sum(axis=1)
    den_max = den0[0] + t1 * hi2.sum(axis=1)
    Nt = table.T[None]  # [1, P, K]
    costs = np.stack(costs)  # [E, M, P, K]
    const_per_theta = -np.stack(den0)  # [E, M]: the ends' constant terms are -theta den0

    theta = np.broadcast_to(np.asarray(theta0, dtype=float), (M,)).copy()
    upper = np.full(M, np.inf)
    x_feas = lo2.copy()
    x_over = lo2.copy()
    guess, mu_first = (mu0 if warm else None), None
    increasing = costs_increase(costs, inbox)  # (the needs do not change with the Dinkelbach ratio)
    for _ in range(n_dinkelbach):
        val = np.where(inbox, Nt - theta[:, None, None] * t1 * Ls[None, :, None], -np.inf)  # [M, P, K]
        # the long lengths that no multiplier picks are dropped: the same answer, bit for bit, faster
        Pu = useful_lengths(val, lo2, increasing)
        c_u = costs[:, :, :Pu]
        dual = minimise_budget_dual(np.broadcast_to(val[:, :Pu], c_u.shape), c_u, B, theta * const_per_theta, lo2,
                                    ok, n_mu=n_mu, mu_tol=mu_tol, mu_guess=guess, stop_above_zero=not refine_open)
        guess = dual.mu if warm else None
        mu_first = dual.mu if mu_first is None else mu_first
        phi_best = dual.phi
        bound = np.where(phi_best >= 0, theta + phi_best / den_min, theta + phi_best / den_max)
        upper = np.minimum(upper, bound)
        x_feas, x_over = dual.x_under, dual.x_over
        # Dinkelbach: the ratio of the knapsack-LP point mixing the two choices on the budget
        used_hi, used_lo = dual.used_under, dual.used_over
        with np.errstate(divide="ignore", invalid="ignore"):
            lam = np.where(dual.done, 0.0, np.clip((B - used_hi) / (used_lo - used_hi), 0.0, 1.0))
        num = lam * table[cols, x_over].sum(axis=1) + (1 - lam) * table[cols, x_feas].sum(axis=1)
        den = den0[-1] + t1 * (lam * x_over.sum(axis=1) + (1 - lam) * x_feas.sum(axis=1))
        new_theta = num / den
        if not np.any(ok & (phi_best > 0) & (new_theta > theta * (1 + 1e-15)) & ~dual.above):
            break
        theta = np.where(phi_best > 0, np.maximum(theta, new_theta), theta)
    upper = np.where(ok, upper, -np.inf)
    diff = x_over != x_feas
    frac_user = np.where(diff.any(axis=1), np.argmax(diff, axis=1), -1)
    fk = np.maximum(frac_user, 0)
    split_at = np.minimum(x_over[np.arange(M), fk], x_feas[np.arange(M), fk])
    feas_upper = np.full(M, np.inf)
    if tangent:  # the under-budget choice's makespan is at least where its needs' tangents reach B
        at = x_feas[:, None, :]
        slack = np.maximum(B - np.take_along_axis(cost, at, axis=1)[:, 0].sum(axis=1), 0.0)
        slope = np.take_along_axis(s, at, axis=1)[:, 0].sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            D_lb = np.where(slope > 0, Dh - slack / slope, 0.0)
        D_lb = np.maximum(D_lb, (x_feas * tau[None, :]).max(axis=1, initial=0.0))
        feas_upper = np.where(ok, sync_goodput(scenario, x_feas, table[cols, x_feas], D_lb), np.inf)
    return BoundResult(upper, x_feas, frac_user, split_at, lo2, hi2, mu_first, feas_upper)


def stack_bounds(parts: list[BoundResult]) -> BoundResult:
    """The node bounds of several :func:`sync_node_bounds` calls, in order, as one :class:`BoundResult`."""
    return BoundResult(*[np.concatenate([getattr(r, f.name) for r in parts]) for f in fields(BoundResult)])


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


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


class SyncSearch:
    """Model (A) as a :class:`spinlib.control.search.NodeSearch`: nodes are makespan intervals
    ``[Dl, Dh]`` and length boxes ``lo..hi`` (module docstring: root, relaxation, tightening, splits).
    """

    def __init__(self, scenario: Scenario, rates: RateModel, table: np.ndarray, *, enum_max: int = 16,
                 n_root: int = 16, tangent: bool = True, warm_start: bool = True, d_split: str = "relaxed",
                 per_node: bool = False, threads: int | None = None, refine_open: bool = True):
        if d_split not in D_SPLITS:
            raise ValidationError(f"d_split must be one of {', '.join(D_SPLITS)}, got {d_split!r}")
        self.d_split, self.per_node, self.refine_open = d_split, bool(per_node), bool(refine_open)
        self.threads = available_cores() if threads is None else check_int_range("threads", threads, 1)
        self.scenario, self.rates, self.table = scenario, rates, table
        self.K, P = table.shape
        self.L_max = P - 1
        self.enum_max, self.n_root, self.tangent, self.warm_start = enum_max, n_root, tangent, warm_start
        self.c0 = float(sync_round_time(scenario, 0.0, 0.0))
        self.t1 = scenario.server.t1_s_per_token

    def evaluate(self, L: np.ndarray) -> np.ndarray:
        """Exact goodput [token/s] of length vectors ``L`` [n, K] with their minimal-makespan split."""
        return self._goodput_and_makespan(L)[0]

    def _map(self, fn, items: list) -> list:
        """``[fn(i) for i in items]``, on ``threads`` threads when ``per_node`` (in order)."""
        n = min(self.threads, len(items)) if self.per_node else 1
        if n <= 1:
            return [fn(i) for i in items]
        with ThreadPoolExecutor(n) as pool:
            return list(pool.map(fn, items))

    def _makespans(self, L: np.ndarray) -> np.ndarray:
        """``D*(L)`` [n] of length vectors ``L`` [n, K]; in row chunks on the threads when ``per_node`` (each
        vector's makespan is its own, bit for bit, whatever the batch beside it: tested)."""
        chunks = [c for c in np.array_split(np.arange(len(L)), min(self.threads, len(L)) if self.per_node else 1) if c.size]
        parts = self._map(lambda c: np.asarray(min_makespan_bandwidth(self.scenario, L[c], self.rates)[0]), chunks)
        return np.concatenate(parts) if parts else np.zeros(0)

    def _goodput_and_makespan(self, L: np.ndarray):
        D, _ = min_makespan_bandwidth(self.scenario, L, self.rates)
        return sync_goodput(self.scenario, L, self.table[np.arange(self.K), L], D), D

    def root(self, inc: Incumbent) -> dict:
        sc, K, L_max = self.scenario, self.K, self.L_max
        tau, S, B = sc.tau, sc.payload.bits_per_token, sc.radio.bandwidth_hz
        # every L != 0 has D*(L) >= min_k (tau_k + S / R_k(B)); the equal split gives b_k >= B / K
        with np.errstate(divide="ignore"):
            d1 = float(np.min(tau + S / self.rates.rate(np.full(K, B))))
            d_eq = float(np.max(tau + S / self.rates.rate(np.full(K, B / K))))
        D_top = L_max * d_eq
        n_max = float(self.table[:, -1].sum())
        D_top = min(D_top, n_max / inc.value - self.c0) if inc.value > 0 else D_top
        inc.offer(np.zeros((1, K), dtype=int))  # the point D = 0 (nobody drafts)
        if not (np.isfinite(D_top) and D_top > d1):
            return {}
        edges = np.geomspace(d1 * (1 - SAFETY), D_top, self.n_root + 1)
        n = self.n_root
        return {"Dl": edges[:-1], "Dh": edges[1:], "lo": np.zeros((n, K), dtype=int),
                "hi": np.full((n, K), L_max, dtype=int), "lo_new": np.zeros(n, bool), "hi_new": np.ones(n, bool),
                "mu": np.full(n, np.nan)}

    def expand(self, nodes: dict, inc: Incumbent):
        sc, rates = self.scenario, self.rates
        Dl, Dh, lo, hi = nodes["Dl"], nodes["Dh"], nodes["lo"], nodes["hi"]
        closed = -np.inf
        # tighten the interval to [D*(lo), D*(hi)] where a box corner is new (an unchanged corner's makespan
        # already bounds the parent's interval, which the child inherits); enumerate the small boxes exactly
        lo_new, hi_new = nodes["lo_new"], nodes["hi_new"]
        if lo_new.any() or hi_new.any():
            corners = self._makespans(np.vstack([lo[lo_new], hi[hi_new]]))
            Dl, Dh = Dl.copy(), Dh.copy()
            Dl[lo_new] = np.maximum(Dl[lo_new], corners[:lo_new.sum()] * (1 - SAFETY))
            Dh[hi_new] = np.minimum(Dh[hi_new], corners[lo_new.sum():])
        keep = Dl <= Dh
        Dl, Dh, lo, hi, mu = Dl[keep], Dh[keep], lo[keep], hi[keep], nodes["mu"][keep]
        small = np.log(hi - lo + 1).sum(axis=1) <= np.log(self.enum_max) + 1e-9
        if small.any():
            G = inc.offer(enumerate_boxes(lo[small], hi[small]))
            closed = float(np.max(G, initial=-np.inf))
            Dl, Dh, lo, hi, mu = Dl[~small], Dh[~small], lo[~small], hi[~small], mu[~small]
        if not len(Dl):
            return {}, closed, 0

        def bound(rows):  # the node bounds of the rows, and their under-budget choices' exact goodput and makespan
            res = sync_node_bounds(sc, rates, self.table, Dl[rows], Dh[rows], lo[rows], hi[rows], inc.threshold,
                                   mu_tol=max(1e-12, 1e-3 * inc.gap), tangent=self.tangent, mu0=mu[rows],
                                   warm=self.warm_start, refine_open=self.refine_open)
            feas = res.upper > -np.inf
            if self.d_split == "midpoint":  # no cut needs the makespans: skip the choices that cannot improve
                feas &= res.x_feas_upper * (1 + 1e-9) > inc.value
            G, Dx = np.full(len(res.upper), -np.inf), np.zeros(len(res.upper))
            if feas.any():
                G[feas], Dx[feas] = self._goodput_and_makespan(res.x_feas[feas])
            return res, G, Dx

        if self.per_node:  # one node per call: its bound depends on it alone, so the threads change no bit
            parts = self._map(bound, [slice(m, m + 1) for m in range(len(Dl))])
            res, G, Dx = stack_bounds([p[0] for p in parts]), *(np.concatenate([p[i] for p in parts]) for i in (1, 2))
        else:
            res, G, Dx = bound(slice(None))
        feas = G > -np.inf
        if feas.any():  # the under-budget choices: candidates, and their makespans place the interval cuts
            inc.consider(res.x_feas[feas], G[feas])
        moved = {"lo_moved": (res.lo != lo).any(axis=1), "hi_moved": (res.hi != hi).any(axis=1)}  # tightened corners
        return ({"Dl": Dl, "Dh": Dh, "lo": res.lo, "hi": res.hi, "ub": res.upper, "frac": res.frac_user, **moved,
                 "split": res.split_at, "Dx": Dx, "mu": res.mu}, closed, len(Dl))

    def split(self, p: dict, inc: Incumbent) -> dict:
        """On the makespan (``d_split="relaxed"``: at the relaxed solution's own makespan when inside the
        interval, else the midpoint; ``"midpoint"``: always the midpoint) while the interval's share of the
        denominator is at least half the node's gap; else on the fractional user of the knapsack
        relaxation (or the widest user's box in half)."""
        pDl, pDh, plo, phi = p["Dl"], p["Dh"], p["lo"], p["hi"]
        node_gap = (p["ub"] - inc.value) / p["ub"]
        w_rel = (pDh - pDl) / (pDl + self.c0 + self.t1 * plo.sum(axis=1))
        width = phi - plo
        by_user = (p["frac"] >= 0) & ((w_rel <= 0.5 * node_gap) | (w_rel < 1e-13))
        by_D = ~by_user & (w_rel >= 1e-13)
        # neither (~by_user & ~by_D): integral relaxation on a tight interval -> split the widest user in half
        k_user = np.where(by_user, p["frac"], np.argmax(width, axis=1))
        rk = np.arange(len(pDl))
        m_user = np.where(by_user, p["split"], plo[rk, k_user] + (width[rk, k_user] - 1) // 2)
        pDx = p["Dx"]
        inside = (pDx > pDl + 0.02 * (pDh - pDl)) & (pDx < pDh - 0.02 * (pDh - pDl)) & (self.d_split == "relaxed")
        D_cut = np.where(inside, pDx * (1 - 1e-11), 0.5 * (pDl + pDh))
        n = len(pDl)
        lo = np.vstack([plo, plo.copy()])
        hi = np.vstack([phi, phi.copy()])
        r = np.flatnonzero(~by_D)
        hi[r, k_user[r]] = m_user[r]
        lo[n + r, k_user[r]] = m_user[r] + 1
        return {"Dl": np.concatenate([pDl, np.where(by_D, D_cut, pDl)]),
                "Dh": np.concatenate([np.where(by_D, D_cut, pDh), pDh]), "lo": lo, "hi": hi,
                "lo_new": np.concatenate([p["lo_moved"], p["lo_moved"] | ~by_D]),
                "hi_new": np.concatenate([p["hi_moved"] | ~by_D, p["hi_moved"]]),
                "mu": np.concatenate([p["mu"], p["mu"]])}


def branch_and_bound_sync(scenario: Scenario, rates: RateModel, table: np.ndarray, L_inc, G_inc: float, *,
                          gap: float = 1e-9, time_limit_s: float = 10.0, max_nodes: int | None = None, batch: int = 64,
                          enum_max: int = 16, n_root: int = 16, tangent: bool = True,
                          warm_start: bool = True, d_split: str = "relaxed", per_node: bool = False,
                          threads: int | None = None, refine_open: bool = True) -> SearchResult:
    """Best-first branch-and-bound of model (A) from the incumbent ``(L_inc, G_inc)``: the engine of
    :func:`spinlib.control.search.best_first` on :class:`SyncSearch`.

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
    tangent : the two-end node bound (default) or the one-end bound (:func:`sync_node_bounds`).
    warm_start : a child's multiplier search starts from its parent's multiplier (default; ``False``:
        every search starts cold, the reference of ``benchmarks/certified_scaling.py``).
    d_split : where a makespan split cuts the interval (:data:`D_SPLITS`): ``"relaxed"`` (the default) at
        the relaxed solution's own makespan when it is inside, else the midpoint; ``"midpoint"`` always at
        the midpoint. Both certify the same problem; ``benchmarks/certified_scaling.py`` measures them
        side by side (the midpoint needed fewer nodes there). The default keeps every committed result.
    per_node : bound each node by its own :func:`sync_node_bounds` call (default ``False``: the nodes of a
        batch in one vectorised pass). A node's bound then depends on that node alone, not on the batch
        beside it (a batch's Dinkelbach steps and dense or sparse multiplier passes are shared, which moves
        the last bits), so ``threads`` bound the nodes of a batch in parallel and the answer is the same bit
        for bit for any number of threads (tested). Worth it at thousands of users, where one node's arrays
        are large enough for NumPy to run at full speed; at tens of users the batch pass is faster.
    threads : threads of ``per_node`` (``None``: every core this process may use; an integer >= 1). Only
        the time depends on it.
    refine_open : ``False``: a node proven to stay open keeps the best bound its multiplier search found up
        to that proof (:func:`sync_node_bounds`). Every certificate stays valid, but the candidates offered,
        the nodes searched, the upper bound reported and, within the gap, the point can differ from the
        refined search's (``benchmarks/certified_scaling.py`` measures both).

    Returns
    -------
    SearchResult
        ``x`` the lengths [K], ``value >= G_inc``; ``upper_bound >= G*`` (module docstring).
    """
    problem = SyncSearch(scenario, rates, table, enum_max=enum_max, n_root=n_root, tangent=tangent,
                         warm_start=warm_start, d_split=d_split, per_node=per_node, threads=threads,
                         refine_open=refine_open)
    return best_first(problem, np.asarray(L_inc, dtype=int), G_inc, gap=gap, time_limit_s=time_limit_s,
                      max_nodes=max_nodes, batch=batch)


__all__ = ["sync_node_bounds", "branch_and_bound_sync", "BoundResult", "SyncSearch", "D_SPLITS", "available_cores",
           "stack_bounds"]
