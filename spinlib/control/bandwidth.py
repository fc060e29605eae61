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

from ..channel import LN2, RateModel
from ..rounds import async_goodput, async_terms
from ..roots import newton_decreasing
from ..scenario import Scenario
from ..validation import ValidationError



def equal_bandwidth(scenario: Scenario, L) -> np.ndarray:
    """``b_k = B / #{k : L_k > 0}`` for drafting users, 0 for the others. Shape ``[..., K]``."""
    L = np.asarray(L)
    active = L > 0
    n = np.maximum(active.sum(axis=-1, keepdims=True), 1)
    return np.where(active, scenario.radio.bandwidth_hz / n, 0.0)


def required_bandwidth(rates: RateModel, S: float, L, tau, D):
    """Bandwidth user k needs to finish drafting and uploading by ``D``::

        b_k(D) = R_k^{-1}( L_k S_k / (D - L_k tau_k) )   [Hz]

    0 where ``L_k = 0``, ``inf`` where the rate is out of reach (``D <= L_k (tau_k + S_k / R_k(inf))``).
    ``S`` [bit/token] is a scalar or an array broadcasting with ``L`` [..., K]; ``D`` [s] broadcasts too.
    """
    L = np.asarray(L, dtype=float)
    slack = D - L * tau
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(slack > 0, L * S / slack, np.inf)
    b = rates.bandwidth_for_rate(np.where(np.isfinite(rate), rate, 0.0))
    b = np.where(np.isfinite(rate), b, np.inf)
    return np.where(L > 0, b, 0.0)


def _bits(scenario: Scenario, bits_per_token):
    """``S``: the scenario's payload bits per token, or a per-user array ``[..., K]`` (UL/DL modes)."""
    if bits_per_token is None:
        return scenario.payload.bits_per_token
    return np.asarray(bits_per_token, dtype=float)


def makespan_lower_bound(scenario: Scenario, L, rates: RateModel | None = None, bits_per_token=None):
    """``max_k L_k (tau_k + S_k / R_k(inf))`` [s]: no bandwidth achieves a smaller makespan."""
    rates = rates or RateModel.of(scenario)
    L = np.asarray(L, dtype=float)
    return np.max(L * (scenario.tau + _bits(scenario, bits_per_token) / rates.max_rate()), axis=-1)


