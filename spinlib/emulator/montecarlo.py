"""The Monte Carlo check of the closed form: the testbed's clock on synthetic rounds at the average channel.

:func:`simulate_rounds` is not a simulator of its own: it draws a synthetic trace (acceptances from each
user's prefix profile, :func:`~spinlib.emulator.traces.synthetic_trace`, the law :func:`spinlib.rounds.evaluate`
takes expectations of) and plays it on the testbed's event clock (:mod:`~spinlib.emulator.clock`) with the
channel at its average (``h = 1``): synchronous rounds on the synchronous clock, asynchronous rounds on the
asynchronous clock with a server per draft (``server="ideal"``, model B). So the Monte Carlo check, the
testbed and the multi-user player share one clock, one goodput estimator and one interval
(:mod:`spinlib.goodput`).

For paper-1 allocations (every device uploads) each round's time is the closed form's, and only the
accepted tokens are random. For UL/DL allocations (paper 2) a round carries the bits it realises (a
DL-mode device downloads a distribution only after a rejection, variant ``"reject"``), so its downlink
phase ``E_r = max_k dl_rk`` is random too, where the closed form takes the maximum of the expected
downlink times: ``E[max_k dl_k] >= max_k E[dl_k]``, so there the closed form's round is at most the
clock's mean round and its goodput at least the clock's (tested).
"""
from __future__ import annotations

import numpy as np

from ..rounds import Allocation, evaluate
from ..scenario import Scenario
from ..validation import check_int_range
from .clock import ClockResult, async_clock, sync_clock
from .traces import synthetic_trace


def simulate_rounds(scenario: Scenario, alloc: Allocation, n_rounds: int, rng: np.random.Generator,
                    confidence: float = 0.99) -> ClockResult:
    """``n_rounds`` rounds of ``alloc`` with random acceptances on the average channel (module docstring).

    Parameters
    ----------
    n_rounds : int
        Rounds (``>= 2``, for an interval).
    rng : numpy.random.Generator
        Draws the acceptances (:func:`spinlib.acceptance.sample_accepted`, ``[n_rounds, K]``).
    confidence : float
        Of the goodput's delta-method interval (:func:`spinlib.goodput.goodput_interval` for synchronous
        rounds, :func:`spinlib.goodput.goodput_sum_interval` over the users' own clocks for asynchronous ones).

    Returns
    -------
    ClockResult
        The testbed's result: goodput [token/s] with its interval, per-user goodput and tokens per round
        ``[K]``, round times [s] (``[n_rounds]``; asynchronous: ``[n_rounds K]``), phase shares.
        :func:`~spinlib.emulator.traces.synthetic_trace` with the same generator gives the rounds' tokens.
    """
    check_int_range("n_rounds", n_rounds, 2)
    evaluate(scenario, alloc)  # the allocation's one-line checks (a length, a band that cannot carry its payload)
    trace = synthetic_trace(scenario, alloc, n_rounds, "profile", rng)
    h = np.ones((n_rounds, scenario.num_users))
    if alloc.round_model == "sync":
        return sync_clock(scenario, alloc, trace, h, confidence=confidence, timeline_rounds=0)
    return async_clock(scenario, alloc, trace, h, confidence=confidence, server="ideal", timeline_rounds=0)


__all__ = ["simulate_rounds"]
