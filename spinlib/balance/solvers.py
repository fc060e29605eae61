r"""BALANCE solvers: an exact polynomial algorithm on the phi grid, and baselines.

The problem (model in :mod:`spinlib.balance.model`): choose a mode in {off, AD, SD} per user and
the AD share ``phi`` to maximise the number of users served, subject to every served user's
deadline at the schedule's batch sizes ``(a, s)`` and the memory limit. The share is taken from
the grid ``G = {0, 1/m, ..., 1}`` (``m = phi_steps``); the MILP reference
(:mod:`spinlib.balance.milp`) fixes ``phi`` per solve and enumerates the **same** grid, so both
solve the same problem ``OPT_G = max_{phi in G} OPT(phi)``.

Claim (our reconstruction, proven below): :func:`solve_exact_grid` returns an optimal schedule
of ``OPT_G`` in polynomial time. For this model the paper's "constant-factor approximation" is
therefore beaten: the proven fraction is 1 (on the grid). This is a statement about *our* model
(time-shared compute, step times affine in the batch size, additive KV memory), not about the
paper's, whose formulation we do not have.

Proof sketch
------------
Fix ``phi``. **(1) Thresholds.** The AD per-token time ``(t0_L + t1_L a) / phi`` and the SD round
time ``(L t_S(s) + t_L(s (L+1))) / (1 - phi)`` are non-decreasing in the batch size, so user k
meets its deadline in AD iff ``a <= A_k`` and in SD iff ``s <= S_k``, with integer thresholds
(:func:`thresholds`: ``A_k = floor((phi (T_k - c_k) / n_k - t0_L) / t1_L)`` and the analogue for
SD; no batch size works when the bracket is negative). A schedule with batch sizes ``(a, s)`` is
feasible iff its AD users have ``A_k >= a``, its SD users ``S_k >= s`` and its memory fits.

**(2) Down-closed.** Let ``F = {(a, s) : a feasible schedule with these batch sizes exists}``.
If ``(a, s) in F`` with ``a >= 1``, dropping one AD user gives ``(a - 1, s) in F`` (the remaining
users' thresholds are ``>= a > a - 1``; memory decreases; dropping the last user of a mode also
drops that model's weights). Same for ``s``. So ``F`` is a staircase and ``OPT(phi) = max_{F}
(a + s)`` is found by the walk of :func:`_best_batches`: ``a(s) = max{a : (a, s) in F}`` is
non-increasing in ``s``; start from ``a(0)`` (binary search) and, for ``s = 0, 1, ...``, decrease
``a`` until ``(a, s) in F``; stop when ``(0, s)`` is not in F. At most ``a(0) + s_max + 2``
membership tests.

**(3) Membership of (a, s) is a min-cost assignment solved exactly.** ``(a, s) in F`` iff the least
KV memory of choosing ``a`` users with ``A_k >= a`` for AD and ``s`` other users with
``S_k >= s`` for SD, plus the weights, is ``<= M``. (i) Some optimal choice uses only the ``a + s``
cheapest AD-eligible users (by ``m^AD``) for AD and the ``a + s`` cheapest SD-eligible (by
``m^SD``) for SD: if an AD user lies outside that set, one of its ``a + s`` members is unused
(at most ``a + s - 1`` others are chosen) and replacing the user by it does not increase memory;
same for SD. (ii) Among the candidates eligible for both modes, sort by ``d_k = m_k^SD - m_k^AD``:
if an SD user i and an AD user j with ``d_i > d_j`` were both chosen, swapping their modes changes
memory by ``d_j - d_i < 0``. Hence some optimum sends a prefix of that order (cut ``t``) to SD
and the suffix to AD, and for a fixed cut the two sides are independent: the ``s`` cheapest SD
candidates of the prefix side plus the ``a`` cheapest AD candidates of the suffix side. Every cut
is evaluated with two heaps (:func:`min_kv_assignment`), ``O((a + s) log(a + s))``.

**(4) Grid.** ``OPT_G`` is the maximum over the ``m + 1`` grid values of ``phi``; phi = 1 is the
best AD-only schedule and phi = 0 the best SD-only schedule (the baselines ``ad-only`` and
``sd-only`` are exactly those). Total time ``O(m (K log K + n_max (K + n_max log n_max)))`` with
``n_max <= K`` the staircase length: polynomial, ``O(m K^2 log K)`` in the worst case, and near
``O(m K)`` when memory caps the served count, as it does on an edge GPU.

What the grid costs: a schedule feasible at some ``phi`` off the grid may need a neighbouring grid
value that serves fewer; ``OPT_G`` is the exact optimum of the problem with ``phi`` restricted to
``G`` (the restriction the MILP makes too), and a finer grid can only gain on nested grids.

The greedy baseline (``greedy``: the controllers.md recipe, users admitted in order of memory into
their cheaper feasible mode, keeping everyone feasible; keeping the better of that set and the best
single user changes nothing here, since the greedy admits the first user that fits alone) has **no**
constant factor: a first admitted user whose deadline allows only AD batch 1 blocks every other AD
user (:func:`greedy_counterexample`: greedy 1, optimum K - 1).
"""
from __future__ import annotations

