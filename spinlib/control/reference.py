"""Independent references for the continuous sub-problems, written in CVXPY (tests and benchmarks).

* Synchronous split: for a trial makespan D, ``min sum_k b_k`` s.t. ``R_k(b_k) >= L_k S/(D - L_k tau_k)``
  is convex (the Shannon rate is ``-rel_entr(b, b + a) / ln 2``, DCP); bisection on D finds the
  smallest D whose minimal bandwidth fits in B.
* Asynchronous split: ``max sum_k (N_k/A_k) (1 - C_k / (A_k t_k + C_k))`` s.t. ``t_k <= R_k(b_k)``,
  ``sum b_k <= B`` -- the goodput ``N R/(A R + C)`` written with ``inv_pos`` so that it is DCP.

Both are far slower than the closed-form/1-D-root solvers they check.
"""
from __future__ import annotations

import numpy as np

from ..channel import LN2, RateModel
from ..scenario import Scenario

SOLVER = "CLARABEL"


def _scaled_rate_expr(cp, rates: RateModel, x, idx, scale: float):
    """``R_k(x scale) / scale`` (rel_entr is positively homogeneous, so this stays well scaled)."""
    if rates.kind == "shannon":
        return -cp.rel_entr(x, x + rates.a[idx] / scale) / LN2
    return cp.multiply(rates.c[idx], x)


def _solve(prob) -> bool:
    import cvxpy as cp

    try:
        prob.solve(solver=SOLVER)
    except cp.error.SolverError:
        return False
    return prob.status in ("optimal", "optimal_inaccurate")


def min_total_bandwidth(scenario: Scenario, L, D: float, rates: RateModel | None = None) -> float:
    """Smallest total bandwidth [Hz] that lets every drafting user finish by D (inf if infeasible)."""
    import cvxpy as cp

    rates = rates or RateModel.of(scenario)
    L = np.asarray(L)
    idx = np.flatnonzero(L > 0)
    if idx.size == 0:
        return 0.0
    slack = D - L[idx] * scenario.tau[idx]
    need = L[idx] * scenario.payload.bits_per_token / np.maximum(slack, 1e-300)
    if np.any(slack <= 0) or np.any(need >= rates.max_rate(idx)):
        return np.inf
    scale = scenario.radio.bandwidth_hz  # solve in units of B for conditioning
    x = cp.Variable(idx.size, nonneg=True)
    cons = [_scaled_rate_expr(cp, rates, x, idx, scale) >= need / scale]
    prob = cp.Problem(cp.Minimize(cp.sum(x)), cons)
    if not _solve(prob):
        return np.inf
    return float(prob.value * scale)


def min_makespan_cvxpy(scenario: Scenario, L, rel_tol: float = 1e-9, rates: RateModel | None = None) -> float:
    """Makespan D [s] of the synchronous split by bisection over CVXPY feasibility problems."""
    from .bandwidth import makespan_lower_bound

    rates = rates or RateModel.of(scenario)
    L = np.asarray(L)
    if not np.any(L > 0):
        return 0.0
    lo = float(makespan_lower_bound(scenario, L, rates))
    hi = max(lo, 1e-6) * 2
    B = scenario.radio.bandwidth_hz
    while min_total_bandwidth(scenario, L, hi, rates) > B:
        hi *= 2
    while hi - lo > rel_tol * hi:
        mid = 0.5 * (lo + hi)
        if min_total_bandwidth(scenario, L, mid, rates) > B:
            lo = mid
        else:
            hi = mid
    return hi


def async_bandwidth_cvxpy(scenario: Scenario, L, tokens, rates: RateModel | None = None):
    """Optimal asynchronous split for fixed L: ``(b [K], goodput)`` from CVXPY."""
    import cvxpy as cp

    from ..rounds import async_terms

    rates = rates or RateModel.of(scenario)
    L = np.asarray(L)
    N = np.asarray(tokens, dtype=float)
    A, C = async_terms(scenario, L)
    idx = np.flatnonzero(L > 0)
    fixed = float(np.sum(N[L == 0] / A[L == 0]))
    b_out = np.zeros(L.size)
    if idx.size == 0:
        return b_out, fixed
    scale = scenario.radio.bandwidth_hz
    x = cp.Variable(idx.size, nonneg=True)
    t = cp.Variable(idx.size, nonneg=True)  # rate in units of bit/s / scale
    Ai, Ci, Ni = A[idx], C[idx] / scale, N[idx]
    obj = cp.sum(cp.multiply(Ni / Ai, 1 - cp.multiply(Ci, cp.inv_pos(cp.multiply(Ai, t) + Ci))))
    cons = [t <= _scaled_rate_expr(cp, rates, x, idx, scale), cp.sum(x) <= 1]
    prob = cp.Problem(cp.Maximize(obj), cons)
    if not _solve(prob):
        raise RuntimeError(f"CVXPY status {prob.status}")
    b_out[idx] = np.asarray(x.value) * scale
    return b_out, fixed + float(prob.value)


def downlink_power_cvxpy(scenario: Scenario, dl_bits, correction_s):
    """Optimal DL power split ``(E, p [K])`` from CVXPY: ``min max_k c_k + (d_k/w) / log2(1 + p_k g_k/(N0 w))``.

    ``inv_pos`` of the concave spectral efficiency is convex, so the min-max is DCP; the power is
    solved in units of ``P_BS`` and the rate in bit/s/Hz for conditioning.
    """
    import cvxpy as cp

    d = np.asarray(dl_bits, dtype=float)
    c = np.asarray(correction_s, dtype=float)
    idx = np.flatnonzero(d > 0)
    p_out = np.zeros(d.size)
    if idx.size == 0:
        return 0.0, p_out
    P, W = scenario.downlink.power_w, scenario.downlink.bandwidth_hz
    w = W / idx.size
    q = P * scenario.gain[idx] / (scenario.radio.noise_psd_w_per_hz * w)  # SNR at full power
    x = cp.Variable(idx.size, nonneg=True)
    se = cp.log(1 + cp.multiply(q, x)) / LN2  # bit/s/Hz
    E = cp.max(c[idx] + cp.multiply(d[idx] / w, cp.inv_pos(se)))
    prob = cp.Problem(cp.Minimize(E), [cp.sum(x) <= 1])
    if not _solve(prob):
        raise RuntimeError(f"CVXPY status {prob.status}")
    p_out[idx] = np.asarray(x.value) * P
    return float(prob.value), p_out
