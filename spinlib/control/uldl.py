"""Joint mode selection, draft lengths, uplink bandwidth and downlink power (paper 2).

Problem (synchronous round with modes, :mod:`spinlib.modes`)::

    max_{m, L, b, p}  sum_k E[N_k](L_k) / ( D_up(L, m, b) + T_ver(sum_k (L_k+1)) + E_dl(L, m, p) + T_fb + T_acc )

For fixed modes ``m`` and lengths ``L`` the numerator is fixed and the two continuous
sub-problems separate: the FDMA makespan ``D_up`` (:func:`.bandwidth.min_makespan_bandwidth`
with per-user payloads) and the DL phase ``E_dl`` (:func:`.power.min_max_downlink_power`), both
solved exactly.

**Mode selection for fixed L.** ``D_up`` increases and ``E_dl`` decreases when a device moves
from DL to UL (it uploads its distributions instead of downloading the target's). Fix the two
phase times ``(D, E)``: device k in UL mode costs extra uplink bandwidth
``Delta b_k = b_k(D; S_UL) - b_k(D; S_DL)`` and frees the power ``p_k(E)`` it would need in DL
mode. Choosing the UL set is then a 0/1 knapsack (free as much power as possible within the
bandwidth left over); its LP relaxation is solved by sorting the devices by the index

    phi_k = p_k(E) / Delta b_k       [W/Hz], power freed per unit of uplink bandwidth spent,

and putting the top m in UL. Hence the "top-m devices in UL" structure: search m = 0..K after
sorting by an index. The knapsack ratio misses one effect of our DL model: a device that leaves
the DL also leaves its share of the band ``W / n_DL`` to the others. The default index is
therefore the *marginal* one, ``psi_k`` = the exact goodput change when device k alone switches
(:func:`marginal_index`, whose first-order expansion has both terms), evaluated at the all-DL
operating point and re-evaluated at the best m's (3 passes). Either way the structure is exact
for a relaxation, not for the integer problem (a knapsack is NP-hard in general), so :func:`best_modes` checks it against all ``2^K`` assignments when
``K <= exact_max_users`` and otherwise polishes it by single-device flips and pairwise swaps
(reported as ``certified = False``).

**Draft lengths.** Greedy per device (coordinate ascent): start from the best common length,
then set each device's ``L_k`` to its best value given the others, sweeping until no device
changes, then try joint moves (devices above/below a length level +-1 together, pairs +-1). Each
step evaluates all ``L_max + 1`` values of one device at once (batched over mode assignments too).

**Reference.** ``uldl-exhaustive`` (:func:`exhaustive_joint`) evaluates every (mode assignment,
length vector) pair with the exact continuous sub-problems -- no greedy step inside -- so it is
the global optimum; it refuses ``2^K (L_max+1)^K >`` :data:`EXHAUSTIVE_MAX_COMBINATIONS`.
"""
from __future__ import annotations

import itertools
import time

import numpy as np

from ..acceptance import accept_all_table, tokens_table
from ..channel import RateModel
from ..modes import mode_names, mode_payload
from ..rounds import Allocation, sync_goodput
from ..scenario import Scenario
from ..validation import ValidationError, check_int_range, check_nonnegative, count_text
from .bandwidth import min_makespan_bandwidth, required_bandwidth
from .search import EXHAUSTIVE_MAX_VECTORS, Certificate, check_exhaustive_max, check_gap, few_vectors
from .branch_and_bound_uldl import branch_and_bound_uldl
from .power import min_max_downlink_power, required_power
from .registry import register_policy

#: the gap below which a result is reported "optimal" (the solver's default tolerance)
OPTIMAL_GAP = 1e-6

EXHAUSTIVE_MAX_COMBINATIONS = 3_000_000  # uldl-exhaustive refuses 2^K (L_max+1)^K above this
THOROUGH_SIZE = 40  # uldl-optimal searches harder (module docstring) when K (L_max + 1) <= this
EXHAUSTIVE_MAX_USERS = 10  # the largest K the cap allows (at L_max = 1: 4^10 <= 3,000,000 < 4^11)


