"""Heterogeneous draft control: a draft length per user, jointly with the bandwidth split.

Two readings of "relaxing the synchronisation" (our reconstruction; the paper's text is not public):

(A) synchronous ragged batch::

    max_{L, b}  sum_k N_k(L_k) / ( D(L, b) + T_ver(sum_k (L_k+1)) + T_fb + T_acc ),
    D(L, b) = max_k L_k (tau_k + S / R_k(b_k)),   sum_k b_k <= B,   L_k in {0..L_max}

(B) asynchronous per-user rounds::

    max_{L, b}  sum_k N_k(L_k) / ( L_k tau_k + L_k S / R_k(b_k) + T_ver(L_k+1) + T_fb + T_acc )

Decomposition used here.

* For fixed L both bandwidth sub-problems are solved exactly (:mod:`.bandwidth`).
* (A): parametrise by the makespan D. For fixed D user k needs ``b_k(L_k, D)`` to finish in time,
  and the problem is ``max sum N_k(L_k) / (D + c0 + t1 sum L_k)`` s.t. ``sum b_k(L_k, D) <= B``.
  Dinkelbach turns the ratio into ``sum_k [N_k(L_k) - theta t1 L_k]`` and a Lagrange multiplier
  mu on the budget separates it into per-user choices ``argmax_L N_k(L) - theta t1 L - mu b_k(L, D)``
  (vectorised over users, lengths and a grid of D). Each D gives a candidate L; the best is
  evaluated exactly.
* (B): a Lagrange multiplier mu on the budget separates the users; user k's best response is
  ``max_{L, b} N_k(L) / T_k(L, b) - mu b``, concave in b for each L (solved by bisection on the
  marginal goodput) and then a scan over L. Bisection on mu meets the budget.
* Both: the integer choice leaves a duality gap of at most one user's switch; we close most of it
  by a local search on L (any length of one user given the others -- all L_max+1 values at once --,
  +-1 on all users, and +-1 on any two users for K <= 8) with the exact bandwidth of every
  candidate, started from the best of the Lagrangian candidates, the homogeneous optimum and
  server-only decoding -- so the result is never worse than any of those.
* (A) is then certified: the local-search optimum is the incumbent of a branch-and-bound over
  makespan intervals and per-user length boxes (:mod:`.branch_and_bound`, whose docstring argues
  the bound). Each node's bound relaxes the budget with the needs at the interval's largest
  makespan and the denominator at its smallest; Dinkelbach on the ratio and a budget multiplier
  separate it per user, and any (ratio, multiplier) pair gives a valid bound. The allocation's
  ``info`` reports ``upper_bound`` (>= the optimum), ``gap = (upper_bound - goodput) / upper_bound``
  and ``status`` ("optimal" when ``gap`` <= the tolerance, "node_limit" when the node budget
  (:func:`node_budget`) stopped it, "time_limit" when the wall-clock safety limit did). Up to
  K = 64 it runs to the tolerance (default 1e-9) within a budget of ``BNB_NODE_WORK / K`` nodes;
  above, a short certifying run of ``LARGE_K_NODE_WORK / K`` nodes reports the gap it proved.
  The node budget makes the answer reproducible on any machine; the time limit (10 s by
  default) is only a safety net and binds only on a machine much slower than this one, except near
  K = 100,000, where a certified solve takes several seconds here (the README's speed section, from
  ``benchmarks/certified_scaling.py``): pass a larger ``time_limit_s`` there for an answer that does not depend on the machine. The tests
  compare both solvers with the exhaustive optimum (``exhaustive.py``) on random instances.
* (B) is certified the same way (:mod:`.branch_and_bound_async`): for any budget multiplier mu,
  ``sum_k max_{L_k in box, b_k in [0, B]} [N_k / T_k - mu b_k] + mu B`` bounds the optimum over a
  box; each inner maximum over b is concave and is bounded safely by the tangent at the computed
  best response; mu minimises this convex dual by bisection, reduced costs cut box ends, small
  boxes are enumerated. Same ``info`` keys and parameters; on random instances the root node
  usually closes the gap (K = 1000 included, ~0.4-0.7 s in all).

Draft length 0 is always available: the user falls back to autoregressive decoding on the
server. A user whose channel cannot carry a token in any useful time is simply given L = 0
(and no bandwidth) by the optimiser: it is excluded from drafting, not from service.
"""
from __future__ import annotations

