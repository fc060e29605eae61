"""Homogeneous draft control: one draft length L for everyone, one synchronous batch.

Problem (paper 1, homogeneous case; our reconstruction)::

    max_{L in {0..L_max}, b}  sum_k N_k(L) / ( max_k (L tau_k + L S / R_k(b_k)) + T_ver(K(L+1)) + T_fb + T_acc )
    s.t.  sum_k b_k <= B

Decomposition. For fixed L the bandwidth sub-problem is the min-makespan split of
:mod:`spinlib.control.bandwidth`; its makespan is ``L d*`` where d* (the per-token makespan) solves

    sum_k R_k^{-1}( S / (d - tau_k) ) = B,

so the optimal split ``b_k* = R_k^{-1}(S/(d* - tau_k))`` does not depend on L. It grows with
``tau_k`` (slow devices get more bandwidth) and with the path loss (``R_k^{-1}`` grows as ``a_k``
falls): the allocation compensates weak computation and weak channels (the paper's claim).
The goodput is then a function of L alone, ``G(L) = sum_k N_k(L) / (c L + e)`` with
``c = d* + t1 K`` and ``e = t0 + t1 K + T_fb + T_acc``; we maximise it by scanning L = 0..L_max
(exact). For equal alpha the continuous maximiser has a closed form
(:func:`closed_form_length`).
"""
from __future__ import annotations

import numpy as np
from scipy.special import lambertw

from ..acceptance import tokens_table
from ..channel import RateModel
from ..rounds import Allocation, sync_goodput, sync_round_time
from ..scenario import Scenario
from ..validation import ValidationError, check_int_range
from .bandwidth import min_makespan_bandwidth
from .registry import register_policy


def per_token_makespan(scenario: Scenario, rates: RateModel | None = None):
    """``d*`` [s/token] and the L-independent split ``b*`` [Hz] (shape [K])."""
    return min_makespan_bandwidth(scenario, np.ones(scenario.num_users, dtype=int), rates)


def goodput_by_length(scenario: Scenario, d_star: float, L_max: int) -> np.ndarray:
    """``G(L)`` [token/s] for L = 0..L_max with the optimal split (shape [L_max+1])."""
    Ls = np.arange(L_max + 1)
    L = np.repeat(Ls[:, None], scenario.num_users, axis=1)  # [L_max+1, K]
    return sync_goodput(scenario, L, tokens_table(scenario, L_max).T, Ls * d_star)


def closed_form_length(alpha: float, c: float, e: float) -> float:
    """Continuous maximiser of ``(1 - alpha^(L+1)) / ((1 - alpha)(c L + e))`` over L >= 0.

    With ``lambda = -ln alpha``, ``M = L + 1`` and ``h = e/c - 1`` the stationarity condition
    ``alpha^M (1 + lambda (M + h)) = 1`` has the solution

        M* = ( -W_{-1}( -exp(-1 - lambda h) ) - 1 ) / lambda - h ,

    valid for ``h >= 0``; for ``h < 0`` (per-round overhead below the per-token cost) the goodput
    decreases in L and ``L* = 0``. The objective is quasi-concave, so the best integer is
    ``floor`` or ``ceil`` of the returned value.

    Parameters
    ----------
    alpha : float
        Acceptance rate in (0, 1).
    c : float
        [s/token] per-drafted-token cost of the round, > 0.
    e : float
        [s] fixed cost of the round, >= 0.
    """
    if not 0 < alpha < 1:
        raise ValidationError(f"alpha must be in (0, 1) for the closed form, got {alpha}")
    if c <= 0 or e < 0:
        raise ValidationError("c must be > 0 and e >= 0")
    lam = -np.log(alpha)
    h = e / c - 1.0
    if h < 0:
        return 0.0
    w = lambertw(-np.exp(-1.0 - lam * h), k=-1).real
    M = (-w - 1.0) / lam - h
    return float(max(M - 1.0, 0.0))


def solve_homogeneous(scenario: Scenario, L_max: int = 16, rates: RateModel | None = None) -> Allocation:
    """Optimal common draft length and bandwidth (synchronous round). See the module docstring."""
    check_int_range("L_max", L_max, 1, 64)
    rates = rates or RateModel.of(scenario)
    d_star, b_star = per_token_makespan(scenario, rates)
    G = goodput_by_length(scenario, d_star, L_max)
    L = int(np.argmax(G))
    K = scenario.num_users
    b = b_star if L > 0 else np.zeros(K)
    info = {"per_token_makespan_s": float(d_star), "goodput_by_length": G.tolist()}
    alpha = scenario.alpha
    if np.allclose(alpha, alpha[0]) and 0 < alpha[0] < 1:
        c = d_star + scenario.server.t1_s_per_token * K
        e = float(sync_round_time(scenario, 0.0, 0.0))
        info["closed_form_length"] = closed_form_length(float(alpha[0]), c, e)
    return Allocation(tuple([L] * K), tuple(b.tolist()), "sync", "homogeneous", float(G[L]), info)


@register_policy("homogeneous", "optimal common draft length + optimal bandwidth (sync batch)", family="paper1")
def homogeneous(scenario: Scenario, L_max: int = 16) -> Allocation:
    """Policy ``homogeneous``: :func:`solve_homogeneous`."""
    return solve_homogeneous(scenario, L_max)


def critical_access_latency(scenario: Scenario, rates: RateModel | None = None) -> float:
    """Smallest per-round access latency ``T_acc`` [s] above which speculation pays (L* >= 1).

    ``G(L)`` is quasi-concave, so ``L* >= 1`` iff ``G(1) > G(0)``. With ``d*`` the per-token
    makespan and ``c0 = t0 + t1 K + T_fb`` this reads ``sum_k alpha_k (c0 + T_acc) > K (d* + t1 K)``:

        T_acc* = max(0, K (d* + t1 K) / sum_k alpha_k - c0).

    Returns ``inf`` when every alpha is 0 (drafting never pays). Uses the i.i.d. model
    (``N_k(1) = 1 + alpha_k``).
    """
    K = scenario.num_users
    d_star, _ = per_token_makespan(scenario, rates)
    t1 = scenario.server.t1_s_per_token
    s_alpha = float(np.sum(scenario.alpha))
    if s_alpha == 0:
        return float("inf")
    c0 = scenario.server.t0_s + t1 * K + scenario.feedback_time_s
    return max(0.0, K * (d_star + t1 * K) / s_alpha - c0)