class Problem:
    """Precomputed tables of one scenario for the UL/DL search."""

    def __init__(self, scenario: Scenario, L_max: int):
        check_int_range("L_max", L_max, 0, 64)
        scenario.payload.distribution_bits  # noqa: B018 -- raises for payload mode 'ids'
        self.scenario = scenario
        self.L_max = L_max
        self.K = scenario.num_users
        self.rates = RateModel.of(scenario)
        self.table = tokens_table(scenario, L_max)
        self.pi = accept_all_table(self.table)

    def solve_continuous(self, L, ul):
        """Optimal ``b``, ``p`` and the phase times for batched ``L [..., K]``, ``ul [..., K]``.

        Returns ``G [...], D [...], E [...], b [..., K], p [..., K]``.
        """
        L = np.asarray(L)
        ul = np.broadcast_to(np.asarray(ul, dtype=bool), L.shape)
        flat_L = L.reshape(-1, self.K)
        flat_ul = ul.reshape(-1, self.K)
        S, d, c = mode_payload(self.scenario, flat_L, flat_ul, self.pi)
        D, b = min_makespan_bandwidth(self.scenario, flat_L, self.rates, bits_per_token=S)
        E, p = min_max_downlink_power(self.scenario, d, c)
        G = sync_goodput(self.scenario, flat_L, self.table[np.arange(self.K), flat_L], D, E)
        shape = L.shape[:-1]
        return (np.reshape(G, shape), np.reshape(D, shape), np.reshape(E, shape),
                b.reshape(L.shape), p.reshape(L.shape))

    def goodput(self, L, ul):
        return self.solve_continuous(L, ul)[0]


# ----------------------------------------------------------------------------------------------
# Draft lengths: greedy per device
# ----------------------------------------------------------------------------------------------
def _joint_moves(L: np.ndarray, L_max: int, pairs: bool) -> np.ndarray:
    """Moves beyond one coordinate, ``[M, n_moves, K]``, clipped to [0, L_max]: every device at
    or above a length level (or at or below it) +-1 together, for each level; and (if ``pairs``)
    every pair of devices +-1 each."""
    M, K = L.shape
    levels = np.arange(0, L_max + 1)
    above = (L[:, None, :] >= levels[None, :, None]).astype(int)  # [M, levels, K]
    below = (L[:, None, :] <= levels[None, :, None]).astype(int)
    steps = np.concatenate([above, -above, below, -below], axis=1)  # [M, 4 levels, K]
    if pairs:
        pv = []
        for i in range(K):
            for j in range(i + 1, K):
                for si in (1, -1):
                    for sj in (1, -1):
                        v = np.zeros(K, int)
                        v[i], v[j] = si, sj
                        pv.append(v)
        if pv:
            steps = np.concatenate([steps, np.broadcast_to(np.array(pv), (M, len(pv), K))], axis=1)
    return np.clip(L[:, None, :] + steps, 0, L_max)


