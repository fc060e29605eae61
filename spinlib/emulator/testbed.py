"""The testbed: a trace (synthetic or real) and a channel realisation, played out on an event clock."""
from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

from ..rounds import Allocation, check_allocation, evaluate
from ..scenario import Scenario
from ..validation import ValidationError
from .clock import ClockResult, async_clock, sync_clock
from .config import EmulatorConfig
from .real_traces import real_trace  # torch and the models load inside it only
from .traces import synthetic_trace


@dataclass(frozen=True, kw_only=True)
class EmulationResult(ClockResult):
    """What the testbed measured (``K`` users): the clock's :class:`~spinlib.emulator.clock.ClockResult`
    (goodput and interval, per-user goodput, tokens per round, round times, latencies, phase shares,
    server utilisation, timeline) and what the run adds.

    Parameters
    ----------
    predicted_tokens_per_s : float
        The analytical model's goodput for the same allocation (:func:`spinlib.rounds.evaluate`).
    rounds : int
        Rounds played (real mode: fewer than asked if a user stopped early).
    outputs : list or None
        Real mode: each user's emitted token ids.
    info : dict
        Round model, policy, fading, acceptance and server models.
    """

    predicted_tokens_per_s: float
    rounds: int
    outputs: list | None = None
    info: dict = field(default_factory=dict)

    @property
    def relative_error(self) -> float:
        """``(emulated - predicted) / predicted``."""
        return self.goodput_tokens_per_s / self.predicted_tokens_per_s - 1.0

    def to_dict(self) -> dict:
        """JSON-ready: arrays as lists, plus ``relative_error``."""
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            out[f.name] = v.tolist() if isinstance(v, np.ndarray) else v
        out["relative_error"] = self.relative_error
        return out


MAX_ROUND_USER_CELLS = 20_000_000  # rounds x users: ~1 GB of per-round arrays at most
#: real mode: model steps of a run, rounds x (one batched target pass + every user's drafted tokens); about
#: 80 min at 0.1 s per step (the Qwen pair's target step on a 2-core CPU); EmulatorConfig.allow_long lifts it
REAL_STEP_BUDGET = 50_000


def real_steps(alloc: Allocation, rounds: int) -> int:
    """Model steps a real-mode run of ``rounds`` rounds takes: ``rounds x (1 + sum_k L_k)`` (one batched
    target pass per round and every drafted token; the asynchronous model's per-user rounds count alike)."""
    return int(rounds) * (1 + int(sum(alloc.draft_lengths)))


def emulate(scenario: Scenario, alloc: Allocation, cfg: EmulatorConfig | None = None, *,
            confidence: float = 0.99, progress: bool = False) -> EmulationResult:
    """Play ``alloc`` out on ``scenario``; returns what was measured.

    The trace comes from :func:`spinlib.emulator.traces.synthetic_trace` or, with
    ``cfg.real_models``, :func:`spinlib.emulator.real_traces.real_trace`; the fading factors from
    ``cfg.fading``; the clock is :func:`spinlib.emulator.clock.async_clock` for asynchronous
    paper-1 allocations and :func:`spinlib.emulator.clock.sync_clock` otherwise. The interval is a
    delta-method confidence interval at level ``confidence`` of the ratio estimator
    (tokens / time) over independent rounds (exact in the static i.i.d. case, approximate under
    Markov fading, whose rounds are correlated).
    """
    cfg = cfg or EmulatorConfig()
    check_allocation(scenario, alloc)
    cells = cfg.rounds * scenario.num_users
    if cells > MAX_ROUND_USER_CELLS:  # the trace holds several [rounds, K] arrays in memory
        raise ValidationError(f"rounds x users = {cells:,} exceeds the emulator's limit of {MAX_ROUND_USER_CELLS:,} "
                              f"(lower rounds; memory grows with rounds x users)")
    if cfg.real_models is not None and not cfg.allow_long and real_steps(alloc, cfg.rounds) > REAL_STEP_BUDGET:
        raise ValidationError(f"real mode: {cfg.rounds:,} rounds x (1 + {sum(alloc.draft_lengths)} drafted tokens) = "
                              f"{real_steps(alloc, cfg.rounds):,} model steps, past the budget of {REAL_STEP_BUDGET:,} "
                              f"(about 80 min at 0.1 s a step); lower rounds, or allow_long=True (emulate --allow-long)")
    rng = np.random.default_rng(cfg.seed)
    if cfg.real_models is not None:
        tr = real_trace(scenario, alloc, cfg, progress)
    else:
        tr = synthetic_trace(scenario, alloc, cfg.rounds, cfg.acceptance, rng)
    h = cfg.fading.draw(tr.rounds, scenario.num_users, rng)
    if alloc.round_model == "async" and alloc.modes is None:
        m = async_clock(scenario, alloc, tr, h, confidence=confidence, server=cfg.server,
                        timeline_rounds=cfg.timeline_rounds)
    else:
        m = sync_clock(scenario, alloc, tr, h, confidence=confidence, timeline_rounds=cfg.timeline_rounds)
    return EmulationResult(
        **{f.name: getattr(m, f.name) for f in fields(ClockResult)},
        predicted_tokens_per_s=evaluate(scenario, alloc).goodput_tokens_per_s, rounds=tr.rounds, outputs=tr.outputs,
        info={"round_model": alloc.round_model, "policy": alloc.policy, "fading": cfg.fading.model,
              "acceptance": "real" if cfg.real_models else cfg.acceptance, "server": cfg.server},
    )


__all__ = ["EmulationResult", "emulate", "REAL_STEP_BUDGET", "real_steps"]
