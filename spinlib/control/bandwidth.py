"""Optimal FDMA bandwidth for given draft lengths: the two continuous sub-problems.

Synchronous round (homogeneous or ragged batch), draft lengths ``L`` fixed::

    min_b  max_k ( L_k tau_k + L_k S / R_k(b_k) )   s.t.  sum_k b_k <= B,  b >= 0

Each finish time decreases in b_k, so at the optimum every drafting user finishes at the same
makespan D (otherwise bandwidth moves from the early user to the late one). Inverting the rate,

    b_k(D) = R_k^{-1}( L_k S / (D - L_k tau_k) ),     D > L_k (tau_k + S / R_k(inf)),

and D* is the unique root of ``sum_k b_k(D) = B`` (the sum decreases strictly in D). With
homogeneous lengths ``L_k = L`` we get ``D* = L d*`` where d* solves the same equation with L = 1:
the split does not depend on L.

Asynchronous rounds, lengths fixed: maximise ``sum_k N_k / (A_k + C_k / R_k(b_k))`` with
``A_k = L_k tau_k + T_ver(L_k+1) + T_fb + T_acc`` and ``C_k = L_k S``. Each term is concave in b_k
(a concave increasing function of the concave rate), so the KKT conditions are sufficient:
``h_k'(b_k) = mu`` for every drafting user, with mu found by bisection on the budget.
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import brentq

from ..channel import RateModel
from ..rounds import async_round_time, sync_round_time
from ..scenario import Scenario, ValidationError

_BISECT_ITERS = 64


def equal_bandwidth(scenario: Scenario, L) -> np.ndarray:
    """``b_k = B / #{k : L_k > 0}`` for drafting users, 0 for the others. Shape ``[..., K]``."""
    L = np.asarray(L)
    active = L > 0
    n = np.maximum(active.sum(axis=-1, keepdims=True), 1)
    return np.where(active, scenario.radio.bandwidth_hz / n, 0.0)


def _required_bandwidth(rates: RateModel, S: float, L, tau, D):
    """``b_k(D) = R_k^{-1}(L_k S / (D - L_k tau_k))`` (0 if L_k = 0, inf if unreachable)."""
    L = np.asarray(L, dtype=float)
    slack = D - L * tau
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(slack > 0, L * S / slack, np.inf)
    b = rates.bandwidth_for_rate(np.where(np.isfinite(rate), rate, 0.0))
    b = np.where(np.isfinite(rate), b, np.inf)
    return np.where(L > 0, b, 0.0)


def makespan_lower_bound(scenario: Scenario, L, rates: RateModel | None = None):
    """``max_k L_k (tau_k + S / R_k(inf))`` [s]: no bandwidth achieves a smaller makespan."""
    rates = rates or RateModel.of(scenario)
    L = np.asarray(L, dtype=float)
    return np.max(L * (scenario.tau + scenario.payload.bits_per_token / rates.max_rate()), axis=-1)


def min_makespan_bandwidth(scenario: Scenario, L, rates: RateModel | None = None):
    """Optimal synchronous bandwidth split for draft lengths ``L`` (shape ``[..., K]``).

    Returns
    -------
    D : ndarray, shape [...]
        Minimal drafting + uplink makespan [s] (0 where nobody drafts).
    b : ndarray, shape [..., K]
        Bandwidth [Hz]; ``sum_k b_k = B`` up to 1e-12 relative where someone drafts.

    A single problem (``L`` of shape ``[K]``) is solved with Brent's method on D; a batch with a
    vectorised bisection (64 halvings of the bracket, relative error < 1e-15).
    """
    rates = rates or RateModel.of(scenario)
    L = np.asarray(L)
    if np.any(L < 0):
        raise ValidationError("draft lengths must be >= 0")
    tau, S, B = scenario.tau, scenario.payload.bits_per_token, scenario.radio.bandwidth_hz
    active = L > 0
    n_act = np.maximum(active.sum(axis=-1), 1)
    lo = makespan_lower_bound(scenario, L, rates)
    # at D_hi every drafting user meets its time with the equal share B / n_active
    b_eq = B / n_act[..., None]
    with np.errstate(divide="ignore"):
        hi = np.max(np.where(active, L * (tau + S / rates.rate(b_eq)), 0.0), axis=-1)

    def excess(D):
        return _required_bandwidth(rates, S, L, tau, D[..., None] if np.ndim(D) else D).sum(axis=-1) - B

    if L.ndim == 1:
        if not active.any():
            return 0.0, np.zeros(L.shape)
        if hi <= lo * (1 + 1e-15):
            D = float(hi)
        else:
            f = lambda D: min(float(excess(np.float64(D))), 1e300)  # noqa: E731  (inf at the lower end)
            D = brentq(f, lo, hi, xtol=1e-15 * hi, rtol=4 * np.finfo(float).eps, maxiter=200) if f(hi) < 0 else hi
            # step to the feasible side of the root
            while f(D) > 0:
                D = np.nextafter(D, np.inf)
        b = _required_bandwidth(rates, S, L, tau, D)
        return float(D), b
    lo = np.array(lo, dtype=float)
    hi = np.array(hi, dtype=float)
    for _ in range(_BISECT_ITERS):
        mid = 0.5 * (lo + hi)
        over = excess(mid) > 0
        lo = np.where(over, mid, lo)
        hi = np.where(over, hi, mid)
    D = np.where(active.any(axis=-1), hi, 0.0)
    b = _required_bandwidth(rates, S, L, tau, D[..., None])
    return D, b


