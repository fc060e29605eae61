"""Per-round inputs of the clock: drafted and accepted tokens, bits and compute times of every round.

A :class:`Trace` holds ``[R, K]`` arrays (rounds x users). It is either synthetic
(:func:`synthetic_trace`: acceptances drawn from the scenario's acceptance model) or replayed
from real speculative decoding (:func:`spinlib.emulator.real_traces.real_trace`). The bits of a
round are never counted here: :func:`trace_bits` asks :func:`spinlib.modes.realised_bits`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..acceptance import prefix_table, sample_accepted
from ..modes import parse_modes, realised_bits
from ..rounds import Allocation
from ..scenario import Payload, Scenario


@dataclass(frozen=True)
class Trace:
    """Per-round, per-user inputs of the timing; every array has shape ``[R, K]``.

    Parameters
    ----------
    drafted : int array
        ``L_rk``, tokens drafted in round r by user k.
    accepted : int array
        ``A_rk`` in ``[0, L_rk]``; the round commits ``A_rk + 1`` tokens.
    bits_up : float array
        Uplink bits [bit] (:func:`spinlib.modes.realised_bits`).
    bits_down : float array
        Distribution bits [bit] sent down (DL mode), without the feedback (paid as ``T_fb``).
    draft_s : float array
        Drafting time [s].
    verify_s : float array or None
        Measured verification time [s] of the user's draft (real mode with
        ``compute="measured"``); ``None``: the clock uses ``T_ver(N) = t0 + t1 N``.
    outputs : list or None
        Real mode: each user's emitted token ids.
    """

    drafted: np.ndarray
    accepted: np.ndarray
    bits_up: np.ndarray
    bits_down: np.ndarray
    draft_s: np.ndarray
    verify_s: np.ndarray | None = None
    outputs: list | None = None

    @property
    def rounds(self) -> int:
        """``R``."""
        return int(self.drafted.shape[0])

    @property
    def num_users(self) -> int:
        """``K``."""
        return int(self.drafted.shape[1])


def uplink_mask(scenario: Scenario, alloc: Allocation) -> np.ndarray:
    """Bool ``[K]``, True where the device uploads its draft distributions (UL mode).

    A paper-1 allocation (``alloc.modes is None``) is all-UL.
    """
    if alloc.modes is None:
        return np.ones(scenario.num_users, dtype=bool)
    return parse_modes(alloc.modes, scenario.num_users)


def trace_bits(scenario: Scenario, alloc: Allocation, drafted, accepted, *, greedy: bool = False,
               payload: Payload | None = None):
    """Uplink and downlink-distribution bits [bit] of realised rounds, shape ``[R, K]``.

    ``up = L_rk S_k`` and ``down`` = ``D_dist`` on a DL rejection (variant "reject") or
    ``(L_rk + 1) D_dist`` (variant "all"), 0 for UL devices: :func:`spinlib.modes.realised_bits`
    with each device's mode and the scenario's DL variant.

    Parameters
    ----------
    drafted, accepted : int arrays, shape [R, K]
    greedy : bool
        Temperature-0 verification (only token ids travel).
    payload : Payload, optional
        Defaults to ``scenario.payload`` (real mode passes the model's vocabulary).
    """
    return realised_bits(payload or scenario.payload, drafted, accepted, uplink_mask(scenario, alloc),
                         greedy=greedy, variant=scenario.downlink.variant)


def synthetic_trace(scenario: Scenario, alloc: Allocation, rounds: int, acceptance: str,
                    rng: np.random.Generator) -> Trace:
    """``rounds`` synthetic rounds of ``alloc``: every round user k drafts ``L_k`` tokens.

    Acceptances are drawn from ``P(A >= i) = pi_i`` (:func:`spinlib.acceptance.prefix_table`:
    ``alpha^i`` for ``acceptance="iid"``, the user's prefix profile for ``"profile"``); bits from
    :func:`trace_bits` (sampling, not greedy); drafting takes ``L_k tau_k`` [s].
    """
    L = alloc.L
    K = scenario.num_users
    pi = prefix_table(scenario, max(int(L.max()), 1), acceptance)
    A = sample_accepted(L, pi, rounds, rng)
    drafted = np.broadcast_to(L, (rounds, K))
    up, down = trace_bits(scenario, alloc, drafted, A)
    return Trace(drafted=drafted, accepted=A, bits_up=up, bits_down=down, draft_s=drafted * scenario.tau)


__all__ = ["Trace", "uplink_mask", "trace_bits", "synthetic_trace"]
