"""Propagation and FDMA rate models.

Shannon rate of user k on bandwidth ``b`` [Hz] (exact model)::

    R_k(b) = b log2(1 + a_k / b),      a_k = P_k g_k / N0  [Hz]

R_k is concave and increasing in b and saturates at ``R_k(inf) = a_k / ln 2`` [bit/s]: no amount
of bandwidth carries more. Its inverse has a closed form through the lower branch of Lambert W
(derivation in ``notebooks/01_system_model.ipynb``)::

    r = R ln2 / a_k  (< 1),   y = -W_{-1}(-r e^{-r}) / r,   b = a_k / (y - 1).

The linear (high-SNR) model freezes the spectral efficiency: ``R_k(b) = c_k b``.

All functions are pure and broadcast over NumPy arrays (shapes ``[..., K]``).
"""
from __future__ import annotations

import numpy as np

LN2 = np.log(2.0)


def path_loss_db(distance_m, *, intercept_db: float = 128.1, exponent: float = 3.76):
    """Macro-cell path loss ``PL(d) = 128.1 + 37.6 log10(d / 1 km)`` [dB] (3GPP TR 36.814, 2 GHz).

    Parameters
    ----------
    distance_m : array_like
        Distance [m], > 0.
    """
    d = np.asarray(distance_m, dtype=float)
    if np.any(d <= 0):
        raise ValueError("distance_m must be > 0")
    return intercept_db + 10.0 * exponent * np.log10(d / 1000.0)


def db_to_linear(x_db):
    return 10.0 ** (np.asarray(x_db, dtype=float) / 10.0)


def dbm_to_w(x_dbm):
    return 10.0 ** ((np.asarray(x_dbm, dtype=float) - 30.0) / 10.0)


