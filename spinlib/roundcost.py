"""The round-cost kernel: the time of one speculative round from its phases.

Every round model of the companion is a choice of the phase times below; this module only adds
them up, in one place::

    synchronous (one batch for every user, arrays [..., K]):
        T = max_k (draft_k + upload_k) + T_ver + max_k downlink_k + overhead          [s]
    per user (each user's own round, arrays [..., K]):
        T_k = draft_k + upload_k + wait_k                                             [s]

``T_ver`` is the batch's verification time [s] and ``overhead`` a fixed per-round time [s]
(feedback, access). ``wait_k`` is everything after the upload: verification, delay, feedback.
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


def sync_round_time(draft_s, upload_s, verify_s, downlink_s=0.0, overhead_s=0.0):
    """``T = max_k (draft_k + upload_k) + T_ver + max_k downlink_k + overhead`` [s].

    Parameters
    ----------
    draft_s, upload_s : array [..., K]
        Drafting and upload time of each user [s].
    verify_s : array [...]
        Verification time of the batch [s].
    downlink_s : array [..., K] or float
        Post-verification exchange of each user [s] (0: none).
    overhead_s : array [...] or float
        Fixed per-round time [s].

    Returns
    -------
    array [...]
        The round time [s].
    """
    ready = np.asarray(draft_s, dtype=float) + np.asarray(upload_s, dtype=float)
    dl = np.asarray(downlink_s, dtype=float)
    after = dl.max(axis=-1) if dl.ndim else dl
    return ready.max(axis=-1) + np.asarray(verify_s, dtype=float) + after + np.asarray(overhead_s, dtype=float)


def user_round_time(draft_s, upload_s, wait_s):
    """``T_k = draft_k + upload_k + wait_k`` [s], elementwise (each user's own round)."""
    return np.asarray(draft_s, dtype=float) + np.asarray(upload_s, dtype=float) + np.asarray(wait_s, dtype=float)


def iid_expected_tokens(alpha, L):
    """``E[N](L) = (1 - alpha^(L+1)) / (1 - alpha)`` [token], broadcasting ``alpha`` in [0, 1) and ``L >= 0``."""
    a = np.asarray(alpha, dtype=float)
    return (1.0 - a ** (np.asarray(L, dtype=float) + 1.0)) / (1.0 - a)


__all__ = ["sync_round_time", "user_round_time", "iid_expected_tokens"]
