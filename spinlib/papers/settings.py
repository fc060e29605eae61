"""The papers' published settings as presets, each number cited to its section or table, and cell generators.

Every value below is printed in the paper named beside it, except where a comment says **ours** (a value the
paper does not state, chosen by us and said so wherever it is used).

Paper 1, Multi-SPIN (arXiv 2606.04581, Sec. VI-A): Table I's acceptance per task and pair; Fig. 5's affine
verification fits on an A100 (read as ``T^fix``, ``T^lin``; the subscripts are lost in the text); ``K = 20``,
``B = 10 MHz``, ``|V^| = 1024``, ``Q_B = 16``, ``N0 = 1e-10 W``, ``H_bar_k ~ U(0.2, 0.5)``, ``h_k ~ CN(0, H_bar_k)``
per round, device times ``U[0.85, 1.15] x T_bar^S``, ``L_max = 25``. Not stated: ``T_bar^S`` (measured on an
Apple M4 Pro GPU), the transmit power ``p`` and Qwen3.5's vocabulary; the device time and power are calibrated
(notebook 11) and the index bits taken as 18 (any vocabulary of 131,073-262,144 tokens; **ours**).

Paper 2, Uplink or Downlink? (arXiv 2608.29618, Sec. VI-A): Table I's acceptance; verification fits
``T^ver_0``, ``T^ver_1`` on an A100; draft times 15.2 / 19.6 ms per token on the same A100, each device scaled by
``U[1, 1.15]``; ``V = 151,665``, ``V_eff = 1024``, ``Q = 16``; ``K = 20``, ``B = 10 MHz``; path loss -30 dB at
1 m with exponent 3.5, distances ``U[100, 500]`` m, Rayleigh fading; ``N0^ser = -169`` and ``N0^dev = -167``
dBm/Hz; ``P^ul = 10`` dBm in Figs. 7-8; ``N_SAA = 1000``; each device one task drawn uniformly.
"""
from __future__ import annotations

import numpy as np

from ..channel import dbm_to_w
from ..validation import ValidationError, check_int_range
from .multispin import L_MAX, MultiSpinCell
from .uplink_downlink import GAMMA_MAX, ReactiveCell, exchange_bits

# ------------------------------------------------------------------------------------------------ paper 1
MULTISPIN_PAIRS = {
    # Table I (alpha by task, mean over prompts) and Fig. 5 (T^fix, T^lin [s] on an A100)
    "llama2": {"alpha": {"MBPP+": 0.8582, "GSM8K": 0.7390, "MT-Bench": 0.7393, "SQuAD": 0.7126},
               "t_fix_s": 22.68e-3, "t_lin_s": 12.72e-3, "vocab_size": 32_000,
               "source": "paper 1 Table I (TinyLlama-1.1B -> Llama-2-7B), Fig. 5(a)"},
    "qwen3.5": {"alpha": {"MBPP+": 0.8100, "GSM8K": 0.9340, "MT-Bench": 0.9318, "SQuAD": 0.9650},
                "t_fix_s": 75.07e-3, "t_lin_s": 19.78e-3, "vocab_size": 248_320,  # vocabulary: ours (18 index bits)
                "source": "paper 1 Table I (Qwen3.5-0.8B -> Qwen3.5-27B), Fig. 5(b)"},
}
MULTISPIN_RADIO = {"num_users": 20, "bandwidth_hz": 10e6, "retained": 1024, "bits_per_prob": 16,
                   "noise_w": 1e-10, "gain_mean_range": (0.2, 0.5), "draft_spread": (0.85, 1.15), "L_max": L_MAX,
                   "source": "paper 1 Sec. VI-A"}


def multispin_bits(pair: str) -> float:
    """``Q^tok = |V^| (Q_B + ceil(log2 V))`` [bit] (9) of ``pair``."""
    spec = _pair(MULTISPIN_PAIRS, pair)
    return float(MULTISPIN_RADIO["retained"] * (MULTISPIN_RADIO["bits_per_prob"]
                                                + int(np.ceil(np.log2(spec["vocab_size"])))))


def _pair(table: dict, pair: str) -> dict:
    if pair not in table:
        raise ValidationError(f"pair must be one of {sorted(table)}, got {pair!r}")
    return table[pair]


