"""The decision seam: one protocol for whatever decides a speculative round.

A *decider* is asked three things per round, for ``K`` users at once (arrays ``[K]``):

1. ``choose(ctx) -> L_ref [K]``: before drafting, a reference length (ints in ``0..L_max``) from
   what is known at the round's start: ``ctx.t`` (round index), ``ctx.rate`` and ``ctx.rate_mean``
   (the uplink rate now and on average [bit/s]), ``ctx.state`` and ``ctx.delay_mean`` (the channel
   state and the current mean delay [s]);
2. ``stop(ctx, L_ref) -> L [K]``: while drafting, the drafted length (``0 <= L <= L_ref``) from
   what the draft sees at each position ``i = 0..L_max-1`` of the round: ``ctx.top_prob`` (the
   draft's largest next-token probability) and ``ctx.entropy`` (its entropy [nat]), both
   ``[K, L_max]``;
3. ``update(out)``: after the round, what it realised (:class:`Outcome`).

Four players run this protocol; a decider that plans lengths runs on the first three without change,
and the fourth takes deciders that plan its schedules:

* the **arena** (:func:`spinlib.online.run_arena`) replays recorded token streams for many users
  under a delay, fading and energy model;
* the **real engine** (:func:`spinlib.sd.engine.speculative_generate`, ``draft_length=decider``)
  drafts with a real model for one user (``K = 1``) and verifies with a real target.
* the **multi-user re-planner** (:func:`spinlib.online.replan.play`) plays ``K`` users who share one
  band under fading; there ``choose`` may return a :class:`Plan` (lengths and bandwidth), the
  context is a :class:`BandContext` and the outcome a :class:`BandOutcome`.
* the **BALANCE server** (:func:`spinlib.balance.rounds.play_balance`) serves ``K`` users by AD or SD on
  one time-shared server; there ``choose`` returns a :class:`spinlib.balance.model.Schedule` (a mode per
  user and the AD share), and every BALANCE policy is such a decider
  (:class:`spinlib.balance.rounds.PolicyDecider`).

**Causality.** The real engine learns position ``i``'s confidence only when it gets there. It
calls ``stop`` after each position it observes, with the positions not yet seen filled as certain
(``top_prob = 1``, ``entropy = 0``), and ends the round as soon as the answer is ``L <= i + 1``
(before position ``i`` when ``L <= i``, after drafting it when ``L = i + 1``). A stop rule that
decides position ``i`` from positions ``<= i`` and never stops on a certain position (every
registered rule: a first position whose confidence falls below, or whose entropy rises above, a
threshold) gets exactly the length it would choose with the whole row in view
(``tests/test_decision.py`` checks it for every registered controller). Observing position ``i``
costs the draft pass that produces its distribution, so a rule that stops before a position has
paid for that pass: the real engine's clock includes it, the arena's ``L t_d`` does not.

A static allocation is the trivial decider (:class:`FixedLength`); paper 1/2's policies produce
such lengths, and the online controllers (:class:`spinlib.online.Controller`: UCB-SpecStop,
GELATO, SpecDec++'s rule, Hugging Face's heuristics) implement all three calls.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from .validation import ValidationError

if TYPE_CHECKING:
    from .channel import RateModel


@runtime_checkable
class Decider(Protocol):
    """What every round player calls (module docstring)."""

    def choose(self, ctx) -> np.ndarray: ...

    def stop(self, ctx, L_ref: np.ndarray) -> np.ndarray: ...

    def update(self, out: "Outcome") -> None: ...


@dataclass
class Outcome:
    """One realised round of every user (arrays ``[K]``).

    Attributes
    ----------
    L, A, N : int arrays
        Drafted tokens, accepted drafts and committed tokens (``N = A + 1`` unless the generation
        ends inside the round).
    T : float array
        Round time [s]: drafting, upload, the delay ``D`` and verification.
    E : float array
        Device energy of the round [J].
    D : float array
        Communication delay of the round [s].
    rate : float array
        Uplink rate of the round [bit/s].
    """

    L: np.ndarray
    A: np.ndarray
    N: np.ndarray
    T: np.ndarray
    E: np.ndarray
    D: np.ndarray
    rate: np.ndarray


@dataclass
class RoundContext:
    """What a decider sees in round ``t`` (arrays ``[K]``; ``top_prob``/``entropy`` ``[K, L_max]``)."""

    t: int
    rate: np.ndarray
    rate_mean: np.ndarray
    state: np.ndarray
    delay_mean: np.ndarray
    top_prob: np.ndarray
    entropy: np.ndarray


def never_stops(stop):
    """Mark a ``stop`` method that always returns ``L_ref`` (it reads no per-position signal): the real
    engine then skips computing the draft's confidence and entropy at every drafted position."""
    stop.never_stops = True
    return stop


def ignores_outcome(update):
    """Mark an ``update`` method that learns nothing from the round's outcome: a player then needs no
    energy model or clock for it (a fixed length, a static allocation)."""
    update.ignores_outcome = True
    return update


def learns(decider) -> bool:
    """False when the decider's ``update`` is marked :func:`ignores_outcome`."""
    return not getattr(getattr(decider, "update", None), "ignores_outcome", False)


def reads_confidence(decider) -> bool:
    """False when the decider's ``stop`` is marked :func:`never_stops` (an override without the mark reads it)."""
    return not getattr(getattr(decider, "stop", None), "never_stops", False)