def greedy_lengths(prob: Problem, ul, L_init=None, max_sweeps: int = 50, pair_max_users: int = 16,
                   starts: int | None = None):
    """Greedy draft lengths for each row of modes ``ul [M, K]`` at once.

    Coordinate ascent: each device in turn takes its best length given the others (all
    ``L_max + 1`` values evaluated in one batch). When no single device can improve, joint moves
    are tried (all devices at or above / at or below a length level +-1 together; pairs of devices
    +-1 for ``K <= pair_max_users``): a
    synchronous round couples the devices through the makespan, and single-device moves alone
    stop early. The ascent runs, in one batch, from the ``starts`` best common lengths (default 3
    for K <= 16, else 1) and from ``L_init`` (an extra start), and keeps the best end point, so the
    result is never worse than any start. A move must gain
    more than 1e-10 relative. Returns ``L [M, K]`` and the goodput ``G [M]``.
    """
    ul0 = np.atleast_2d(np.asarray(ul, dtype=bool))
    M0, K = ul0.shape
    starts = (3 if K <= 16 else 1) if starts is None else starts
    Ls = np.arange(prob.L_max + 1)
    common = np.broadcast_to(Ls[None, :, None], (M0, Ls.size, K))
    G_all = prob.goodput(common, ul0[:, None, :])
    n_common = max(1, min(starts, Ls.size))
    top = np.argsort(-G_all, axis=1, kind="stable")[:, :n_common]  # [M0, n_common]
    L = np.repeat(Ls[top][:, :, None], K, axis=2)  # [M0, n_common, K]
    G = np.take_along_axis(G_all, top, axis=1)
    if L_init is not None:  # one more start per row
        L0 = np.broadcast_to(np.asarray(L_init, dtype=int), (M0, K))
        L = np.concatenate([L, L0[:, None, :]], axis=1)
        G = np.concatenate([G, prob.goodput(L0, ul0)[:, None]], axis=1)
    n_starts = L.shape[1]
    L, G = L.reshape(-1, K).copy(), G.reshape(-1)
    ul = np.repeat(ul0, n_starts, axis=0)
    M = ul.shape[0]
    rows = np.arange(M)
    for _ in range(max_sweeps):
        changed = False
        for k in range(K):
            cand = np.repeat(L[:, None, :], Ls.size, axis=1)
            cand[:, :, k] = Ls
            Gk = prob.goodput(cand, ul[:, None, :])
            j = np.argmax(Gk, axis=1)
            improve = Gk[rows, j] > G * (1 + 1e-10)
            if improve.any():
                L[improve, k] = Ls[j[improve]]
                G = np.where(improve, Gk[rows, j], G)
                changed = True
        if not changed:
            cand = _joint_moves(L, prob.L_max, K <= pair_max_users)
            Gk = prob.goodput(cand, ul[:, None, :])
            j = np.argmax(Gk, axis=1)
            improve = Gk[rows, j] > G * (1 + 1e-10)
            if not improve.any():
                break
            L[improve] = cand[rows, j][improve]
            G = np.where(improve, Gk[rows, j], G)
    best = np.argmax(G.reshape(M0, n_starts), axis=1) + np.arange(M0) * n_starts
    return L[best], G[best]


# ----------------------------------------------------------------------------------------------
# Mode selection for fixed lengths
# ----------------------------------------------------------------------------------------------
def knapsack_index(prob: Problem, L, ul_ref=None):
    """``phi_k = p_k(E) / Delta b_k`` [W/Hz] at the operating point of modes ``ul_ref`` (default all DL).

    Large phi: the device frees much DL power for little extra uplink bandwidth -> UL first.
    Devices that do not draft get ``-inf`` (their mode does not matter; they are put last).
    """
    s = prob.scenario
    L = np.asarray(L)
    ul_ref = np.zeros(prob.K, dtype=bool) if ul_ref is None else np.asarray(ul_ref, dtype=bool)
    _, D, E, _, _ = prob.solve_continuous(L, ul_ref)
    S_ul, _, _ = mode_payload(s, L, np.ones(prob.K, bool), prob.pi)
    S_dl, d, c = mode_payload(s, L, np.zeros(prob.K, bool), prob.pi)
    b_ul = required_bandwidth(prob.rates, S_ul, L, s.tau, D)
    b_dl = required_bandwidth(prob.rates, S_dl, L, s.tau, D)
    n_dl = max(int(np.count_nonzero(~ul_ref & (L > 0))), 1)
    w = s.downlink.bandwidth_hz / n_dl
    a_w = s.gain / s.radio.noise_psd_w_per_hz
    E_eval = max(E, float(np.max(np.where(d > 0, c, 0.0))) * (1 + 1e-9) + 1e-12)
    p, _ = required_power(d, c, E_eval, a_w, w)
    with np.errstate(divide="ignore", invalid="ignore"):
        phi = np.where(np.isfinite(b_ul), p / np.maximum(b_ul - b_dl, 1e-300), 0.0)
    return np.where(L > 0, phi, -np.inf)