def multispin_devices(rng: np.random.Generator, pair: str, K: int, draft_ref_s: float) -> dict:
    """One population of ``K`` devices in paper 1's setting: a task per device (uniform over Table I's four), its
    ``alpha``, ``T^S_k = T_bar^S U[0.85, 1.15]`` and ``H_bar_k ~ U(0.2, 0.5)``. Arrays ``[K]``."""
    spec = _pair(MULTISPIN_PAIRS, pair)
    check_int_range("K", K, 1, 100_000)
    tasks = sorted(spec["alpha"])
    task = rng.integers(len(tasks), size=K)
    lo, hi = MULTISPIN_RADIO["draft_spread"]
    g_lo, g_hi = MULTISPIN_RADIO["gain_mean_range"]
    return {"alpha": np.array([spec["alpha"][tasks[i]] for i in task]),
            "draft_s": draft_ref_s * rng.uniform(lo, hi, size=K),
            "gain_mean": rng.uniform(g_lo, g_hi, size=K),
            "task": [tasks[i] for i in task]}


def multispin_round(rng: np.random.Generator, pair: str, devices: dict, tx_power_w: float,
                    bandwidth_hz: float | None = None) -> MultiSpinCell:
    """One round on a fresh block-fading channel: ``H_k = |h_k|^2``, ``h_k ~ CN(0, H_bar_k)`` (exponential power),
    ``r_k = log2(1 + p H_k / N0)``."""
    spec = _pair(MULTISPIN_PAIRS, pair)
    H = devices["gain_mean"] * rng.exponential(size=len(devices["alpha"]))
    r = np.log2(1.0 + tx_power_w * H / MULTISPIN_RADIO["noise_w"])
    return MultiSpinCell(devices["draft_s"], devices["alpha"], r,
                         MULTISPIN_RADIO["bandwidth_hz"] if bandwidth_hz is None else bandwidth_hz,
                         multispin_bits(pair), spec["t_fix_s"], spec["t_lin_s"], MULTISPIN_RADIO["L_max"])


# ------------------------------------------------------------------------------------------------ paper 2
UPDOWN_PAIRS = {
    # Table I (alpha by task), Sec. VI-A (verification fits and draft times on an A100)
    "qwen2.5": {"alpha": {"HumanEval": 0.9453, "GSM8K": 0.8580, "MT-Bench": 0.8509, "IFEval": 0.8816},
                "t0_s": 42.8e-3, "t1_s": 7.6e-3, "draft_s": 15.2e-3,
                "source": "paper 2 Table I (Qwen2.5-0.5B -> Qwen2.5-14B), Sec. VI-A"},
    "deepseek-r1": {"alpha": {"HumanEval": 0.8691, "GSM8K": 0.8618, "MT-Bench": 0.8221, "IFEval": 0.8323},
                    "t0_s": 69.3e-3, "t1_s": 9.1e-3, "draft_s": 19.6e-3,
                    "source": "paper 2 Table I (DeepSeek-R1-Distill-Qwen 1.5B -> 32B), Sec. VI-A"},
}
UPDOWN_RADIO = {"num_users": 20, "bandwidth_hz": 10e6, "vocab_size": 151_665, "retained": 1024,
                "bits_per_prob": 16, "path_loss_1m_db": -30.0, "path_loss_exponent": 3.5,
                "distance_m": (100.0, 500.0), "n0_ser_dbm_per_hz": -169.0, "n0_dev_dbm_per_hz": -167.0,
                "p_ul_dbm": 10.0, "draft_spread": (1.0, 1.15), "gamma_max": GAMMA_MAX,
                "source": "paper 2 Sec. VI-A"}


def updown_devices(rng: np.random.Generator, pair: str, K: int) -> dict:
    """One population of ``K`` devices in paper 2's setting: a task each (uniform over Table I's four), its
    ``alpha``, ``T^dft_k = T^dft U[1, 1.15]``, a distance ``U[100, 500]`` m and its path loss (linear). Arrays [K]."""
    spec = _pair(UPDOWN_PAIRS, pair)
    check_int_range("K", K, 1, 100_000)
    tasks = sorted(spec["alpha"])
    task = rng.integers(len(tasks), size=K)
    d = rng.uniform(*UPDOWN_RADIO["distance_m"], size=K)
    pl_db = UPDOWN_RADIO["path_loss_1m_db"] - 10.0 * UPDOWN_RADIO["path_loss_exponent"] * np.log10(d)
    return {"alpha": np.array([spec["alpha"][tasks[i]] for i in task]),
            "draft_s": spec["draft_s"] * rng.uniform(*UPDOWN_RADIO["draft_spread"], size=K),
            "distance_m": d, "path_gain": 10.0 ** (pl_db / 10.0), "task": [tasks[i] for i in task]}