def min_makespan_bandwidth(scenario: Scenario, L, rates: RateModel | None = None, bits_per_token=None):
    """Optimal synchronous bandwidth split for draft lengths ``L`` (shape ``[..., K]``).

    ``bits_per_token`` (optional, shape broadcasting to ``[..., K]``) replaces the scenario's
    ``S`` per user: UL-mode and DL-mode devices upload different payloads (paper 2).

    Returns
    -------
    D : ndarray, shape [...]
        Minimal drafting + uplink makespan [s] (0 where nobody drafts).
    b : ndarray, shape [..., K]
        Bandwidth [Hz] with ``sum_k b_k <= B`` always, and ``>= B (1 - 2e-8)`` where someone drafts
        (the Newton stop leaves up to ~1e-8 unused) unless ``D`` is at its lower bound, where a user
        whose rate is power-limited at any bandwidth sets the makespan and more band is of no use
        (tested on random cells with gains over the whole physical range, 1e-30..1).

    The root of ``sum_k b_k(D) = B`` is bracketed by ``max_k L_k (tau_k + S/R_k(inf))`` (sum = inf)
    and the makespan of the equal split (sum <= B), then found by safeguarded Newton
    (:func:`spinlib.roots.newton_decreasing`) in ``u = log(D - lo)`` on ``log(sum_k b_k / B)``, for
    every length vector of the batch at once.
    """
    rates = rates or RateModel.of(scenario)
    L = np.ascontiguousarray(L)  # (rows summed in one order whatever the caller's layout)
    if np.any(L < 0):
        raise ValidationError("draft lengths must be >= 0")
    tau, S, B = scenario.tau, _bits(scenario, bits_per_token), scenario.radio.bandwidth_hz
    active = L > 0
    n_act = np.maximum(active.sum(axis=-1), 1)
    lo = makespan_lower_bound(scenario, L, rates, bits_per_token)
    b_eq = B / n_act[..., None]
    with np.errstate(divide="ignore"):
        hi = np.max(np.where(active, L * (tau + S / rates.rate(b_eq)), 0.0), axis=-1)

    # solve in u = log(D - lo) for F(u) = log(sum_k b_k / B): nearly linear, ~10 evaluations
    any_active = active.any(axis=-1)
    lo = np.where(any_active, np.minimum(lo, hi), 0.0)
    # power-limited to float precision (e.g. a user in an extreme fade: R_k(b) = R_k(inf) already at a
    # tiny b): the equal split reaches the lower bound, so it is optimal; no root to search for
    flat = any_active & (hi - lo <= 1e-12 * np.abs(hi))
    width = np.where(any_active & ~flat, hi - lo, 1.0)

    # the Newton iteration evaluates only the length vectors still searching (each vector's root is its own)
    Lr, lo_r, act_r = L.reshape(-1, L.shape[-1]), lo.reshape(-1), active.reshape(-1, L.shape[-1])
    S_r = np.broadcast_to(S, L.shape).reshape(Lr.shape) if np.ndim(S) else S

    def log_excess(u, idx=None):
        """F(u) = log(sum_k b_k(D)/B) and dF/du, with db_k/dD = -(r_k / (D - L_k tau_k)) / R_k'(b_k), of every
        length vector (``idx=None``: ``u`` of the batch's shape) or of the vectors ``idx`` (flat; ``u`` [len(idx)])."""
        if idx is None:
            Li, Si, act, lo_i = L, S, active, lo
        else:
            Li, Si, act, lo_i = Lr[idx], (S_r[idx] if np.ndim(S_r) else S_r), act_r[idx], lo_r[idx]
        D = lo_i + np.exp(u)
        slack = D[..., None] - Li * tau
        with np.errstate(divide="ignore", invalid="ignore"):
            b = required_bandwidth(rates, Si, Li, tau, D[..., None])
            r = Li * Si / slack
            db = np.where(act, -(r / slack) / rates.derivative(b), 0.0)
            tot = b.sum(axis=-1)
            return np.log(tot / B), np.exp(u) * db.sum(axis=-1) / tot

    # tight lower bracket: the makespan at which the slowest user alone needs all of B
    with np.errstate(divide="ignore"):
        lo_br = np.max(np.where(active, L * (tau + S / rates.rate(np.full(L.shape, B))), 0.0), axis=-1)
    gap = np.clip(np.where(any_active & ~flat, lo_br - lo, 0.0), width * 1e-12, width)
    # per-user rates: each vector on its own rows; a rate model per vector (RateModel.faded with h [..., K])
    # has the batch's shape, so the whole batch is evaluated at once
    u, _, _ = newton_decreasing(log_excess, np.log(gap), np.log(width), np.log(gap), tol=1e-14,
                                live=any_active & ~flat, rows=np.ndim(rates.a) <= 1)
    # Newton may end on either side of the root: step to the side where sum_k b_k <= B (a steep need,
    # e.g. a user in a deep fade, may take more than one step: the step doubles until it is there)
    f, _ = log_excess(u)
    step = np.abs(u) * 4e-15 + 1e-300
    for _ in range(1100):  # 2^1100 x 1e-300 covers any float gap
        over = (f > 0) & ~flat & np.isfinite(u)
        if not np.any(over):
            break
        u = np.where(over, u + step, u)
        step = np.where(over, 2.0 * step, step)
        f, _ = log_excess(u)
    D = np.where(any_active, np.where(flat, hi, lo + np.exp(u)), 0.0)
    b = required_bandwidth(rates, S, L, tau, np.asarray(D)[..., None])
    b = np.where(flat[..., None], np.where(active, b_eq, 0.0), b)
    if L.ndim == 1:
        return float(D), b
    return D, b


# ----------------------------------------------------------------------------------------------
# Asynchronous rounds
# ----------------------------------------------------------------------------------------------
def async_marginal(rates: RateModel, b, N, A, C):
    """``h'(b) = N C R'(b) / (A R(b) + C)^2`` [token/s/Hz] of ``h(b) = N R / (A R + C)``."""
    R = rates.rate(b)
    return N * C * rates.derivative(b) / (A * R + C) ** 2


def async_best_response(rates: RateModel, mu, N, A, C, b_max: float, iters: int = 40, t_init=None):
    """Per user: the b in (0, b_max] with ``h'(b) = mu`` (0 where C = 0, b_max where h'(b_max) >= mu).

    Safeguarded Newton on ``phi(t) = log h'(e^t) - log mu`` (decreasing in t = log b) with
    ``phi'(t) = b [R''/R' - 2 A R' / (A R + C)]``; a bisection step replaces any Newton step
    that leaves the bracket ``[log b_max - 40, log b_max]``.
    """
    shape = np.broadcast(mu, N, A, C).shape
    log_mu = np.log(mu)
    with np.errstate(divide="ignore", invalid="ignore"):
        at_max = async_marginal(rates, np.full(shape, b_max), N, A, C) >= mu
    live = (np.broadcast_to(C, shape) > 0) & ~at_max  # entries that need the iteration
    lo = np.full(shape, np.log(b_max) - 40.0)
    hi = np.full(shape, np.log(b_max))
    t0 = np.full(shape, np.log(b_max) - 10.0) if t_init is None else np.broadcast_to(t_init, shape)

    def phi(t):
        b = np.exp(t)
        R, dR = rates.rate(b), rates.derivative(b)
        AR = A * R + C
        return (np.log(N * C * dR) - 2.0 * np.log(AR) - log_mu,
                b * (rates.second_derivative(b) / dR - 2.0 * A * dR / AR))

    t, _, _ = newton_decreasing(phi, lo, hi, t0, tol=1e-13, max_iter=iters, live=live)
    b = np.where(at_max, b_max, np.exp(t))
    return np.where(C > 0, b, 0.0)