def marginal_index(prob: Problem, L, ul_ref=None):
    """``psi_k = G(ref with k in UL) - G(ref with k in DL)`` [token/s]: the exact goodput change of
    moving device k alone, from the operating point of modes ``ul_ref`` (default all DL).

    To first order ``psi_k ~ lambda_E (p_k / sum_j |dp_j/dE| + w-effect) - lambda_D Delta b_k /
    sum_j |db_j/dD|``: the DL time a device frees (its power, and its share of the band, which the
    other DL devices inherit) against the makespan its larger upload costs. Computing it exactly
    costs K batched evaluations and captures the band-sharing effect that the knapsack ratio
    :func:`knapsack_index` misses. Devices that do not draft get ``-inf``.
    """
    L = np.asarray(L)
    ref = np.zeros(prob.K, dtype=bool) if ul_ref is None else np.asarray(ul_ref, dtype=bool)
    flips = ref[None, :] ^ np.eye(prob.K, dtype=bool)
    G_flip = prob.goodput(np.broadcast_to(L, flips.shape), flips)
    G_ref = float(prob.goodput(L, ref))
    psi = np.where(ref, G_ref - G_flip, G_flip - G_ref)
    return np.where(L > 0, psi, -np.inf)


INDEXES = {"marginal": marginal_index, "knapsack": knapsack_index}


def top_m_modes(order: np.ndarray, K: int) -> np.ndarray:
    """``[K+1, K]`` bool: row m puts the first m devices of ``order`` in UL."""
    ul = np.zeros((K + 1, K), dtype=bool)
    for m in range(1, K + 1):
        ul[m, order[:m]] = True
    return ul


def structured_modes(prob: Problem, L, passes: int = 3, index: str = "marginal"):
    """Top-m search for fixed ``L``: sort by the index (``"marginal"`` or ``"knapsack"``),
    evaluate m = 0..K, then re-evaluate the index at the best m's modes (``passes`` times).

    Returns ``(ul [K], G, m)``.
    """
    if index not in INDEXES:
        raise ValidationError(f"index must be one of {sorted(INDEXES)}, got {index!r}")
    L = np.asarray(L)
    ref = np.zeros(prob.K, dtype=bool)
    best = (ref, -np.inf, 0)
    for _ in range(passes):
        order = np.argsort(-INDEXES[index](prob, L, ref), kind="stable")
        cands = top_m_modes(order, prob.K)
        G = prob.goodput(np.broadcast_to(L, cands.shape), cands)
        m = int(np.argmax(G))
        if G[m] > best[1] * (1 + 1e-12):
            best = (cands[m], float(G[m]), m)
        ref = best[0]
    return best


def all_mode_rows(K: int) -> np.ndarray:
    """``[2^K, K]`` bool: every UL/DL assignment."""
    return np.array(list(itertools.product([False, True], repeat=K)), dtype=bool)


def exhaustive_modes(prob: Problem, L, chunk: int = 4096):
    """Best of all ``2^K`` assignments for fixed ``L`` (devices with ``L_k = 0`` do not matter and are fixed to UL)."""
    L = np.asarray(L)
    act = np.flatnonzero(L > 0)
    if act.size > 20:
        raise ValidationError(f"exhaustive mode search over 2^{act.size} assignments is too large (max 2^20)")
    sub = all_mode_rows(act.size)
    best_G, best = -np.inf, None
    for i in range(0, sub.shape[0], chunk):
        rows = np.ones((min(chunk, sub.shape[0] - i), prob.K), dtype=bool)
        rows[:, act] = sub[i:i + chunk]
        G = prob.goodput(np.broadcast_to(L, rows.shape), rows)
        j = int(np.argmax(G))
        if G[j] > best_G:
            best_G, best = float(G[j]), rows[j]
    return best, best_G


