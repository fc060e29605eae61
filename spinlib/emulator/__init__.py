"""A discrete-event testbed: the whole system played out round by round on a virtual clock.

The analysis (:mod:`spinlib.rounds`) predicts goodput from averages. The emulator executes an
allocation (from any policy) instead, in three steps:

1. **a trace** of per-round inputs (:mod:`~spinlib.emulator.traces`): drafted and accepted tokens
   of every round and user -- acceptances drawn (``"iid"``: ``P(A >= i) = alpha^i``;
   ``"profile"``: ``P(A >= i) = pi_i``, the user's measured prefix profile) or taken from **real
   speculative decoding** (:mod:`~spinlib.emulator.real_traces`) -- with the bits each round carries
   (:func:`spinlib.modes.realised_bits`) and the compute times;
2. **a channel realisation** (:mod:`~spinlib.emulator.fading`): block fading ``"static"``,
   ``"rayleigh"`` or ``"markov"``; transfers take the rate model's time for the round's bits
   with the allocation's bandwidth / power on that round's channel (:mod:`~spinlib.emulator.links`);
3. **an event clock** (:mod:`~spinlib.emulator.clock`): synchronous rounds verify every user's
   draft in one batch, ``T_ver(sum_k (L_k + 1))``; asynchronous rounds send each draft on arrival
   to one batching server (queueing) or to a server of its own (model B).

Goodput intervals are delta-method intervals of ratio estimators (:mod:`spinlib.goodput`). The Monte Carlo
check of the closed form, :func:`~spinlib.emulator.montecarlo.simulate_rounds`, is this clock on synthetic
rounds at the average channel.
:func:`emulate` (:mod:`~spinlib.emulator.testbed`) runs the three steps::

    from spinlib.emulator import EmulatorConfig, Fading, emulate
    res = emulate(scenario, allocation, EmulatorConfig(rounds=2000, fading=Fading("rayleigh")))
"""
from __future__ import annotations

from .clock import ClockResult, async_clock, sync_clock
from .config import ACCEPTANCE_MODELS, COMPUTE_MODELS, SERVER_MODELS, EmulatorConfig
from .fading import FADING_MODELS, Fading
from .links import transfer_times
from .montecarlo import simulate_rounds
from .real_traces import REAL_TASKS, real_prompts, real_trace
from .testbed import EmulationResult, emulate
from .traces import Trace, synthetic_trace, trace_bits, uplink_mask

__all__ = ["emulate", "EmulatorConfig", "EmulationResult", "Fading", "FADING_MODELS", "ACCEPTANCE_MODELS",
           "SERVER_MODELS", "COMPUTE_MODELS", "Trace", "synthetic_trace", "trace_bits", "uplink_mask",
           "transfer_times", "ClockResult", "sync_clock", "async_clock", "simulate_rounds",
           "REAL_TASKS", "real_prompts", "real_trace"]
