"""Communication modes (paper 2): what each device sends and receives, expected and realised.

Correcting a rejected draft token needs the draft distribution q and the target distribution p
over the whole vocabulary. Either the device uploads q and the server corrects (**UL** mode) or
the server sends p down and the device corrects (**DL** mode). This module is the one place that
counts the bits of each mode: the analysis (:mod:`spinlib.rounds`, the solvers), the engine
(:mod:`spinlib.sd.engine`), the testbed (:mod:`spinlib.emulator`) and the notebooks all call it.

With ``V`` the vocabulary, ``Q`` bits per probability, ``D_dist`` bits per distribution (``V Q``
full, ``k (ceil(log2 V) + Q)`` top-k; :attr:`spinlib.scenario.Payload.distribution_bits`) and
``pi_L = P(all L drafts accepted)``:

==========  ==========================================  =====================================  ==========================
mode        uplink bits per drafted token ``S_k``        expected downlink bits ``d_k``          device correction ``c_k``
==========  ==========================================  =====================================  ==========================
UL          ``ceil(log2 V) + D_dist`` (id + q)            0 (feedback only)                      0
DL reject   ``ceil(log2 V) + Q`` (id + q(x_i) scalar)     ``(1 - pi_L) D_dist`` (p at rejection)  ``(1 - pi_L) t_corr``
DL all      ``ceil(log2 V)`` (id)                         ``(L + 1) D_dist`` (every p)            ``t_corr``
==========  ==========================================  =====================================  ==========================

``S_k`` of UL mode is the scenario's payload per token (:attr:`Payload.bits_per_token`), so a
paper-1 allocation (no modes) is the all-UL case. A device with ``L_k = 0`` decodes on the server
and sends nothing either way. Every round also carries the feedback (accepted count, 8 bits,
and one token id) down, paid as ``T_fb`` by the round model.

Realised bits of one round (:func:`realised_bits`) replace ``1 - pi_L`` by the round's outcome
(the target distribution goes down only if a draft was rejected); at temperature 0 (greedy
verification) only token ids travel, in either mode.

The DL phase of a synchronous round (the DL rate is :func:`spinlib.channel.downlink_rate`)::

    E_dl = max_{k in DL} ( c_k + d_k / r_k(p_k) ),   sum_k p_k <= P_BS.

Using the *expected* DL bits inside the max is our modelling choice (the papers' round-time
model is not public); the testbed plays out the real, random DL payloads.
"""
from __future__ import annotations

import numpy as np

from .channel import downlink_rate
from .scenario import FEEDBACK_COUNT_BITS as COUNT_BITS, Payload, Scenario
from .validation import ValidationError

MODES = ("UL", "DL")


def parse_modes(modes, num_users: int) -> np.ndarray:
    """``["UL", "DL", ...]`` -> bool array ``[K]`` (True = UL); clear errors for bad entries."""
    if isinstance(modes, (str, bytes)) or not hasattr(modes, "__iter__"):
        raise ValidationError(f"modes must be a list of 'UL'/'DL' entries, got {modes!r}")
    modes = list(modes)
    if len(modes) != num_users:
        raise ValidationError(f"modes has {len(modes)} entries, the scenario has {num_users} users")
    for i, m in enumerate(modes):
        if m not in MODES:
            raise ValidationError(f"modes[{i}] must be 'UL' or 'DL', got {m!r}")
    return np.array([m == "UL" for m in modes], dtype=bool)


def mode_names(ul) -> tuple[str, ...]:
    """Bool array ``[K]`` (True = UL) -> ``("UL", "DL", ...)``."""
    return tuple("UL" if u else "DL" for u in np.asarray(ul, dtype=bool))


def uplink_bits_per_token(payload: Payload, variant: str, ul) -> np.ndarray:
    """``S_k`` [bit] per drafted token of each mode (``ul`` bool, any shape)."""
    ul = np.asarray(ul, dtype=bool)
    if ul.all():
        return np.full(ul.shape, payload.bits_per_token)
    S_dl = payload.id_bits + (payload.bits_per_prob if variant == "reject" else 0)
    return np.where(ul, payload.bits_per_token, float(S_dl))


def mode_payload(scenario: Scenario, L, ul, pi_table: np.ndarray | None = None):
    """Expected per-user payload of each mode, batched: ``S [..., K]``, ``d [..., K]``, ``c [..., K]``.

    Parameters
    ----------
    L : int array, shape [..., K]
        Draft lengths.
    ul : bool array, broadcasting to ``[..., K]``
        True where the device is in UL mode.
    pi_table : array [K, L_max + 1], optional
        :func:`spinlib.acceptance.accept_all_table`; needed only when some device is in DL mode.

    Returns
    -------
    S : uplink bits per drafted token [bit]
    d : expected downlink bits per round, without the feedback [bit] (0 for UL and non-drafting devices)
    c : expected device-side correction time [s]
    """
    pay, dl = scenario.payload, scenario.downlink
    L = np.asarray(L)
    ul = np.broadcast_to(np.asarray(ul, dtype=bool), L.shape)
    S = uplink_bits_per_token(pay, dl.variant, ul)
    if ul.all():
        zeros = np.zeros(L.shape)
        return S, zeros, zeros
    dist = pay.distribution_bits  # raises for payload mode 'ids'
    if pi_table is None:
        raise ValidationError("mode_payload needs pi_table (accept_all_table) for DL-mode devices")
    pi = pi_table[np.arange(scenario.num_users), L]  # [..., K]
    if dl.variant == "reject":
        d = (1.0 - pi) * dist
        c = (1.0 - pi) * dl.correction_time_s
    else:
        d = (L + 1.0) * dist
        c = np.full(L.shape, dl.correction_time_s)
    off = ul | (L == 0)
    return S, np.where(off, 0.0, d), np.where(off, 0.0, c)


