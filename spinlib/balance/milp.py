r"""Exact references for BALANCE: a mixed-integer program (HiGHS) and exhaustive search.

Both solve the problem of :mod:`spinlib.balance.solvers` on the same share grid
``G = {0, 1/m, ..., 1}``: the share is **fixed per solve and enumerated** over G, and the best
schedule over G is kept. Neither uses the thresholds, the staircase or the assignment argument of
the algorithm: they are independent checks of it.

MILP at a fixed ``phi`` (binary ``x_k^AD, x_k^SD``, binary ``z`` = anyone served, ``z_S`` = anyone
in SD, integer batch sizes ``a, s``)::

    max  sum_k (x_k^AD + x_k^SD)
    s.t. x_k^AD + x_k^SD <= z,   x_k^SD <= z_S,   a = sum_k x_k^AD,   s = sum_k x_k^SD
         (W_L z + W_S z_S + sum_k m_k^AD x_k^AD + m_k^SD x_k^SD) / M <= 1
         a + (K + 1) x_k^AD <= K + 1 + hat A_k        (deadline of k in AD: a <= hat A_k when x_k^AD = 1)
         s + (K + 1) x_k^SD <= K + 1 + hat S_k

with the real (not rounded) batch bounds straight from the deadline,
``hat A_k = (phi (T_k - c_k) / n_k - t0_L) / t1_L`` and
``hat S_k = ((1 - phi)(T_k - c_k) N_k / n_k - L t0_S - t0_L) / (L t1_S + (L + 1) t1_L)``, clipped
to ``[-1, K]`` (a bound below -1 means the same as -1; one above K never binds). With a zero
per-token cost the deadline does not depend on the batch: the user's variable is fixed to 0 when
it cannot meet it and free otherwise. HiGHS runs with ``mip_rel_gap = 0``; a solve stopped by the
time limit is reported (``certified: false``), never passed off as optimal.

Scaling (``benchmarks/balance_scaling.py``): one MILP has ``2K + 4`` variables and ``O(K)`` rows
with ``O(K)`` non-zeros; the enumeration solves ``m + 1`` of them.

Exhaustive search (``K <= 10``): all ``3^K`` mode vectors, each checked at every grid share with the
model's formulas (vectorised), the largest feasible count kept.
"""
from __future__ import annotations

import itertools
import time

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

from ..validation import ValidationError, check_int_range
from .model import BalanceInstance, Schedule
from .registry import register_balance_policy
from .solvers import phi_grid

EXHAUSTIVE_MAX_USERS = 10


def _batch_bounds(instance: BalanceInstance, phi: float):
    """``(hat_A, hat_S)`` ``[K]`` real batch bounds at ``phi`` (module docstring); ``-inf`` where a mode
    cannot serve the user, ``+inf`` where the batch never binds."""
    srv, K, L = instance.server, instance.num_users, instance.server.draft_length
    slack, n = instance.deadline - instance.comm, instance.n

    def bound(r, per_user):
        if per_user > 0:
            return r / per_user
        return np.where(r >= 0, np.inf, -np.inf)

    hA = np.full(K, -np.inf) if phi <= 0 else bound(phi * slack / n - srv.large_t0_s, srv.large_t1_s_per_token)
    if phi >= 1:
        hS = np.full(K, -np.inf)
    else:
        r = (1 - phi) * slack * instance.tokens_per_round / n - L * srv.small_t0_s - srv.large_t0_s
        hS = bound(r, L * srv.small_t1_s_per_token + (L + 1) * srv.large_t1_s_per_token)
    return hA, hS


