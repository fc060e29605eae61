"""Optimal stopping of drafting under communication delay (UCB-SpecStop, arXiv 2606.20591; our model).

One round of device-edge speculative decoding drafts ``L >= 1`` tokens at ``t_d`` s/token (and
uploads them at ``t_up`` s/token), the server verifies the ``L + 1`` positions in
``t_v(L) = t0 + t1 (L + 1)`` and the round pays a communication delay ``D``. Its cost is linear
in ``L``::

    C(L) = c + s L,   c = t0 + t1 + D  [s],   s = t_d + t_up + t1  [s/token]

and it commits ``N(L) = sum_{i=0}^{L} S(i)`` tokens on average, ``S(i)`` the probability that the
first ``i`` drafts are all accepted (``S(0) = 1``; ``S(i) = alpha^i`` i.i.d., or the measured
survival of the empirical-prefix variant). The per-token latency is

    J(L) = C(L) / N(L)   [s/token]                                   (controllers.md, "Chosen")

**Stopping rule (Dinkelbach form).** With ``lambda* = min_L J(L)``, ``f(L) = C(L) - lambda* N(L)``
is >= 0 with equality at the optimum, and ``f(L+1) - f(L) = s - lambda* S(L+1)`` is non-decreasing
in ``L`` because ``S`` is non-increasing: ``f`` is discretely convex, so the optimum is "draft
token ``i + 1`` while ``lambda* S(i+1) > s``". ``lambda*`` itself comes from Dinkelbach's
iteration ``lambda <- J(L(lambda))`` (finite, monotone), never from a search over ``L``
(:func:`optimal_stopping`). Ties go to the shorter length (as the brute-force argmin does).

**Critical delay.** ``L* = 1`` iff ``J(1) <= J(2)`` (convexity), i.e. ``C(1) S(2) <= s N(1)``::

    D_c = s (1 + S(1)) / S(2) - (t0 + t1 + s)                 (any survival profile)
        = s (1 + alpha - alpha^2) / alpha^2 - (t0 + t1)        (i.i.d., the closed form of controllers.md
                                                                  with s = t_d + t1)

and ``L*`` is non-decreasing in ``D`` (``lambda*`` grows with ``D`` and the rule's threshold with
``lambda``), so ``D_c`` is the flip point from 1 to 2.

**Large delay (i.i.d.).** Setting the derivative of the continuous ``J`` to zero gives
``alpha^(L+1) (c + s L) ln(1/alpha) = s (1 - alpha^(L+1))``; for ``c >> s`` this is

    L* + 1 ~ ln((c / s) ln(1/alpha)) / ln(1/alpha)           (:func:`large_delay_length`)

a logarithmic growth of the optimal length with the delay (controllers.md writes ``t_d`` for
``s``: the case ``t_up = t1 = 0``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..validation import ValidationError, check_nonnegative, check_positive


@dataclass(frozen=True)
class RoundCosts:
    """Costs of one round [s]: ``C(L) = c + s L`` (module docstring).

    Parameters
    ----------
    t_d : float
        Drafting time per token on the device [s/token], > 0.
    t0, t1 : float
        Verification time ``t0 + t1 (L + 1)`` [s, s/token], >= 0.
    D : float
        Communication (and access) delay per round [s], >= 0.
    t_up : float
        Upload time per drafted token [s/token], >= 0.
    """

    t_d: float
    t0: float = 0.0
    t1: float = 0.0
    D: float = 0.0
    t_up: float = 0.0

    def __post_init__(self) -> None:
        check_positive("t_d", self.t_d)
        for name in ("t0", "t1", "D", "t_up"):
            check_nonnegative(name, getattr(self, name))

    @property
    def c(self) -> float:
        """Fixed cost of a round ``t0 + t1 + D`` [s]."""
        return self.t0 + self.t1 + self.D

    @property
    def s(self) -> float:
        """Marginal cost of one drafted token ``t_d + t_up + t1`` [s/token]."""
        return self.t_d + self.t_up + self.t1

    def cost(self, L):
        """``C(L)`` [s]."""
        return self.c + self.s * np.asarray(L, dtype=float)


def check_survival(S, name: str = "survival") -> np.ndarray:
    """``S`` as a float array ``[L_max + 1]`` with ``S[0] = 1``, values in [0, 1], non-increasing."""
    S = np.asarray(S, dtype=float)
    if S.ndim != 1 or S.size < 2:
        raise ValidationError(f"{name} must be a 1-D array S(0..L_max) with L_max >= 1, got shape {S.shape}")
    if not np.all(np.isfinite(S)) or S.min() < 0 or S.max() > 1 or abs(S[0] - 1.0) > 1e-12:
        raise ValidationError(f"{name} must hold probabilities with S(0) = 1")
    if np.any(np.diff(S) > 1e-12):
        raise ValidationError(f"{name} must be non-increasing (a prefix survival P(first i drafts accepted))")
    return S


def iid_survival(alpha: float, L_max: int) -> np.ndarray:
    """``S(i) = alpha^i``, i = 0..L_max."""
    if not (isinstance(alpha, (int, float, np.floating)) and 0.0 <= alpha < 1.0):
        raise ValidationError(f"alpha must be in [0, 1), got {alpha!r}")
    return float(alpha) ** np.arange(L_max + 1)


def expected_tokens(S) -> np.ndarray:
    """``N(L) = sum_{i<=L} S(i)`` for L = 0..L_max."""
    return np.cumsum(np.asarray(S, dtype=float))


def per_token_latency(S, costs: RoundCosts) -> np.ndarray:
    """``J(L) = C(L) / N(L)`` [s/token] for L = 0..L_max (entry 0 is plain decoding, never chosen here)."""
    S = check_survival(S)
    L = np.arange(S.size)
    return costs.cost(L) / expected_tokens(S)


def brute_force_length(S, costs: RoundCosts, L_min: int = 1) -> tuple[int, float]:
    """``(argmin_L J(L), min J)`` over ``L_min..L_max`` by enumeration (the reference)."""
    J = per_token_latency(S, costs)
    L = L_min + int(np.argmin(J[L_min:]))
    return L, float(J[L])


def rule_length(S, lam: float, s: float, L_min: int = 1) -> int:
    """The stopping rule at ratio ``lam``: smallest ``L >= L_min`` with ``lam S(L+1) <= s`` (``L_max`` if none)."""
    S = np.asarray(S, dtype=float)
    L_max = S.size - 1
    for L in range(L_min, L_max):
        if lam * S[L + 1] <= s:
            return L
    return L_max


def optimal_stopping(S, costs: RoundCosts, L_min: int = 1, max_iter: int = 100) -> tuple[int, float]:
    """``(L*, lambda*)`` by Dinkelbach's iteration on the stopping rule (module docstring).

    Starts from ``lambda = J(L_min)`` and repeats ``L <- rule(lambda)``, ``lambda <- J(L)`` until
    ``lambda`` stops decreasing (each step lowers it strictly or ends; at most ``L_max`` steps).
    """
    S = check_survival(S)
    if not 1 <= L_min < S.size:
        raise ValidationError(f"L_min must be in [1, {S.size - 1}], got {L_min}")
    N = expected_tokens(S)
    L = L_min
    lam = float(costs.cost(L) / N[L])
    for _ in range(max_iter):
        L_new = rule_length(S, lam, costs.s, L_min)
        lam_new = float(costs.cost(L_new) / N[L_new])
        if lam_new >= lam * (1 - 1e-13):
            break
        L, lam = L_new, lam_new
    return L, lam


def critical_delay(S, costs: RoundCosts) -> float:
    """``D_c = s (1 + S(1)) / S(2) - (t0 + t1 + s)`` [s]: ``L* = 1`` for ``D <= D_c``, ``L* >= 2`` above
    (``costs.D`` is ignored). ``inf`` when ``S(2) = 0``; negative when ``L* >= 2`` even at ``D = 0``."""
    S = check_survival(S)
    if S.size < 3:
        raise ValidationError("the critical delay needs S(0..2) (L_max >= 2)")
    s = costs.s
    if S[2] == 0:
        return math.inf
    return s * (1 + S[1]) / S[2] - (costs.t0 + costs.t1 + s)


def critical_delay_iid(alpha: float, costs: RoundCosts) -> float:
    """The closed form ``D_c = s (1 + alpha - alpha^2) / alpha^2 - (t0 + t1)`` [s] (i.i.d.)."""
    if not 0.0 < alpha < 1.0:
        raise ValidationError(f"alpha must be in (0, 1), got {alpha!r}")
    return costs.s * (1 + alpha - alpha**2) / alpha**2 - (costs.t0 + costs.t1)


def large_delay_length(alpha, c, s):
    """``L* ~ ln((c / s) ln(1/alpha)) / ln(1/alpha) - 1``: the large-delay law (i.i.d.), ``c`` the
    fixed cost per round [s] and ``s`` the marginal cost per drafted token [s/token]."""
    alpha = np.asarray(alpha, dtype=float)
    k = np.log(1.0 / alpha)
    return np.log(np.asarray(c, float) / np.asarray(s, float) * k) / k - 1.0


def survival_from_accept(accept_runs, L_max: int) -> np.ndarray:
    """Empirical prefix survival ``S(i) = P(run >= i)`` from run lengths ``run[p]`` (one per start position)."""
    run = np.asarray(accept_runs)
    return np.array([1.0] + [float(np.mean(run >= i)) for i in range(1, L_max + 1)])


__all__ = ["RoundCosts", "check_survival", "iid_survival", "expected_tokens", "per_token_latency",
           "brute_force_length", "rule_length", "optimal_stopping", "critical_delay", "critical_delay_iid",
           "large_delay_length", "survival_from_accept"]
