"""Random BALANCE instances from the roofline presets (our assumptions, stated per field).

Server (default): Llama-2-7B (fp16) with the Llama-68M draft on one GPU of the roofline table
(:data:`spinlib.presets.EDGE_GPUS`, default the NVIDIA L4 with 24 GB), step times from
:func:`spinlib.presets.roofline_server`: ``t0 = weight bytes / (bandwidth eta_mem)``,
``t1 = 2 params / (FLOP/s eta_flop)`` per token position, for both models.

KV cache per token (model configs): Llama-2-7B, 32 layers x 4,096 hidden x K and V x 2 bytes =
512 KiB; Llama-68M, 2 layers x 768 x 2 x 2 bytes = 6 KiB. User k holds ``prompt_k + n_k``
positions in AD, and ``prompt_k + n_k + L`` positions in both models' caches in SD.

Users (our assumptions): prompt ``~ U{prompt_tokens}``, output ``n_k ~ U{output_tokens}``,
``alpha_k ~ U(alpha_range)``, deadline ``T_k = c_k + n_k d_k`` with the per-token budget
``d_k ~ U(token_budget_ms)``. All randomness flows from ``seed`` (an int or a Generator).
"""
from __future__ import annotations

import numpy as np

from ..presets import EDGE_GPUS, MODELS, roofline_server
from ..validation import ValidationError, check_int_range
from .model import BalanceInstance, BalanceServer, BalanceUser

KV_BYTES_PER_TOKEN = {  # 2 (K and V) x layers x hidden x bytes per value
    "llama-2-7b-fp16": 2 * 32 * 4096 * 2,
    "llama-68m-fp16": 2 * 2 * 768 * 2,
}
GPU_MEMORY_BYTES = {"nvidia-l4": 24e9, "nvidia-a100-80gb": 80e9}  # datasheets


def roofline_balance_server(target: str = "llama-2-7b-fp16", draft: str = "llama-68m-fp16", gpu: str = "nvidia-l4",
                            memory_bytes: float | None = None, draft_length: int = 4) -> BalanceServer:
    """:class:`BalanceServer` of ``target`` + ``draft`` on ``gpu`` (roofline step times, module docstring)."""
    if gpu not in EDGE_GPUS or gpu not in GPU_MEMORY_BYTES:
        raise ValidationError(f"gpu must be one of {sorted(GPU_MEMORY_BYTES)}, got {gpu!r}")
    for name, m in (("target", target), ("draft", draft)):
        if m not in MODELS or m not in KV_BYTES_PER_TOKEN:
            raise ValidationError(f"{name} must be one of {sorted(KV_BYTES_PER_TOKEN)}, got {m!r}")
    big, small = roofline_server(target, gpu), roofline_server(draft, gpu)
    return BalanceServer(
        memory_bytes=GPU_MEMORY_BYTES[gpu] if memory_bytes is None else memory_bytes,
        large_weights_bytes=MODELS[target][0] * MODELS[target][1],
        small_weights_bytes=MODELS[draft][0] * MODELS[draft][1],
        large_t0_s=big.t0_s, large_t1_s_per_token=big.t1_s_per_token,
        small_t0_s=small.t0_s, small_t1_s_per_token=small.t1_s_per_token,
        draft_length=draft_length, name=f"{target} + {draft} on {gpu}")


def _range(name, r, lo=0.0):
    if not (isinstance(r, (tuple, list)) and len(r) == 2 and lo <= r[0] <= r[1]):
        raise ValidationError(f"{name} must be a pair (low, high) with {lo:g} <= low <= high, got {r!r}")
    return float(r[0]), float(r[1])


def random_instance(num_users: int, seed: int | np.random.Generator = 0, *,
                    memory_gb: float | None = None, gpu: str = "nvidia-a100-80gb", draft_length: int = 4,
                    prompt_tokens: tuple = (64, 2048), output_tokens: tuple = (32, 512),
                    alpha_range: tuple = (0.3, 0.9), token_budget_ms: tuple = (8.0, 40.0),
                    comm_s=None, comm_allowance_s: float | None = None) -> BalanceInstance:
    """``num_users`` random requesting users on the roofline server (module docstring).

    Parameters
    ----------
    num_users : int
        K >= 1.
    seed : int or numpy.random.Generator
    memory_gb : float, optional
        Server memory [GB] (default: the GPU's).
    token_budget_ms : (low, high)
        Per-token latency budget ``d_k`` [ms]; the deadline is ``c_k + n_k d_k``.
    comm_s : array_like [K], optional
        Communication times ``c_k`` [s] (e.g. :func:`spinlib.balance.wireless.communication_times`); default 0.
    comm_allowance_s : float, optional
        When given, the deadline is ``comm_allowance_s + n_k d_k`` whatever ``c_k`` is (the radio eats into
        it); by default it is ``c_k + n_k d_k`` (the radio never decides).
    """
    K = check_int_range("num_users", num_users, 1, 100_000)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    p_lo, p_hi = _range("prompt_tokens", prompt_tokens, 0)
    o_lo, o_hi = _range("output_tokens", output_tokens, 1)
    a_lo, a_hi = _range("alpha_range", alpha_range)
    if a_hi >= 1:
        raise ValidationError(f"alpha_range must lie in [0, 1), got {alpha_range!r}")
    d_lo, d_hi = _range("token_budget_ms", token_budget_ms)
    if d_lo <= 0:
        raise ValidationError(f"token_budget_ms must be > 0, got {token_budget_ms!r}")
    server = roofline_balance_server(gpu=gpu, memory_bytes=None if memory_gb is None else memory_gb * 1e9,
                                     draft_length=draft_length)
    prompt = rng.integers(int(p_lo), int(p_hi) + 1, K)
    n = rng.integers(int(o_lo), int(o_hi) + 1, K)
    alpha = rng.uniform(a_lo, a_hi, K)
    budget = rng.uniform(d_lo, d_hi, K) * 1e-3
    c = np.zeros(K) if comm_s is None else np.asarray(comm_s, dtype=float)
    if c.shape != (K,):
        raise ValidationError(f"comm_s must hold {K} values, got shape {c.shape}")
    if comm_allowance_s is None:
        allow = c
    elif isinstance(comm_allowance_s, (int, float)) and not isinstance(comm_allowance_s, bool) \
            and 0 <= comm_allowance_s < 1e6:
        allow = np.full(K, float(comm_allowance_s))
    else:
        raise ValidationError(f"comm_allowance_s must be a number in [0, 1e6) seconds, got {comm_allowance_s!r}")
    kv_l, kv_s = KV_BYTES_PER_TOKEN["llama-2-7b-fp16"], KV_BYTES_PER_TOKEN["llama-68m-fp16"]
    users = tuple(BalanceUser(
        output_tokens=int(n[k]), deadline_s=float(allow[k] + n[k] * budget[k]), alpha=float(alpha[k]),
        kv_ad_bytes=float(kv_l * (prompt[k] + n[k])),
        kv_sd_bytes=float((kv_l + kv_s) * (prompt[k] + n[k] + draft_length)), comm_s=float(c[k]))
        for k in range(K))
    return BalanceInstance(users, server, name=f"random K={K}",
                           meta={"seed": seed if isinstance(seed, int) else None,
                                 "prompt_tokens": prompt.tolist(), "token_budget_s": budget.tolist()})


__all__ = ["KV_BYTES_PER_TOKEN", "GPU_MEMORY_BYTES", "roofline_balance_server", "random_instance"]