def milp_at(instance: BalanceInstance, phi: float, time_limit_s: float | None = None) -> dict:
    """Solve the MILP at one share ``phi``: ``{"served", "modes", "status", "certified", "wall_s", "x_found", "code"}``
    (``x_found``: the solver returned a feasible point; "0 served" without one is no answer; ``code``: the
    status code of :func:`scipy.optimize.milp`)."""
    K = instance.num_users
    srv = instance.server
    hA, hS = _batch_bounds(instance, phi)
    nv = 2 * K + 4  # xA[0:K], xS[K:2K], z, zS, a, s
    iz, izs, ia, is_ = 2 * K, 2 * K + 1, 2 * K + 2, 2 * K + 3
    lb, ub = np.zeros(nv), np.ones(nv)
    ub[ia] = ub[is_] = K
    ub[:K][hA < 1] = 0  # cannot meet the deadline even alone (a >= 1 when served): also implied by the rows below
    ub[K:2 * K][hS < 1] = 0
    rows, cols, vals, lo, hi = [], [], [], [], []
    r = 0

    def row(entries, low, high):
        nonlocal r
        for c, v in entries:
            rows.append(r)
            cols.append(c)
            vals.append(v)
        lo.append(low)
        hi.append(high)
        r += 1

    for k in range(K):
        row([(k, 1.0), (K + k, 1.0), (iz, -1.0)], -np.inf, 0.0)
        row([(K + k, 1.0), (izs, -1.0)], -np.inf, 0.0)
        if np.isfinite(hA[k]) and hA[k] < K:
            row([(ia, 1.0), (k, K + 1.0)], -np.inf, K + 1.0 + max(hA[k], -1.0))
        if np.isfinite(hS[k]) and hS[k] < K:
            row([(is_, 1.0), (K + k, K + 1.0)], -np.inf, K + 1.0 + max(hS[k], -1.0))
    row([(ia, 1.0)] + [(k, -1.0) for k in range(K)], 0.0, 0.0)
    row([(is_, 1.0)] + [(K + k, -1.0) for k in range(K)], 0.0, 0.0)
    M = srv.memory_bytes
    row([(iz, srv.large_weights_bytes / M), (izs, srv.small_weights_bytes / M)]
        + [(k, instance.kv_ad[k] / M) for k in range(K)] + [(K + k, instance.kv_sd[k] / M) for k in range(K)],
        -np.inf, 1.0)
    A = coo_matrix((vals, (rows, cols)), shape=(r, nv)).tocsr()
    c = np.zeros(nv)
    c[:2 * K] = -1.0
    options = {"mip_rel_gap": 0.0, "disp": False}
    if time_limit_s is not None:
        options["time_limit"] = float(time_limit_s)
    t = time.perf_counter()
    res = milp(c, constraints=LinearConstraint(A, lo, hi), integrality=np.ones(nv), bounds=Bounds(lb, ub),
               options=options)
    wall = time.perf_counter() - t
    if res.x is None:
        return {"served": 0, "modes": ["off"] * K, "status": res.message, "certified": False, "wall_s": wall,
                "x_found": False, "code": int(res.status)}
    x = np.rint(res.x).astype(int)
    modes = ["AD" if x[k] else "SD" if x[K + k] else "off" for k in range(K)]
    return {"served": int(x[:2 * K].sum()), "modes": modes, "status": res.message, "certified": res.status == 0,
            "wall_s": wall, "x_found": True, "code": int(res.status)}


def solve_milp_grid(instance: BalanceInstance, phis, time_limit_s: float | None = None) -> Schedule:
    """:func:`milp_at` at every share of ``phis``; the best (first on ties). ``info`` has per-share counts
    (``None`` for a share not solved before the time limit), ``certified`` (every share solved and
    proven optimal), ``status`` ("optimal"; "time_limit" when the clock stopped a solve or the grid;
    "not_certified" otherwise) and the total MILP wall time. When the time limit ends the search before any solve found a
    feasible point, the result is not "0 served" but one :class:`ValidationError` line saying so."""
    best, per, cert, wall, found, clock = None, [], True, 0.0, False, False
    t_end = None if time_limit_s is None else time.perf_counter() + time_limit_s
    for phi in phis:
        left = None if t_end is None else t_end - time.perf_counter()
        if left is not None and left <= 0:  # out of time: the remaining shares are not solved
            per.append(None)
            cert, clock = False, True
            continue
        out = milp_at(instance, float(phi), left)
        per.append(out["served"])
        cert &= out["certified"]
        found |= out["x_found"]
        clock |= out["code"] == 1  # scipy.optimize.milp: 1 = iteration or time limit reached
        wall += out["wall_s"]
        if best is None or out["served"] > best[0]["served"]:
            best = (out, float(phi))
    if not found:
        if clock:
            raise ValidationError(f"milp: no feasible schedule found within time_limit_s = {time_limit_s:g} s for "
                                  f"{instance.num_users:,} users (building and solving the MILP takes longer): raise "
                                  "time_limit_s, or use a heuristic policy (--list-policies)")
        raise ValidationError(f"milp: the solver returned no schedule for {instance.num_users:,} users "
                              f"({len(per)} shares of the grid)")
    out, phi = best
    return Schedule(tuple(out["modes"]), phi, "milp", {"served_by_phi": per, "certified": bool(cert),
                                                       "status": "optimal" if cert else "time_limit" if clock
                                                       else "not_certified",
                                                       "milp_wall_s": wall, "phi_grid": [float(p) for p in phis]})