# ----------------------------------------------------------------------------------------------
# Asynchronous rounds
# ----------------------------------------------------------------------------------------------
def _async_terms(scenario: Scenario, L):
    """``A_k`` [s] and ``C_k = L_k S`` [bit] of the asynchronous goodput ``N/(A + C/R(b))``."""
    L = np.asarray(L, dtype=float)
    A = async_round_time(scenario, L, 0.0)
    C = L * scenario.payload.bits_per_token
    return A, C


def _async_marginal(rates: RateModel, b, N, A, C):
    """``h'(b) = N C R'(b) / (A R(b) + C)^2`` [token/s/Hz] of ``h(b) = N R / (A R + C)``."""
    R = rates.rate(b)
    return N * C * rates.derivative(b) / (A * R + C) ** 2


def _async_best_response(rates: RateModel, mu, N, A, C, b_max: float, iters: int = 32):
    """Per user: the b in [0, b_max] with ``h'(b) = mu`` (bisection on log b); 0 where C = 0."""
    lo = np.full(np.broadcast(mu, N, A, C).shape, np.log(b_max) - 40.0)  # e^-40 B ~ 0
    hi = np.full(lo.shape, np.log(b_max))
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        above = _async_marginal(rates, np.exp(mid), N, A, C) > mu
        lo = np.where(above, mid, lo)
        hi = np.where(above, hi, mid)
    b = np.exp(lo)  # the side where h' >= mu
    return np.where(C > 0, b, 0.0)


def async_optimal_bandwidth(scenario: Scenario, L, tokens, rates: RateModel | None = None, iters: int = 44):
    """Optimal bandwidth for fixed lengths under asynchronous rounds (batched over ``[..., K]``).

    Parameters
    ----------
    L : array, shape [..., K]
        Draft lengths.
    tokens : array, shape [..., K]
        ``E[N_k](L_k)``.

    Returns
    -------
    b : ndarray [..., K]
        Bandwidth [Hz], ``sum_k b_k <= B`` (equality where someone drafts).
    goodput : ndarray [...]
        ``sum_k N_k / T_k`` [token/s].
    """
    rates = rates or RateModel.of(scenario)
    B = scenario.radio.bandwidth_hz
    L = np.asarray(L)
    N = np.asarray(tokens, dtype=float)
    A, C = _async_terms(scenario, L)
    # bracket mu (log space): at mu_lo everyone would take all of B, at mu_hi ~ nobody takes any
    with np.errstate(divide="ignore", invalid="ignore"):
        m_full = np.where(C > 0, _async_marginal(rates, np.full(L.shape, B), N, A, C), np.inf)
        m_tiny = np.where(C > 0, _async_marginal(rates, np.full(L.shape, B * np.exp(-40.0)), N, A, C), 0.0)
    lo = np.log(np.maximum(np.min(m_full, axis=-1), 1e-300))
    hi = np.log(np.maximum(np.max(m_tiny, axis=-1), 1e-300)) + 1.0
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        b = _async_best_response(rates, np.exp(mid)[..., None], N, A, C, B)
        over = b.sum(axis=-1) > B
        lo = np.where(over, mid, lo)
        hi = np.where(over, hi, mid)
    b = _async_best_response(rates, np.exp(hi)[..., None], N, A, C, B)
    # the bisection ends a hair below the budget: hand the remainder out in proportion
    tot = b.sum(axis=-1, keepdims=True)
    b = np.where(tot > 0, b * (B / np.where(tot > 0, tot, 1.0)), 0.0)
    goodput = async_goodput(scenario, L, N, b, rates)
    return b, goodput


def async_goodput(scenario: Scenario, L, tokens, b, rates: RateModel | None = None):
    """``sum_k N_k / T_k`` for lengths ``L``, tokens ``N`` and bandwidth ``b`` (all ``[..., K]``)."""
    rates = rates or RateModel.of(scenario)
    A, C = _async_terms(scenario, L)
    with np.errstate(divide="ignore", invalid="ignore"):
        up = np.where(C > 0, C / rates.rate(b), 0.0)
    return np.sum(np.asarray(tokens) / (A + up), axis=-1)


def sync_goodput(scenario: Scenario, L, tokens, D):
    """``sum_k N_k / (D + T_ver(sum_k (L_k+1)) + T_fb + T_acc)`` for a makespan D (``[...]``)."""
    return np.sum(tokens, axis=-1) / sync_round_time(scenario, D, np.asarray(L).sum(axis=-1))