def flip_search(prob: Problem, L, ul, G, max_rounds: int = 50, swap_max_users: int = 32):
    """Polish modes by single flips and (for ``K <= swap_max_users``) UL/DL swaps, batched;
    returns ``(ul, G)``."""
    L = np.asarray(L)
    act = np.flatnonzero(L > 0)
    ul = np.asarray(ul, dtype=bool).copy()
    for _ in range(max_rounds):
        cands = [ul ^ np.eye(prob.K, dtype=bool)[k] for k in act]
        ups, downs = act[ul[act]], act[~ul[act]]
        if prob.K > swap_max_users:
            ups = ()
        for i in ups:
            for j in downs:
                c = ul.copy()
                c[i], c[j] = False, True
                cands.append(c)
        if not cands:
            break
        cands = np.array(cands)
        Gc = prob.goodput(np.broadcast_to(L, cands.shape), cands)
        j = int(np.argmax(Gc))
        if Gc[j] <= G * (1 + 1e-12):
            break
        ul, G = cands[j], float(Gc[j])
    return ul, G


def best_modes(prob: Problem, L, exact_max_users: int = 16):
    """Optimal modes for fixed ``L``: top-m structure, certified by exhaustive search for small K.

    Returns ``(ul [K], G, info)`` with ``info["structure_held"]`` (the top-m answer was optimal,
    within 1e-9 relative) where ``info["certified"]`` is True.
    """
    L = np.asarray(L)
    ul, G, m = structured_modes(prob, L)
    info = {"m_ul": m}
    n_act = int(np.count_nonzero(L > 0))
    if n_act <= exact_max_users:
        ul_x, G_x = exhaustive_modes(prob, L)
        info.update(certified=True, structure_held=bool(G >= G_x * (1 - 1e-9)),
                    structure_gap=float(max(0.0, 1 - G / G_x)) if G_x > 0 else 0.0)
        if G_x > G:
            ul, G = ul_x, G_x
    else:
        ul, G = flip_search(prob, L, ul, G)
        info.update(certified=False)
    return ul, G, info


# ----------------------------------------------------------------------------------------------
# Policies
# ----------------------------------------------------------------------------------------------
def _allocation(prob: Problem, L, ul, policy: str, **info) -> Allocation:
    G, D, E, b, p = prob.solve_continuous(np.asarray(L)[None], np.asarray(ul)[None])
    return Allocation(
        draft_lengths=tuple(int(x) for x in L), bandwidth_hz=tuple(float(x) for x in b[0]),
        round_model="sync", policy=policy, goodput_tokens_per_s=float(G[0]),
        modes=mode_names(ul), dl_power_w=tuple(float(x) for x in np.where(np.asarray(ul), 0.0, p[0])),
        info={"uplink_makespan_s": float(D[0]), "downlink_time_s": float(E[0]), **info},
    )


def solve_fixed_modes(scenario: Scenario, ul, L_max: int = 16, policy: str = "") -> Allocation:
    """Greedy lengths, optimal bandwidth and power for given modes (``all-ul``, ``all-dl``)."""
    prob = Problem(scenario, L_max)
    ul = np.broadcast_to(np.asarray(ul, dtype=bool), (prob.K,))
    t = time.perf_counter()
    L, G = greedy_lengths(prob, ul[None])
    return _allocation(prob, L[0], ul, policy, solve_time_s=time.perf_counter() - t)


@register_policy("all-ul", "UL/DL baseline: every device uploads its draft distributions", family="paper2")
def solve_all_ul(scenario: Scenario, L_max: int = 16) -> Allocation:
    return solve_fixed_modes(scenario, True, L_max, "all-ul")


@register_policy("all-dl", "UL/DL baseline: every device downloads the target distribution", family="paper2")
def solve_all_dl(scenario: Scenario, L_max: int = 16) -> Allocation:
    return solve_fixed_modes(scenario, False, L_max, "all-dl")