# ----- Shannon ---------------------------------------------------------------------------------
def shannon_rate(b, a):
    """``R(b) = b log2(1 + a/b)`` [bit/s]; ``R(0) = 0``.

    Parameters
    ----------
    b : array_like
        Bandwidth [Hz], >= 0.
    a : array_like
        ``P g / N0`` [Hz], > 0.
    """
    b = np.asarray(b, dtype=float)
    a = np.asarray(a, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = b * np.log1p(a / b) / LN2
    return np.where(b > 0, r, 0.0)


def shannon_rate_derivative(b, a):
    """``dR/db = [ln(1 + a/b) - a/(a + b)] / ln 2`` [bit/s/Hz]; positive and decreasing."""
    b = np.asarray(b, dtype=float)
    a = np.asarray(a, dtype=float)
    return (np.log1p(a / b) - a / (a + b)) / LN2


def shannon_rate_second_derivative(b, a):
    """``d^2R/db^2 = -a^2 / (b (a + b)^2 ln 2)`` (negative: R is concave)."""
    b = np.asarray(b, dtype=float)
    a = np.asarray(a, dtype=float)
    return -(a * a) / (b * (a + b) ** 2 * LN2)


def shannon_rate_limit(a):
    """``lim_{b->inf} R(b) = a / ln 2`` [bit/s]."""
    return np.asarray(a, dtype=float) / LN2


def lambert_wm1_neg(r, iters: int = 5):
    """``Y = -W_{-1}(-r e^{-r})`` for ``r`` in (0, 1): the root ``Y > 1`` of ``Y - ln Y = r - ln r``.

    Newton on the convex increasing ``g(Y) = Y - ln Y - c`` (``c = r - ln r``) from
    ``max(c + ln c, 1 + sqrt(2(c-1)) + 2(c-1)/3)`` (the large-c and small-(c-1) expansions):
    3 steps reach ~1e-13 relative in the bandwidth on r in [1e-250, 1 - 1e-4] and 5 are taken.
    About 7x faster than ``scipy.special.lambertw`` (which works in complex arithmetic), and
    checked against it in the tests.
    """
    r = np.asarray(r, dtype=float)
    c = r - np.log(r)
    y = np.maximum(c + np.log(c), 1.0 + np.sqrt(2.0 * (c - 1.0)) + 2.0 * (c - 1.0) / 3.0)
    for _ in range(iters):
        y = y - (y - np.log(y) - c) / (1.0 - 1.0 / y)
    return y


def shannon_bandwidth_for_rate(rate, a):
    """Closed-form inverse of :func:`shannon_rate` via Lambert W_{-1} (:func:`lambert_wm1_neg`).

    With ``r = rate ln2 / a`` and ``Y = -W_{-1}(-r e^{-r})``: ``b = a r / (Y - r)``.

    Returns the bandwidth [Hz] at which ``R(b) = rate``; ``0`` for ``rate == 0`` and ``inf`` where
    ``rate >= a / ln 2`` (the rate is out of reach at any bandwidth).
    """
    rate = np.asarray(rate, dtype=float)
    a = np.asarray(a, dtype=float)
    rate, a = np.broadcast_arrays(rate, a)
    r = rate * LN2 / a
    out = np.full(r.shape, np.inf)
    out[r <= 0] = 0.0
    # Near r = 1 (b >> a) W_{-1} is evaluated at its branch point and y - 1 cancels; there we use
    # the series ln(1+x)/x = 1 - x/2 + x^2/3 - ... inverted: x = a/b = 2e + (8/3) e^2 + (28/9) e^3, e = 1 - r
    # (relative error O(e^3) < 1e-12). For r < 1e-250 (absurdly small rates) b ~ a r / ln(1/r).
    mid = (r >= 1e-250) & (r < 1 - 1e-4)
    if np.any(mid):
        rr = r[mid]
        Y = lambert_wm1_neg(rr)  # = -W_{-1}(-r e^{-r})
        out[mid] = a[mid] * rr / (Y - rr)
    near = (r >= 1 - 1e-4) & (r < 1)
    if np.any(near):
        e = 1.0 - r[near]
        out[near] = a[near] / (e * (2.0 + e * (8.0 / 3.0 + e * 28.0 / 9.0)))
    tiny = (r > 0) & (r < 1e-250)
    if np.any(tiny):
        out[tiny] = a[tiny] * r[tiny] / np.log(1.0 / r[tiny])
    return out


# ----- linear ----------------------------------------------------------------------------------
def linear_rate(b, c):
    """``R(b) = c b`` [bit/s] with spectral efficiency ``c`` [bit/s/Hz]."""
    return np.asarray(b, dtype=float) * np.asarray(c, dtype=float)


class RateModel:
    """The rate function of every user in a scenario: evaluate, differentiate, invert.

    Parameters
    ----------
    kind : {"shannon", "linear"}
    a : ndarray, shape [K]
        ``P_k g_k / N0`` [Hz].
    bandwidth_hz : float
        Total bandwidth B; fixes the linear model's spectral efficiency at the equal share.
    """

    def __init__(self, kind: str, a: np.ndarray, bandwidth_hz: float):
        self.kind = kind
        self.a = np.asarray(a, dtype=float)
        k = self.a.shape[-1]
        self.c = np.log2(1.0 + self.a * k / bandwidth_hz)  # linear model efficiency [bit/s/Hz]

    @classmethod
    def of(cls, scenario) -> "RateModel":
        return cls(scenario.radio.rate_model, scenario.snr_scale_hz, scenario.radio.bandwidth_hz)

    @classmethod
    def faded(cls, scenario, h) -> "RateModel":
        """The scenario's rates on the faded channel ``g_k h_k``: ``a_k h_k`` in place of ``a_k``, for power-gain
        factors ``h`` of shape ``[..., K]`` (:meth:`spinlib.emulator.fading.Fading.draw`). The one faded-rate
        model: the testbed's links, the per-round problem and the multi-user player use it."""
        return cls(scenario.radio.rate_model, scenario.snr_scale_hz * np.asarray(h, dtype=float),
                   scenario.radio.bandwidth_hz)

    def rate(self, b, idx=slice(None)):
        """``R_k(b_k)`` [bit/s] for ``b`` of shape ``[..., K]`` (or the users ``idx``)."""
        if self.kind == "shannon":
            return shannon_rate(b, self.a[idx])
        return linear_rate(b, self.c[idx])

    def derivative(self, b, idx=slice(None)):
        if self.kind == "shannon":
            return shannon_rate_derivative(b, self.a[idx])
        return np.broadcast_to(self.c[idx], np.shape(b)).astype(float)

    def second_derivative(self, b, idx=slice(None)):
        if self.kind == "shannon":
            return shannon_rate_second_derivative(b, self.a[idx])
        return np.zeros(np.shape(b))

    def max_rate(self, idx=slice(None)):
        """Largest achievable rate [bit/s] (``inf`` for the linear model)."""
        if self.kind == "shannon":
            return shannon_rate_limit(self.a[idx])
        return np.full(np.shape(self.a[idx]), np.inf)

    def bandwidth_for_rate(self, rate, idx=slice(None)):
        """Inverse ``R_k^{-1}(rate)`` [Hz]; ``inf`` where unreachable."""
        if self.kind == "shannon":
            return shannon_bandwidth_for_rate(rate, self.a[idx])
        rate = np.asarray(rate, dtype=float)
        return rate / self.c[idx]


# ----- downlink (paper 2) ----------------------------------------------------------------------
def downlink_rate(scenario, p, n_dl, fading=1.0):
    """``r_k = w log2(1 + p_k h g_k / (N0 w))`` [bit/s] with ``w = W / n_DL`` (broadcasting).

    The DL-mode devices share the band ``W`` (``scenario.downlink.bandwidth_hz``) equally; ``p``
    [W] is the base-station power given to each, ``g_k`` the (reciprocal) channel gain and
    ``fading`` the power-gain factor ``h`` of the round (1 for the average channel).
    """
    W = scenario.downlink.bandwidth_hz
    w = W / np.maximum(np.asarray(n_dl, dtype=float), 1.0)
    a_w = scenario.gain / scenario.radio.noise_psd_w_per_hz
    return w * np.log1p(np.asarray(p, dtype=float) * a_w * fading / w) / LN2