def _async_kkt_newton(rates: RateModel, B: float, N, A, C, max_iter: int = 30):
    """Newton on the KKT system in ``x = log b`` (Shannon rates; rows ``[M, K]``).

    With R'(0) = inf every drafting user's optimal share is interior, so ``h_k'(e^{x_k}) = mu`` and
    ``sum_k e^{x_k} = B`` is a smooth system; its Jacobian is diagonal plus one bordering row and
    column, so each step costs O(K): ``D_k = h_k''(b_k) b_k``, ``r_k = h_k' - mu``,
    ``dmu = (sum b r / D - (sum b - B)) / sum b / D``, ``dx = (dmu - r) / D``, damped to at most
    4 in log b. Started from the linear-rate closed form ``b_k = (s sqrt(N_k C_k c_k) - C_k)/(A_k c_k)``.
    Returns ``b`` and a per-row convergence flag (steps below 1e-11 in log b).
    """
    act = C > 0
    Cs = np.where(act, C, 1.0)
    c = np.where(act, rates.c, 1.0)
    w = np.where(act, np.sqrt(N * Cs * c) / (A * c), 0.0)
    off = np.where(act, Cs / (A * c), 0.0)
    s = (B + off.sum(-1, keepdims=True)) / np.maximum(w.sum(-1, keepdims=True), 1e-300)
    b = np.where(act, np.maximum(s * w - off, B * 1e-6), 0.0)
    tot = b.sum(-1, keepdims=True)
    b = np.where(act, b * (B / np.where(tot > 0, tot, 1.0)), 1.0)
    x = np.log(b)
    conv = ~act.any(-1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        R, dR = rates.rate(b), rates.derivative(b)
        hp = N * Cs * dR / (A * R + Cs) ** 2
        n_act = np.maximum(act.sum(-1, keepdims=True), 1)
        mu = np.exp(np.where(act, np.log(hp), 0.0).sum(-1, keepdims=True) / n_act)
        for _ in range(max_iter):
            b = np.exp(x)
            R, dR, d2R = rates.rate(b), rates.derivative(b), rates.second_derivative(b)
            AR = A * R + Cs
            hp = N * Cs * dR / AR**2
            D = np.where(act, N * Cs * (d2R * AR - 2.0 * A * dR * dR) / AR**3 * b, -1.0)
            r = np.where(act, hp - mu, 0.0)
            bb = np.where(act, b, 0.0)
            dmu = ((bb * r / D).sum(-1, keepdims=True) - (bb.sum(-1, keepdims=True) - B)) \
                / (bb / D).sum(-1, keepdims=True)
            dmu = np.where(conv[..., None], 0.0, dmu)
            dx = np.where(act & ~conv[..., None], (dmu - r) / D, 0.0)
            scale = np.minimum(1.0, 4.0 / np.maximum(np.abs(dx).max(-1, keepdims=True), 1e-300))
            scale = np.minimum(scale, np.where(dmu < 0, 0.9 * mu / np.maximum(-dmu, 1e-300), 1.0))
            x = x + scale * dx
            mu = mu + scale * dmu
            conv = conv | (np.abs(scale * dx).max(-1) < 1e-11)
            if conv.all():
                break
    ok = conv & np.all(np.isfinite(x) | ~act, axis=-1)
    return np.where(act, np.exp(x), 0.0), ok


def async_optimal_bandwidth(scenario: Scenario, L, tokens, rates: RateModel | None = None):
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

    Shannon rates: Newton on the KKT system in log b (:func:`_async_kkt_newton`; every share is
    interior since R'(0) = inf). Rows it does not settle in 30 steps, and the linear model (whose
    optimum can leave a user at b = 0), use the multiplier search: the multiplier mu of the budget
    solves ``sum_k b_k(mu) = B`` (decreasing in mu), found in log mu by safeguarded Newton on
    ``log(sum_k b_k / B)`` (derivative from ``db_k/dmu = 1/h_k''``), each ``b_k(mu)`` by
    :func:`async_best_response`.
    """
    rates = rates or RateModel.of(scenario)
    B = scenario.radio.bandwidth_hz
    L = np.asarray(L)
    N = np.asarray(tokens, dtype=float)
    if rates.kind == "shannon" and L.size:
        A, C = async_terms(scenario, L)
        A2, C2, N2 = (np.broadcast_to(v, L.shape).reshape(-1, L.shape[-1]) for v in (A, C, N))
        b, ok = _async_kkt_newton(rates, B, N2, A2, C2)
        if not ok.all():  # rows the Newton iteration did not settle: the multiplier search
            b[~ok] = _async_multiplier_split(scenario, L.reshape(-1, L.shape[-1])[~ok], N2[~ok], rates)
        tot = b.sum(-1, keepdims=True)
        b = np.where(tot > 0, b * (B / np.where(tot > 0, tot, 1.0)), 0.0).reshape(L.shape)
        return b, async_goodput(scenario, L, N, b, rates)
    b = _async_multiplier_split(scenario, L, N, rates)
    return b, async_goodput(scenario, L, N, b, rates)


def _async_multiplier_split(scenario: Scenario, L, N, rates: RateModel):
    """The multiplier search of :func:`async_optimal_bandwidth` (any rate model, corners included)."""
    B = scenario.radio.bandwidth_hz
    A, C = async_terms(scenario, L)
    with np.errstate(divide="ignore", invalid="ignore"):
        m_full = np.where(C > 0, async_marginal(rates, np.full(L.shape, B), N, A, C), np.inf)
        m_tiny = np.where(C > 0, async_marginal(rates, np.full(L.shape, B * np.exp(-40.0)), N, A, C), 0.0)
    lo = np.log(np.maximum(np.min(m_full, axis=-1), 1e-300)) - 1e-9
    hi = np.log(np.maximum(np.max(m_tiny, axis=-1), 1e-300)) + 1.0
    lo = np.minimum(lo, hi - 1e-9)

    last_t = [None]  # warm start: each user's Newton starts from the previous multiplier's solution
    interior = (C > 0)

    def log_excess(s):
        """F(s) = log(sum_k b_k(e^s) / B) and dF/ds, with db_k/dmu = 1 / h_k''(b_k) inside (0, B)."""
        mu = np.exp(np.asarray(s))[..., None]
        b = async_best_response(rates, mu, N, A, C, B, t_init=last_t[0])
        last_t[0] = np.log(np.maximum(b, B * np.exp(-40.0)))
        with np.errstate(divide="ignore", invalid="ignore"):
            R, dR, d2R = rates.rate(b), rates.derivative(b), rates.second_derivative(b)
            AR = A * R + C
            h2 = N * C * (d2R * AR - 2.0 * A * dR * dR) / AR**3
            db = np.where(interior & (b > 0) & (b < B), 1.0 / h2, 0.0)
            tot = b.sum(axis=-1)
            return np.log(tot / B), np.exp(np.asarray(s)) * db.sum(axis=-1) / tot

    s, _, hi_s = newton_decreasing(log_excess, lo, hi, None, tol=1e-13, f_tol=1e-12)
    f, _ = log_excess(s)
    s = np.where(f > 0, hi_s, s)  # end on the side where sum_k b_k <= B
    b = async_best_response(rates, np.exp(np.asarray(s))[..., None], N, A, C, B, t_init=last_t[0])
    # the root is approached from within the budget: hand the remainder out in proportion
    tot = b.sum(-1, keepdims=True)
    return np.where(tot > 0, b * (B / np.where(tot > 0, tot, 1.0)), 0.0)


def accurate_rate_derivative(rates: RateModel, b):
    """``R_k'(b)`` [bit/s/Hz] without cancellation, for certified bounds: for Shannon,
    ``ln2 R' = log1p(x) - x / (1 + x)`` with ``x = a / b`` loses ``~2 eps / x`` relative for small
    x; there the alternating series ``sum_{n >= 2} (-1)^n (n - 1) / n x^n`` (truncated after
    n = 12: relative error < 2 x^11). Other rate models: :meth:`RateModel.derivative`."""
    if rates.kind != "shannon":
        return rates.derivative(b)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        x = rates.a / b
        exact = np.log1p(x) - x / (1.0 + x)
        xs = np.minimum(x, 1e-2)
        series = np.zeros_like(xs)
        for n in range(12, 1, -1):  # Horner in x
            series = (series + (-1) ** n * (n - 1) / n) * xs
        series = series * xs  # the loop leaves sum_{n>=2} c_n x^(n-1)
    return np.where(x < 1e-2, series, exact) / LN2