@register_policy("uldl-fixed-length", "UL/DL: optimal modes and power, fixed L (draft_length)", family="paper2")
def solve_uldl_fixed_length(scenario: Scenario, draft_length: int = 4, exact_max_users: int = 16) -> Allocation:
    """Every device drafts ``draft_length``; optimal modes, bandwidth and power."""
    check_int_range("draft_length", draft_length, 0, 64)
    prob = Problem(scenario, draft_length)
    t = time.perf_counter()
    L = np.full(prob.K, draft_length)
    ul, G, info = best_modes(prob, L, exact_max_users)
    return _allocation(prob, L, ul, "uldl-fixed-length", solve_time_s=time.perf_counter() - t, **info)


@register_policy("uldl-optimal", "UL/DL: top-m mode structure + greedy lengths + optimal bandwidth and DL power "
                 "+ branch-and-bound certificate (upper_bound, gap in info)", family="paper2", max_users=1000)
def solve_uldl_optimal(scenario: Scenario, L_max: int = 16, exact_max_users: int = 16,
                       per_m_max_users: int = 16, max_rounds: int = 8, gap: float = 1e-6,
                       time_limit_s: float = 30.0, max_nodes: int = 1000,
                       exhaustive_max: int = EXHAUSTIVE_MAX_VECTORS) -> Allocation:
    """Adaptive mode selection: the top-m structure with greedy lengths, then alternation.

    0. Up to ``exhaustive_max`` distinct (mode, length) pairs, ``(2 L_max + 1)^K``, every pair is
       evaluated instead (:func:`exhaustive_joint`; ``info["search"] = "exhaustive"``, gap 0).

    1. Greedy lengths for all-DL and for all-UL, each also started from paper 1's
       heterogeneous-sync lengths (optimal for all-UL, whose round is paper 1's): the result is
       never worse than ``heterogeneous-sync``.
    2. Top-m pass: sort by :func:`marginal_index` at the all-DL lengths; for every m = 0..K run
       the greedy length search with the top m devices in UL (one batch; single start, no pair
       moves) when ``K <= per_m_max_users``; for larger K, the top-m search for fixed lengths
       (:func:`structured_modes`) from both step-1 length vectors.
    3. Alternate until nothing improves: optimal modes for the current lengths
       (:func:`best_modes`: exhaustive certificate for ``K <= exact_max_users``, flips and swaps
       beyond), then greedy lengths for those modes (warm-started); when neither improves and
       ``K <= per_m_max_users``, joint moves: every single-device mode flip, each followed by the
       greedy length search (one batch), and the alternation resumes from any improvement.
    Small problems (``K (L_max + 1) <=`` :data:`THOROUGH_SIZE`) search harder: the length searches
    of steps 1 and 3 start from every common length, and the joint moves also flip every pair of
    devices (with the full greedy search). Measured on 100 fresh random cells (K = 3 with
    L_max = 8, K = 4 with L_max = 6) against the joint optimum (:func:`exhaustive_joint`): the
    search without these additions missed 4-11 of 100 (by up to 4.5 %); with them 0 of 100, at
    about twice the time (0.33 s mean).
    Every step keeps the best point found and the all-UL / all-DL points are candidates (step 1
    includes their searches' starts), so the result is never worse than ``all-ul``, ``all-dl`` or
    ``heterogeneous-sync``.
    4. Certificate: :func:`.branch_and_bound_uldl.branch_and_bound_uldl` from the step-3 point,
       with paper 1's certified bound for the all-UL vectors, until the relative gap is at most
       ``gap`` or ``max_nodes`` nodes / ``time_limit_s`` seconds (counted from the start of the
       solve; the root bound is always computed) are spent. It may improve the point.

    ``info``: ``upper_bound`` [token/s] >= the joint optimum over (modes x lengths),
    ``gap = (upper_bound - goodput) / upper_bound``, ``status`` ("optimal": gap <= :data:`OPTIMAL_GAP`;
    "gap_limit": stopped at a looser requested ``gap``; "node_limit" / "time_limit": stopped), ``heuristic_goodput`` (steps 1-3 alone: its miss rate is
    measured in ``benchmarks/certified_optimality.py``), ``bnb_nodes``, ``bnb_time_s``.
    A stop by ``max_nodes`` is reproducible; a stop by the clock is not: the defaults (1,000 nodes,
    30 s) let the node budget bind on this machine up to K = 1,000 (where nodes are dearest).
    """
    from .heterogeneous import solve_heterogeneous_sync

    gap = check_gap(gap)
    time_limit_s = check_nonnegative("time_limit_s", time_limit_s)
    check_int_range("max_nodes", max_nodes, 0, 10**9)
    exhaustive_max = check_exhaustive_max(exhaustive_max)
    t = time.perf_counter()
    prob = Problem(scenario, L_max)
    K = prob.K
    if few_vectors(K, 2 * L_max, exhaustive_max):
        G, L, ul = exhaustive_joint(scenario, L_max, prob=prob)
        cert = Certificate(G, 0.0, "optimal", 0, time.perf_counter() - t, "exhaustive")
        return _allocation(prob, L, ul, "uldl-optimal", solve_time_s=time.perf_counter() - t, m_ul=int(ul.sum()),
                           **cert.info_for(G, OPTIMAL_GAP))
    ends = np.array([np.zeros(K, bool), np.ones(K, bool)])
    # paper 1's lengths are optimal for all-UL (its round is ours with every device in UL)
    h = solve_heterogeneous_sync(scenario, L_max)
    L_p1 = np.array(h.draft_lengths)
    small = K <= per_m_max_users
    thorough = K * (L_max + 1) <= THOROUGH_SIZE
    all_starts = L_max + 1 if thorough else None  # the length search from every common length
    L_end, G_end = greedy_lengths(prob, ends, L_init=L_p1, starts=all_starts)
    j = int(np.argmax(G_end))
    L, ul, G = L_end[j], ends[j], float(G_end[j])
    if K <= per_m_max_users:
        order = np.argsort(-marginal_index(prob, L_end[0]), kind="stable")
        rows = top_m_modes(order, K)
        Ls, Gs = greedy_lengths(prob, rows, starts=1, pair_max_users=0)
        j = int(np.argmax(Gs))
        if Gs[j] > G * (1 + 1e-12):
            L, ul, G = Ls[j], rows[j], float(Gs[j])
    else:
        for Lj in L_end:
            ul_j, G_j, _ = structured_modes(prob, Lj)
            if G_j > G * (1 + 1e-12):
                L, ul, G = Lj, ul_j, G_j
    info = {"m_ul_first_pass": int(ul.sum())}
    for it in range(max_rounds):
        ul2, G2, minfo = best_modes(prob, L, exact_max_users)
        info.update(minfo)
        if G2 > G * (1 + 1e-12):
            ul, G = ul2, G2
        L2, G3 = greedy_lengths(prob, ul[None], L_init=L, starts=all_starts)
        if G3[0] > G * (1 + 1e-12):
            L, G = L2[0], float(G3[0])
            continue
        if small:  # joint moves: one (thorough: or two) devices change mode, lengths searched again
            flips = ul[None, :] ^ np.eye(K, dtype=bool)
            if thorough:
                i, j = np.triu_indices(K, 1)
                flips = np.vstack([flips, flips[i] ^ np.eye(K, dtype=bool)[j]])
                L4, G4 = greedy_lengths(prob, flips, L_init=L)
            else:
                L4, G4 = greedy_lengths(prob, flips, L_init=L, starts=1, pair_max_users=0)
            j = int(np.argmax(G4))
            if G4[j] > G * (1 + 1e-12):
                L, ul, G = L4[j], flips[j], float(G4[j])
                continue
        break
    info.update(rounds=it + 1, m_ul=int(ul.sum()), heuristic_goodput=G)
    L, ul, bnb = branch_and_bound_uldl(prob, L, ul, G, h.info["upper_bound"], gap=gap,
                                       time_limit_s=max(0.0, time_limit_s - (time.perf_counter() - t)),
                                       max_nodes=max_nodes)
    G = bnb.value
    info.update(m_ul=int(ul.sum()), **bnb.certificate.info_for(G, OPTIMAL_GAP))
    return _allocation(prob, L, ul, "uldl-optimal", solve_time_s=time.perf_counter() - t, **info)