import dataclasses
import time

import numpy as np

from ..acceptance import tokens_table
from ..channel import RateModel
from ..rounds import Allocation, async_goodput, async_terms, evaluate, sync_goodput, sync_round_time
from ..scenario import Scenario
from ..validation import check_int_range, check_nonnegative
from .bandwidth import (
    async_best_response,
    async_marginal,
    async_optimal_bandwidth,
    min_makespan_bandwidth,
    required_bandwidth,
)
from .branch_and_bound import branch_and_bound_sync
from .branch_and_bound_async import branch_and_bound_async
from .search import EXHAUSTIVE_MAX_VECTORS, check_exhaustive_max, check_gap, exhaustive_if_small
from .homogeneous import solve_homogeneous
from .registry import register_policy

#: the gap below which a result is reported "optimal" (the default tolerance of both solvers)
OPTIMAL_GAP = 1e-9

POLISH_MAX_USERS = 32  # local search on L runs up to this K (beyond, the Lagrangian gap is O(1/K))
PAIR_MOVES_MAX_USERS = 8
BNB_FULL_USERS = 64  # branch-and-bound to the tolerance up to this K (beyond, a short certifying run)
BNB_NODE_WORK = 400_000  # node budget x K of the branch-and-bound up to BNB_FULL_USERS users
LARGE_K_NODE_WORK = 40_000  # node budget x K above BNB_FULL_USERS (at least 64 nodes: node_budget)
PER_NODE_USERS = 3_000  # above, each node is bounded on its own, in threads (the crossover measured against the
# "one batch pass" column of benchmarks/certified_scaling.py; README speed section)


