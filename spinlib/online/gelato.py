"""GELATO (arXiv 2605.10124): throughput under a long-term energy budget (our reconstruction).

Outer loop (drift-plus-penalty with an energy virtual queue ``Z``, per user)::

    L_ref(t) = argmax_{1 <= L <= L_max}  V N(L) / T(L, R_t) - Z(t) E(L, R_t)
    Z(t+1)   = max(Z(t) + E(t) - E_bar, 0)

with ``N(L) = (1 - a^(L+1)) / (1 - a)`` from the running estimate ``a`` of the acceptance
(accepted drafts over accepted drafts plus rejections, a Beta(1, 1) prior; a round whose drafts
were all accepted is censored), ``T(L, R) = L (t_d + S / R + t1) + t0 + t1 + D_hat`` on the
current uplink rate ``R_t`` (known at the start of the round) and the running mean delay, and
``E(L, R)`` the device energy (:class:`spinlib.online.energy.EnergyModel`). Inner loop: drafting
stops before a token whose draft entropy ``H(q_i)`` exceeds ``eta`` (the first token is always
drafted). Standard drift-plus-penalty arguments give a time-average throughput within
``O(1/V)`` of the best energy-feasible policy and a queue (energy debt) of ``O(V)``.

Its two halves: **lyapunov-only** (``eta = inf``) and **entropy-only** (``L_ref = L_max``, no queue).
"""
from __future__ import annotations

import math

import numpy as np

from ..decision import never_stops
from ..roundcost import user_round_time
from ..validation import ValidationError, check_positive
from .anchors import first_true
from .registry import Controller, Env, register_controller


def _check_V(V) -> float:
    """``float(V)``, or one line for bools, strings, NaN, infinities, integers beyond floats and V <= 0."""
    try:
        return check_positive("V", V)
    except ValidationError as e:
        raise ValidationError(f"V must be a finite number > 0 ({e})") from None


def _check_eta(eta) -> float:
    if isinstance(eta, bool) or not isinstance(eta, (int, float)) or math.isnan(eta) or eta < 0:
        raise ValidationError(f"eta must be a number >= 0 [nat] (inf: no early exit), got {eta!r}")
    return float(eta)


@register_controller("gelato", "drift-plus-penalty reference length with an energy queue + entropy early exit",
                     family="gelato")
class Gelato(Controller):
    def __init__(self, env: Env, V: float = 10.0, eta: float = 2.0):
        super().__init__(env)
        self.V = _check_V(V)
        self.eta = _check_eta(eta)
        if not (env.energy_budget_j >= 0):
            raise ValidationError(f"energy_budget_j must be >= 0, got {env.energy_budget_j!r}")
        K = env.K
        self.Z = np.zeros(K)
        self.succ = np.zeros(K)
        self.fail = np.zeros(K)
        self.d_sum, self.d_n = np.full(K, env.mean_delay_s), np.ones(K)
        self.L = np.arange(1, env.L_max + 1)[None, :]

    def alpha_hat(self) -> np.ndarray:
        return (self.succ + 1.0) / (self.succ + self.fail + 2.0)

    def choose(self, ctx):
        env = self.env
        a = np.minimum(self.alpha_hat(), 1 - 1e-9)[:, None]
        N = (1 - a ** (self.L + 1)) / (1 - a)
        up = self.L * env.bits_per_token / ctx.rate[:, None]
        D = (self.d_sum / self.d_n)[:, None]
        wait = env.t0 + env.t1 * (self.L + 1) + D
        T = user_round_time(self.L * env.t_d, up, wait)
        E = env.energy.round_energy(self.L, up, wait)
        obj = self.V * N / T - self.Z[:, None] * E
        return np.argmax(obj, axis=1) + 1

    def stop(self, ctx, L_ref):
        if math.isinf(self.eta):
            return L_ref
        high = ctx.entropy[:, 1:] > self.eta  # token i+1 too uncertain: draft i
        return np.minimum(first_true(high, self.env.L_max), L_ref)

    def update(self, out):
        self.Z = np.maximum(self.Z + out.E - self.env.energy_budget_j, 0.0)
        self.succ += out.A
        self.fail += out.A < out.L
        self.d_sum += out.D
        self.d_n += 1


@register_controller("lyapunov-only", "GELATO's outer loop alone (no entropy exit)", family="gelato")
class LyapunovOnly(Gelato):
    def __init__(self, env: Env, V: float = 10.0):
        super().__init__(env, V=V, eta=math.inf)

    @never_stops
    def stop(self, ctx, L_ref):
        """``L_ref``: with ``eta = inf`` GELATO's entropy exit never fires (so this reads no observable)."""
        return L_ref


@register_controller("entropy-only", "GELATO's entropy early exit alone (L_ref = L_max, no energy queue)",
                     family="gelato")
class EntropyOnly(Controller):
    def __init__(self, env: Env, eta: float = 2.0):
        super().__init__(env)
        self.eta = _check_eta(eta)

    def stop(self, ctx, L_ref):
        high = ctx.entropy[:, 1:] > self.eta
        return np.minimum(first_true(high, self.env.L_max), L_ref)


__all__ = ["Gelato", "LyapunovOnly", "EntropyOnly"]
