"""The event clocks: a trace's rounds placed in time, synchronous or asynchronous.

**Synchronous** (one batch per round, every user)::

    T_r = D_r + T_ver(sum_k (L_rk + 1)) + E_r + T_fb + T_acc,
    D_r = max_k (L_rk tau_k + up_rk),  E_r = max_k dl_rk,

with ``T_ver(N) = t0 + t1 N`` (:meth:`spinlib.scenario.Server.verification_time`) or, in real
mode with measured compute, the sum of the users' measured shares of the round's batched pass.
Goodput ``G = sum_r sum_k N_rk / sum_r T_r`` with ``N_rk = A_rk + 1``.

**Asynchronous** (each user's rounds back to back; paper-1 allocations only): user k's round j
arrives at the server after drafting and upload. With ``server="ideal"`` every draft has its own
server (no queueing, model B): ``T_kj = L_kj tau_k + up_kj + T_ver(L_kj + 1) + T_fb + T_acc``.
With ``server="batch"`` one server verifies, whenever it becomes free, all drafts that have
arrived, in one pass ``T_ver(sum (L_i + 1))`` (dynamic batching): drafts wait in a queue.
Goodput ``G = sum_k (sum_j N_kj) / elapsed_k``.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from ..roundcost import makespan as batch_ready, sync_round_time, user_round_time
from ..rounds import Allocation, fixed_round_overhead
from ..scenario import Scenario
from .links import transfer_times
from ..goodput import GoodputEstimate, goodput_interval, goodput_sum_interval
from .traces import Trace


@dataclass(frozen=True)
class ClockResult(GoodputEstimate):
    """What a clock measured (``K`` users, ``R`` rounds).

    Parameters
    ----------
    goodput_tokens_per_s, ci_low, ci_high : float
        Goodput [token/s] and its delta-method interval (:mod:`spinlib.goodput`).
    user_goodput : float array [K]
        Tokens of each user over the elapsed time [token/s].
    tokens_per_round : float array [K]
        Mean ``A + 1`` per round.
    tokens_per_round_sd : float array [K]
        Sample standard deviation of ``A + 1`` over the rounds (``ddof = 1``; 0 with one round).
    round_time_s : float array
        Every round's duration [s]: ``[R]`` (sync) or ``[R K]`` (async, round-major).
    token_latency_s : float array [K]
        Elapsed time / tokens [s].
    phase_shares : dict
        Phase -> share of the elapsed time.
    server_utilisation : float
        Busy time of the server / elapsed time.
    timeline : tuple of dict
        ``{"user", "phase", "start", "end"}`` [s] of the first rounds (sync) or batches (async).
    """

    user_goodput: np.ndarray
    tokens_per_round: np.ndarray
    tokens_per_round_sd: np.ndarray
    round_time_s: np.ndarray
    token_latency_s: np.ndarray
    phase_shares: dict
    server_utilisation: float
    timeline: tuple = ()


def _round_sd(N: np.ndarray) -> np.ndarray:
    """Sample standard deviation over rounds (axis 0, ``ddof = 1``) of ``N [R, K]``; zeros when ``R = 1``."""
    return N.std(axis=0, ddof=1) if N.shape[0] > 1 else np.zeros(N.shape[1])


def sync_clock(scenario: Scenario, alloc: Allocation, trace: Trace, h: np.ndarray, *, confidence: float = 0.99,
               timeline_rounds: int = 12, bandwidth_hz=None) -> ClockResult:
    """Synchronous rounds (module docstring); ``h`` ``[R, K]`` are the fading factors.

    ``bandwidth_hz`` (``[K]`` or ``[R, K]`` [Hz], optional) replaces ``alloc.b`` round by round
    (:func:`~spinlib.emulator.links.transfer_times`); the trace carries the per-round lengths.
    """
    R, K = trace.drafted.shape
    up, dl = transfer_times(scenario, alloc, trace, h, bandwidth_hz)
    ready = trace.draft_s + up  # [R, K] (the timeline's uplink ends)
    makespan = batch_ready(trace.draft_s, up)
    if trace.verify_s is not None:
        t_ver = trace.verify_s.sum(axis=1)  # measured: the users' shares of the round's batched pass
    else:
        t_ver = scenario.server.verification_time(trace.drafted.sum(axis=1) + K)
    E = dl.max(axis=1)
    over = fixed_round_overhead(scenario)
    T = sync_round_time(makespan, t_ver, E, over)
    N = trace.accepted + 1  # [R, K]
    G, lo, hi = goodput_interval(N.sum(axis=1).astype(float), T, confidence)
    total = T.sum()
    timeline = []
    t = 0.0
    for r in range(min(timeline_rounds, R)):
        for k in range(K):
            timeline.append({"user": k, "phase": "draft", "start": t, "end": t + trace.draft_s[r, k]})
            timeline.append({"user": k, "phase": "uplink", "start": t + trace.draft_s[r, k], "end": t + ready[r, k]})
            v0 = t + makespan[r]
            timeline.append({"user": k, "phase": "verify", "start": v0, "end": v0 + t_ver[r]})
            if dl[r, k] > 0:
                timeline.append({"user": k, "phase": "downlink", "start": v0 + t_ver[r],
                                 "end": v0 + t_ver[r] + dl[r, k]})
            timeline.append({"user": k, "phase": "feedback+access", "start": t + T[r] - over, "end": t + T[r]})
        t += T[r]
    shares = {"draft+uplink (makespan)": float(makespan.sum() / total), "verification": float(t_ver.sum() / total),
              "downlink": float(E.sum() / total), "feedback+access": float(R * over / total),
              "draft (mean user)": float(trace.draft_s.mean(axis=1).sum() / total),
              "uplink (mean user)": float(up.mean(axis=1).sum() / total)}
    tokens = N.sum(axis=0)
    return ClockResult(goodput_tokens_per_s=G, ci_low=lo, ci_high=hi, user_goodput=tokens / total,
                       tokens_per_round=N.mean(axis=0), tokens_per_round_sd=_round_sd(N), round_time_s=T,
                       token_latency_s=total / tokens,
                       phase_shares=shares, server_utilisation=float(t_ver.sum() / total), timeline=tuple(timeline))


def async_clock(scenario: Scenario, alloc: Allocation, trace: Trace, h: np.ndarray, *, confidence: float = 0.99,
                server: str = "batch", timeline_rounds: int = 12) -> ClockResult:
    """Asynchronous rounds (module docstring), ``server`` in {"batch", "ideal"}."""
    R, K = trace.drafted.shape
    up, _ = transfer_times(scenario, alloc, trace, h)
    pre = trace.draft_s + up  # [R, K] drafting + upload of each user's round j
    srv = scenario.server
    if trace.verify_s is not None:
        ver = trace.verify_s
    else:
        ver = srv.verification_time(trace.drafted + 1.0)
    over = fixed_round_overhead(scenario)
    N = (trace.accepted + 1).astype(float)
    wait = np.zeros((R, K))
    ver_used = np.array(ver, dtype=float, copy=True)
    timeline = []
    busy = 0.0
    if server == "ideal":
        dur = user_round_time(trace.draft_s, up, ver, over)
        elapsed = dur.sum(axis=0)
        busy = float(ver.sum())
    else:
        positions = trace.drafted + 1.0
        heap = [(pre[0, k], k) for k in range(K)]
        heapq.heapify(heap)
        j = np.zeros(K, dtype=int)  # round in progress per user
        elapsed = np.zeros(K)
        free = 0.0
        n_batch = 0
        while heap:
            t_arr, k = heapq.heappop(heap)
            start = max(free, t_arr)
            batch = [(t_arr, k)]
            while heap and heap[0][0] <= start:
                batch.append(heapq.heappop(heap))
            if trace.verify_s is not None:
                t_ver = float(sum(ver[j[i], i] for _, i in batch))
            else:
                t_ver = float(srv.verification_time(float(sum(positions[j[i], i] for _, i in batch))))
            end = start + t_ver
            busy += t_ver
            for t_i, i in batch:
                wait[j[i], i] = start - t_i
                ver_used[j[i], i] = t_ver
                if n_batch < timeline_rounds:
                    r0 = t_i - pre[j[i], i]
                    timeline += [{"user": i, "phase": "draft", "start": r0, "end": r0 + trace.draft_s[j[i], i]},
                                 {"user": i, "phase": "uplink", "start": r0 + trace.draft_s[j[i], i], "end": t_i},
                                 {"user": i, "phase": "queue", "start": t_i, "end": start},
                                 {"user": i, "phase": "verify", "start": start, "end": end},
                                 {"user": i, "phase": "feedback+access", "start": end, "end": end + over}]
                j[i] += 1
                if j[i] < R:
                    heapq.heappush(heap, (end + over + pre[j[i], i], i))
                else:
                    elapsed[i] = end + over
            free = end
            n_batch += 1
        dur = user_round_time(trace.draft_s, up, wait, ver_used, over)
    tokens = N.sum(axis=0)
    G, lo, hi = goodput_sum_interval(N, dur, tokens, elapsed, confidence)
    span = float(elapsed.max())
    shares = {"draft": float(np.mean(trace.draft_s.sum(0) / elapsed)), "uplink": float(np.mean(up.sum(0) / elapsed)),
              "queue": float(np.mean(wait.sum(0) / elapsed)), "verification": float(np.mean(ver_used.sum(0) / elapsed)),
              "feedback+access": float(np.mean(R * over / elapsed))}
    util = float(busy / span) if server == "batch" else float(np.sum(ver.sum(0) / elapsed))
    return ClockResult(goodput_tokens_per_s=G, ci_low=lo, ci_high=hi, user_goodput=tokens / elapsed,
                       tokens_per_round=N.mean(axis=0), tokens_per_round_sd=_round_sd(N),
                       round_time_s=dur.reshape(-1), token_latency_s=elapsed / tokens,
                       phase_shares=shares, server_utilisation=util, timeline=tuple(timeline))


__all__ = ["ClockResult", "sync_clock", "async_clock"]
