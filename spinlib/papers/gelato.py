"""GELATO as written: "GELATO: Generative Entropy- and Lyapunov-based Adaptive Token Offloading for
Device-Edge Speculative LLM Inference" (Tang, Sun, Chen, Ding, Ai, arXiv 2605.10124).

**The paper's model** (Sec. II): one device drafts with a small model and uploads a top-p compressed draft
to one edge server, which verifies greedily (the first mismatch ends the step; one bonus token). Per step
``k`` with draft length ``gamma`` and context length ``L_k``::

    F_k   = N gamma [6 d_m^2 + 4 (L_k + gamma/2) d_m + 2 d_m^2 + 4 d_m d_f]       (1)   [FLOP]
    T^D   = F_k / f^D,   E^D = p^D T^D                                               [s], [J]
    D_k   = sum_{i <= gamma} |S_i| (b_prob + b_index)                                (2)   [bit]
    r^U   = B log2(1 + p^U h_k / (N0 B)),   T^U = D_k / r^U,   E^U = p^U T^U             [bit/s], [s], [J]
    E_k   = E^D + E^U                                                                (3)   [J]
    T_k   = T^D + T^U + T^LLM                                                        (4)   [s]
    P1:  max (1/K) sum_k N_k / T_k   s.t.  (1/K) sum_k E_k <= E_bar,  gamma in {1..gamma_0}   (5)

``T_k`` is :func:`spinlib.roundcost.user_round_time` (draft, upload, the server's wait ``T^LLM``).

**The paper's algorithm** (Sec. III, Algorithm 1): the surrogate ``E[N](gamma) = (1 - rho_0^(gamma+1)) /
(1 - rho_0)`` (6) (:func:`spinlib.roundcost.iid_expected_tokens`); the energy queue ``Q_{k+1} = [Q_k + E_k -
E_bar]^+`` (7); each step the budget ``gamma~ = argmax_gamma V E[N](gamma)/T(gamma) - Q_k E(gamma)`` (8) by
exhaustive search (:func:`choose_budget`); then drafting stops early by the entropy leaky bucket ``Theta_i =
max(0, Theta_{i-1} + H_i - H_th)`` (12), ``gamma* = max{j <= gamma~ : Theta_i <= Theta_th, i <= j}`` (13)
(:func:`early_exit_length`), with ``H_th = phi^{-1}(rho_0)`` (11) and the paper's fitted ``phi(H) = exp(-0.35
H)`` (Fig. 2). **Baseline**: static SD with a fixed ``gamma`` (Sec. IV; the paper plots 5, 7 and 9).

**Settings** (Sec. IV, Table I): Qwen2.5-0.5B drafting for Qwen2.5-7B on GSM8K, ``rho_0 = 0.9``, ``N0 =
-174`` dBm/Hz, ``f^D = 40`` GFLOPS, ``p^D = 12`` W, ``p^U = 23`` dBm, ``E_bar = 1.2`` J, ``gamma_0 = 15``,
``Theta_th = 1.2 H_th`` (our reading of a garbled Table I entry), top-p ``0.99995``, ``T^LLM = 100`` ms, ``B`` in
1-10 MHz, averages over 1000 simulation rounds; path loss and Rayleigh fading. **Ours** (the text does not state
them, and every figure made with them says so): the weight ``V`` (Fig. 5 does not give it; 10 here, one of Fig.
4's two), the 1000 rounds read as one continuous run of 1000 steps (the context grows with every step), the
drafter's shape (Qwen2.5-0.5B's published configuration: 24 layers, ``d_m = 896``, ``d_f = 4864``), the prompt's
context (128 tokens), ``b_prob = 16`` and ``b_index = 18`` bits (``ceil(log2 151,665)``), a fixed top-p set
size ``|S_i|`` (:attr:`GelatoSetting.topp_set`), the distance (200 m) and path loss ``128.1 + 37.6 log10(d /
km)`` dB, per-token entropies i.i.d. exponential with the mean that makes ``E[phi(H)] = rho_0``, token ``i``
accepted with probability ``phi(H_i)``, at least one token drafted when the first entropy already exceeds the
bucket, and a step's energy counted on the transmitted length. Static SD at top-p ``0.99998`` (one of the
paper's curves) needs a second set size and is not modelled.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..channel import db_to_linear, dbm_to_w, path_loss_db, shannon_rate
from ..roundcost import iid_expected_tokens, user_round_time
from ..validation import ValidationError, check_int_range, check_positive

#: phi(H) = exp(-PHI_SLOPE H): the paper's fitted map from a draft token's entropy [nat] to its acceptance (Fig. 2)
PHI_SLOPE = 0.35


@dataclass(frozen=True)
class GelatoSetting:
    """GELATO's setting: the paper's Table I and Sec. IV, and **our** choices where the text is silent
    (module docstring). Times [s], energies [J], powers [W], bandwidth [Hz]."""

    rho0: float = 0.9                  # Sec. IV: nominal acceptance
    noise_dbm_hz: float = -174.0       # Table I
    device_flops: float = 40e9         # Table I, f^D
    draft_power_w: float = 12.0        # Table I, p^D
    tx_power_dbm: float = 23.0         # Table I, p^U
    energy_budget_j: float = 1.2       # Table I, E_bar per step
    gamma_max: int = 15                # Table I, gamma_0
    theta_factor: float = 1.2          # Table I, Theta_th = 1.2 H_th
    t_llm_s: float = 0.100             # Sec. IV, Fig. 5(a, b)
    layers: int = 24                   # ours: Qwen2.5-0.5B's published configuration
    d_model: int = 896                 # ours: idem
    d_ff: int = 4864                   # ours: idem
    prompt_tokens: int = 128           # ours
    bits_prob: int = 16                # ours
    bits_index: int = 18               # ours: ceil(log2 151,665)
    topp_set: int = 4000               # ours: |S_i| at top-p 0.99995 (Fig. 3 bounds it only to 1..1e5)
    distance_m: float = 200.0          # ours

    def __post_init__(self):
        if not 0 < self.rho0 < 1:
            raise ValidationError(f"rho0 must be in (0, 1), got {self.rho0!r}")
        for name in ("device_flops", "draft_power_w", "energy_budget_j", "t_llm_s", "theta_factor", "distance_m"):
            check_positive(name, getattr(self, name))
        for name, lo in (("gamma_max", 1), ("layers", 1), ("d_model", 1), ("d_ff", 1), ("prompt_tokens", 0),
                         ("bits_prob", 1), ("bits_index", 1), ("topp_set", 1)):
            check_int_range(name, getattr(self, name), lo)

    @property
    def h_threshold(self) -> float:
        """``H_th = phi^{-1}(rho_0) = ln(1/rho_0) / 0.35`` [nat] (11)."""
        return math.log(1.0 / self.rho0) / PHI_SLOPE

    @property
    def entropy_mean(self) -> float:
        """Mean of the (ours) exponential entropy: ``E[exp(-0.35 H)] = 1 / (1 + 0.35 m) = rho_0`` [nat]."""
        return (1.0 / self.rho0 - 1.0) / PHI_SLOPE

    @property
    def mean_channel_gain(self) -> float:
        """Mean power gain of the (ours) distance and path loss [-]."""
        return float(db_to_linear(-path_loss_db(self.distance_m)))


def draft_flops(s: GelatoSetting, gamma, context) -> np.ndarray:
    """``F = N gamma [6 d_m^2 + 4 (L + gamma/2) d_m + 2 d_m^2 + 4 d_m d_f]`` [FLOP] (1)."""
    g = np.asarray(gamma, dtype=float)
    d = float(s.d_model)
    return s.layers * g * (6 * d * d + 4 * (np.asarray(context, dtype=float) + g / 2) * d + 2 * d * d
                           + 4 * d * s.d_ff)


def step_cost(s: GelatoSetting, gamma, context, gain, bandwidth_hz: float, t_llm_s: float):
    """``(T, E)`` of a step [s], [J] (3)-(4) for draft lengths ``gamma`` (broadcasting), the context ``L_k``, the
    power gain ``h_k`` and the band ``B``."""
    g = np.asarray(gamma, dtype=float)
    t_draft = draft_flops(s, g, context) / s.device_flops
    bits = g * s.topp_set * (s.bits_prob + s.bits_index)
    p_tx = float(dbm_to_w(s.tx_power_dbm))
    rate = shannon_rate(bandwidth_hz, p_tx * gain / float(dbm_to_w(s.noise_dbm_hz)))
    t_up = bits / rate
    return user_round_time(t_draft, t_up, t_llm_s), s.draft_power_w * t_draft + p_tx * t_up


def choose_budget(s: GelatoSetting, queue_j: float, V: float, context, gain, bandwidth_hz: float,
                  t_llm_s: float) -> int:
    """The budget ``gamma~`` of (8): ``argmax_{gamma in 1..gamma_0} V E[N](gamma) / T(gamma) - Q E(gamma)`` by
    exhaustive search (Algorithm 1, lines 4-8: the first maximiser)."""
    g = np.arange(1, s.gamma_max + 1)
    T, E = step_cost(s, g, context, gain, bandwidth_hz, t_llm_s)
    utility = V * iid_expected_tokens(s.rho0, g) / T - queue_j * E
    return int(g[int(np.argmax(utility))])


def early_exit_length(entropies, h_threshold: float, theta_threshold: float) -> int:
    """``gamma* = max{j : Theta_i <= Theta_th for all i <= j}`` with ``Theta_i = max(0, Theta_{i-1} + H_i -
    H_th)``, ``Theta_0 = 0`` (12)-(13), over the budget's entropies ``H_1..H_gamma~``; at least 1 (ours)."""
    theta = 0.0
    for j, h in enumerate(np.asarray(entropies, dtype=float)):
        theta = max(0.0, theta + h - h_threshold)
        if theta > theta_threshold:
            return max(j, 1)
    return max(len(entropies), 1)