import heapq
import math

import numpy as np

from ..validation import check_int_range
from .model import BalanceInstance, BalanceServer, BalanceUser, Schedule
from .registry import register_balance_policy

MAX_PHI_STEPS = 1000


def phi_grid(phi_steps: int) -> np.ndarray:
    """``[m + 1]`` grid ``{0, 1/m, ..., 1}`` of AD shares (``m = phi_steps`` in [1, 1000])."""
    m = check_int_range("phi_steps", phi_steps, 1, MAX_PHI_STEPS)
    return np.arange(m + 1) / m


def thresholds(instance: BalanceInstance, phi: float) -> tuple[np.ndarray, np.ndarray]:
    """``(A, S)``: ``[K]`` largest AD / SD batch sizes (in ``[0, K]``) at which each user meets its deadline.

    ``A_k = floor((phi (T_k - c_k) / n_k - t0_L) / t1_L)`` (all ``K`` when ``t1_L = 0`` and the bracket
    is >= 0), and for SD ``S_k = floor(((1 - phi) (T_k - c_k) N_k / n_k - L t0_S - t0_L) / (L t1_S +
    (L + 1) t1_L))``; 0 means the user cannot be served in that mode at this share.
    """
    srv: BalanceServer = instance.server
    K, L = instance.num_users, srv.draft_length
    slack = instance.deadline - instance.comm  # [K] time left for decoding [s]
    n = instance.n

    def cap(r, per_user):  # largest integer b in [0, K] with per_user * b <= r (r: [K])
        with np.errstate(divide="ignore", invalid="ignore"):
            b = np.floor(r / per_user) if per_user > 0 else np.where(r >= 0, float(K), -1.0)
        return np.clip(np.nan_to_num(b, nan=-1.0, posinf=K, neginf=-1.0), 0, K).astype(np.int64)

    if phi <= 0.0:
        A = np.zeros(K, dtype=np.int64)
    else:
        A = cap(phi * slack / n - srv.large_t0_s, srv.large_t1_s_per_token)
    if phi >= 1.0:
        S = np.zeros(K, dtype=np.int64)
    else:
        r = (1.0 - phi) * slack * instance.tokens_per_round / n - L * srv.small_t0_s - srv.large_t0_s
        S = cap(r, L * srv.small_t1_s_per_token + (L + 1) * srv.large_t1_s_per_token)
    A[slack <= 0] = 0
    S[slack <= 0] = 0
    return A, S


def _sum_smallest_growing(values, base, count):
    """``out[t]`` = sum of the ``count`` smallest of ``base + values[:t]``, t = 0..len(values) (inf if too few)."""
    out = np.full(len(values) + 1, math.inf)
    if count == 0:
        out[:] = 0.0
        return out
    heap = [-v for v in sorted(base)[:count]]  # max-heap of the count smallest
    heapq.heapify(heap)
    total = -sum(heap)
    for t in range(len(values) + 1):
        if len(heap) == count:
            out[t] = total
        if t == len(values):
            break
        v = values[t]
        if len(heap) < count:
            heapq.heappush(heap, -v)
            total += v
        elif v < -heap[0]:
            total += v + heapq.heapreplace(heap, -v)
    return out