def node_budget(K: int) -> int:
    """Default node budget of the heterogeneous branch-and-bounds for ``K`` users (at least 64).

    ``ceil(BNB_NODE_WORK / K)`` up to :data:`BNB_FULL_USERS` users, ``ceil(LARGE_K_NODE_WORK / K)``
    above: the work of a node grows with K. A node budget, unlike a time limit, gives the same
    answer on every machine.
    """
    work = BNB_NODE_WORK if K <= BNB_FULL_USERS else LARGE_K_NODE_WORK
    return max(64, -(-work // max(int(K), 1)))


# ----------------------------------------------------------------------------------------------
# exact evaluation of candidate length vectors (batched)
# ----------------------------------------------------------------------------------------------
def _tokens_of(table: np.ndarray, L: np.ndarray) -> np.ndarray:
    """``N_k(L_k)`` from a ``[K, L_max+1]`` table for ``L`` of shape ``[..., K]``."""
    return table[np.arange(table.shape[0]), L]


def evaluate_sync_lengths(scenario: Scenario, L, table, rates=None):
    """Exact goodput [...] and bandwidth [..., K] of length vectors ``L`` [..., K] under model (A)."""
    L = np.asarray(L)
    D, b = min_makespan_bandwidth(scenario, L, rates)
    return sync_goodput(scenario, L, _tokens_of(table, L), D), b


def evaluate_async_lengths(scenario: Scenario, L, table, rates=None):
    """Exact goodput [...] and bandwidth [..., K] of length vectors ``L`` [..., K] under model (B)."""
    L = np.asarray(L)
    b, G = async_optimal_bandwidth(scenario, L, _tokens_of(table, L), rates)
    return G, b


def _neighbours(L: np.ndarray, L_max: int, pairs: bool) -> np.ndarray:
    """Candidate moves ``[n, K]``: every length 0..L_max of one user (the others fixed), +-1 on
    everyone, and (small K) +-1 on any two users."""
    K = L.size
    single = np.tile(L, (K * (L_max + 1), 1))
    single[np.arange(K * (L_max + 1)), np.repeat(np.arange(K), L_max + 1)] = np.tile(np.arange(L_max + 1), K)
    moves = [single, (L + 1)[None], (L - 1)[None]]
    if pairs:
        i, j = np.triu_indices(K, 1)
        for si in (1, -1):
            for sj in (1, -1):
                m = np.tile(L, (i.size, 1))
                m[np.arange(i.size), i] += si
                m[np.arange(i.size), j] += sj
                moves.append(m)
    cand = np.vstack(moves)
    ok = np.all((cand >= 0) & (cand <= L_max), axis=1) & np.any(cand != L, axis=1)
    return np.unique(cand[ok], axis=0)


def local_search(evaluate, L0: np.ndarray, G0: float, L_max: int, max_sweeps: int = 500):
    """Best-improvement search, exact evaluation of every candidate of a sweep in one batch.

    Moves: any length of one user (its best response to the others, all ``L_max + 1`` values at
    once), +-1 on every user, and +-1 on any two users for ``K <= 8``.
    """
    L, G = np.array(L0, dtype=int), float(G0)
    pairs = L.size <= PAIR_MOVES_MAX_USERS
    sweeps = 0
    for sweeps in range(1, max_sweeps + 1):
        cand = _neighbours(L, L_max, pairs)
        if cand.size == 0:
            break
        Gc, _ = evaluate(cand)
        i = int(np.argmax(Gc))
        if Gc[i] <= G * (1 + 1e-12):
            break
        L, G = cand[i], float(Gc[i])
    return L, G, sweeps


# ----------------------------------------------------------------------------------------------
# (A) synchronous ragged batch
# ----------------------------------------------------------------------------------------------
def _lagrangian_choice(values, costs, lin_price, B, iters: int = 40):
    """Per-user ``argmax_L values[L,k] - lin_price * L - mu costs[..., L, k]`` with mu meeting B.

    values : [L+1, K]; costs : [M, L+1, K] (M grid makespans; inf = infeasible); lin_price : [M].
    Returns the choice at the smallest mu that keeps ``sum_k cost <= B`` (shape [M, K]).
    """
    Lp1 = values.shape[0]
    Ls = np.arange(Lp1)[None, :, None]
    base = values[None] - lin_price[:, None, None] * Ls  # [M, L+1, K]
    finite = np.isfinite(costs)
    base = np.where(finite, base, -np.inf)
    safe_cost = np.where(finite, costs, 0.0)

    def choose(mu):
        score = base - mu[:, None, None] * safe_cost
        idx = np.argmax(score, axis=1)  # [M, K]
        used = np.take_along_axis(safe_cost, idx[:, None, :], axis=1)[:, 0, :].sum(axis=1)
        return idx, used

    idx0, used0 = choose(np.zeros(costs.shape[0]))
    with np.errstate(divide="ignore", invalid="ignore"):
        gain = (base - base[:, :1, :]) / safe_cost
    gain = np.where(finite & (safe_cost > 0), gain, 0.0)
    mu_hi = np.log(np.maximum(gain.max(axis=(1, 2)), 1e-300)) + 1e-9
    mu_lo = mu_hi - 80.0
    for _ in range(iters):
        mid = 0.5 * (mu_lo + mu_hi)
        _, used = choose(np.exp(mid))
        over = used > B
        mu_lo = np.where(over, mid, mu_lo)
        mu_hi = np.where(over, mu_hi, mid)
    idx, _ = choose(np.exp(mu_hi))
    return np.where((used0 <= B)[:, None], idx0, idx)


def sync_candidates(scenario: Scenario, table, L_max: int, rates, n_grid: int = 32, n_dinkelbach: int = 4):
    """Lagrangian/Dinkelbach candidates over a log grid of M makespans D; returns (L [M, K], lower bounds [M])."""
    tau, S, B = scenario.tau, scenario.payload.bits_per_token, scenario.radio.bandwidth_hz
    K = scenario.num_users
    t1 = scenario.server.t1_s_per_token
    with np.errstate(divide="ignore"):
        d_best = np.min(tau + S / rates.rate(np.full(K, B)))
        d_worst = np.max(tau + S / rates.rate(np.full(K, B / K)))
    grid = np.geomspace(d_best, L_max * d_worst, n_grid)
    Ls = np.arange(L_max + 1)
    costs = required_bandwidth(rates, S, Ls[None, :, None], tau[None, None, :], grid[:, None, None])
    values = table.T  # [L+1, K]
    c0 = float(sync_round_time(scenario, 0.0, 0.0))
    L_sel = np.zeros((n_grid, K), dtype=int)
    theta = K / (grid + c0)
    for _ in range(n_dinkelbach):
        L_sel = _lagrangian_choice(values, costs, theta * t1, B)
        theta = _tokens_of(table, L_sel).sum(axis=1) / (grid + c0 + t1 * L_sel.sum(axis=1))
    return L_sel, theta


def _prepare(scenario: Scenario, L_max: int, rates: RateModel | None):
    """Shared set-up of both solvers: checked L_max, rate model, tokens table, homogeneous optimum."""
    check_int_range("L_max", L_max, 1, 64)
    rates = rates or RateModel.of(scenario)
    return rates, scenario.num_users, tokens_table(scenario, L_max), solve_homogeneous(scenario, L_max, rates)


def _polish(polish: bool | None, K: int) -> bool:
    return polish if polish is not None else K <= POLISH_MAX_USERS


def sync_search_settings(K: int) -> dict:
    """The branch-and-bound settings :func:`solve_heterogeneous_sync` uses at ``K`` users.

    * up to :data:`BNB_FULL_USERS`: batches of 64 nodes, 16 root intervals, makespan cuts at the relaxed
      solution's own makespan, every bound refined (the settings every committed small-K result holds);
    * above: batches of 8, 4 root intervals, every makespan cut at the interval's midpoint, and a node
      proven to stay open keeps the best bound found up to that proof (``refine_open=False``); measured faster at
      K = 100 to 100,000 (``benchmarks/certified_scaling.py``: fewer nodes, fewer multiplier searches);
    * above :data:`PER_NODE_USERS` also one node per bound call, on every core (``per_node``: the same bits
      on any number of threads); below it one node's arrays are too small and the batch pass is faster.
    """
    if K <= BNB_FULL_USERS:
        return {"batch": 64, "n_root": 16}
    return {"batch": 8, "n_root": 4, "d_split": "midpoint", "refine_open": False, "per_node": K > PER_NODE_USERS}


def solve_heterogeneous_sync(scenario: Scenario, L_max: int = 16, rates: RateModel | None = None,
                             polish: bool | None = None, gap: float = 1e-9,
                             time_limit_s: float = 10.0, max_nodes: int | None = None,
                             exhaustive_max: int = EXHAUSTIVE_MAX_VECTORS) -> Allocation:
    """Per-user draft lengths and bandwidth for one synchronous ragged batch (model A), with a
    certified optimality gap.

    The Lagrangian candidates, the homogeneous optimum and server-only decoding seed a local
    search (:func:`local_search`); its result is the incumbent of the branch-and-bound of
    :func:`spinlib.control.branch_and_bound.branch_and_bound_sync`, which improves it and proves a
    bound on the optimum, within a node budget (:func:`node_budget`; a short certifying run above
    :data:`BNB_FULL_USERS` users) and the wall-clock safety limit ``time_limit_s``, and reports the
    gap it certified (settings by K: :func:`sync_search_settings`). Up to ``exhaustive_max`` length vectors (``(L_max+1)^K``) every vector is
    evaluated instead (:func:`spinlib.control.search.exhaustive`: cheaper there, gap 0).

    Parameters
    ----------
    L_max : int
        Largest draft length (1..64).
    polish : bool, optional
        Run the local search (default: ``K <= 32``).
    gap : float
        Relative optimality tolerance of the branch-and-bound (>= 0).
    time_limit_s : float
        Wall-clock safety limit of the branch-and-bound [s] (>= 0; 0 computes no bound beyond the seeds).
    max_nodes : int, optional
        Node budget of the branch-and-bound (>= 1; default :func:`node_budget` of K).
    exhaustive_max : int
        Evaluate every length vector when there are at most this many (>= 0; 0: always branch).

    Returns
    -------
    Allocation
        ``info``: ``upper_bound`` [token/s] >= the optimum, ``gap = (upper_bound - goodput) /
        upper_bound``, ``status`` ("optimal": gap <= :data:`OPTIMAL_GAP`; "gap_limit": stopped at a looser requested ``gap``; "node_limit" / "time_limit": stopped by the node budget / the clock),
        ``search`` ("branch-and-bound" or "exhaustive"), ``bnb_nodes``, ``bnb_time_s``, ``makespan_s``,
        ``local_search_sweeps``, ``homogeneous_goodput``.
    """
    gap = check_gap(gap)
    time_limit_s = check_nonnegative("time_limit_s", time_limit_s)
    nodes = node_budget(scenario.num_users) if max_nodes is None else check_int_range("max_nodes", max_nodes, 1, 10**9)
    exhaustive_max = check_exhaustive_max(exhaustive_max)  # before any work: a bad value is one line
    t_start = time.perf_counter()
    rates, K, table, hom = _prepare(scenario, L_max, rates)
    res = exhaustive_if_small(lambda X: evaluate_sync_lengths(scenario, X, table, rates)[0], K, L_max, exhaustive_max)
    if res is not None:
        return _sync_allocation(scenario, rates, table, res, 0, hom)
    big = K > BNB_FULL_USERS
    pool = [np.array(hom.draft_lengths), np.zeros(K, dtype=int)]
    if not big:  # above, the branch-and-bound's root nodes offer the same Lagrangian candidates
        cands, lower = sync_candidates(scenario, table, L_max, rates)
        # exact evaluation of the few most promising candidates (by their grid lower bound)
        pool += [cands[i] for i in np.argsort(-lower)[:6]]
    pool = np.vstack(pool)
    Gp, _ = evaluate_sync_lengths(scenario, pool, table, rates)
    i = int(np.argmax(Gp))
    best_L, best_G = pool[i], float(Gp[i])
    sweeps = 0
    if _polish(polish, K):
        best_L, best_G, sweeps = local_search(
            lambda c: evaluate_sync_lengths(scenario, c, table, rates), best_L, best_G, L_max
        )
    limit = max(0.0, time_limit_s - (time.perf_counter() - t_start))
    bnb = branch_and_bound_sync(scenario, rates, table, best_L, best_G, gap=gap, time_limit_s=limit,
                                max_nodes=nodes, **sync_search_settings(K))
    return _sync_allocation(scenario, rates, table, bnb, sweeps, hom)


def _sync_allocation(scenario: Scenario, rates: RateModel, table, res, sweeps: int, hom) -> Allocation:
    """The allocation of a certified search's lengths ``res.x`` with their minimal-makespan split."""
    best_L = res.x
    D, b = min_makespan_bandwidth(scenario, best_L, rates)
    G = float(sync_goodput(scenario, best_L, _tokens_of(table, best_L), D))
    info = {"makespan_s": float(D), "local_search_sweeps": sweeps, "homogeneous_goodput": hom.goodput_tokens_per_s,
            **res.certificate.info_for(G, OPTIMAL_GAP)}
    return Allocation(tuple(int(x) for x in best_L), tuple(b.tolist()), "sync", "heterogeneous-sync", G, info)


# ----------------------------------------------------------------------------------------------
# (B) asynchronous rounds
# ----------------------------------------------------------------------------------------------
def async_lagrangian(scenario: Scenario, table, L_max: int, rates, iters: int = 40):
    """Lengths chosen by the budget-multiplier decomposition of model (B): ``(L_feasible, L_over)``."""
    K = scenario.num_users
    B = scenario.radio.bandwidth_hz
    Ls = np.broadcast_to(np.arange(L_max + 1)[:, None], (L_max + 1, K))
    N = table.T  # [L+1, K]
    A, C = async_terms(scenario, Ls)

    def respond(mu):
        b = async_best_response(rates, mu, N, A, C, B)
        with np.errstate(divide="ignore", invalid="ignore"):
            up = np.where(C > 0, C / rates.rate(b), 0.0)
        val = N / (A + up) - mu * b
        idx = np.argmax(val, axis=0)
        return idx, b[idx, np.arange(K)].sum()

    with np.errstate(divide="ignore", invalid="ignore"):
        m_full = np.where(C > 0, async_marginal(rates, np.full(Ls.shape, B), N, A, C), np.inf)
        m_tiny = np.where(C > 0, async_marginal(rates, np.full(Ls.shape, B * np.exp(-40.0)), N, A, C), 0.0)
    lo = np.log(max(float(m_full.min()), 1e-300)) - 1.0
    hi = np.log(max(float(m_tiny.max()), 1e-300)) + 1.0
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        _, used = respond(np.exp(mid))
        if used > B:
            lo = mid
        else:
            hi = mid
    return respond(np.exp(hi))[0], respond(np.exp(lo))[0]


def solve_heterogeneous_async(scenario: Scenario, L_max: int = 16, rates: RateModel | None = None,
                              polish: bool | None = None, gap: float = 1e-9,
                              time_limit_s: float = 10.0, max_nodes: int | None = None,
                              exhaustive_max: int = EXHAUSTIVE_MAX_VECTORS) -> Allocation:
    """Per-user draft lengths and bandwidth for asynchronous per-user rounds (model B), with a
    certified optimality gap.

    The budget-multiplier choices (:func:`async_lagrangian`), their one-user mixtures, the
    homogeneous optimum and server-only decoding seed a local search (:func:`local_search`); its
    result is the incumbent of the branch-and-bound of
    :func:`spinlib.control.branch_and_bound_async.branch_and_bound_async`, which improves it and
    proves a bound on the optimum, within a node budget (:func:`node_budget`; the root bound is
    always computed) and the wall-clock safety limit ``time_limit_s``, and reports the gap it certified.
    Up to ``exhaustive_max`` length vectors every vector is evaluated instead (gap 0).

    Parameters
    ----------
    L_max : int
        Largest draft length (1..64).
    polish : bool, optional
        Run the local search (default: ``K <= 32``).
    gap : float
        Relative optimality tolerance of the branch-and-bound (>= 0).
    time_limit_s : float
        Wall-clock safety limit of the branch-and-bound [s] (>= 0; 0 bounds the root only).
    max_nodes : int, optional
        Node budget of the branch-and-bound (>= 1; default :func:`node_budget` of K).
    exhaustive_max : int
        Evaluate every length vector when there are at most this many (>= 0; 0: always branch).

    Returns
    -------
    Allocation
        ``info``: ``upper_bound`` [token/s] >= the optimum, ``gap = (upper_bound - goodput) /
        upper_bound``, ``status`` ("optimal": gap <= :data:`OPTIMAL_GAP`; "gap_limit": stopped at a looser requested ``gap``; "node_limit" / "time_limit": stopped by the node budget / the clock),
        ``search`` ("branch-and-bound" or "exhaustive"), ``bnb_nodes``, ``bnb_time_s``,
        ``local_search_sweeps``, ``server_utilisation``.
    """
    gap = check_gap(gap)
    time_limit_s = check_nonnegative("time_limit_s", time_limit_s)
    nodes = node_budget(scenario.num_users) if max_nodes is None else check_int_range("max_nodes", max_nodes, 1, 10**9)
    exhaustive_max = check_exhaustive_max(exhaustive_max)  # before any work: a bad value is one line
    t_start = time.perf_counter()
    rates, K, table, hom = _prepare(scenario, L_max, rates)
    res = exhaustive_if_small(lambda X: evaluate_async_lengths(scenario, X, table, rates)[0], K, L_max, exhaustive_max)
    if res is not None:
        return _async_allocation(scenario, rates, table, res, 0, hom)
    L_feas, L_over = async_lagrangian(scenario, table, L_max, rates)
    # the multiplier brackets the budget: the under- and over-budget choices, and every
    # mixture switching one user between them, are the natural candidates
    diff = np.flatnonzero(L_feas != L_over)
    mixes = [np.where(np.arange(K) == k, L_over, L_feas) for k in diff[:8]]
    pool = np.vstack([np.array(hom.draft_lengths), np.zeros(K, dtype=int), L_feas, L_over, *mixes])
    G, _ = evaluate_async_lengths(scenario, pool, table, rates)
    i = int(np.argmax(G))
    best_L, best_G = pool[i], float(G[i])
    sweeps = 0
    if _polish(polish, K):
        best_L, best_G, sweeps = local_search(
            lambda c: evaluate_async_lengths(scenario, c, table, rates), best_L, best_G, L_max
        )
    big = K > BNB_FULL_USERS
    limit = max(0.0, time_limit_s - (time.perf_counter() - t_start))
    bnb = branch_and_bound_async(scenario, rates, table, best_L, best_G, gap=gap, time_limit_s=limit,
                                 max_nodes=nodes, batch=8 if big else 64)
    return _async_allocation(scenario, rates, table, bnb, sweeps, hom)


def _async_allocation(scenario: Scenario, rates: RateModel, table, res, sweeps: int, hom) -> Allocation:
    """The allocation of a certified search's lengths ``res.x`` with their optimal bandwidth."""
    best_L = res.x
    b, G = async_optimal_bandwidth(scenario, best_L, _tokens_of(table, best_L), rates)
    G = float(G)
    alloc = Allocation(tuple(int(x) for x in best_L), tuple(b.tolist()), "async", "heterogeneous-async", G)
    info = {"local_search_sweeps": sweeps, "server_utilisation": evaluate(scenario, alloc).server_utilisation,
            "homogeneous_goodput": hom.goodput_tokens_per_s, **res.certificate.info_for(G, OPTIMAL_GAP)}
    return dataclasses.replace(alloc, info=info)


@register_policy("heterogeneous-sync", "per-user draft lengths + optimal bandwidth, one synchronous ragged batch "
                 "(model A)", family="paper1")
def heterogeneous_sync(scenario: Scenario, L_max: int = 16, gap: float = 1e-9, time_limit_s: float = 10.0,
                       max_nodes: int | None = None, exhaustive_max: int = EXHAUSTIVE_MAX_VECTORS) -> Allocation:
    """Policy ``heterogeneous-sync``: :func:`solve_heterogeneous_sync` (``gap``: relative optimality
    tolerance; ``max_nodes``: branch-and-bound node budget, default :func:`node_budget`;
    ``time_limit_s``: wall-clock safety limit [s]; ``exhaustive_max``: enumerate up to this many
    length vectors, 0 always branches)."""
    return solve_heterogeneous_sync(scenario, L_max, gap=gap, time_limit_s=time_limit_s, max_nodes=max_nodes,
                                    exhaustive_max=exhaustive_max)


@register_policy("heterogeneous-async", "per-user draft lengths + optimal bandwidth, asynchronous rounds (model B)",
                 family="paper1")
def heterogeneous_async(scenario: Scenario, L_max: int = 16, gap: float = 1e-9,
                        time_limit_s: float = 10.0, max_nodes: int | None = None,
                        exhaustive_max: int = EXHAUSTIVE_MAX_VECTORS) -> Allocation:
    """Policy ``heterogeneous-async``: :func:`solve_heterogeneous_async` (``gap``: relative optimality
    tolerance; ``max_nodes``: branch-and-bound node budget, default :func:`node_budget`;
    ``time_limit_s``: wall-clock safety limit [s]; ``exhaustive_max``: enumerate up to this many
    length vectors, 0 always branches)."""
    return solve_heterogeneous_async(scenario, L_max, gap=gap, time_limit_s=time_limit_s, max_nodes=max_nodes,
                                     exhaustive_max=exhaustive_max)


__all__ = [
    "solve_heterogeneous_sync",
    "sync_search_settings",
    "solve_heterogeneous_async",
    "evaluate_sync_lengths",
    "evaluate_async_lengths",
    "async_goodput",
]
