"""The round-cost kernel: the time of one speculative round from its phases.

Every round model of the companion is a choice of the phase times below; this module only adds
them up, in one place::

    synchronous (one batch for every user, arrays [..., K]):
        T = max_k (draft_k + upload_k) + T_ver + (later phases: downlink, feedback, access)   [s]
    per user (each user's own round, arrays [..., K]):
        T_k = draft_k + upload_k + (waits: verification, delay, feedback, access)              [s]

``T_ver`` is the batch's verification time [s]. The phases are added in the order the caller lists
them (so every player's floating-point sums are those it always had), and this module is the one place
that adds a round's phases: our synchronous and asynchronous rounds (:mod:`spinlib.rounds`), the
testbed's clock (:mod:`spinlib.emulator.clock`), the arena's trace links (:mod:`spinlib.online.arena`),
one prompt's replay (:mod:`spinlib.online.real_rounds`), the real engine's clock
(:mod:`spinlib.sd.engine`) and BALANCE's server rounds (:mod:`spinlib.balance.rounds`) call it.
The papers' round models (:mod:`spinlib.papers`) are instances: paper 1 (Multi-SPIN, Sec. II, eqs.
(7), (9), (26)) is the synchronous round with ``draft_k = L_k T^S_k``, ``upload_k = L_k Q^tok /
(B_k r_k)``, ``T_ver = T^fix + K T^lin`` and no downlink or overhead; paper 2 (Uplink or Downlink?,
eqs. (15)-(21)) is the synchronous round with no upload before verification and one exchange after
it, ``downlink`` being the reactive exchange of the rejected devices. Our own model
(:mod:`spinlib.rounds`: per-token verification, access and feedback terms) and the online players'
per-user round (:mod:`spinlib.online.arena`) are the others.

The expected tokens of a round with i.i.d. acceptance (paper 1 eq. (12), paper 2 eq. (13),
UCB-SpecStop eq. (1))::

    E[N](L) = sum_{l=0}^{L} alpha^l = (1 - alpha^(L+1)) / (1 - alpha)               [token]

counts the accepted drafts and the one bonus or correction token (``E[N](0) = 1``).
"""
from __future__ import annotations

import numpy as np


def makespan(draft_s, upload_s):
    """``max_k (draft_k + upload_k)`` [s] over the last axis: when the batch is ready (arrays ``[..., K]`` -> ``[...]``)."""
    return (np.asarray(draft_s, dtype=float) + np.asarray(upload_s, dtype=float)).max(axis=-1)


def sync_round_time(makespan_s, verify_s, *after_s):
    """``T = makespan + T_ver + after_1 + after_2 + ...`` [s], added in the order given (broadcasting).

    Parameters
    ----------
    makespan_s : array [...]
        When the batch is ready [s] (:func:`makespan`, or a split's least makespan).
    verify_s : array [...]
        Verification time of the batch [s].
    *after_s : arrays [...]
        Every later phase of the round [s]: a downlink phase ``max_k downlink_k``, a fixed overhead
        (feedback, access), each a scalar or an array broadcasting with the others.
    """
    T = np.asarray(makespan_s, dtype=float) + np.asarray(verify_s, dtype=float)
    for a in after_s:
        T = T + np.asarray(a, dtype=float)
    return T


def user_round_time(draft_s, upload_s, *wait_s):
    """``T_k = draft_k + upload_k + wait_1 + wait_2 + ...`` [s], elementwise, added in the order given: each user's
    own round (the waits: verification, delay, feedback, access)."""
    T = np.asarray(draft_s, dtype=float) + np.asarray(upload_s, dtype=float)
    for w in wait_s:
        T = T + np.asarray(w, dtype=float)
    return T


def iid_expected_tokens(alpha, L):
    """``E[N](L) = (1 - alpha^(L+1)) / (1 - alpha)`` [token], broadcasting ``alpha`` in [0, 1) and ``L >= 0``."""
    a = np.asarray(alpha, dtype=float)
    return (1.0 - a ** (np.asarray(L, dtype=float) + 1.0)) / (1.0 - a)


__all__ = ["makespan", "sync_round_time", "user_round_time", "iid_expected_tokens"]