class FixedLength:
    """The trivial decider: the same length ``L [K]`` (or one int for all) every round, no early stop."""

    def __init__(self, L):
        self.L = np.atleast_1d(np.asarray(L, dtype=np.int64))
        if self.L.ndim != 1 or self.L.size == 0 or self.L.min() < 0:
            raise ValidationError(f"draft lengths must be ints >= 0, got {L!r}")
        self.L_max = max(int(self.L.max()), 1)  # the width of the rows a player gives it

    def choose(self, ctx) -> np.ndarray:
        return self.L.copy()

    @never_stops
    def stop(self, ctx, L_ref: np.ndarray) -> np.ndarray:
        return L_ref

    @ignores_outcome
    def update(self, out: Outcome) -> None:
        pass


def check_decider(obj, name: str = "decider") -> None:
    """One line unless ``obj`` has callable ``choose``, ``stop`` and ``update``."""
    missing = [m for m in ("choose", "stop", "update") if not callable(getattr(obj, m, None))]
    if missing:
        raise ValidationError(f"{name} must have choose(ctx), stop(ctx, L_ref) and update(out); "
                              f"{type(obj).__name__} lacks {', '.join(missing)}")


def check_lengths(L, K: int, hi, who: str, lo: int = 0) -> np.ndarray:
    """``L`` as an int array ``[K]`` with ``lo <= L <= hi`` (``hi`` an int or ``[K]``), else one line
    naming ``who`` (a decider that returns a wrong shape, a float or a length out of range)."""
    arr = np.asarray(L)
    if arr.shape != (K,) or not (np.issubdtype(arr.dtype, np.integer)
                                 or (np.issubdtype(arr.dtype, np.floating) and np.all(np.isfinite(arr))
                                     and np.all(arr == np.round(arr)))):
        raise ValidationError(f"{who} must return {K} integer length(s), got {arr.dtype} of shape {arr.shape}")
    arr = arr.astype(np.int64)
    if arr.min() < lo or np.any(arr > hi):
        raise ValidationError(f"{who} returned lengths outside {lo}..{int(np.max(hi))}: {arr.tolist()[:8]}")
    return arr


@dataclass(frozen=True)
class Plan:
    """What a decider commits to before a round when the users share a band (arrays ``[K]``).

    Attributes
    ----------
    L : int array [K]
        Draft lengths, ints in ``0..L_max``.
    b : float array [K] or None
        Uplink bandwidth [Hz]: finite, ``>= 0``, summing to at most the band ``B``, ``> 0`` for a
        drafting user. ``None``: paper 1's split for the lengths, the least makespan on the
        round's channel (:func:`spinlib.control.bandwidth.min_makespan_bandwidth`).
    """

    L: np.ndarray
    b: np.ndarray | None = None


def check_plan(choice, K: int, L_max: int, B: float, who: str) -> Plan:
    """``choice`` (lengths ``[K]`` or a :class:`Plan`) as a checked ``Plan`` (int lengths and, when
    given, float bandwidth [Hz]); one line naming ``who`` otherwise."""
    plan = choice if isinstance(choice, Plan) else Plan(choice)
    L = check_lengths(plan.L, K, L_max, who)
    if plan.b is None:
        return Plan(L)
    b = np.asarray(plan.b)
    if b.shape != (K,) or not (np.issubdtype(b.dtype, np.integer) or np.issubdtype(b.dtype, np.floating)):
        raise ValidationError(f"{who} must plan {K} bandwidth(s) [Hz], got {b.dtype} of shape {b.shape}")
    b = b.astype(float)
    if not np.all(np.isfinite(b) & (b >= 0)) or b.sum() > B * (1 + 1e-9):
        raise ValidationError(f"{who}: bandwidth must be finite, >= 0 and sum to <= {B:g} Hz")
    if np.any((L > 0) & (b <= 0)):
        raise ValidationError(f"{who}: a drafting user needs bandwidth > 0")
    return Plan(L, b)


@dataclass
class BandContext(RoundContext):
    """Round ``t`` as a decider sees it at its start when the ``K`` users share the band.

    The seam's fields (:class:`spinlib.decision.RoundContext`): ``rate`` and ``rate_mean`` are the
    uplink rates [bit/s] at the equal share ``B / K`` on the round's and on the average channel,
    ``state`` and ``delay_mean`` are zero (no delay model here), ``top_prob`` and ``entropy`` are
    ``None`` (no draft observables). Added: ``h [K]``, the round's fading factors, and ``rates``
    (:class:`spinlib.channel.RateModel` on the channel ``g_k h_k``: the rate as a function of the
    bandwidth).
    """

    h: np.ndarray
    rates: RateModel


@dataclass
class BandOutcome(Outcome):
    """What a round of ``K`` users sharing the band realised: the seam's
    :class:`spinlib.decision.Outcome` (``T [K]`` every user's time of the synchronous round, ``D [K]``
    the fixed feedback and access time, ``rate [K]`` the uplink rates at the played bandwidth) plus
    ``b [K]`` the bandwidth [Hz] and ``upload_s [K]`` each draft's upload time [s]."""

    b: np.ndarray
    upload_s: np.ndarray


def certain_rows(K: int, L_max: int) -> tuple[np.ndarray, np.ndarray]:
    """``(top_prob, entropy)`` ``[K, L_max]`` of positions not yet seen: certain (1 and 0 nat)."""
    return np.ones((K, L_max)), np.zeros((K, L_max))


def check_rate(name: str, x, unit: str = "bit/s") -> float:
    """A rate > 0 in ``unit`` (``inf``: no upload time), one line otherwise naming ``name`` and the unit."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or math.isnan(x) or x <= 0:
        raise ValidationError(f"{name} must be > 0 [{unit}] (inf: instant upload), got {x!r}")
    return float(x)


__all__ = ["Decider", "Outcome", "RoundContext", "FixedLength", "Plan", "BandContext", "BandOutcome", "check_plan",
           "check_decider", "check_lengths", "certain_rows", "check_rate", "never_stops", "reads_confidence",
           "ignores_outcome", "learns"]