def run(s: GelatoSetting, policy: str, *, bandwidth_hz: float, steps: int = 1000, seed: int = 0,
        V: float = 10.0, gamma: int = 7, t_llm_s: float | None = None) -> dict:
    """One device for ``steps`` steps under ``policy`` (``"gelato"``: Algorithm 1 with weight ``V``;
    ``"budget-only"``: its outer loop alone, the budget of (8) drafted in full (no entropy exit: an ablation
    of ours); ``"static"``: a fixed ``gamma``, no early exit); every draw from
    ``numpy.random.default_rng(seed)`` (the same channel and entropy streams for every policy of a seed).

    Returns
    -------
    dict
        ``throughput`` the paper's objective (5a), the mean of ``N_k / T_k`` [token/s]; ``tokens_per_s``
        ``sum N / sum T``; ``mean_tokens`` per step; ``queue_changed_share`` the share of steps whose budget
        the energy queue changed (against ``Q = 0``; 0 for static SD); ``energy_per_token_j`` ``sum E / sum N``; ``mean_energy_j`` per step (against
        ``E_bar``); ``mean_gamma``; ``final_queue_j``.
    """
    if policy not in ("gelato", "budget-only", "static"):
        raise ValidationError(f"policy must be 'gelato', 'budget-only' or 'static', got {policy!r}")
    check_positive("bandwidth_hz", bandwidth_hz)
    check_int_range("steps", steps, 1, 10**6)
    check_int_range("gamma", gamma, 1, s.gamma_max)
    check_positive("V", V)
    t_llm = s.t_llm_s if t_llm_s is None else check_positive("t_llm_s", t_llm_s)
    rng = np.random.default_rng(seed)
    gains = s.mean_channel_gain * rng.exponential(1.0, steps)            # Rayleigh power gain
    H = rng.exponential(s.entropy_mean, (steps, s.gamma_max))             # per-token entropies (ours)
    U = rng.random((steps, s.gamma_max))                                  # acceptance draws
    h_th, th_th = s.h_threshold, s.theta_factor * s.h_threshold
    context, queue = float(s.prompt_tokens), 0.0
    ratio = N_sum = T_sum = E_sum = g_sum = 0.0
    changed = 0
    for k in range(steps):
        if policy == "static":
            g = gamma
        else:
            budget = choose_budget(s, queue, V, context, gains[k], bandwidth_hz, t_llm)
            changed += budget != choose_budget(s, 0.0, V, context, gains[k], bandwidth_hz, t_llm)
            g = early_exit_length(H[k, :budget], h_th, th_th) if policy == "gelato" else budget
        accepted = np.exp(-PHI_SLOPE * H[k, :g]) > U[k, :g]
        n = int(np.argmin(accepted)) if not accepted.all() else g
        N = n + 1
        T, E = step_cost(s, g, context, gains[k], bandwidth_hz, t_llm)
        T, E = float(T), float(E)
        queue = max(queue + E - s.energy_budget_j, 0.0)
        context += N
        ratio += N / T
        N_sum, T_sum, E_sum, g_sum = N_sum + N, T_sum + T, E_sum + E, g_sum + g
    return {"throughput": ratio / steps, "tokens_per_s": N_sum / T_sum, "mean_tokens": N_sum / steps,
            "queue_changed_share": changed / steps, "energy_per_token_j": E_sum / N_sum,
            "mean_energy_j": E_sum / steps, "mean_gamma": g_sum / steps, "final_queue_j": queue}


__all__ = ["PHI_SLOPE", "GelatoSetting", "draft_flops", "step_cost", "choose_budget", "early_exit_length", "run"]
