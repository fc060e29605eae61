"""Uplink or downlink (paper 2): what each communication mode sends, and the round it makes.

Correcting a rejected draft token needs the draft distribution q and the target distribution p
over the whole vocabulary. With ``D`` bits per distribution (``V Q`` full, ``k (ceil(log2 V) + Q)``
top-k; :attr:`spinlib.scenario.Payload.distribution_bits`) and ``pi_L = P(all L drafts accepted)``:

==========  ==========================================  =====================================  ==========================
mode        uplink bits per drafted token ``S_k``        expected downlink bits ``d_k``          device correction ``c_k``
==========  ==========================================  =====================================  ==========================
UL          ``ceil(log2 V) + D`` (id + q)                 0 (feedback only)                      0
DL reject   ``ceil(log2 V) + Q`` (id + q(x_i) scalar)     ``(1 - pi_L) D`` (p at the rejection)   ``(1 - pi_L) t_corr``
DL all      ``ceil(log2 V)`` (id)                         ``(L + 1) D`` (every p)                 ``t_corr``
==========  ==========================================  =====================================  ==========================

A device with ``L_k = 0`` decodes on the server and sends nothing either way. ``pi_L`` comes
from the measured prefix profile where the user has one (else ``alpha^L``). The synchronous
round (model A of paper 1, with the DL phase after verification)::

    T = D_up + T_ver(sum_k (L_k + 1)) + E_dl + T_fb + T_acc,
    D_up = max_k ( L_k tau_k + L_k S_k / R_k(b_k) ),           FDMA uplink, sum_k b_k <= B
    E_dl = max_{k in DL} ( c_k + d_k / r_k(p_k) ),             shared downlink, sum_k p_k <= P_BS
    G    = sum_k E[N_k](L_k) / T.

Using the *expected* DL bits inside the max is our modelling choice (the papers' round-time
model is not public); the testbed (:mod:`spinlib.emulator`, notebook 07) plays out the real, random DL payloads.
"""
from __future__ import annotations

import numpy as np

from .scenario import Scenario, ValidationError

MODES = ("UL", "DL")


def accept_all_table(table: np.ndarray) -> np.ndarray:
    """``pi[k, L] = P(first L drafts all accepted) = E[N_k](L) - E[N_k](L-1)``, ``pi[k, 0] = 1``.

    ``table`` is :func:`spinlib.acceptance.tokens_table` (shape ``[K, L_max + 1]``).
    """
    pi = np.ones_like(table)
    pi[:, 1:] = np.diff(table, axis=1)
    return np.clip(pi, 0.0, 1.0)


def parse_modes(modes, num_users: int) -> np.ndarray:
    """``["UL", "DL", ...]`` -> bool array ``[K]`` (True = UL); clear errors for bad entries."""
    modes = list(modes)
    if len(modes) != num_users:
        raise ValidationError(f"modes has {len(modes)} entries, the scenario has {num_users} users")
    for i, m in enumerate(modes):
        if m not in MODES:
            raise ValidationError(f"modes[{i}] must be 'UL' or 'DL', got {m!r}")
    return np.array([m == "UL" for m in modes], dtype=bool)


def mode_names(ul) -> tuple[str, ...]:
    return tuple("UL" if u else "DL" for u in np.asarray(ul, dtype=bool))


def mode_payload(scenario: Scenario, L, ul, pi_table: np.ndarray):
    """Per-user payload of each mode, batched: ``S [..., K]``, ``d [..., K]``, ``c [..., K]``.

    Parameters
    ----------
    L : int array, shape [..., K]
        Draft lengths.
    ul : bool array, broadcasting to ``[..., K]``
        True where the device is in UL mode.
    pi_table : array [K, L_max + 1]
        :func:`accept_all_table`.

    Returns
    -------
    S : uplink bits per drafted token [bit]
    d : expected downlink bits per round [bit] (0 for UL-mode and non-drafting devices)
    c : expected device-side correction time [s]
    """
    pay, dl = scenario.payload, scenario.downlink
    dist = pay.distribution_bits  # raises for payload mode 'ids'
    L = np.asarray(L)
    ul = np.broadcast_to(np.asarray(ul, dtype=bool), L.shape)
    K = scenario.num_users
    pi = pi_table[np.arange(K), L]  # [..., K]
    if dl.variant == "reject":
        S_dl = pay.id_bits + pay.bits_per_prob
        d = (1.0 - pi) * dist
        c = (1.0 - pi) * dl.correction_time_s
    else:
        S_dl = pay.id_bits
        d = (L + 1.0) * dist
        c = np.full(L.shape, dl.correction_time_s)
    S = np.where(ul, pay.bits_per_token, float(S_dl))
    off = ul | (L == 0)
    return S, np.where(off, 0.0, d), np.where(off, 0.0, c)


def downlink_finish_times(scenario: Scenario, L, ul, p, pi_table):
    """``c_k + d_k / r_k(p_k)`` [s] for DL-mode drafting devices, 0 for the others (shape [K])."""
    from .control.power import downlink_rate

    _, d, c = mode_payload(scenario, L, ul, pi_table)
    n_dl = int(np.count_nonzero(d > 0))
    r = downlink_rate(scenario, p, n_dl)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(d > 0, c + d / r, 0.0)
    return t


def random_uldl_scenario(num_users: int, rng: np.random.Generator, preset: str | None = None,
                         **overrides) -> Scenario:
    """A random scenario for UL/DL studies: random preset, DL power 20-46 dBm, DL band 5-50 MHz,
    full or top-k payload (k in {32, 128, 512}), Q in {8, 16, 32}, variant "reject" (3/4) or "all".

    All randomness flows from ``rng``; ``overrides`` go to :func:`spinlib.presets.random_scenario`.
    """
    from .channel import dbm_to_w
    from .presets import PRESETS, random_scenario
    from .scenario import Downlink, Payload

    name = preset or str(rng.choice(["llama2-7b-l4", "qwen-7b-l4"]))
    V = PRESETS[name].vocab_size
    dl = Downlink(power_w=float(dbm_to_w(rng.uniform(20.0, 46.0))),
                  bandwidth_hz=float(rng.choice([5e6, 10e6, 20e6, 50e6])),
                  variant="all" if rng.random() < 0.25 else "reject")
    payload = Payload(V, str(rng.choice(["topk", "full"])), int(rng.choice([8, 16, 32])),
                      int(rng.choice([32, 128, 512])))
    return random_scenario(num_users, int(rng.integers(1 << 31)), name, payload=payload, downlink=dl,
                           **overrides)