def _size_check(K: int, L_max: int) -> int:
    """``2^K (L_max+1)^K``, or one line refusing it above :data:`EXHAUSTIVE_MAX_COMBINATIONS`."""
    n = 2**K * (L_max + 1) ** K
    if n > EXHAUSTIVE_MAX_COMBINATIONS:
        raise ValidationError(
            f"uldl-exhaustive would evaluate 2^K (L_max+1)^K = {count_text(n)} (mode, length) combinations for K = {K}, "
            f"L_max = {L_max}, above its cap of {EXHAUSTIVE_MAX_COMBINATIONS:,}; use fewer users, a smaller L_max "
            "or uldl-optimal")
    return n


def exhaustive_joint(scenario: Scenario, L_max: int, chunk: int = 16384, prob: Problem | None = None):
    """Global optimum of the UL/DL problem: every mode assignment x every length vector.

    For each ``(ul, L)`` the two continuous sub-problems (FDMA makespan and DL power) are solved
    exactly (:meth:`Problem.solve_continuous`), so the best pair is the optimum of the mixed-integer
    problem. The mode of a device with ``L_k = 0`` does not matter (it sends nothing either way): it
    is enumerated in UL only, i.e. for each mode row the DL devices range over ``1..L_max`` --
    ``(2 L_max + 1)^K`` distinct pairs instead of ``2^K (L_max+1)^K``. Batched in ``chunk`` rows;
    refuses ``2^K (L_max+1)^K >`` :data:`EXHAUSTIVE_MAX_COMBINATIONS` (one line naming K and L_max).

    Returns ``(G, L [K], ul [K])``; ties go to the first pair in the enumeration order.
    """
    check_int_range("L_max", L_max, 1, 64)
    K = scenario.num_users
    _size_check(K, L_max)
    prob = prob or Problem(scenario, L_max)
    best = (-np.inf, None, None)
    for ul in all_mode_rows(K):
        lo = np.where(ul, 0, 1)
        sizes = np.full(K, L_max + 1) - lo
        total = int(np.prod(sizes))
        for start in range(0, total, chunk):
            idx = np.arange(start, min(total, start + chunk))
            Lv = np.stack(np.unravel_index(idx, sizes), axis=-1) + lo
            G = prob.goodput(Lv, np.broadcast_to(ul, Lv.shape))
            j = int(np.argmax(G))
            if G[j] > best[0]:
                best = (float(G[j]), Lv[j].copy(), ul.copy())
    return best


