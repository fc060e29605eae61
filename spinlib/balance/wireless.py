"""Where the radio meets the server: communication times of BALANCE users from the FDMA model.

User k's request (prompt token ids plus an optional attachment, e.g. an image) goes up the FDMA
uplink of :mod:`spinlib.channel` and the generated tokens come back on the downlink of the same
cell, both split equally among the K requesting users (every requesting user sends its request,
whether it is served or not)::

    c_k = (prompt_k id_bits + attachment_bits) / R_k(B / K)  +  n_k id_bits / r_k(P_BS / K, W / K)

with ``R_k(b) = b log2(1 + P_k g_k / (N0 b))`` (the scenario's rate model) and the downlink rate
``r_k`` of :func:`spinlib.channel.downlink_rate` (base-station power and band split equally).
Counting the whole response after the last token is conservative (streaming would overlap it).
The deadline then covers the radio and the server in one model: see ``wireless_instance``.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..channel import RateModel, downlink_rate
from ..presets import random_scenario
from ..scenario import Scenario
from ..validation import ValidationError
from .instances import random_instance
from .model import BalanceInstance


def communication_times(scenario: Scenario, prompt_tokens, output_tokens, attachment_bits: float = 0.0) -> np.ndarray:
    """``[K]`` ``c_k`` [s] (module docstring) for the users of ``scenario`` (gains, powers, bands)."""
    K = scenario.num_users
    prompt = np.asarray(prompt_tokens, dtype=float)
    out = np.asarray(output_tokens, dtype=float)
    if prompt.shape != (K,) or out.shape != (K,):
        raise ValidationError(f"prompt_tokens and output_tokens must hold {K} values each")
    if not (np.isfinite(attachment_bits) and attachment_bits >= 0):
        raise ValidationError(f"attachment_bits must be a finite number >= 0, got {attachment_bits!r}")
    bits = scenario.payload.id_bits
    up = RateModel.of(scenario).rate(np.full(K, scenario.radio.bandwidth_hz / K))
    down = downlink_rate(scenario, scenario.downlink.power_w / K, K)
    return (prompt * bits + attachment_bits) / up + out * bits / down


def wireless_instance(num_users: int, seed: int = 0, *, bandwidth_hz: float = 10e6, attachment_bits: float = 0.0,
                      comm_allowance_s: float = 1.0, preset: str = "llama2-7b-l4", **kwargs) -> BalanceInstance:
    """A random BALANCE instance whose users sit in a random cell of ``preset`` (uplink band ``bandwidth_hz``).

    Deadline ``T_k = comm_allowance_s + n_k d_k``: the radio takes ``c_k`` out of it, so cell-edge users
    (small ``R_k``) have less time left for decoding. ``kwargs`` go to
    :func:`~spinlib.balance.instances.random_instance`. One seed draws both the cell and the requests.
    """
    rng = np.random.default_rng(seed)
    cell = random_scenario(num_users, seed=int(rng.integers(1 << 31)), preset=preset, bandwidth_hz=bandwidth_hz)
    base = random_instance(num_users, rng, **kwargs)  # the requests (prompts, lengths, budgets)
    prompt = np.asarray(base.meta["prompt_tokens"])
    c = communication_times(cell, prompt, base.n, attachment_bits)
    budget = np.asarray(base.meta["token_budget_s"])
    users = tuple(dataclasses.replace(u, comm_s=float(c[k]),
                                      deadline_s=float(comm_allowance_s + u.output_tokens * budget[k]))
                  for k, u in enumerate(base.users))
    return base.replace(users=users, name=f"wireless K={num_users}",
                        meta={**base.meta, "seed": seed, "bandwidth_hz": bandwidth_hz,
                              "attachment_bits": attachment_bits, "comm_allowance_s": comm_allowance_s,
                              "distance_m": cell.meta["distance_m"]})


__all__ = ["communication_times", "wireless_instance"]
