"""Certified upper bounds and branch-and-bound for asynchronous per-user rounds (model B).

The problem (see :mod:`.heterogeneous`)::

    G* = max_{L in {0..L_max}^K, b >= 0, sum_k b_k <= B}  sum_k h_k(L_k, b_k),
    h_k(L, b) = N_k(L) / ( A_k(L) + C_k(L) / R_k(b) )  =  N_k(L) R_k(b) / ( A_k(L) R_k(b) + C_k(L) )

with ``A_k(L) = L tau_k + T_ver(L+1) + T_fb + T_acc`` [s] and ``C_k(L) = L S`` [bit]
(:func:`spinlib.rounds.async_terms`). For ``L = 0`` (C = 0) the term is the constant ``N_k(0) / A_k(0)``
and needs no bandwidth. For ``L > 0``, ``h_k(L, .)`` is concave and increasing on ``[0, B]`` with
``h_k(L, 0) = 0`` (a concave increasing function of the concave rate; :mod:`.bandwidth`).

Node relaxation
---------------
A node is a box ``lo_k <= L_k <= hi_k``. For any multiplier ``mu >= 0`` on the budget, every
feasible ``(L, b)`` of the node has ``sum_k h_k <= sum_k h_k + mu (B - sum_k b_k)`` and each
``b_k`` lies in ``[0, B]``, so::

    max over the node  <=  Phi(mu) = sum_k max_{L in box_k} g_k(L, mu) + mu B,
    g_k(L, mu) = max_{b in [0, B]} h_k(L, b) - mu b.

*Every* ``mu >= 0`` gives a valid bound; the solver only chooses a good one. ``Phi`` is convex in
mu with subgradient ``B - sum_k b_k`` at the per-user maximisers, so the minimising mu is found by
bisection in ``log mu`` on the sign of that subgradient (the bound kept is the smallest ``Phi``
met, each an upper bound by itself).

Safe inner maximum. ``b = async_best_response(mu)`` (safeguarded Newton on ``h'(b) = mu``) is only
approximately the maximiser. The bound does not rely on its accuracy: for a concave ``h`` and any
``b`` in ``[0, B]`` the tangent at ``b`` lies above ``h`` on ``[0, B]``, hence::

    g(L, mu) <= max_{b' in [0, B]} h(b) + h'(b) (b' - b) - mu b' = h(b) - h'(b) b + max(0, (h'(b) - mu) B),

which equals ``g`` at the exact maximiser and exceeds it by a second-order amount elsewhere; so a
Newton residual can only loosen the bound, never invalidate it. The derivative ``R'`` is computed
without cancellation (a series for ``a/b < 1e-2``, :func:`.bandwidth.accurate_rate_derivative`); to cover the rounding
of ``h``, ``h'`` (a few ulps) and of the sum over users each term gets the slack
``SAFETY (h + (h' + mu) B)`` with ``SAFETY = 1e-12`` and the sum a relative ``(K + 4) eps``.

Reduced-cost fixing. At the mu of the smallest ``Phi``, forcing ``L_k = L`` gives the bound
``Phi(mu) - (max_{L'} g_k(L') - g_k(L))`` (the same relaxation with user k's choice fixed); lengths
at the ends of a box whose bound is ``<= G_inc (1 + gap)`` are cut from the box, and their bound
enters the reported upper bound like any discarded node's.

Branch and bound
----------------
The root is the full box ``{0..L_max}^K``. Best-first, in batches (the top nodes by bound are split
together and their children bounded in one vectorised pass). A node is split on a user whose
choices at the two ends of the final multiplier bracket differ (the user the budget makes
fractional), between those two lengths; otherwise its widest box in half. Boxes of at most
``enum_max`` vectors are enumerated, each vector with its optimal bandwidth
(:func:`.bandwidth.async_optimal_bandwidth`): the exact maximum over the box, both a valid bound and
a candidate. Every bounded node also offers its two Lagrangian choices as candidates (any length
vector is feasible in model B once given its optimal bandwidth), evaluated exactly. A node is
discarded when its bound is ``<= G_inc (1 + gap)``. The upper bound returned is
``max(G_inc, bounds of every discarded, cut or open node)``: each vector of ``{0..L_max}^K`` lies in
a node that was enumerated, discarded with a bound, cut by reduced costs, or is still open.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..channel import RateModel
from ..rounds import async_terms
from ..scenario import Scenario
from .bandwidth import accurate_rate_derivative, async_best_response, async_marginal, async_optimal_bandwidth
from .branch_and_bound import enumerate_boxes
from .search import Incumbent, SearchResult, best_first

SAFETY = 1e-12  # relative slack per term against rounding (see module docstring)
EPS = np.finfo(float).eps


def response_bounds(rates: RateModel, B: float, mu, N, A, C, t_init=None):
    """Safe upper bounds ``gU >= g(L, mu) = max_{b in [0, B]} h(b) - mu b`` (module docstring).

    ``mu`` broadcasts with ``N, A, C`` (shape ``[..., K]``). Returns ``gU``, the approximate
    maximiser ``b`` and ``log b`` (warm start of the next call).
    """
    b = async_best_response(rates, mu, N, A, C, B, t_init=t_init)
    drafting = C > 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        R = rates.rate(b)
        den = A * R + C
        h = np.where(drafting, N * R / den, N / A)
        d = np.where(drafting, N * C * accurate_rate_derivative(rates, b) / den**2, 0.0)
        g = h - d * b + np.maximum(0.0, (d - mu) * B)
        g = g + SAFETY * (h + (d + mu) * B)
    g = np.where(drafting & ~np.isfinite(g), np.inf, g)  # never claim less than we can prove
    t = np.log(np.maximum(b, B * np.exp(-40.0)))
    return g, b, t


def multiplier_bracket(scenario: Scenario, rates: RateModel, table: np.ndarray):
    """``[s_lo, s_hi]`` in ``log mu``: below ``s_lo`` every drafting choice takes all of B, above
    ``s_hi`` every choice takes at most ``B e^-40`` (as in :func:`.heterogeneous.async_lagrangian`)."""
    K, P = table.shape
    B = scenario.radio.bandwidth_hz
    Ls = np.broadcast_to(np.arange(P)[:, None], (P, K))
    A, C = async_terms(scenario, Ls)
    N = table.T
    with np.errstate(divide="ignore", invalid="ignore"):
        m_full = np.where(C > 0, async_marginal(rates, np.full(Ls.shape, B), N, A, C), np.inf)
        m_tiny = np.where(C > 0, async_marginal(rates, np.full(Ls.shape, B * np.exp(-40.0)), N, A, C), 0.0)
    lo = np.log(max(float(np.min(m_full)), 1e-300)) - 1.0
    hi = np.log(max(float(np.max(m_tiny)), 1e-300)) + 1.0
    return lo, max(hi, lo + 1.0)


@dataclass
class AsyncBoundResult:
    """Node bounds of :func:`async_node_bounds` (M nodes, K users).

    upper : [M] valid upper bound on the goodput over the node [token/s] (-inf: emptied by reduced costs).
    x_feas, x_over : [M, K] the Lagrangian choices at the under- and over-budget ends of the bracket.
    frac_user : [M] a user whose two choices differ (-1: none); split_at: split its box after this length.
    lo, hi : [M, K] the boxes after reduced-cost fixing.
    cut_max : [M] largest bound of the lengths cut by reduced costs (-inf: none).
    """

    upper: np.ndarray
    x_feas: np.ndarray
    x_over: np.ndarray
    frac_user: np.ndarray
    split_at: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    cut_max: np.ndarray


def async_node_bounds(scenario: Scenario, rates: RateModel, table: np.ndarray, lo, hi, bracket, prune_at: float,
                      n_mu: int = 60, s_tol: float = 1e-11) -> AsyncBoundResult:
    """Lagrangian upper bounds of model (B) on M boxes at once (see the module docstring).

    Parameters
    ----------
    table : [K, L_max+1] ``E[N_k](L)``.
    lo, hi : [M, K] int boxes.
    bracket : ``(s_lo, s_hi)`` from :func:`multiplier_bracket`.
    prune_at : the incumbent threshold ``G_inc (1 + gap)``: a node whose bound falls below it stops
        iterating, and reduced-cost fixing cuts lengths whose bound is below it.
    """
    K, P = table.shape
    M = len(lo)
    B = scenario.radio.bandwidth_hz
    Ls = np.arange(P)
    A, C = async_terms(scenario, np.broadcast_to(Ls[:, None], (P, K)))
    N = table.T
    rows = np.arange(M)[:, None]
    cols = np.arange(K)[None, :]
    inbox = (Ls[None, :, None] >= lo[:, None, :]) & (Ls[None, :, None] <= hi[:, None, :])  # [M, P, K]
    fudge = (K + 4) * EPS

    def at(s, t, live):
        """Phi(e^s) (safe), the used bandwidth, the choices and the per-entry bounds."""
        mu = np.exp(s)[:, None, None]
        g, b, t_new = response_bounds(rates, B, mu, N, A, C, t)
        t_new = np.where(live[:, None, None], t_new, t)
        score = np.where(inbox, g, -np.inf)
        idx = np.argmax(score, axis=1)
        best = score[rows, idx, cols]
        phi = best.sum(axis=1) + mu[:, 0, 0] * B
        phi = phi + fudge * (np.abs(best).sum(axis=1) + mu[:, 0, 0] * B)
        used = b[rows, idx, cols].sum(axis=1)
        return phi, used, idx, score, best, t_new

    s_lo = np.full(M, float(bracket[0]))
    s_hi = np.full(M, float(bracket[1]))
    everyone = np.ones(M, dtype=bool)
    t = np.full((M, P, K), np.log(B) - 10.0)
    phi_lo, used_lo, idx_lo, score_lo, best_lo, t = at(s_lo, t, everyone)
    phi_hi, used_hi, idx_hi, score_hi, best_hi, _ = at(s_hi, t, everyone)
    # the bound kept: the smallest Phi met, with its per-entry bounds (for reduced costs)
    take_hi = phi_hi < phi_lo
    phi_best = np.where(take_hi, phi_hi, phi_lo)
    score_best = np.where(take_hi[:, None, None], score_hi, score_lo)
    best_best = np.where(take_hi[:, None], best_hi, best_lo)
    done = used_lo <= B  # Phi non-decreasing from s_lo on: nothing to search
    x_feas = np.where(done[:, None], idx_lo, idx_hi)
    x_over = idx_lo.copy()
    live = ~done & (phi_best > prune_at)
    for _ in range(n_mu):
        if not live.any():
            break
        mid = 0.5 * (s_lo + s_hi)
        phi, used, idx, score, best, t = at(mid, t, live)
        better = live & (phi < phi_best)
        phi_best = np.where(better, phi, phi_best)
        score_best = np.where(better[:, None, None], score, score_best)
        best_best = np.where(better[:, None], best, best_best)
        over = used > B
        up_lo = live & over
        up_hi = live & ~over
        s_lo = np.where(up_lo, mid, s_lo)
        s_hi = np.where(up_hi, mid, s_hi)
        x_over = np.where(up_lo[:, None], idx, x_over)
        x_feas = np.where(up_hi[:, None], idx, x_feas)
        live &= (s_hi - s_lo > s_tol * (1.0 + np.abs(s_hi))) & (phi_best > prune_at)
    phi_best = np.where(np.isnan(phi_best), np.inf, phi_best)  # a NaN proves nothing
    upper = phi_best
    # reduced-cost fixing at the best multiplier: bound with L_k forced = Phi - (best_k - g_k(L))
    forced = phi_best[:, None, None] - (best_best[:, None, :] - score_best)
    forced = forced + fudge * np.abs(phi_best)[:, None, None]
    keep = inbox & (forced > prune_at)
    cut = inbox & ~keep
    cut_max = np.max(np.where(cut, forced, -np.inf), axis=(1, 2))
    any_in = keep.any(axis=1)  # [M, K]
    empty = ~any_in.all(axis=1)
    lo2 = np.where(any_in, np.argmax(keep, axis=1), lo)
    hi2 = np.where(any_in, P - 1 - np.argmax(keep[:, ::-1, :], axis=1), hi)
    # lengths strictly inside [lo2, hi2] that were cut stay in the box: still covered by the node's bound
    upper = np.where(empty, -np.inf, upper)
    cut_max = np.where(empty, np.maximum(cut_max, phi_best), cut_max)
    x_feas = np.clip(x_feas, lo2, hi2)
    x_over = np.clip(x_over, lo2, hi2)
    diff = x_over != x_feas
    frac_user = np.where(diff.any(axis=1), np.argmax(diff, axis=1), -1)
    fk = np.maximum(frac_user, 0)
    split_at = np.minimum(x_over[np.arange(M), fk], x_feas[np.arange(M), fk])
    return AsyncBoundResult(upper, x_feas, x_over, frac_user, split_at, lo2, hi2, cut_max)


class AsyncSearch:
    """Model (B) as a :class:`spinlib.control.search.NodeSearch`: nodes are length boxes ``lo..hi``
    (module docstring: the dual bound, reduced-cost cuts, enumeration of small boxes)."""

    def __init__(self, scenario: Scenario, rates: RateModel, table: np.ndarray, *, enum_max: int = 64):
        self.scenario, self.rates, self.table = scenario, rates, table
        self.K, P = table.shape
        self.L_max = P - 1
        self.enum_max = enum_max
        self.bracket = multiplier_bracket(scenario, rates, table)

    def evaluate(self, L: np.ndarray) -> np.ndarray:
        """Exact goodput [token/s] of length vectors ``L`` [n, K] with their optimal bandwidth split."""
        Kr = np.arange(self.K)
        return np.concatenate([async_optimal_bandwidth(self.scenario, c, self.table[Kr, c], self.rates)[1]
                               for c in np.array_split(L, max(1, len(L) // 20000 + 1))])

    def _small(self, lo, hi):
        return np.log(hi - lo + 1).sum(axis=1) <= np.log(self.enum_max) + 1e-9

    def root(self, inc: Incumbent) -> dict:
        return {"lo": np.zeros((1, self.K), dtype=int), "hi": np.full((1, self.K), self.L_max, dtype=int)}

    def expand(self, nodes: dict, inc: Incumbent):
        lo, hi = nodes["lo"], nodes["hi"]
        closed = -np.inf
        small = self._small(lo, hi)
        if small.any():
            closed = float(np.max(inc.offer(enumerate_boxes(lo[small], hi[small])), initial=-np.inf))
            lo, hi = lo[~small], hi[~small]
        if not len(lo):
            return {}, closed, 0
        res = async_node_bounds(self.scenario, self.rates, self.table, lo, hi, self.bracket, inc.threshold)
        closed = max(closed, float(np.max(res.cut_max, initial=-np.inf)))
        alive = res.upper > -np.inf
        inc.offer(np.unique(np.vstack([res.x_feas[alive], res.x_over[alive]]), axis=0))
        # boxes that reduced-cost fixing made small: enumerate now (the live ones)
        upper = res.upper.copy()
        small = (upper > inc.threshold) & self._small(res.lo, res.hi)
        if small.any():
            closed = max(closed, float(np.max(inc.offer(enumerate_boxes(res.lo[small], res.hi[small])),
                                              initial=-np.inf)))
            upper[small] = -np.inf
        return ({"lo": res.lo, "hi": res.hi, "ub": upper, "frac": res.frac_user, "split": res.split_at},
                closed, len(lo))

    def split(self, p: dict, inc: Incumbent) -> dict:
        """On the fractional user of the dual relaxation at its two choices (else the widest box in half)."""
        plo, phi, pfrac = p["lo"], p["hi"], p["frac"]
        n = len(plo)
        rk = np.arange(n)
        width = phi - plo
        by_user = (pfrac >= 0) & (width[rk, np.maximum(pfrac, 0)] > 0)
        k_user = np.where(by_user, pfrac, np.argmax(width, axis=1))
        m_user = np.where(by_user, p["split"], plo[rk, k_user] + (width[rk, k_user] - 1) // 2)
        m_user = np.clip(m_user, plo[rk, k_user], phi[rk, k_user] - 1)
        lo = np.vstack([plo, plo.copy()])
        hi = np.vstack([phi, phi.copy()])
        hi[rk, k_user] = m_user
        lo[n + rk, k_user] = m_user + 1
        return {"lo": lo, "hi": hi}


def branch_and_bound_async(scenario: Scenario, rates: RateModel, table: np.ndarray, L_inc, G_inc: float, *,
                           gap: float = 1e-9, time_limit_s: float = 10.0, max_nodes: int | None = None, batch: int = 64,
                           enum_max: int = 64) -> SearchResult:
    """Best-first branch-and-bound of model (B) from the incumbent ``(L_inc, G_inc)``: the engine of
    :func:`spinlib.control.search.best_first` on :class:`AsyncSearch`.

    Parameters
    ----------
    table : [K, L_max+1] ``E[N_k](L)``.
    gap : relative tolerance: nodes whose bound is ``<= G_inc (1 + gap)`` are discarded.
    max_nodes : node budget (``None``: none); on reaching it the search stops (status
        ``"node_limit"``) exactly as on a time limit. A node budget is reproducible, a time limit is not.
    time_limit_s : wall-clock budget [s]; the root is always bounded; on expiry the open nodes'
        bounds enter the upper bound.
    batch : nodes split per vectorised pass.
    enum_max : boxes with at most this many vectors are enumerated exactly.

    Returns
    -------
    SearchResult
        ``x`` the lengths [K], ``value >= G_inc``; ``upper_bound >= G*`` (module docstring).
    """
    problem = AsyncSearch(scenario, rates, table, enum_max=enum_max)
    return best_first(problem, np.asarray(L_inc, dtype=int), G_inc, gap=gap, time_limit_s=time_limit_s,
                      max_nodes=max_nodes, batch=batch)


__all__ = ["async_node_bounds", "branch_and_bound_async", "response_bounds", "multiplier_bracket",
           "AsyncBoundResult", "AsyncSearch"]