def downlink_finish_times(scenario: Scenario, L, ul, p, pi_table, fading=1.0) -> np.ndarray:
    """``c_k + d_k / r_k(p_k)`` [s] for DL-mode drafting devices, 0 for the others (shape [K])."""
    _, d, c = mode_payload(scenario, L, ul, pi_table)
    n_dl = int(np.count_nonzero(d > 0))
    r = downlink_rate(scenario, p, n_dl, fading)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(d > 0, c + d / r, 0.0)


def _distribution_bits(payload: Payload) -> float:
    """Bits of one distribution; an ``ids`` payload that must send one (sampling) sends it in full."""
    if payload.mode == "ids":
        return float(payload.vocab_size * payload.bits_per_prob)
    return payload.distribution_bits


def realised_bits(payload: Payload, L, accepted, ul, *, greedy: bool = False, variant: str = "reject"):
    """Bits of rounds that happened: uplink ``[...]`` and downlink distribution bits ``[...]``.

    Parameters
    ----------
    L, accepted : int arrays (broadcasting)
        Drafted and accepted tokens of each round.
    ul : bool array (broadcasting)
        True in UL mode.
    greedy : bool
        Temperature-0 verification: only token ids go up, only the feedback comes down.
    variant : {"reject", "all"}
        DL variant (:class:`spinlib.scenario.Downlink`).

    Returns
    -------
    up : uplink bits of the round (``L`` times the mode's bits per token).
    down : distribution bits sent down (DL: ``D_dist`` if a draft was rejected, variant "reject";
        ``(L + 1) D_dist``, variant "all"); the feedback is not included (:func:`feedback_bits`).
    """
    L = np.asarray(L)
    A = np.asarray(accepted)
    ul = np.asarray(ul, dtype=bool)
    if greedy:
        up = L * float(payload.id_bits)
        return np.asarray(up, dtype=float), np.zeros(np.broadcast(L, A, ul).shape)
    if payload.mode == "ids":
        S_ul = float(payload.id_bits)
    else:
        S_ul = payload.bits_per_token
    S_dl = payload.id_bits + (payload.bits_per_prob if variant == "reject" else 0)
    up = L * np.where(ul, S_ul, float(S_dl))
    dist = _distribution_bits(payload) if not ul.all() else 0.0
    down = np.where(A < L, dist, 0.0) if variant == "reject" else (L + 1.0) * dist
    down = np.where(ul | (L == 0), 0.0, down)
    return np.asarray(up, dtype=float), np.asarray(down, dtype=float)


def feedback_bits(payload: Payload, distribution_sent) -> np.ndarray:
    """Feedback bits of a round: the accepted count, plus the token id unless the device samples
    its own correction from a distribution that went down (DL rejection)."""
    return np.where(np.asarray(distribution_sent) > 0, COUNT_BITS, COUNT_BITS + payload.id_bits).astype(float)



def expected_round_bits(payload: Payload, L: int, pi_L: float, mode: str, variant: str = "reject"):
    """Expected bits of one sampled (T > 0) round of ``L`` drafts: ``(up, down)`` [bit], the
    downlink including the feedback. ``pi_L`` is ``P(all L accepted)``. The mean of
    :func:`realised_bits` + :func:`feedback_bits` over the round's outcome (what notebook 06
    compares with the engine's measured rounds)::

        UL:  up = L S_UL,           down = 8 + ceil(log2 V)
        DL:  up = L (ceil(log2 V) + Q),  down = 8 + (1 - pi_L) D_dist + pi_L ceil(log2 V)   (variant "reject")
    """
    if mode not in MODES:
        raise ValidationError(f"mode must be 'UL' or 'DL', got {mode!r}")
    ul = mode == "UL"
    up, _ = realised_bits(payload, L, L, ul, variant=variant)
    if ul:
        return float(up), float(payload.feedback_bits)
    if variant != "reject":
        return float(up), float(COUNT_BITS + (L + 1) * _distribution_bits(payload))
    down = COUNT_BITS + (1.0 - pi_L) * _distribution_bits(payload) + pi_L * payload.id_bits
    return float(up), float(down)


__all__ = ["MODES", "COUNT_BITS", "parse_modes", "mode_names", "uplink_bits_per_token",
           "mode_payload", "downlink_finish_times", "realised_bits", "feedback_bits", "expected_round_bits"]
