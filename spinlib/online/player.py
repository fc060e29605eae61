"""The one round loop of the online players: choose, stop, realise, update.

Every online player drives a decider (:mod:`spinlib.decision`) through the same loop::

    t = 0
    while not model.done(t):
        ctx   = model.context(t)                          what is known at the round's start
        L_ref = model.reference(decider.choose(ctx), t)   checked: ints in 0..L_max (a plan: its lengths)
        L     = decider.stop(ctx, L_ref)                  checked: 0 <= L <= L_ref
        decider.update(model.realise(t, L))               the round's Outcome on the model's clock
        t += 1

and differs only in its :class:`RoundModel`, which says what a round costs and yields:

* the arena's links (:class:`spinlib.online.arena.TraceLinks`): ``K`` independent users replaying
  token streams under a delay, fading and energy model;
* one prompt's replay (:class:`spinlib.online.real_rounds.PromptReplay`): one user, the trace of a
  prompt, capped as the real engine caps it, for the real-vs-replay comparison;
* the shared band (:class:`spinlib.online.replan.SharedBand`): ``K`` users in synchronous rounds
  on one FDMA band under block fading, with the analytical acceptance sampler.
* BALANCE's server (:class:`spinlib.balance.rounds.ServerRounds`): ``K`` users served by AD or SD
  under a time-shared server, the plan a :class:`spinlib.balance.model.Schedule` (every BALANCE policy
  plays through :class:`spinlib.balance.rounds.PolicyDecider`).

A model of your own (another delay law, another clock) is one class with these four methods;
:func:`play_rounds` plays any decider on it. The testbed's event clocks
(:mod:`spinlib.emulator.clock`) and the real engine (:mod:`spinlib.sd.engine`) are the other
players: the testbed places a whole trace in time after it is drawn, and the real engine's round
is a model's forward passes.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from ..decision import Outcome, check_decider, check_lengths


@runtime_checkable
class RoundModel(Protocol):
    """What a round costs and yields for ``K`` users (module docstring)."""

    K: int

    def done(self, t: int) -> bool:
        """True when no round ``t`` is to be played."""

    def context(self, t: int):
        """What the decider sees at the start of round ``t`` (:class:`spinlib.decision.RoundContext`)."""

    def reference(self, choice, t: int, who: str) -> np.ndarray:
        """The checked reference lengths ``[K]`` of the decider's ``choice`` (one line naming ``who``
        otherwise); a model that takes plans keeps the rest of the plan for :meth:`realise`."""

    def realise(self, t: int, L: np.ndarray) -> Outcome:
        """Play round ``t`` with the drafted lengths ``L [K]``; the decider learns from the result."""


def play_rounds(decider, model: RoundModel, who: str = "decider") -> int:
    """Play ``decider`` on ``model`` until ``model.done`` (module docstring); returns the rounds played.

    ``who`` names the decider in the one-line errors (a length out of range, a wrong shape, a stop
    that drafts more than its reference)."""
    check_decider(decider, who)
    K = model.K
    t = 0
    while not model.done(t):
        ctx = model.context(t)
        L_ref = model.reference(decider.choose(ctx), t, who)
        L = check_lengths(decider.stop(ctx, L_ref), K, L_ref, who)
        decider.update(model.realise(t, L))
        t += 1
    return t


__all__ = ["RoundModel", "play_rounds"]