def updown_round(rng: np.random.Generator, pair: str, devices: dict, p_ul_w: float, p_dl_w: float,
                 bandwidth_hz: float | None = None) -> ReactiveCell:
    """One round on a fresh Rayleigh channel (``|h_k|^2 = path gain x Exp(1)``, the same up and down)."""
    spec = _pair(UPDOWN_PAIRS, pair)
    K = len(devices["alpha"])
    gain = devices["path_gain"] * rng.exponential(size=K)
    return ReactiveCell(devices["draft_s"], devices["alpha"], gain,
                        UPDOWN_RADIO["bandwidth_hz"] if bandwidth_hz is None else bandwidth_hz,
                        np.full(K, p_ul_w), p_dl_w, dbm_to_w(UPDOWN_RADIO["n0_ser_dbm_per_hz"]),
                        dbm_to_w(UPDOWN_RADIO["n0_dev_dbm_per_hz"]),
                        exchange_bits(UPDOWN_RADIO["vocab_size"], UPDOWN_RADIO["retained"],
                                      UPDOWN_RADIO["bits_per_prob"]),
                        spec["t0_s"], spec["t1_s"], UPDOWN_RADIO["gamma_max"])


# ------------------------------------------------------------------------------------------------ UCB-SpecStop
#: Table IV's mean per-token costs [s] and Table V's geometric acceptance (k >= 2) of UCB-SpecStop's testbed
SPECSTOP_SUITES = {
    "qwen": {"c_d_s": 85.14e-3, "c_v_s": 8.09e-3, "alpha_geo": 0.828,
             "source": "UCB-SpecStop Tables IV-V (Qwen2.5-0.5B -> Qwen2.5-7B-Instruct)"},
    "llama": {"c_d_s": 67.37e-3, "c_v_s": 8.37e-3, "alpha_geo": 0.845,
              "source": "UCB-SpecStop Tables IV-V (Llama-3.2-1B -> Llama-3.1-8B-Instruct)"},
}
#: Table I: the delay grid [ms] and the measured best k at each delay
SPECSTOP_TABLE1 = {"delays_ms": (0, 5, 20, 40, 55, 83, 111, 150),
                   "qwen": (1, 1, 1, 1, 1, 2, 3, 4), "llama": (1, 1, 1, 1, 1, 1, 4, 7),
                   "qwen_geom": (1, 1, 1, 1, 1, 2, 2, 3), "llama_geom": (1, 1, 1, 1, 1, 2, 3, 3)}


def specstop_critical_delay(c_d: float, c_v: float, alpha: float) -> float:
    """Theorem 5 (9): ``d_c = (c_d + c_v)(1 + alpha) / (2 alpha^2) - (c_d + 2 c_v) / 2`` [s]."""
    return (c_d + c_v) * (1.0 + alpha) / (2.0 * alpha ** 2) - (c_d + 2.0 * c_v) / 2.0


def specstop_best_k(c_d: float, c_v: float, alpha: float, d: float, k_max: int = 64) -> int:
    """``argmin_k C(k, d)``, ``C(k, d) = [k (c_d + c_v) + 2 d + c_v] / B(k)``, ``B(k) = (1 - alpha^(k+1)) / (1 - alpha)``
    (3); the smallest minimiser."""
    k = np.arange(1, k_max + 1)
    C = (k * (c_d + c_v) + 2.0 * d + c_v) * (1.0 - alpha) / (1.0 - alpha ** (k + 1.0))
    return int(k[np.argmin(C)])


__all__ = ["MULTISPIN_PAIRS", "MULTISPIN_RADIO", "multispin_bits", "multispin_devices", "multispin_round",
           "UPDOWN_PAIRS", "UPDOWN_RADIO", "updown_devices", "updown_round", "SPECSTOP_SUITES", "SPECSTOP_TABLE1",
           "specstop_critical_delay", "specstop_best_k"]
