"""Optimal downlink power for DL-mode devices (paper 2), for given modes and draft lengths.

DL-mode device k needs ``d_k`` bits (the target distribution at its first rejection, in
expectation) and then ``c_k`` seconds to sample its correction. The devices share the band ``W``
equally (``w = W / n_DL``) and the base-station power ``P_BS``::

    min_p  max_k ( c_k + d_k / r_k(p_k) )   s.t.  sum_k p_k <= P_BS,  p >= 0,
    r_k(p) = w log2(1 + p g_k / (N0 w)).

Each finish time decreases in ``p_k``, so at the optimum all DL devices finish together (else
power moves from an early device to the late one). Inverting the rate,

    p_k(E) = (N0 w / g_k) (2^{d_k / (w (E - c_k))} - 1),      E > c_k,

and the DL phase time ``E*`` is the unique root of ``sum_k p_k(E) = P_BS`` (the sum decreases
strictly in E). Same structure as the uplink bandwidth split (:mod:`.bandwidth`), with power in
place of bandwidth; checked against CVXPY (:func:`.reference.downlink_power_cvxpy`).
"""
from __future__ import annotations

import numpy as np

from ..channel import LN2
from ..roots import newton_decreasing
from ..scenario import Scenario


def required_power(d, c, E, a_w, w):
    """Power a DL device needs to finish by ``E``, and its derivative (0 where ``d_k = 0``)::

        p_k(E) = (w / a_k) (2^{d_k / (w (E - c_k))} - 1)   [W],   dp_k/dE   [W/s]

    Parameters
    ----------
    d, c : arrays [..., K]
        Expected DL bits [bit] and correction time [s].
    E : array broadcasting to [..., K]
        DL phase time [s], ``E > c_k``.
    a_w : array [K]
        ``g_k / N0`` [1/(W/Hz)]: the SNR per watt on a band ``w`` is ``a_w / w``.
    w : array broadcasting to [..., K]
        Band of each DL device [Hz].
    """
    slack = E - c
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        z = np.where(d > 0, d / (w * slack), 0.0)
        p = np.where(d > 0, (w / a_w) * np.expm1(z * LN2), 0.0)
        dp = np.where(d > 0, -(w / a_w) * np.exp(z * LN2) * LN2 * z / slack, 0.0)
    return p, dp


def min_max_downlink_power(scenario: Scenario, dl_bits, correction_s):
    """Optimal DL power split (batched over leading dims).

    Parameters
    ----------
    dl_bits : array, shape [..., K]
        ``d_k`` [bit], expected bits each device downloads per round (0 for UL-mode devices and
        for devices that do not draft: they take no part in the DL phase).
    correction_s : array, shape [..., K]
        ``c_k`` [s], device-side correction time after the download.

    Returns
    -------
    E : ndarray, shape [...]
        DL phase time [s] (0 where no device downloads).
    p : ndarray, shape [..., K]
        Power [W], ``sum_k p_k <= P_BS``.

    The root of ``sum_k p_k(E) = P_BS`` is bracketed by the time at which the slowest device
    alone needs all the power (sum >= P_BS) and the finish time of the equal split (sum <= P_BS),
    and found by safeguarded Newton (:func:`spinlib.roots.newton_decreasing`) on
    ``log(sum_k p_k(E) / P_BS)``, for every row of the batch at once.
    """
    d = np.asarray(dl_bits, dtype=float)
    c = np.broadcast_to(np.asarray(correction_s, dtype=float), d.shape)
    P = scenario.downlink.power_w
    W = scenario.downlink.bandwidth_hz
    a_w = scenario.gain / scenario.radio.noise_psd_w_per_hz  # SNR = p a_w / w
    active = d > 0
    n = active.sum(axis=-1, keepdims=True)
    w = W / np.maximum(n, 1)
    any_active = n[..., 0] > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        t_alone = np.where(active, c + d / (w * np.log1p(P * a_w / w) / LN2), 0.0)
        t_equal = np.where(active, c + d / (w * np.log1p((P / np.maximum(n, 1)) * a_w / w) / LN2), 0.0)
    lo = np.max(t_alone, axis=-1)
    hi = np.max(t_equal, axis=-1)
    lo = np.where(any_active, lo, 0.0)
    hi = np.where(any_active, np.maximum(hi, lo), 1.0)

    def log_excess(E):
        p, dp = required_power(d, c, E[..., None], a_w, w)
        tot = p.sum(axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(tot / P), dp.sum(axis=-1) / tot

    E, _, _ = newton_decreasing(log_excess, lo, hi, hi, tol=1e-15, f_tol=1e-13, live=any_active)
    E = np.where(any_active, E, 0.0)
    p, _ = required_power(d, c, E[..., None], a_w, w)
    p = np.where(np.isfinite(p), p, 0.0)
    tot = p.sum(axis=-1, keepdims=True)  # Newton ends within ~1e-15 of the budget, on either side
    p = np.where(tot > P, p * (P / np.where(tot > 0, tot, 1.0)), p)
    if d.ndim == 1:
        return float(E), p
    return E, p
