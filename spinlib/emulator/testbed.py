"""The testbed: a trace (synthetic or real) and a channel realisation, played out on an event clock."""
from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

from ..goodput import GoodputEstimate
from ..rounds import Allocation, check_allocation, evaluate
from ..scenario import Scenario
from ..validation import ValidationError
from .clock import async_clock, sync_clock
from .config import EmulatorConfig
from .real_traces import real_trace  # torch and the models load inside it only
from .traces import synthetic_trace


@dataclass(frozen=True)
class EmulationResult(GoodputEstimate):
    """What the testbed measured (``K`` users).

    Parameters
    ----------
    goodput_tokens_per_s, ci_low, ci_high : float
        Emulated goodput [token/s] and its delta-method interval.
    predicted_tokens_per_s : float
        The analytical model's goodput for the same allocation (:func:`spinlib.rounds.evaluate`).
    user_goodput : float array [K]
        [token/s].
    tokens_per_round : float array [K]
        Mean tokens per round.
    tokens_per_round_sd : float array [K]
        Their sample standard deviation over the rounds (``ddof = 1``).
    round_time_s : float array
        All round durations [s] (sync: ``[R]``; async: every user's rounds, ``[R K]``).
    token_latency_s : float array [K]
        Elapsed time / tokens [s].
    phase_shares : dict
        Phase -> share of the elapsed time.
    server_utilisation : float
    rounds : int
        Rounds played (real mode: fewer than asked if a user stopped early).
    timeline : list of dict
        ``{"user", "phase", "start", "end"}`` [s] of the first rounds.
    outputs : list or None
        Real mode: each user's emitted token ids.
    info : dict
        Round model, policy, fading, acceptance and server models.
    """

    predicted_tokens_per_s: float
    user_goodput: np.ndarray
    tokens_per_round: np.ndarray
    tokens_per_round_sd: np.ndarray
    round_time_s: np.ndarray
    token_latency_s: np.ndarray
    phase_shares: dict
    server_utilisation: float
    rounds: int
    timeline: list = field(default_factory=list)
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
        goodput_tokens_per_s=m.goodput_tokens_per_s, ci_low=m.ci_low, ci_high=m.ci_high,
        predicted_tokens_per_s=evaluate(scenario, alloc).goodput_tokens_per_s,
        user_goodput=m.user_goodput, tokens_per_round=m.tokens_per_round, round_time_s=m.round_time_s,
        tokens_per_round_sd=m.tokens_per_round_sd,
        token_latency_s=m.token_latency_s, phase_shares=m.phase_shares,
        server_utilisation=m.server_utilisation, rounds=tr.rounds, timeline=list(m.timeline), outputs=tr.outputs,
        info={"round_model": alloc.round_model, "policy": alloc.policy, "fading": cfg.fading.model,
              "acceptance": "real" if cfg.real_models else cfg.acceptance, "server": cfg.server},
    )


__all__ = ["EmulationResult", "emulate"]
