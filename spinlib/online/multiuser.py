"""Multi-user controllers that re-plan every synchronous round on the current channel.

Paper 1's solver (:func:`spinlib.control.heterogeneous.solve_heterogeneous_sync`) plans draft
lengths ``L_k`` and uplink bandwidth ``b_k`` once, on the *average* channel. Under block fading
(:class:`spinlib.emulator.Fading`) the testbed finds that such a plan can lose to server-only
decoding. Here a controller sees the current power-gain factors ``h_r = h[r, :]`` at the start of
round ``r`` (CSI at round start) and returns that round's plan.

The round (the testbed's synchronous round, :func:`spinlib.emulator.sync_clock`)::

    R_k(b; h) = b log2(1 + a_k h / b)     (a_k = P_k g_k / N0 [Hz]; or the linear model at a_k h)
    D_r = max_k ( L_rk tau_k + L_rk S / R_k(b_rk; h_rk) )                     makespan [s]
    T_r = D_r + t0 + t1 sum_k (L_rk + 1) + T_fb + T_acc                        round time [s]
    N_rk = 1 + A_rk,  P(A_rk >= i) = pi_k(i) for i <= L_rk                     tokens
    G = sum_r sum_k N_rk / sum_r T_r                                          goodput [token/s]

with ``A`` drawn by :func:`spinlib.acceptance.sample_accepted` (i.i.d. ``pi_k(i) = alpha_k^i``
by default) and the round's times by the emulator's kernels (:func:`spinlib.emulator.sync_clock`
on the realised per-round lengths and bandwidths). Device ``k``'s energy in round ``r``
(:class:`spinlib.online.energy.EnergyModel`, one per device)::

    E_rk = L_rk e_k + P_k up_rk + p_idle (T_r - L_rk tau_k - up_rk)      [J],   up_rk = L_rk S / R_k(b_rk; h_rk)

with ``e_k = P_device tau_k`` from an :data:`~spinlib.online.energy.ENERGY_PRESETS` entry and
``P_k`` the scenario's transmit power (the one the rate model uses).

Controllers (registry :func:`register_multiuser_controller`; add your own in one file)
------------------------------------------------------------------------------------
* ``plan-on-average``: heterogeneous-sync on the average channel, kept every round.
* ``server-only``: paper 1's ``server-only`` policy (``L = 0``).
* ``replan-ratio``: heterogeneous-sync re-solved each round on the current channel (gains
  ``g_k h_rk``). It maximises the *per-round ratio* ``E[N_r] / T_r``, which is not the long-run
  goodput ``sum N / sum T``: a round on a bad channel is short-changed in the ratio of sums.
* ``replan-dinkelbach``: renewal-reward-correct. The long-run goodput of a stationary policy
  ``h -> a(h)`` is ``E[N(a(h))] / E[T(a(h); h)]``; by Dinkelbach's theorem its maximiser solves,
  *per channel state*, ``max_a E[N(a)] - lambda* T(a; h)`` with ``lambda*`` the optimal goodput.
  Each round: ``max_{L, b} sum_k E[N_k](L_k) - lambda_r T_r(L, b; h_r)`` with ``lambda_r`` the
  running goodput estimate (accumulated tokens / accumulated time, started with one virtual
  round of the average plan at its predicted goodput).
* ``replan-bandwidth``: the average plan's lengths, bandwidth re-split each round on the current
  channel by paper 1's optimal split for fixed lengths
  (:func:`spinlib.control.bandwidth.min_makespan_bandwidth`, equal finish times). Cheap, and
  shows that the loss of the average plan is in its lengths: it recovers almost nothing.
* ``replan-drop``: the average plan's lengths with a subset of users silenced, chosen among
  ``2 n + 1`` nested / single drops by the Dinkelbach objective (one batched evaluation).
* ``replan-coordinate``: local search on the Dinkelbach objective from the previous round's
  lengths (a cheap rule; notebook 10 measures how far each cheap rule stays below
  ``replan-dinkelbach``).
* ``energy-queue`` (GELATO-style, one virtual queue per device)::

      Q_k(r+1) = max(Q_k(r) + E_rk - Ebar_k, 0)
      max_L  V (sum_k E[N_k](L_k) - lambda_r T_r(L; h_r)) - sum_k Q_k(r) E_rk(L; h_r)

  with the bandwidth of every candidate ``L`` from paper 1's split for fixed lengths (an extension
  none of the papers has: GELATO's energy queue on paper 1's multi-user round).

The per-round problem of ``replan-dinkelbach`` and ``energy-queue``, solved exactly
---------------------------------------------------------------------------------
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

The simulator (:func:`run_replan`) plays every controller on common random numbers: acceptance
uniforms and fading from ``numpy.random.default_rng(seed)`` in the testbed's order (all
acceptance uniforms, then the fading), so a controller that returns a fixed allocation gets
exactly :func:`spinlib.emulator.emulate`'s trace, clock and goodput (tested bit for bit).
The delta-method interval of the clock assumes independent rounds: it holds (asymptotically) for
a fixed plan on static or Rayleigh fading and is approximate for adaptive controllers (``lambda_r``
and ``Q`` carry state from round to round) and Markov fading. ``expected_goodput_tokens_per_s``
(expected tokens of the played lengths over the realised times) removes the acceptance noise
from comparisons between controllers on the same channel draws.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ..acceptance import prefix_table, sample_accepted, tokens_table
from ..channel import RateModel
from ..control.bandwidth import min_makespan_bandwidth, required_bandwidth
from ..control.branch_and_bound import SAFETY, enumerate_boxes
from ..control.heterogeneous import BNB_FULL_USERS, solve_heterogeneous_sync
from ..control.search import best_first
from ..emulator.clock import sync_clock
from ..emulator.fading import FADING_MODELS, Fading
from ..emulator.testbed import MAX_ROUND_USER_CELLS
from ..emulator.traces import Trace, trace_bits
from ..rounds import Allocation, evaluate, sync_round_time, uplink_time
from ..registry import Registry, declared_params
from ..scenario import Scenario
from ..validation import ValidationError, check_int_range, check_nonnegative, check_positive
from .energy import ENERGY_PRESETS, EnergyModel
from .registry import ControllerEntry, ControllerSpec, parse_params

MAX_USERS = BNB_FULL_USERS  # per-round solvers: heterogeneous-sync certifies to its tolerance up to this K
MAX_ROUNDS = 100_000  # rounds per run: every round is a solve (about 10-100 ms each at K = 4-8)
ACCEPTANCE = ("iid", "profile")
MAX_SPARSE_CACHE = 4096  # replan-ratio: solutions kept per exact channel state (static / Markov fading repeat)


# ----------------------------------------------------------------------------------------------
# the per-round objective and its exact maximiser
# ----------------------------------------------------------------------------------------------
def faded_rates(scenario: Scenario, h) -> RateModel:
    """The scenario's rate model on the channel ``g_k h_k`` (``h`` ``[..., K]``), as the testbed's
    :func:`spinlib.emulator.transfer_times` builds it: ``a_k h_k`` in place of ``a_k``."""
    return RateModel(scenario.radio.rate_model, scenario.snr_scale_hz * np.asarray(h, dtype=float),
                     scenario.radio.bandwidth_hz)


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
    """The reference: ``J`` of all ``(L_max + 1)^K`` vectors (small K only, tests)."""
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
    M = len(Dl)
    Ls = np.arange(P)
    rows = np.arange(M)[:, None]
    cols = np.arange(K)[None, :]
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
    inbox2 = np.broadcast_to(inbox, cost2.shape)
    rows2 = np.arange(2)[:, None, None], np.arange(M)[None, :, None]
    cols2 = np.arange(K)[None, None, :]

    def choose(mu):
        """Phi(mu) = max over the two ends; the choice and the need at the maximising end."""
        score = np.where(inbox2, val2 - mu[None, :, None, None] * cost2, -np.inf)
        idx = np.argmax(score, axis=2)  # [2, M, K]
        phi = score[rows2[0], rows2[1], idx, cols2].sum(axis=2) + mu[None] * B + const2
        used = cost2[rows2[0], rows2[1], idx, cols2].sum(axis=2)
        e = np.argmax(phi, axis=0)
        m = np.arange(M)
        return idx[e, m], phi[e, m], used[e, m]

    zero = np.zeros(M)
    idx0, phi0, used0 = choose(zero)
    done = used0 <= B  # the budget does not bind: mu = 0 is the minimiser (slope B - used >= 0)
    v_min = val2[:, rows, lo2, cols]  # [2, M, K]
    c_lo = cost2[:, rows, lo2, cols]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = (val2 - v_min[:, :, None, :]) / (cost2 - c_lo[:, :, None, :])
    ratio = np.where(inbox2 & (cost2 > c_lo[:, :, None, :]), ratio, 0.0)
    mu_hi = np.maximum(ratio.max(axis=(0, 2, 3)), 0.0) * (1 + 1e-9) + 1e-300  # everyone at its cheapest length
    idx_hi, phi_hi, used_hi = choose(mu_hi)
    phi_best = np.where(done, phi0, np.minimum(phi0, phi_hi))
    mu_lo, phi_lo, used_lo, idx_lo = zero, phi0, used0, idx0
    live = ~done & ok
    for _ in range(n_mu):  # intersection of tangents of the convex piecewise-linear dual
        if not live.any():
            break
        s_lo, s_hi = B - used_lo, B - used_hi
        with np.errstate(divide="ignore", invalid="ignore"):
            mu_x = (phi_hi - phi_lo + s_lo * mu_lo - s_hi * mu_hi) / (s_lo - s_hi)
        bad = ~np.isfinite(mu_x) | (mu_x <= mu_lo) | (mu_x >= mu_hi)
        mu_x = np.where(bad, 0.5 * (mu_lo + mu_hi), mu_x)
        line = phi_lo + s_lo * (mu_x - mu_lo)
        idx_x, phi_x, used_x = choose(mu_x)
        phi_best = np.where(live, np.minimum(phi_best, phi_x), phi_best)
        vertex = phi_x <= line + 1e-13 * (np.abs(line) + np.abs(const2).max(axis=0))
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
    upper = np.where(ok, phi_best, -np.inf)
    x_feas = np.where(done[:, None], idx0, idx_hi)
    x_over = np.where(done[:, None], idx0, idx_lo)
    diff = x_over != x_feas
    frac = np.where(diff.any(axis=1), np.argmax(diff, axis=1), -1)
    return upper, x_feas, frac, lo2, hi2


def maximise_round(scenario: Scenario, rates: RateModel, u, w, price: float, *, seeds=(), gap: float = 1e-9,
                   max_nodes: int | None = None, batch: int = 64, enum_max: int = 64,
                   n_root: int = 8) -> RoundSolution:
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


# ----------------------------------------------------------------------------------------------
# device energy
# ----------------------------------------------------------------------------------------------
def device_energy(scenario: Scenario, preset: str = "phone-soc") -> tuple[EnergyModel, ...]:
    """One :class:`~spinlib.online.energy.EnergyModel` per device: ``e_k = P_device tau_k`` and
    ``p_idle`` from :data:`~spinlib.online.energy.ENERGY_PRESETS` ``[preset]``, transmit power the
    scenario's ``P_k`` (the power behind the rate model; the presets' 0.2 W is the same 23 dBm)."""
    if preset not in ENERGY_PRESETS:
        raise ValidationError(f"energy_preset must be one of {sorted(ENERGY_PRESETS)}, got {preset!r}")
    p_dev, _, p_idle, _ = ENERGY_PRESETS[preset]
    return tuple(EnergyModel(p_dev * float(t), float(p), p_idle) for t, p in zip(scenario.tau, scenario.power))


def _energy_arrays(models: Sequence[EnergyModel]):
    """``(e [K] J/token, p_tx [K] W, p_idle [K] W)``."""
    return (np.array([m.draft_j_per_token for m in models]), np.array([m.tx_power_w for m in models]),
            np.array([m.idle_power_w for m in models]))


def round_energy(models: Sequence[EnergyModel], L, upload_s, wait_s) -> np.ndarray:
    """``E_k = L_k e_k + p_tx,k up_k + p_idle,k wait_k`` [J], shape ``[..., K]``
    (:meth:`EnergyModel.round_energy` of every device)."""
    e, p_tx, p_idle = _energy_arrays(models)
    return (np.asarray(L, float) * e + p_tx * np.asarray(upload_s, float) + p_idle * np.asarray(wait_s, float))


# ----------------------------------------------------------------------------------------------
# the registry of multi-user controllers
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MultiUserEnv:
    """What a multi-user controller knows before the first round.

    Parameters
    ----------
    scenario : Scenario
        The cell (average channel ``g_k``).
    L_max : int
        Largest draft length.
    table : float array [K, L_max + 1]
        ``E[N_k](L)`` (:func:`spinlib.acceptance.tokens_table`, the solvers' model).
    average_plan : Allocation
        heterogeneous-sync on the average channel (solved once per scenario).
    energy : tuple of EnergyModel, length K
        The devices' energy models (:func:`device_energy`).
    """

    scenario: Scenario
    L_max: int
    table: np.ndarray
    average_plan: Allocation
    energy: tuple

    @property
    def K(self) -> int:
        return self.scenario.num_users


@dataclass(frozen=True)
class RoundContext:
    """Round ``r`` as a controller sees it at its start: ``h`` ``[K]`` and the rates on it."""

    r: int
    h: np.ndarray
    rates: RateModel


@dataclass(frozen=True)
class RoundOutcome:
    """What round ``r`` realised (all ``[K]`` except ``T``).

    ``L``, ``b`` [Hz], ``A`` accepted drafts, ``N = A + 1``, ``T`` round time [s],
    ``upload_s`` [s], ``E`` device energy [J].
    """

    r: int
    L: np.ndarray
    b: np.ndarray
    A: np.ndarray
    N: np.ndarray
    T: float
    upload_s: np.ndarray
    E: np.ndarray


class MultiUserController:
    """Base class. ``plan(ctx) -> (L [K] int, b [K] Hz)`` every round; ``update(out)`` after it;
    ``info()`` adds diagnostics to the result (solver statuses, energy debt)."""

    def __init__(self, env: MultiUserEnv):
        self.env = env

    def plan(self, ctx: RoundContext):
        raise NotImplementedError

    def update(self, out: RoundOutcome) -> None:
        """Learn from the realised round."""

    def info(self) -> dict:
        return {}


MULTIUSER_FAMILIES = ("multi-user", "user")
REGISTRY: Registry[ControllerEntry] = Registry("controller", MULTIUSER_FAMILIES, forbidden=":,=")
MULTIUSER_CONTROLLERS: dict[str, ControllerEntry] = REGISTRY.entries


def register_multiuser_controller(name: str, description: str, *, family: str = "user", replace: bool = False):
    """Class decorator: register a :class:`MultiUserController` subclass as ``name``.

    Parameters are the keyword arguments (with defaults) of ``__init__(self, env, ...)``, as in
    :func:`spinlib.online.registry.register_controller` (the same rules: :class:`spinlib.registry.Registry`).
    From your own file::

        from spinlib.online.multiuser import MultiUserController, register_multiuser_controller

        @register_multiuser_controller("equal-split", "L for everyone, equal bandwidth")
        class EqualSplit(MultiUserController):
            def __init__(self, env, L: int = 4):
                super().__init__(env)
                self.L = L

            def plan(self, ctx):
                K, B = self.env.K, self.env.scenario.radio.bandwidth_hz
                return np.full(K, self.L), np.full(K, B / K)

    then ``python -m spinlib replan cell.json --plugin my_controllers.py --controllers equal-split:L=3``.
    """
    REGISTRY.check_new(name, family)

    def deco(cls):
        if not (isinstance(cls, type) and issubclass(cls, MultiUserController)):
            raise TypeError(f"controller {name!r} must be a subclass of spinlib.online.multiuser.MultiUserController")
        params = declared_params(name, cls.__init__, skip=2, kind="controller")  # after self, env
        REGISTRY.add(ControllerEntry(name, cls, description, params, family), cls, replace)
        return cls

    return deco


def get_multiuser_controller(name: str) -> ControllerEntry:
    """The registered multi-user controller ``name``, or one line listing the registered names."""
    return REGISTRY.get(name)


def multiuser_controller_names(family: str | None = None) -> list[str]:
    return REGISTRY.names(family)


def mspec(name: str, label: str = "", **params) -> ControllerSpec:
    """A checked :class:`~spinlib.online.registry.ControllerSpec` of a multi-user controller."""
    REGISTRY.check_params(name, params)
    return ControllerSpec(name, tuple(sorted(params.items())), label)


def parse_mspec(text) -> ControllerSpec:
    """``"name"`` or ``"name:key=value,key=value"`` (:func:`spinlib.online.registry.parse_params`), or a spec."""
    if isinstance(text, ControllerSpec):
        return mspec(text.name, text.label, **text.kwargs)
    name, params = parse_params(text)
    return mspec(name, **params)


def make_multiuser_controller(spec, env: MultiUserEnv) -> MultiUserController:
    spec = parse_mspec(spec)
    return get_multiuser_controller(spec.name).cls(env, **spec.kwargs)


# ----------------------------------------------------------------------------------------------
# the library's controllers
# ----------------------------------------------------------------------------------------------
def _check_nodes(max_nodes):
    return None if max_nodes is None else check_int_range("max_nodes", max_nodes, 1, 10**9)


def _check_gap(gap) -> float:
    gap = check_nonnegative("gap", gap)
    if gap >= 1:
        raise ValidationError(f"gap must be in [0, 1), got {gap!r}")
    return gap


@register_multiuser_controller("plan-on-average", "heterogeneous-sync solved once on the average channel, kept "
                               "every round (the testbed's baseline)", family="multi-user")
class PlanOnAverage(MultiUserController):
    def plan(self, ctx):
        return self.env.average_plan.L, self.env.average_plan.b


@register_multiuser_controller("server-only", "paper 1's server-only policy: no drafting (L = 0)", family="multi-user")
class ServerOnly(MultiUserController):
    def __init__(self, env: MultiUserEnv):
        super().__init__(env)
        from ..control import solve

        a = solve(env.scenario, "server-only")
        self.L, self.b = a.L, a.b

    def plan(self, ctx):
        return self.L, self.b


@register_multiuser_controller("replan-ratio", "heterogeneous-sync re-solved every round on the current channel "
                               "(maximises the per-round ratio E[N]/T)", family="multi-user")
class ReplanRatio(MultiUserController):
    """Paper 1's solver on the round's channel (``rates`` with ``a_k h_rk``). Solutions are kept per
    exact channel state (``h`` bytes; static and Markov fading repeat states, nothing is rounded).

    ``max_nodes``: node budget of the solver's branch-and-bound per round (after its local search),
    ``None`` for its default (to the tolerance 1e-9). The default 32 trades a little optimality
    for speed; the rounds it stopped on the budget are counted in ``info()["solver_status"]``.
    """

    def __init__(self, env: MultiUserEnv, max_nodes: int | None = 32):
        super().__init__(env)
        self.max_nodes = _check_nodes(max_nodes)
        self._cache: dict = {}
        self.status: dict = {}

    def plan(self, ctx):
        key = ctx.h.tobytes()
        hit = self._cache.get(key)
        if hit is None:
            a = solve_heterogeneous_sync(self.env.scenario, self.env.L_max, rates=ctx.rates, max_nodes=self.max_nodes)
            hit = (a.L, np.asarray(a.b), a.info["status"])
            if len(self._cache) < MAX_SPARSE_CACHE:
                self._cache[key] = hit
        self.status[hit[2]] = self.status.get(hit[2], 0) + 1
        return hit[0], hit[1]

    def info(self):
        return {"solver_status": dict(self.status)}


LAMBDA_TOKENS = ("expected", "realised")


class _RunningGoodput:
    """``lambda_r = (G_0 T_0 + sum_{s<r} N_s) / (T_0 + sum_{s<r} T_s)``: accumulated tokens over
    accumulated time, started by one virtual round of the average plan (its predicted goodput
    ``G_0`` over its round time ``T_0``). ``tokens="expected"`` accumulates ``sum_k E[N_k](L_sk)``
    of the played lengths (the same limit as the realised tokens, without their acceptance noise),
    ``"realised"`` the tokens the rounds produced."""

    def __init__(self, env: MultiUserEnv, tokens: str = "expected"):
        if tokens not in LAMBDA_TOKENS:
            raise ValidationError(f"lambda_tokens must be one of {LAMBDA_TOKENS}, got {tokens!r}")
        ev = evaluate(env.scenario, env.average_plan)
        T0 = float(ev.round_time_s[0])
        self.N_sum, self.T_sum = ev.goodput_tokens_per_s * T0, T0
        self.table, self.expected = env.table, tokens == "expected"

    @property
    def value(self) -> float:
        return self.N_sum / self.T_sum

    def add(self, out: RoundOutcome) -> None:
        if self.expected:
            self.N_sum += float(self.table[np.arange(self.table.shape[0]), out.L].sum())
        else:
            self.N_sum += float(out.N.sum())
        self.T_sum += float(out.T)


@register_multiuser_controller("replan-dinkelbach", "every round max E[N] - lambda T on the current channel, "
                               "lambda the running goodput (long-run goodput, renewal-reward)", family="multi-user")
class ReplanDinkelbach(MultiUserController):
    """``max_L sum_k E[N_k](L_k) - lambda_r T(L; h_r)`` with paper 1's split (module docstring),
    solved by :func:`maximise_round` to the relative tolerance ``gap`` (``max_nodes``: its node
    budget per round, ``None``: none)."""

    def __init__(self, env: MultiUserEnv, gap: float = 1e-9, max_nodes: int | None = None,
                 lambda_tokens: str = "expected"):
        super().__init__(env)
        self.gap = _check_gap(gap)
        self.max_nodes = _check_nodes(max_nodes)
        self.lam = _RunningGoodput(env, lambda_tokens)
        self.prev = env.average_plan.L
        self.t1L = env.scenario.server.t1_s_per_token * np.arange(env.L_max + 1)[None, :]
        self.status: dict = {}

    def plan(self, ctx):
        lam = self.lam.value
        sol = maximise_round(self.env.scenario, ctx.rates, self.env.table - lam * self.t1L, np.zeros(self.env.K), lam,
                             seeds=(self.prev, self.env.average_plan.L), gap=self.gap, max_nodes=self.max_nodes)
        self.status[sol.status] = self.status.get(sol.status, 0) + 1
        self.prev = sol.L
        return sol.L, sol.b

    def update(self, out):
        self.lam.add(out)

    def info(self):
        return {"solver_status": dict(self.status), "final_lambda": self.lam.value}


@register_multiuser_controller("replan-bandwidth", "bandwidth only: the average plan's lengths, bandwidth re-split "
                               "every round on the current channel (paper 1's split for fixed lengths)",
                               family="multi-user")
class ReplanBandwidth(MultiUserController):
    def plan(self, ctx):
        L = self.env.average_plan.L
        _, b = min_makespan_bandwidth(self.env.scenario, L, ctx.rates)
        return L, b


@register_multiuser_controller("replan-drop", "a cheap rule: the average plan's lengths with the users whose channel "
                               "is worst silenced, the subset chosen every round by E[N] - lambda T",
                               family="multi-user")
class ReplanDrop(MultiUserController):
    """The average plan's lengths ``Lbar``; each round the candidates silence the ``j`` drafting users
    that are slowest on the current channel (per-token time ``tau_k + S / R_k(B / n; h_rk)`` at the
    equal share, ``j = 0..n``) or any one drafting user; the one maximising
    ``sum_k E[N_k](L_k) - lambda_r T(L; h_r)`` (paper 1's split, ``lambda_r`` the running goodput)
    is played. One batched evaluation of ``2 n + 1`` vectors per round, no search."""

    def __init__(self, env: MultiUserEnv, lambda_tokens: str = "expected"):
        super().__init__(env)
        self.lam = _RunningGoodput(env, lambda_tokens)
        self.t1 = env.scenario.server.t1_s_per_token

    def plan(self, ctx):
        s, Lbar = self.env.scenario, self.env.average_plan.L
        act = np.flatnonzero(Lbar > 0)
        if act.size == 0:
            return Lbar, self.env.average_plan.b
        B, S = s.radio.bandwidth_hz, s.payload.bits_per_token
        per_token = s.tau[act] + S / ctx.rates.rate(np.full(s.num_users, B / act.size))[act]
        order = act[np.argsort(-per_token, kind="stable")]
        cand = np.tile(Lbar, (2 * act.size + 1, 1))
        for j in range(1, act.size + 1):
            cand[j, order[:j]] = 0
        cand[act.size + 1 + np.arange(act.size), act] = 0
        lam = self.lam.value
        u = self.env.table - lam * self.t1 * np.arange(self.env.L_max + 1)[None, :]
        J, _, b = round_objective(s, ctx.rates, u, np.zeros(s.num_users), lam, cand)
        i = int(np.argmax(J))
        return cand[i], b[i]

    def update(self, out):
        self.lam.add(out)


@register_multiuser_controller("replan-coordinate", "a cheap rule: local search on E[N] - lambda T from the previous "
                               "round's lengths (one user's length, +-1 on all, +-1 on pairs)", family="multi-user")
class ReplanCoordinate(MultiUserController):
    """The per-round objective of ``replan-dinkelbach`` improved by local search instead of solved.

    Start: the best of the previous round's lengths, the average plan's and ``L = 0`` on the current
    channel. Each sweep evaluates, in one batch, every length of every single user with the others
    fixed, ``+-1`` on every drafting user at once, and (``K <= 8``) ``+-1`` on any two users, and
    moves to the best, until no move improves or ``max_sweeps``. A local optimum, not certified.
    """

    def __init__(self, env: MultiUserEnv, max_sweeps: int = 8, lambda_tokens: str = "expected"):
        super().__init__(env)
        self.max_sweeps = check_int_range("max_sweeps", max_sweeps, 1, 1000)
        self.lam = _RunningGoodput(env, lambda_tokens)
        self.prev = env.average_plan.L
        self.t1 = env.scenario.server.t1_s_per_token

    def _moves(self, L):
        K, P = self.env.K, self.env.L_max + 1
        single = np.tile(L, (K * P, 1))
        single[np.arange(K * P), np.repeat(np.arange(K), P)] = np.tile(np.arange(P), K)
        moves = [single, (L + (L > 0))[None], np.maximum(L - 1, 0)[None]]
        if K <= 8:
            i, j = np.triu_indices(K, 1)
            for si in (1, -1):
                for sj in (1, -1):
                    m = np.tile(L, (i.size, 1))
                    m[np.arange(i.size), i] += si
                    m[np.arange(i.size), j] += sj
                    moves.append(m)
        cand = np.vstack(moves)
        return cand[np.all((cand >= 0) & (cand < P), axis=1)]

    def plan(self, ctx):
        s, K, P = self.env.scenario, self.env.K, self.env.L_max + 1
        lam = self.lam.value
        u = self.env.table - lam * self.t1 * np.arange(P)[None, :]
        w = np.zeros(K)
        start = np.vstack([self.prev, self.env.average_plan.L, np.zeros(K, dtype=int)])
        J, _, bs = round_objective(s, ctx.rates, u, w, lam, start)
        i = int(np.argmax(J))
        L, J0, b = start[i], float(J[i]), bs[i]
        for _ in range(self.max_sweeps):
            cand = self._moves(L)
            J, _, bs = round_objective(s, ctx.rates, u, w, lam, cand)
            i = int(np.argmax(J))
            if J[i] <= J0 + 1e-12 * max(abs(J0), 1.0):
                break
            L, J0, b = cand[i], float(J[i]), bs[i]
        self.prev = L
        return L, b

    def update(self, out):
        self.lam.add(out)


def _check_V(V) -> float:
    """``float(V)``, or one line for bools, strings, NaN, infinities, integers beyond floats and V <= 0."""
    try:
        return check_positive("V", V)
    except ValidationError as e:
        raise ValidationError(f"V must be a finite number > 0 [J^2/token] ({e})") from None


@register_multiuser_controller("energy-queue", "drift-plus-penalty per device: every round max V (E[N] - lambda T) "
                               "- sum_k Q_k E_k, Q_k the energy debt against the budget Ebar_k", family="multi-user")
class EnergyQueue(MultiUserController):
    """GELATO's outer loop for K devices sharing the band (module docstring).

    Parameters
    ----------
    V : float
        Weight of goodput against energy [J^2/token], > 0: time-average goodput within O(1/V) of
        the best budget-feasible policy, debt O(V) (drift-plus-penalty).
    budget_j : float, sequence of K floats, or None
        ``Ebar_k``, average energy per round [J] of each device, >= 0 (a scalar applies to all).
        ``None``: ``budget_scale`` times each device's energy per round under the average plan
        on the average channel.
    budget_scale : float
        >= 0, used when ``budget_j`` is None.
    gap, max_nodes :
        Relative tolerance and node budget (``None``: none) of the per-round :func:`maximise_round`.
    """

    def __init__(self, env: MultiUserEnv, V: float = 0.05, budget_j=None, budget_scale: float = 0.8,
                 gap: float = 1e-9, max_nodes: int | None = None, lambda_tokens: str = "expected"):
        super().__init__(env)
        self.V = _check_V(V)
        self.gap = _check_gap(gap)
        self.max_nodes = _check_nodes(max_nodes)
        s = env.scenario
        K = env.K
        if budget_j is None:
            scale = check_nonnegative("budget_scale", budget_scale)
            ev = evaluate(s, env.average_plan)
            L = env.average_plan.L
            wait = ev.round_time_s - ev.draft_time_s - ev.uplink_time_s
            self.budget = scale * round_energy(env.energy, L, ev.uplink_time_s, wait)
        else:
            vals = np.atleast_1d(np.asarray(budget_j, dtype=object))
            if vals.size == 1:
                vals = np.repeat(vals, K)
            if vals.size != K:
                raise ValidationError(f"budget_j must be one number or {K} numbers [J per round], got {vals.size}")
            named = np.ndim(budget_j) > 0
            self.budget = np.array([check_nonnegative(f"budget_j[{k}]" if named else "budget_j", v)
                                    for k, v in enumerate(vals)])
        self.Q = np.zeros(K)
        self.lam = _RunningGoodput(env, lambda_tokens)
        self.prev = env.average_plan.L
        self.e, self.p_tx, self.p_idle = _energy_arrays(env.energy)
        self.Ls = np.arange(env.L_max + 1)[None, :]
        self.status: dict = {}
        self.Q_max = np.zeros(K)

    def plan(self, ctx):
        s, Q = self.env.scenario, self.Q
        t1 = s.server.t1_s_per_token
        price = self.V * self.lam.value + float(np.dot(self.p_idle, Q))
        u = self.V * self.env.table - (Q * (self.e - self.p_tx * s.tau))[:, None] * self.Ls - price * t1 * self.Ls
        w = Q * (self.p_tx - self.p_idle)
        sol = maximise_round(s, ctx.rates, u, w, price, seeds=(self.prev, self.env.average_plan.L), gap=self.gap,
                             max_nodes=self.max_nodes)
        self.status[sol.status] = self.status.get(sol.status, 0) + 1
        self.prev = sol.L
        return sol.L, sol.b

    def update(self, out):
        self.Q = np.maximum(self.Q + out.E - self.budget, 0.0)
        self.Q_max = np.maximum(self.Q_max, self.Q)
        self.lam.add(out)

    def info(self):
        return {"solver_status": dict(self.status), "budget_j": self.budget.copy(), "debt_j": self.Q.copy(),
                "max_debt_j": self.Q_max.copy(), "final_lambda": self.lam.value}


# ----------------------------------------------------------------------------------------------
# the simulator
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReplanConfig:
    """One run of multi-user controllers.

    Parameters
    ----------
    rounds : int
        Synchronous rounds, in [2, :data:`MAX_ROUNDS`] (two for an interval; every round is a solve).
    seed : int
        >= 0. Acceptance uniforms, then fading, from ``numpy.random.default_rng(seed)`` in the
        testbed's order (:func:`spinlib.emulator.emulate`); every controller sees the same draws.
    fading : Fading
        Block fading (:class:`spinlib.emulator.Fading`).
    L_max : int
        Largest draft length, in [1, 64].
    acceptance : {"iid", "profile"}
        Acceptance model of the sampler (:func:`spinlib.acceptance.prefix_table`).
    energy_preset : str
        Device energy (:func:`device_energy`).
    confidence : float
        Level of the goodput interval, in (0, 1).
    """

    rounds: int = 500
    seed: int = 0
    fading: Fading = field(default_factory=Fading)
    L_max: int = 8
    acceptance: str = "iid"
    energy_preset: str = "phone-soc"
    confidence: float = 0.99

    def __post_init__(self) -> None:
        check_int_range("rounds", self.rounds, 2, MAX_ROUNDS)
        check_int_range("seed", self.seed, 0)
        check_int_range("L_max", self.L_max, 1, 64)
        if not isinstance(self.fading, Fading):
            raise ValidationError("fading must be a spinlib.emulator.Fading")
        if self.acceptance not in ACCEPTANCE:
            raise ValidationError(f"acceptance must be one of {ACCEPTANCE}, got {self.acceptance!r}")
        if self.energy_preset not in ENERGY_PRESETS:
            raise ValidationError(f"energy_preset must be one of {sorted(ENERGY_PRESETS)}, got {self.energy_preset!r}")
        c = self.confidence
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0 < c < 1:
            raise ValidationError(f"confidence must be in (0, 1), got {c!r}")


@dataclass(frozen=True)
class ReplanResult:
    """What one controller realised (``R`` rounds, ``K`` users).

    Parameters
    ----------
    controller : str
        Its label.
    goodput_tokens_per_s, ci_low, ci_high : float
        ``sum N / sum T`` [token/s] and the clock's delta-method interval.
    tokens_per_round : float
        Mean ``sum_k N_rk``.
    round_time_s : float
        Mean ``T_r`` [s].
    expected_goodput_tokens_per_s : float
        ``sum_r sum_k E[N_k](L_rk) / sum_r T_r`` [token/s]: the acceptance noise averaged out (the
        channel's stays), for comparing controllers on the same draws.
    mean_L : float
        Mean draft length over rounds and users.
    energy_per_token_j : float
        All devices' energy over all tokens [J/token].
    energy_per_round_j : float array [K]
        Mean energy per round of each device [J].
    draft_lengths : int array [R, K]
    bandwidth_hz : float array [R, K]
    tokens : int array [R, K]
        ``N_rk``.
    round_times_s : float array [R]
    energy_j : float array [R, K]
    info : dict
        The controller's :meth:`~MultiUserController.info` (solver statuses; energy controllers:
        ``budget_j``, ``debt_j`` (final ``Q``), ``max_debt_j``).
    """

    controller: str
    goodput_tokens_per_s: float
    ci_low: float
    ci_high: float
    tokens_per_round: float
    round_time_s: float
    expected_goodput_tokens_per_s: float
    mean_L: float
    energy_per_token_j: float
    energy_per_round_j: np.ndarray
    draft_lengths: np.ndarray
    bandwidth_hz: np.ndarray
    tokens: np.ndarray
    round_times_s: np.ndarray
    energy_j: np.ndarray
    info: dict = field(default_factory=dict)

    def record(self) -> dict:
        """The scalars (and ``[K]`` lists) of a long record; ``info``'s arrays as lists."""
        out = {"controller": self.controller, "goodput_tokens_per_s": self.goodput_tokens_per_s,
               "ci_low": self.ci_low, "ci_high": self.ci_high, "tokens_per_round": self.tokens_per_round,
               "round_time_s": self.round_time_s, "expected_goodput_tokens_per_s": self.expected_goodput_tokens_per_s,
               "mean_L": self.mean_L,
               "energy_per_token_j": self.energy_per_token_j,
               "energy_per_round_j": float(self.energy_per_round_j.mean())}
        for k, v in self.info.items():
            out[k] = v.tolist() if isinstance(v, np.ndarray) else v
        if "budget_j" in self.info:
            budget = self.info["budget_j"]
            with np.errstate(divide="ignore", invalid="ignore"):
                out["energy_over_budget"] = float(np.max(self.energy_per_round_j / budget))
        return out


def multiuser_env(scenario: Scenario, config: ReplanConfig, average_plan: Allocation | None = None) -> MultiUserEnv:
    """The controllers' environment: solves heterogeneous-sync on the average channel (unless given)."""
    if not isinstance(scenario, Scenario):
        raise ValidationError(f"scenario must be a spinlib Scenario, got {type(scenario).__name__}")
    K = scenario.num_users
    if K > MAX_USERS:
        raise ValidationError(f"num_users must be <= {MAX_USERS} for per-round re-planning (the per-round solvers "
                              f"certify their optimum up to {MAX_USERS} users), got {K}")
    if average_plan is None:  # once per cell: the solver's default node budget (certified to 1e-9)
        average_plan = solve_heterogeneous_sync(scenario, config.L_max)
    return MultiUserEnv(scenario, config.L_max, tokens_table(scenario, config.L_max), average_plan,
                        device_energy(scenario, config.energy_preset))


def _check_plan(name: str, r: int, L, b, K: int, L_max: int, B: float):
    L = np.asarray(L)
    b = np.asarray(b, dtype=float)
    if L.shape != (K,) or b.shape != (K,):
        raise ValidationError(f"controller {name!r}, round {r}: plan must be L [K] and b [K] with K = {K}, "
                              f"got shapes {L.shape} and {b.shape}")
    if not np.issubdtype(L.dtype, np.integer) or L.min() < 0 or L.max() > L_max:
        raise ValidationError(f"controller {name!r}, round {r}: draft lengths must be integers in [0, {L_max}]")
    if not np.all(np.isfinite(b) & (b >= 0)) or b.sum() > B * (1 + 1e-9):
        raise ValidationError(f"controller {name!r}, round {r}: bandwidth must be finite, >= 0 and sum to <= {B:g} Hz")
    if np.any((L > 0) & (b <= 0)):
        raise ValidationError(f"controller {name!r}, round {r}: a drafting user needs bandwidth > 0")
    return L.astype(int), b


def _draws(scenario: Scenario, config: ReplanConfig) -> np.ndarray:
    """The fading ``h [R, K]`` from a generator that has first drawn the ``R x K`` acceptance uniforms
    (the testbed's order), in chunks to bound memory."""
    R, K = config.rounds, scenario.num_users
    rng = np.random.default_rng(config.seed)
    step = max(1, 1_000_000 // K)
    for r0 in range(0, R, step):
        rng.random((min(step, R - r0), K))
    return config.fading.draw(R, K, rng)


def play(scenario: Scenario, controller: MultiUserController, h: np.ndarray, config: ReplanConfig,
         label: str = "") -> ReplanResult:
    """Play one controller over the channel ``h [R, K]`` (module docstring) and clock it with
    :func:`spinlib.emulator.sync_clock` on the realised per-round lengths and bandwidths."""
    env = controller.env
    R, K = h.shape
    B = scenario.radio.bandwidth_hz
    name = label or type(controller).__name__
    pi = prefix_table(scenario, config.L_max, config.acceptance)
    acc_rng = np.random.default_rng(config.seed)  # the acceptance uniforms come first in the testbed's stream
    Ls = np.zeros((R, K), dtype=int)
    bs = np.zeros((R, K))
    As = np.zeros((R, K), dtype=int)
    Es = np.zeros((R, K))
    tau = scenario.tau
    for r in range(R):
        ctx = RoundContext(r, h[r], faded_rates(scenario, h[r]))
        L, b = _check_plan(name, r, *controller.plan(ctx), K, env.L_max, B)
        A = sample_accepted(L, pi, 1, acc_rng)[0]
        up = uplink_time(scenario, L, b, rates=ctx.rates)
        T = float(sync_round_time(scenario, np.max(L * tau + up), L.sum()))
        E = round_energy(env.energy, L, up, T - L * tau - up)
        Ls[r], bs[r], As[r], Es[r] = L, b, A, E
        controller.update(RoundOutcome(r, L, b, A, A + 1, T, up, E))
    template = Allocation((0,) * K, (0.0,) * K, "sync", name)
    up_bits, down_bits = trace_bits(scenario, template, Ls, As)
    trace = Trace(drafted=Ls, accepted=As, bits_up=up_bits, bits_down=down_bits, draft_s=Ls * tau)
    # a fixed bandwidth is passed as [K]: the very arrays the testbed computes with (bit-identical results)
    b_clock = bs[0] if np.all(bs == bs[0]) else bs
    m = sync_clock(scenario, template, trace, h, confidence=config.confidence, timeline_rounds=0, bandwidth_hz=b_clock)
    N = As + 1
    expected = np.cumsum(pi, axis=1)[np.arange(K), Ls]  # E[N_k](L) = sum_{i <= L} P(A_k >= i) under the sampler's law
    return ReplanResult(controller=name, goodput_tokens_per_s=m.goodput_tokens_per_s, ci_low=m.ci_low,
                        ci_high=m.ci_high, tokens_per_round=float(N.sum(axis=1).mean()),
                        round_time_s=float(m.round_time_s.mean()),
                        expected_goodput_tokens_per_s=float(expected.sum() / m.round_time_s.sum()),
                        mean_L=float(Ls.mean()),
                        energy_per_token_j=float(Es.sum() / N.sum()), energy_per_round_j=Es.mean(axis=0),
                        draft_lengths=Ls, bandwidth_hz=bs, tokens=N, round_times_s=m.round_time_s, energy_j=Es,
                        info=controller.info())


def run_replan(scenario: Scenario, controllers, config: ReplanConfig | None = None, *,
               average_plan: Allocation | None = None, timings: bool = False) -> list[ReplanResult]:
    """Every controller on the same cell, channel and acceptance draws.

    Parameters
    ----------
    controllers : sequence of str or ControllerSpec
        Registered names (``"name:key=value,..."``, :func:`multiuser_controller_names`) or
        :func:`mspec` specs.
    config : ReplanConfig
    average_plan : Allocation, optional
        heterogeneous-sync on the average channel, if already solved.
    timings : bool
        Add the wall time of each controller's run (``info["wall_s"]``; not reproducible).
    """
    config = config or ReplanConfig()
    if isinstance(controllers, (str, ControllerSpec)):
        controllers = [controllers]
    specs = [parse_mspec(c) for c in controllers]
    if not specs:
        raise ValidationError("controllers must name at least one controller")
    if config.rounds * scenario.num_users > MAX_ROUND_USER_CELLS:
        raise ValidationError(f"rounds x users = {config.rounds * scenario.num_users:,} exceeds the limit of "
                              f"{MAX_ROUND_USER_CELLS:,} (memory grows with rounds x users)")
    env = multiuser_env(scenario, config, average_plan)
    h = _draws(scenario, config)
    out = []
    for spec in specs:
        t = time.perf_counter()
        ctrl = get_multiuser_controller(spec.name).cls(env, **spec.kwargs)
        res = play(scenario, ctrl, h, config, spec.title)
        if timings:
            res.info["wall_s"] = time.perf_counter() - t
        out.append(res)
    return out


# ----------------------------------------------------------------------------------------------
# the notebook's driver
# ----------------------------------------------------------------------------------------------
DEFAULT_CONTROLLERS = ("plan-on-average", "server-only", "replan-ratio", "replan-dinkelbach", "replan-bandwidth",
                       "replan-drop", "replan-coordinate", "energy-queue")


def replan_under_fading(n_cells: int = 2, num_users: int = 4, rounds: int = 250, seed: int = 0,
                        fadings: Sequence[str] = FADING_MODELS, controllers: Sequence = DEFAULT_CONTROLLERS,
                        L_max: int = 8, timings: bool = False) -> list[dict]:
    """Every controller on ``n_cells`` random cells under each fading model: long records.

    Cells are :func:`spinlib.presets.random_scenario` ``(num_users, s_i)`` with ``s_i`` from
    :func:`spinlib.experiments.sweep_seeds` ``(seed, n_cells)``; cell ``i`` is played with
    ``ReplanConfig(rounds, seed=i, fading, L_max)`` (as :func:`spinlib.experiments.fading_gains`
    emulates its cells). The default sizes run in well under a minute on a 2-core machine.

    Returns
    -------
    list of dict
        One per (cell, fading, controller): ``cell``, ``fading``, and :meth:`ReplanResult.record`
        (``goodput_tokens_per_s`` with ``ci_low``/``ci_high`` (99 %), ``tokens_per_round``,
        ``round_time_s``, ``mean_L``, ``energy_per_token_j``, ``energy_per_round_j``, ``solver_status``,
        and for energy controllers ``budget_j``, ``debt_j``, ``max_debt_j``, ``energy_over_budget``).
        With ``timings`` also ``wall_s`` (not reproducible).
    """
    from ..experiments import sweep_seeds
    from ..presets import random_scenario

    check_int_range("n_cells", n_cells, 1, 1000)
    check_int_range("num_users", num_users, 1, MAX_USERS)
    fadings = tuple(fadings)
    for f in fadings:
        if f not in FADING_MODELS:
            raise ValidationError(f"fadings must hold names from {FADING_MODELS}, got {f!r}")
    specs = [parse_mspec(c) for c in controllers]
    rows = []
    for i, sd in enumerate(sweep_seeds(seed, n_cells)):
        s = random_scenario(num_users, sd)
        avg = solve_heterogeneous_sync(s, L_max)
        for f in fadings:
            cfg = ReplanConfig(rounds=rounds, seed=i, fading=Fading(f), L_max=L_max)
            res = run_replan(s, specs, cfg, average_plan=avg, timings=timings)
            rows += [{"cell": i, "fading": f, **r.record()} for r in res]
    return rows


__all__ = ["MAX_USERS", "MAX_ROUNDS", "faded_rates", "round_constant_s", "round_objective", "RoundSolution",
           "maximise_round", "exhaustive_round", "device_energy", "round_energy", "MultiUserEnv", "RoundContext",
           "RoundOutcome", "MultiUserController", "MULTIUSER_CONTROLLERS", "register_multiuser_controller",
           "get_multiuser_controller", "multiuser_controller_names", "mspec", "parse_mspec",
           "make_multiuser_controller", "PlanOnAverage", "ServerOnly", "ReplanRatio", "ReplanDinkelbach",
           "ReplanBandwidth", "ReplanDrop", "ReplanCoordinate", "EnergyQueue", "ReplanConfig", "ReplanResult",
           "multiuser_env", "play", "run_replan", "DEFAULT_CONTROLLERS", "replan_under_fading",
           "LAMBDA_TOKENS", "REGISTRY"]
