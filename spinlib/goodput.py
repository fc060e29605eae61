"""Goodput and its confidence interval: the one definition every simulator of rounds uses.

Goodput is a ratio, tokens over time: ``G = sum_r N_r / sum_r T_r`` [token/s] over the rounds played
(synchronous: all users' tokens over the rounds' durations), or ``G = sum_k G_k`` with each user's
tokens over its own elapsed time (asynchronous rounds). The testbed's clocks (:mod:`spinlib.emulator.clock`)
estimate it here, and through them the Monte Carlo check of the closed form
(:func:`spinlib.emulator.montecarlo.simulate_rounds`) and the multi-user player. With i.i.d. pairs ``(N_r, T_r)`` over rounds the
estimator ``G = sum N_r / sum T_r`` is asymptotically normal with standard error

    se(G) = std(N_r - G T_r) / (sqrt(n) mean(T_r))

(delta method). With deterministic round times (a static channel) it is the normal interval of the
mean of ``N_r / T``; under Markov fading, whose rounds are correlated, it is approximate.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class GoodputEstimate:
    """A goodput measured over played rounds and its confidence interval: the part every result of a
    round simulator shares (the testbed's :class:`~spinlib.emulator.clock.ClockResult`, which the Monte
    Carlo check returns too, and :class:`~spinlib.emulator.testbed.EmulationResult`,
    the multi-user player's :class:`~spinlib.online.replan.ReplanResult`), computed by
    :func:`goodput_interval` or :func:`goodput_sum_interval`.

    goodput_tokens_per_s : float
        Tokens over time [token/s] (module docstring).
    ci_low, ci_high : float
        Its interval [token/s] (``ci_low <= goodput_tokens_per_s <= ci_high``; NaN when fewer than two
        rounds were played, as a real run that stopped early may: then :meth:`covers` is False).
    """

    goodput_tokens_per_s: float
    ci_low: float
    ci_high: float

    def covers(self, value: float) -> bool:
        """Whether ``value`` [token/s] lies in the interval (e.g. the analysis' prediction)."""
        return bool(self.ci_low <= value <= self.ci_high)


def goodput_interval(num: np.ndarray, den: np.ndarray, confidence: float) -> tuple[float, float, float]:
    """``G = sum num / sum den`` and its delta-method interval over i.i.d. pairs.

    Parameters
    ----------
    num, den : float arrays, shape [n]
        Per-round tokens and durations [s].
    confidence : float
        Two-sided level in (0, 1).

    Returns
    -------
    (G, low, high) : floats [token/s]
        ``G -+ z se(G)``, ``z = Phi^{-1}(1/2 + confidence/2)``.
    """
    from scipy.stats import norm

    n = num.size
    G = num.sum() / den.sum()
    resid = num - G * den
    half = norm.ppf(0.5 + confidence / 2) * resid.std(ddof=1) / (np.sqrt(n) * den.mean())
    return float(G), float(G - half), float(G + half)


def goodput_sum_interval(num: np.ndarray, den: np.ndarray, total_num: np.ndarray, total_den: np.ndarray,
                       confidence: float) -> tuple[float, float, float]:
    """``G = sum_k G_k``, ``G_k = total_num_k / total_den_k``, with a delta-method interval.

    Users are independent, so the variances add:
    ``var(G) = sum_k var(N_rk - G_k T_rk) / (R mean_r(T_rk)^2)``.

    Parameters
    ----------
    num, den : float arrays, shape [R, K]
        Per-round tokens and durations [s] of every user.
    total_num, total_den : float arrays, shape [K]
        Each user's tokens and elapsed time [s] (the clock's, which may differ from
        ``den.sum(0)`` by rounding).
    confidence : float
        Two-sided level in (0, 1).

    Returns
    -------
    (G, low, high) : floats [token/s]
    """
    from scipy.stats import norm

    R, K = num.shape
    z = norm.ppf(0.5 + confidence / 2)
    var = 0.0
    for k in range(K):
        g = total_num[k] / total_den[k]
        resid = num[:, k] - g * den[:, k]
        var += resid.var(ddof=1) / (R * den[:, k].mean() ** 2)
    half = z * math.sqrt(var)
    G = float((total_num / total_den).sum())
    return G, G - half, G + half


__all__ = ["GoodputEstimate", "goodput_interval", "goodput_sum_interval"]