def min_kv_assignment(a: int, s: int, ad_sorted: np.ndarray, sd_sorted: np.ndarray, kv_ad: np.ndarray,
                      kv_sd: np.ndarray, select: bool = False):
    """Least KV memory of ``a`` AD users from ``ad_sorted`` and ``s`` other SD users from ``sd_sorted``.

    ``ad_sorted`` / ``sd_sorted``: the eligible users' indices in increasing ``kv_ad`` / ``kv_sd``.
    Exact (module docstring, step 3). Returns the cost (``inf`` when impossible), and with
    ``select`` also the chosen AD and SD index lists.
    """
    n = a + s
    if len(ad_sorted) < a or len(sd_sorted) < s:
        return (math.inf, None, None) if select else math.inf
    TA, TS = ad_sorted[:n], sd_sorted[:n]
    selA, selS = TA[:a], TS[:s]
    if not np.intersect1d(selA, selS, assume_unique=True).size:  # the unconstrained optimum is disjoint
        cost = float(kv_ad[selA].sum() + kv_sd[selS].sum())
        return (cost, list(selA), list(selS)) if select else cost
    inS, inA = set(TS.tolist()), set(TA.tolist())
    P = [k for k in TA.tolist() if k not in inS]
    Q = [k for k in TS.tolist() if k not in inA]
    B = sorted((k for k in TA.tolist() if k in inS), key=lambda k: (kv_sd[k] - kv_ad[k], k))
    fS = _sum_smallest_growing([kv_sd[k] for k in B], [kv_sd[k] for k in Q], s)  # SD side: Q + B[:t]
    fA = _sum_smallest_growing([kv_ad[k] for k in B[::-1]], [kv_ad[k] for k in P], a)[::-1]  # AD: P + B[t:]
    tot = fS + fA
    t = int(np.argmin(tot))
    cost = float(tot[t])
    if not select:
        return cost
    if not math.isfinite(cost):
        return math.inf, None, None
    poolS = sorted(Q + B[:t], key=lambda k: (kv_sd[k], k))[:s]
    poolA = sorted(P + B[t:], key=lambda k: (kv_ad[k], k))[:a]
    return cost, poolA, poolS


class _Fixed:
    """Everything about one value of phi: thresholds, eligible lists, membership of (a, s) in F."""

    def __init__(self, instance: BalanceInstance, phi: float, order_ad, order_sd, kv_ad, kv_sd):
        self.inst, self.phi = instance, phi
        self.A, self.S = thresholds(instance, phi)
        self.order_ad, self.order_sd, self.kv_ad, self.kv_sd = order_ad, order_sd, kv_ad, kv_sd
        self.A_sorted, self.S_sorted = self.A[order_ad], self.S[order_sd]
        srv = instance.server
        self.WL, self.WS, self.M = srv.large_weights_bytes, srv.small_weights_bytes, srv.memory_bytes

    def weights(self, a, s):
        return (self.WL if a + s > 0 else 0.0) + (self.WS if s > 0 else 0.0)

    def eligible(self, a, s):
        ad = self.order_ad[self.A_sorted >= a] if a > 0 else self.order_ad[:0]
        sd = self.order_sd[self.S_sorted >= s] if s > 0 else self.order_sd[:0]
        return ad, sd

    def member(self, a, s) -> bool:
        if a < 0 or s < 0:
            return False
        W = self.weights(a, s)
        if W > self.M:
            return False
        ad, sd = self.eligible(a, s)
        return W + min_kv_assignment(a, s, ad, sd, self.kv_ad, self.kv_sd) <= self.M

    def select(self, a, s):
        ad, sd = self.eligible(a, s)
        return min_kv_assignment(a, s, ad, sd, self.kv_ad, self.kv_sd, select=True)


def _best_batches(fx: _Fixed) -> tuple[int, int, int]:
    """The staircase walk (module docstring, step 2): ``(a, s, tests)`` maximising a + s at this phi."""
    tests = 0
    lo, hi = 0, int((fx.A >= 1).sum())  # (0, 0) is always in F; a(0) <= users eligible at batch 1
    while lo < hi:  # binary search of a(0) (membership is monotone in a)
        mid = (lo + hi + 1) // 2
        tests += 1
        if fx.member(mid, 0):
            lo = mid
        else:
            hi = mid - 1
    a, best = lo, (lo, 0)
    s_cap = int((fx.S >= 1).sum())
    for s in range(1, s_cap + 1):
        while a >= 0:
            tests += 1
            if fx.member(a, s):
                break
            a -= 1
        if a < 0:
            break
        if a + s > sum(best):
            best = (a, s)
    return best[0], best[1], tests


def _schedule(instance, fx: _Fixed, a: int, s: int, policy: str, info: dict) -> Schedule:
    modes = ["off"] * instance.num_users
    _, selA, selS = fx.select(a, s)
    for k in selA or ():
        modes[int(k)] = "AD"
    for k in selS or ():
        modes[int(k)] = "SD"
    return Schedule(tuple(modes), float(fx.phi), policy, info)


def solve_exact_grid(instance: BalanceInstance, phis, policy: str = "balance") -> Schedule:
    """The exact algorithm (module docstring) over the AD shares ``phis``; ties go to the first phi."""
    kv_ad, kv_sd = instance.kv_ad, instance.kv_sd
    idx = np.arange(instance.num_users)
    order_ad = np.lexsort((idx, kv_ad))
    order_sd = np.lexsort((idx, kv_sd))
    best, tests = None, 0
    per_phi = []
    for phi in phis:
        fx = _Fixed(instance, float(phi), order_ad, order_sd, kv_ad, kv_sd)
        a, s, t = _best_batches(fx)
        tests += t
        per_phi.append(a + s)
        if best is None or a + s > best[1] + best[2]:
            best = (fx, a, s)
    fx, a, s = best
    return _schedule(instance, fx, a, s, policy, {"membership_tests": tests, "served_by_phi": per_phi,
                                                   "phi_grid": [float(p) for p in phis]})