@register_balance_policy("milp", "reference: MILP (scipy/HiGHS) with phi fixed per solve, enumerated over the "
                         "same grid", family="reference")
def milp_policy(instance: BalanceInstance, phi_steps: int = 20, time_limit_s: float = 600.0) -> Schedule:
    """Policy ``milp``: :func:`solve_milp_grid` on :func:`~spinlib.balance.solvers.phi_grid` (total time limit)."""
    if isinstance(time_limit_s, bool) or not isinstance(time_limit_s, (int, float)) or not 0 < time_limit_s <= 1e6:
        raise ValidationError(f"time_limit_s must be in (0, 1e6] seconds, got {time_limit_s!r}")
    return solve_milp_grid(instance, phi_grid(phi_steps), float(time_limit_s))


def exhaustive_grid(instance: BalanceInstance, phis) -> Schedule:
    """Every mode vector at every share of ``phis`` (``K <= 10``), checked with the model's formulas."""
    K = check_int_range("number of users", instance.num_users, 1, EXHAUSTIVE_MAX_USERS)
    srv, L = instance.server, instance.server.draft_length
    X = np.array(list(itertools.product((0, 1, 2), repeat=K)), dtype=np.int8)  # 0 off, 1 AD, 2 SD
    isA, isS = X == 1, X == 2
    a, s = isA.sum(1), isS.sum(1)
    mem = np.where(a + s > 0, srv.large_weights_bytes, 0.0) + np.where(s > 0, srv.small_weights_bytes, 0.0) \
        + isA @ instance.kv_ad + isS @ instance.kv_sd
    mem_ok = mem <= srv.memory_bytes
    c, n, T, N = instance.comm, instance.n, instance.deadline, instance.tokens_per_round
    ad_step = srv.large_t0_s + srv.large_t1_s_per_token * a  # [V]
    sd_round = L * (srv.small_t0_s + srv.small_t1_s_per_token * s) + srv.large_t0_s \
        + srv.large_t1_s_per_token * s * (L + 1)
    served = a + s
    best = (-1, None, None)
    for phi in phis:
        with np.errstate(divide="ignore"):
            tA = c[None, :] + n[None, :] * ad_step[:, None] / phi if phi > 0 else np.full(X.shape, np.inf)
            tS = c[None, :] + n[None, :] * sd_round[:, None] / ((1 - phi) * N[None, :]) if phi < 1 \
                else np.full(X.shape, np.inf)
        ok = mem_ok & np.all(~isA | (tA <= T[None, :]), axis=1) & np.all(~isS | (tS <= T[None, :]), axis=1)
        cand = np.where(ok, served, -1)
        i = int(np.argmax(cand))
        if cand[i] > best[0]:
            best = (int(cand[i]), i, float(phi))
    names = ("off", "AD", "SD")
    return Schedule(tuple(names[v] for v in X[best[1]]), best[2], "exhaustive", {"vectors": int(len(X))})


@register_balance_policy("exhaustive", f"reference: all 3^K mode vectors at every grid phi (K <= "
                         f"{EXHAUSTIVE_MAX_USERS})", family="reference", max_users=EXHAUSTIVE_MAX_USERS)
def exhaustive_policy(instance: BalanceInstance, phi_steps: int = 20) -> Schedule:
    return exhaustive_grid(instance, phi_grid(phi_steps))


__all__ = ["milp_at", "solve_milp_grid", "exhaustive_grid", "EXHAUSTIVE_MAX_USERS"]