@register_policy("uldl-exhaustive", "UL/DL reference: every (mode assignment, length vector) with optimal bandwidth "
                 "and DL power; refuses 2^K (L_max+1)^K > 3,000,000 (the default L_max = 8 runs K <= 4 in about "
                 "a second; K = 5 takes ~25 s)", family="reference", max_users=EXHAUSTIVE_MAX_USERS)
def solve_uldl_exhaustive(scenario: Scenario, L_max: int = 8) -> Allocation:
    """Reference: the joint optimum over all modes and lengths (:func:`exhaustive_joint`), for small K.

    Refuses (one :class:`ValidationError` line naming K and L_max) when ``2^K (L_max+1)^K`` exceeds
    :data:`EXHAUSTIVE_MAX_COMBINATIONS`; K <= :data:`EXHAUSTIVE_MAX_USERS` (the cap at L_max = 1).
    """
    check_int_range("L_max", L_max, 1, 64)
    n = _size_check(scenario.num_users, L_max)
    t = time.perf_counter()
    prob = Problem(scenario, L_max)
    _, L, ul = exhaustive_joint(scenario, L_max, prob=prob)
    return _allocation(prob, L, ul, "uldl-exhaustive", solve_time_s=time.perf_counter() - t,
                       combinations=n, evaluated=(2 * L_max + 1) ** scenario.num_users)