@register_balance_policy("balance", "ours: exact on the phi grid (staircase over batch sizes x min-memory "
                         "assignment); proven optimal for our model", family="balance")
def balance_exact(instance: BalanceInstance, phi_steps: int = 20) -> Schedule:
    """Policy ``balance``: :func:`solve_exact_grid` on :func:`phi_grid` ``(phi_steps)``."""
    return solve_exact_grid(instance, phi_grid(phi_steps), "balance")


@register_balance_policy("ad-only", "baseline: best schedule with every served user in AD (phi = 1, exact)",
                         family="baseline")
def ad_only(instance: BalanceInstance) -> Schedule:
    return solve_exact_grid(instance, [1.0], "ad-only")


@register_balance_policy("sd-only", "baseline: best schedule with every served user in SD (phi = 0, exact)",
                         family="baseline")
def sd_only(instance: BalanceInstance) -> Schedule:
    return solve_exact_grid(instance, [0.0], "sd-only")


def greedy_at(instance: BalanceInstance, phi: float) -> list[str]:
    """Greedy at one share: users by increasing memory (cheaper eligible mode), admitted into their
    cheaper mode that keeps every admitted user's deadline and the memory limit, else the other."""
    A, S = thresholds(instance, phi)
    kv = {"AD": instance.kv_ad, "SD": instance.kv_sd}
    thr = {"AD": A, "SD": S}
    srv = instance.server
    cheapest = np.where(A >= 1, kv["AD"], np.inf)
    cheapest = np.minimum(cheapest, np.where(S >= 1, kv["SD"], np.inf))
    modes = ["off"] * instance.num_users
    count = {"AD": 0, "SD": 0}
    min_thr = {"AD": math.inf, "SD": math.inf}
    mem = 0.0
    for k in np.lexsort((np.arange(instance.num_users), cheapest)):
        if not math.isfinite(cheapest[k]):
            break
        for m in sorted(("AD", "SD"), key=lambda m: kv[m][k]):
            b = count[m] + 1
            if thr[m][k] < b or min_thr[m] < b:
                continue
            W = srv.large_weights_bytes + (srv.small_weights_bytes if count["SD"] + (m == "SD") > 0 else 0.0)
            if W + mem + kv[m][k] > srv.memory_bytes:
                continue
            modes[k] = m
            count[m] = b
            min_thr[m] = min(min_thr[m], thr[m][k])
            mem += kv[m][k]
            break
    return modes


@register_balance_policy("greedy", "baseline: smallest memory first into the cheaper feasible mode, best phi "
                         "of the grid (no guarantee)", family="baseline")
def greedy(instance: BalanceInstance, phi_steps: int = 20) -> Schedule:
    best = None
    for phi in phi_grid(phi_steps):
        modes = greedy_at(instance, float(phi))
        n = sum(m != "off" for m in modes)
        if best is None or n > best[0]:
            best = (n, modes, float(phi))
    return Schedule(tuple(best[1]), best[2], "greedy", {})


def greedy_counterexample(K: int) -> BalanceInstance:
    """An instance where ``greedy`` serves 1 user and the optimum K - 1 (K >= 3): no constant factor.

    SD is useless (alpha = 0, a slow draft model); an AD step costs ``1 + (0.01 / K) b`` s. User 0
    has the least memory and a deadline that allows only AD batch 1 at phi = 1; users 1..K-1 allow
    batch K - 1 at phi = 1 and nothing at any phi <= 0.99 (every grid with ``phi_steps <= 100``).
    """
    K = check_int_range("K", K, 3, 100_000)
    t1, eps = 0.01 / K, 0.001 / K
    srv = BalanceServer(memory_bytes=1e12, large_weights_bytes=0.0, small_weights_bytes=0.0, large_t0_s=1.0,
                        large_t1_s_per_token=t1, small_t0_s=10.0, small_t1_s_per_token=0.0, draft_length=1)
    users = [BalanceUser(1, 1.0 + t1 + eps, 0.0, 1.0, 1.0)]
    users += [BalanceUser(1, 1.0 + t1 * (K - 1) + eps, 0.0, 2.0, 2.0) for _ in range(K - 1)]
    return BalanceInstance(tuple(users), srv, name=f"greedy counterexample K={K}")


__all__ = ["phi_grid", "thresholds", "min_kv_assignment", "solve_exact_grid", "greedy_at", "greedy_counterexample",
           "MAX_PHI_STEPS"]
