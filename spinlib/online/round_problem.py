"""The per-round problem of the multi-user re-planners, solved exactly (certified).

The round of :mod:`spinlib.online.multiuser` on the current channel ``h_r``; ``replan-dinkelbach``
and ``energy-queue`` maximise a linear objective over the draft lengths of that round.

With the bandwidth split for fixed ``L`` (every drafting user finishes at ``D*(L)``, the
smallest makespan the band allows), both objectives are instances of::

    J(L) = sum_k u_k(L_k) - D*(L) (Lambda + sum_{k: L_k > 0} w_k) - Lambda c0,
    c0 = t0 + t1 K + T_fb + T_acc,   T = D* + c0 + t1 sum_k L_k,

Dinkelbach: ``u_k(L) = E[N_k](L) - lambda t1 L``, ``w = 0``, ``Lambda = lambda``. Energy queue:
``u_k(L) = V E[N_k](L) - Q_k (e_k - P_k tau_k) L - Lambda t1 L``, ``w_k = Q_k (P_k - p_idle)``,
``Lambda = V lambda + p_idle sum_k Q_k`` (a drafting device uploads for ``D* - L_k tau_k`` and idles
for ``T - D*``, a silent one idles for ``T``). :func:`maximise_round` maximises ``J`` over
``L in {0..L_max}^K`` by a best-first branch-and-bound over makespan intervals ``[D_lo, D_hi]``
and per-user length boxes (the node structure of :mod:`spinlib.control.branch_and_bound`, whose
bounds are for the ratio, not for this linear objective). The need ``b_k(L, D)`` of user k to
finish by ``D`` is convex and decreasing in ``D``, so it lies above its tangent at ``D_hi``,
``c_k(L, D) = b_k(L, D_hi) + |db_k/dD| (D_hi - D)``; every ``L`` of a node has
``D = D*(L) in [D_lo, D_hi]`` and ``sum_k c_k(L_k, D) <= sum_k b_k(L_k, D) <= B``. For any ``mu >= 0``::

    J(L) <= max_{D in {D_lo, D_hi}}  sum_k max_{L_k in box_k} [u_k(L_k) - 1{L_k > 0} w_k D - mu c_k(L_k, D)]
                                      + mu B - Lambda (D + c0)

(the bracket is linear in ``D`` for fixed ``L``: its maximum over the interval is at an end).
``mu`` minimises this convex piecewise-linear bound (intersection of tangents). A node whose
relaxation is fractional is split on that user's length (one child per length), an integral one
on the makespan (at the choice's own ``D*``); boxes of at most ``enum_max`` vectors are enumerated
with the exact split; the makespan axis is bounded by ``min_k (tau_k + S / R_k(B))`` below and by
the equal split and the incumbent above. The result is exact to the relative tolerance ``gap``
when ``status == "optimal"``; with a node budget (``max_nodes``) that binds it is the best vector
found, with a certified ``upper_bound``. The tests compare it with exhaustive search
(:func:`exhaustive_round`) on random instances, both objectives, with and without enumeration.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..channel import RateModel
from ..control.bandwidth import min_makespan_bandwidth, required_bandwidth
from ..control.branch_and_bound import SAFETY, enumerate_boxes
from ..control.lagrangian import costs_increase, minimise_budget_dual, useful_lengths
from ..control.search import EXHAUSTIVE_MAX_VECTORS, best_first, exhaustive_if_small
from ..rounds import sync_round_time
from ..scenario import Scenario
from ..validation import ValidationError

def faded_rates(scenario: Scenario, h) -> RateModel:
    """The scenario's rate model on the channel ``g_k h_k`` (``h`` ``[..., K]``):
    :meth:`spinlib.channel.RateModel.faded`, the testbed's links' too."""
    return RateModel.faded(scenario, h)


def round_constant_s(scenario: Scenario) -> float:
    """``c0 = t0 + t1 K + T_fb + T_acc`` [s]: the round time of ``L = 0``."""
    return float(sync_round_time(scenario, 0.0, 0.0))


def round_objective(scenario: Scenario, rates: RateModel, u, w, price: float, L):
    """``J(L)`` of the module docstring for length vectors ``L`` ``[..., K]`` (batched).

    Parameters
    ----------
    rates : RateModel
        The round's rates (:func:`faded_rates`).
    u : float array [K, L_max + 1]
        ``u_k(L)`` (in the objective's unit: tokens for replan-dinkelbach, J^2 for energy-queue).
    w : float array [K]
        Makespan price of a drafting user [unit/s].
    price : float
        ``Lambda`` [unit/s], >= 0.
    L : int array [..., K]

    Returns
    -------
    J : float array [...]
        Objective.
    D : float array [...]
        ``D*(L)`` [s].
    b : float array [..., K]
        Paper 1's bandwidth split for ``L`` [Hz].
    """
    L = np.asarray(L, dtype=int)
    u = np.asarray(u, dtype=float)
    D, b = min_makespan_bandwidth(scenario, L, rates)
    K = u.shape[0]
    val = u[np.arange(K), L].sum(axis=-1)
    coef = price + np.where(L > 0, np.asarray(w, dtype=float), 0.0).sum(axis=-1)
    return val - coef * D - price * round_constant_s(scenario), D, b


@dataclass(frozen=True)
class RoundSolution:
    """A maximiser of ``J`` (:func:`maximise_round`, :func:`exhaustive_round`).

    Parameters
    ----------
    L : int array [K]
    b : float array [K]
        Bandwidth [Hz] (paper 1's split for ``L`` on the round's channel).
    makespan_s : float
        ``D*(L)`` [s].
    value : float
        ``J(L)`` [tokens].
    upper_bound : float
        Certified bound on ``max J`` [tokens].
    status : str
        ``"optimal"`` (within ``gap``), ``"node_limit"`` (node budget reached) or ``"exhaustive"``.
    nodes : int
        Nodes bounded.
    """

    L: np.ndarray
    b: np.ndarray
    makespan_s: float
    value: float
    upper_bound: float
    status: str
    nodes: int


def exhaustive_round(scenario: Scenario, rates: RateModel, u, w, price: float) -> RoundSolution:
    """The reference: ``J`` of all ``(L_max + 1)^K`` vectors (small K only, tests), written apart from
    :func:`spinlib.control.search.exhaustive`."""
    K, P = np.shape(u)
    grid = np.stack(np.meshgrid(*[np.arange(P)] * K, indexing="ij"), axis=-1).reshape(-1, K)
    J, D, b = round_objective(scenario, rates, u, w, price, grid)
    i = int(np.argmax(J))
    return RoundSolution(grid[i], b[i], float(D[i]), float(J[i]), float(J[i]), "exhaustive", 0)


def _node_bounds(u, w, price, c0, rates, tau, S, B, Dl, Dh, lo, hi, n_mu: int = 40):
    """Bounds of ``J`` on M nodes ``([Dl, Dh], [lo, hi])`` at once (module docstring).

    Returns ``upper [M]`` (``-inf``: empty node), the under-budget Lagrangian choice ``x_feas``
    ``[M, K]``, a user whose over- and under-budget choices differ (``frac [M]``, -1: none) and
    the tightened boxes.
    """
    K, P = u.shape
    Ls = np.arange(P)
    L3 = Ls[None, :, None]
    cost = required_bandwidth(rates, S, L3, tau[None, None, :], Dh[:, None, None])
    # tangent of the convex, decreasing need at D_hi: b_k(L, D) >= b_k(L, D_hi) + |db/dD| (D_hi - D)
    slack = Dh[:, None, None] - L3 * tau[None, None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = np.where((L3 > 0) & np.isfinite(cost), (L3 * S / slack**2) / rates.derivative(cost), 0.0)
    cost = cost * (1.0 - SAFETY)
    inbox = (L3 >= lo[:, None, :]) & (L3 <= hi[:, None, :]) & np.isfinite(cost)
    c_min = np.min(np.where(inbox, cost, np.inf), axis=1)  # [M, K] smallest need (lowest length of the box)
    base = c_min.sum(axis=1)
    ok = np.isfinite(base) & (base <= B)
    with np.errstate(invalid="ignore"):
        inbox &= (cost - c_min[:, None, :] + base[:, None, None]) <= B * (1 + 1e-15)
    inbox &= ok[:, None, None]
    any_in = inbox.any(axis=1)
    ok &= any_in.all(axis=1)
    lo2 = np.where(any_in, np.argmax(inbox, axis=1), lo)
    hi2 = np.where(any_in, P - 1 - np.argmax(inbox[:, ::-1, :], axis=1), hi)
    Dl_s = Dl * (1.0 - SAFETY)
    # the two ends of the interval (the bound is linear in D for fixed L and mu: its maximum is at an end)
    ends = np.stack([Dl_s, Dh])  # [2, M]
    slope = np.where(inbox & np.isfinite(slope), slope * (1.0 - 1e-9), 0.0)
    cost2 = np.where(inbox, np.stack([cost + slope * (Dh - Dl_s)[:, None, None], cost]), 0.0)  # [2, M, P, K]
    val2 = u.T[None, None] - (L3 > 0)[None] * (w[None, None, :] * ends[:, :, None])[:, :, None, :]
    const2 = -price * (ends + c0)  # [2, M]
    val2 = np.where(inbox[None], val2, -np.inf)
    # the long lengths that no multiplier picks are dropped (the same answer, bit for bit: lagrangian.useful_lengths)
    Pu = useful_lengths(val2, lo2, costs_increase(cost2, inbox))
    dual = minimise_budget_dual(val2[:, :, :Pu], cost2[:, :, :Pu], B, const2, lo2, ok, n_mu=n_mu)
    upper = np.where(ok, dual.phi, -np.inf)
    x_feas, x_over = dual.x_under, dual.x_over
    diff = x_over != x_feas
    frac = np.where(diff.any(axis=1), np.argmax(diff, axis=1), -1)
    return upper, x_feas, frac, lo2, hi2


def maximise_round(scenario: Scenario, rates: RateModel, u, w, price: float, *, seeds=(), gap: float = 1e-9,
                   max_nodes: int | None = None, batch: int = 64, enum_max: int = 64,
                   n_root: int = 8, exhaustive_max: int = EXHAUSTIVE_MAX_VECTORS) -> RoundSolution:
    """``max_{L in {0..L_max}^K} J(L)`` by branch-and-bound (module docstring).

    Parameters
    ----------
    rates : RateModel
        The round's rates (:func:`faded_rates`).
    u : float array [K, L_max + 1]
        ``u_k(L)`` (the objective's unit, :func:`round_objective`).
    w : float array [K]
        Makespan price of each drafting user [unit/s] (any sign).
    price : float
        ``Lambda`` [unit/s], >= 0 (finite).
    seeds : sequence of int arrays [K]
        Starting incumbents (``L = 0`` is always one).
    gap : float
        Relative tolerance: a node is discarded when its bound is ``<= J_inc + gap scale`` with
        ``scale = max(|J_inc|, Lambda c0)``.
    max_nodes : int, optional
        Node budget (``None``: none). A node budget gives the same answer on every machine.
    batch, enum_max, n_root : int
        Nodes split per vectorised pass; boxes of at most ``enum_max`` vectors are enumerated;
        geometric makespan intervals of the root.
    exhaustive_max : int
        Up to this many length vectors (``(L_max+1)^K``) every one is evaluated instead of branching
        (:func:`spinlib.control.search.exhaustive`; status "optimal", 0 nodes). 0: always branch.

    Returns
    -------
    RoundSolution
        ``status`` ``"optimal"`` or ``"node_limit"``; ``upper_bound >= max J``.
    """
    u = np.asarray(u, dtype=float)
    w = np.asarray(w, dtype=float)
    K, P = u.shape
    if not (math.isfinite(price) and price >= 0):
        raise ValidationError(f"price must be a finite number >= 0, got {price!r}")
    L_max = P - 1
    problem = _RoundSearch(scenario, rates, u, w, price, enum_max, n_root)
    res = exhaustive_if_small(problem.evaluate, K, L_max, exhaustive_max)
    if res is not None:
        D, b = min_makespan_bandwidth(scenario, res.x, rates)
        return RoundSolution(np.asarray(res.x).copy(), np.asarray(b), float(D), res.value, res.value, "optimal", 0)
    pool = np.vstack([np.zeros((1, K), dtype=int)] + [np.asarray(s, dtype=int).reshape(1, K) for s in seeds])
    pool = np.clip(pool, 0, L_max)
    J = problem.evaluate(pool)
    i = int(np.argmax(J))
    scale = price * problem.c0

    def prune(value: float, g: float) -> float:  # absolute scale: J can be negative
        return value + g * max(abs(value), scale, 1e-300)

    res = best_first(problem, pool[i], float(J[i]), gap=gap, time_limit_s=math.inf, max_nodes=max_nodes,
                     batch=batch, prune=prune)
    D, b = min_makespan_bandwidth(scenario, res.x, rates)
    return RoundSolution(np.asarray(res.x).copy(), np.asarray(b), float(D), res.value, res.upper_bound, res.status,
                         res.nodes)


class _RoundSearch:
    """:func:`maximise_round` as a :class:`spinlib.control.search.NodeSearch` (nodes: makespan
    intervals and length boxes, as model (A)'s)."""

    def __init__(self, scenario, rates, u, w, price, enum_max, n_root):
        self.scenario, self.rates, self.u, self.w, self.price = scenario, rates, u, w, price
        self.enum_max, self.n_root = enum_max, n_root
        self.K, P = u.shape
        self.L_max = P - 1
        self.c0 = round_constant_s(scenario)

    def _objective(self, X):
        J, D, _ = round_objective(self.scenario, self.rates, self.u, self.w, self.price, X)
        return np.asarray(J, dtype=float).reshape(-1), np.asarray(D)

    def evaluate(self, X):
        return self._objective(X)[0]

    def _offer(self, inc, X):
        """Exact ``J`` and ``D*`` of candidate vectors; the best becomes the incumbent if it is better."""
        if len(X) == 0:
            return np.zeros(0), np.zeros(0)
        J, D = self._objective(X)
        inc.consider(X, J)
        return J, D

    def root(self, inc) -> dict:
        # every L != 0 has D*(L) >= min_k (tau_k + S / R_k(B)) and, by the equal split of the band among
        # the drafting users, D*(L) <= L_max max_k (tau_k + S / R_k(B / K)); J(L) <= sum_k max u_k
        # - D*(L) (Lambda + sum_k w_k^-) - Lambda c0 prunes the makespans that cannot beat the incumbent
        sc, K, rates = self.scenario, self.K, self.rates
        tau, S, B = sc.tau, sc.payload.bits_per_token, sc.radio.bandwidth_hz
        with np.errstate(divide="ignore"):
            d1 = float(np.min(tau + S / rates.rate(np.full(K, B))))
            d_eq = float(np.max(tau + S / rates.rate(np.full(K, B / K))))
        D_top = self.L_max * d_eq
        slope = self.price + float(np.minimum(self.w, 0.0).sum())
        if slope > 0:
            D_top = min(D_top, (float(self.u.max(axis=1).sum()) - self.price * self.c0 - inc.value) / slope)
        if not (np.isfinite(D_top) and D_top > d1):
            return {}
        edges = np.geomspace(d1 * (1 - SAFETY), D_top, self.n_root + 1)
        return {"Dl": edges[:-1], "Dh": edges[1:], "lo": np.zeros((self.n_root, K), dtype=int),
                "hi": np.full((self.n_root, K), self.L_max, dtype=int)}

    def _small(self, lo, hi):
        return np.log(hi - lo + 1).sum(axis=1) <= np.log(self.enum_max) + 1e-9

    def expand(self, nodes, inc):
        sc = self.scenario
        Dl, Dh, lo, hi = nodes["Dl"], nodes["Dh"], nodes["lo"], nodes["hi"]
        closed = -np.inf
        # one batch of exact evaluations: the vectors of the small boxes (enumerated: their maximum closes
        # the node) and both corners of every other box (candidates, and D*(lo) <= D*(L) <= D*(hi))
        small = self._small(lo, hi)
        enum = enumerate_boxes(lo[small], hi[small])
        n_big = int((~small).sum())
        Jc, Dc = self._offer(inc, np.vstack([enum, lo[~small], hi[~small]]))
        if len(enum):
            closed = float(Jc[:len(enum)].max())
        Dl, Dh, lo, hi = Dl[~small], Dh[~small], lo[~small], hi[~small]
        Dl = np.maximum(Dl, Dc[len(enum):len(enum) + n_big] * (1 - SAFETY))
        Dh = np.minimum(Dh, Dc[len(enum) + n_big:])
        keep = Dl <= Dh
        Dl, Dh, lo, hi = Dl[keep], Dh[keep], lo[keep], hi[keep]
        if not len(Dl):
            return {}, closed, 0
        ub, x_feas, frac, lo2, hi2 = _node_bounds(self.u, self.w, self.price, self.c0, self.rates, sc.tau,
                                                  sc.payload.bits_per_token, sc.radio.bandwidth_hz, Dl, Dh, lo, hi)
        feas = ub > -np.inf
        # boxes the bound tightened to a small size are enumerated now (once, whatever the interval)
        small = (ub > inc.threshold) & self._small(lo2, hi2)
        enum = enumerate_boxes(lo2[small], hi2[small])
        Jc, Dc = self._offer(inc, np.vstack([enum, x_feas[feas]]))
        if len(enum):
            closed = max(closed, float(Jc[:len(enum)].max()))
        Dx = np.zeros(len(Dl))
        Dx[feas] = Dc[len(enum):]
        closed = max(closed, float(np.max(ub[small], initial=-np.inf)))  # (their bound, as before enumeration)
        ub = np.where(small, -np.inf, ub)
        return {"Dl": Dl, "Dh": Dh, "lo": lo2, "hi": hi2, "ub": ub, "frac": frac, "Dx": Dx}, closed, len(Dl)

    def split(self, p, inc) -> dict:
        # a fractional relaxation splits the box of its fractional user; an integral one, loose only through the
        # makespan interval, splits the interval (at the choice's own makespan when it lies inside)
        wide_D = (p["Dh"] - p["Dl"]) > 1e-12 * p["Dh"]
        by_D = wide_D & (p["frac"] < 0)
        k_user = np.where(p["frac"] >= 0, p["frac"], np.argmax(p["hi"] - p["lo"], axis=1))
        inside = (p["Dx"] > p["Dl"] + 0.02 * (p["Dh"] - p["Dl"])) & (p["Dx"] < p["Dh"] - 0.02 * (p["Dh"] - p["Dl"]))
        D_cut = np.where(inside, p["Dx"], 0.5 * (p["Dl"] + p["Dh"]))
        d = np.flatnonzero(by_D)  # two children: [Dl, cut] and [cut, Dh]
        r = np.flatnonzero(~by_D)  # one child per length of the user's box (a shallow tree: fewer passes)
        a, z = p["lo"][r, k_user[r]], p["hi"][r, k_user[r]]
        par = np.repeat(r, z - a + 1)
        val = np.repeat(a - np.cumsum(z - a + 1) + (z - a + 1), z - a + 1) + np.arange(par.size)
        lo_c, hi_c = p["lo"][par], p["hi"][par]
        col = np.repeat(k_user[r], z - a + 1)
        lo_c[np.arange(par.size), col] = val
        hi_c[np.arange(par.size), col] = val
        return {"Dl": np.concatenate([p["Dl"][d], D_cut[d], p["Dl"][par]]),
                "Dh": np.concatenate([D_cut[d], p["Dh"][d], p["Dh"][par]]),
                "lo": np.vstack([p["lo"][d], p["lo"][d], lo_c]), "hi": np.vstack([p["hi"][d], p["hi"][d], hi_c])}


__all__ = ["faded_rates", "round_constant_s", "round_objective", "RoundSolution", "maximise_round", "exhaustive_round"]
