"""Acceptance models: how many tokens a round of speculative decoding produces.

With L drafted tokens, i.i.d. acceptance ``alpha`` and the correction/bonus token counted, the
number of tokens a round produces, ``N = 1 + A`` with ``A = min(first rejection index, L)``, has

    E[N](L) = sum_{i=0}^{L} alpha^i = (1 - alpha^(L+1)) / (1 - alpha)     (Leviathan et al., eq. 1)

which is 1 at L = 0 (plain autoregressive decoding: one token per target pass). With an empirical
prefix-acceptance profile ``pi_i = P(first i drafts all accepted)``::

    E[N](L) = 1 + sum_{i=1}^{L} pi_i .
"""
from __future__ import annotations

import numpy as np


def expected_tokens(alpha, L):
    """``E[N](L) = (1 - alpha^(L+1)) / (1 - alpha)``, broadcasting ``alpha`` [K] and ``L`` [..., K].

    Parameters
    ----------
    alpha : array_like
        Acceptance rates in [0, 1).
    L : array_like of int
        Draft lengths >= 0.
    """
    alpha = np.asarray(alpha, dtype=float)
    L = np.asarray(L)
    if np.any(L < 0):
        raise ValueError("draft lengths must be >= 0")
    if np.any((alpha < 0) | (alpha >= 1)):
        raise ValueError("alpha must be in [0, 1)")
    return (1.0 - alpha ** (L + 1.0)) / (1.0 - alpha)


def expected_tokens_profile(profile, L):
    """``E[N](L) = 1 + sum_{i<=L} pi_i`` for a prefix-acceptance profile ``pi`` (length >= L)."""
    pi = np.asarray(profile, dtype=float)
    L = np.asarray(L, dtype=int)
    cum = np.concatenate([[1.0], 1.0 + np.cumsum(pi)])
    if np.any(L >= cum.size):
        raise ValueError(f"profile holds {pi.size} positions, L up to {int(np.max(L))} requested")
    return cum[L]


def iid_profile(alpha: float, L_max: int) -> np.ndarray:
    """``pi_i = alpha^i`` for i = 1..L_max, the i.i.d. prefix profile."""
    return float(alpha) ** np.arange(1, L_max + 1)


def tokens_table(scenario, L_max: int) -> np.ndarray:
    """``[K, L_max+1]`` table of ``E[N_k](L)`` for L = 0..L_max.

    Users with an ``acceptance_profile`` use it for the positions it covers and continue with
    ``alpha_k`` beyond (``pi_{i+1} = pi_i alpha_k``); the others use the i.i.d. model.
    """
    L = np.arange(L_max + 1)
    table = expected_tokens(scenario.alpha[:, None], L[None, :])
    for k, u in enumerate(scenario.users):
        if u.acceptance_profile is not None:
            prof = list(u.acceptance_profile[:L_max])
            while len(prof) < L_max:
                prof.append(prof[-1] * u.alpha)
            table[k] = expected_tokens_profile(prof, L)
    return table


def accept_all_table(table: np.ndarray) -> np.ndarray:
    """``pi[k, L] = P(first L drafts all accepted) = E[N_k](L) - E[N_k](L-1)``, ``pi[k, 0] = 1``.

    ``table`` is :func:`tokens_table` (shape ``[K, L_max + 1]``).
    """
    pi = np.ones_like(table)
    pi[:, 1:] = np.diff(table, axis=1)
    return np.clip(pi, 0.0, 1.0)


def prefix_table(scenario, L_max: int, acceptance: str = "profile") -> np.ndarray:
    """``pi[k, i] = P(A_k >= i)`` for i = 0..L_max (shape ``[K, L_max + 1]``).

    ``"profile"``: each user's measured prefix profile where it has one, else ``alpha_k^i``
    (the model of :func:`tokens_table`); ``"iid"``: ``alpha_k^i`` for everyone.
    """
    if acceptance == "iid":
        return scenario.alpha[:, None] ** np.arange(L_max + 1)[None, :]
    if acceptance != "profile":
        raise ValueError(f"acceptance must be 'iid' or 'profile', got {acceptance!r}")
    return accept_all_table(tokens_table(scenario, L_max))


def sample_accepted(L, pi_table: np.ndarray, rounds: int, rng: np.random.Generator) -> np.ndarray:
    """Accepted drafts ``A[r, k]`` with ``P(A_k >= i) = pi_table[k, i]`` for ``i <= L_k`` (shape ``[rounds, K]``).

    One uniform per round and user: ``A = #{i <= L_k : U < pi_i}``, exact because ``pi`` is
    non-increasing in ``i``. The one acceptance sampler of the library: the testbed's synthetic traces
    (and so the Monte Carlo check, :func:`spinlib.emulator.montecarlo.simulate_rounds`) call it, honouring a
    user's measured profile. Tokens of the round: ``N = 1 + A``.
    """
    L = np.asarray(L, dtype=int)
    K = L.size
    L_max = pi_table.shape[1] - 1
    if L.max(initial=0) > L_max:
        raise ValueError(f"pi_table covers L <= {L_max}, L up to {int(L.max())} requested")
    U = rng.random((rounds, K))
    pos = np.arange(1, L_max + 1)
    ok = (U[:, :, None] < pi_table[None, :, 1:]) & (pos[None, None, :] <= L[None, :, None])
    return ok.sum(axis=2)
