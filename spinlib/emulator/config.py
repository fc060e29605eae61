"""What to emulate: :class:`EmulatorConfig`."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..validation import ValidationError, check_bool, check_int_range, check_nonnegative
from .fading import Fading

ACCEPTANCE_MODELS = ("iid", "profile")
SERVER_MODELS = ("batch", "ideal")
COMPUTE_MODELS = ("model", "measured")


@dataclass(frozen=True)
class EmulatorConfig:
    """What to emulate.

    Parameters
    ----------
    rounds : int
        Synchronous: rounds of the cell. Asynchronous: rounds of every user (>= 2).
    seed : int
        All randomness (acceptances, fading) flows from ``numpy.random.default_rng(seed)``;
        real mode also seeds user k's sampler with ``seed + k``.
    fading : Fading
        Block-fading model of the channel (:class:`~spinlib.emulator.fading.Fading`).
    acceptance : {"iid", "profile"}
        Synthetic acceptances: ``P(A >= i) = alpha^i`` or the user's prefix profile ``pi_i``
        (ignored in real mode).
    server : {"batch", "ideal"}
        Asynchronous policies only: one server verifying, when free, every draft that has
        arrived in one pass (queueing), or one server per draft (no queueing, model B).
    real_models : str or None
        A same-tokenizer pair of :data:`spinlib.sd.models.PAIRS` for real speculative decoding.
    temperature : float
        Real mode: 0 (greedy) or the sampling temperature.
    compute : {"model", "measured"}
        Real mode: compute times from the latency model or measured by the engine.
    timeline_rounds : int
        Rounds (sync) or server batches (async) kept in the per-phase timeline.
    allow_long : bool
        Real mode: run past :data:`spinlib.emulator.testbed.REAL_STEP_BUDGET` model steps (refused
        otherwise, before any model loads). Where the work may run, not what it computes: not part of
        a cache key.
    """

    rounds: int = 1000
    seed: int = 0
    fading: Fading = field(default_factory=Fading)
    acceptance: str = "iid"
    server: str = "batch"
    real_models: str | None = None
    temperature: float = 0.0
    compute: str = "model"
    timeline_rounds: int = 12
    allow_long: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        check_bool("allow_long", self.allow_long)
        check_int_range("rounds", self.rounds, 2)
        check_int_range("seed", self.seed, 0)
        check_int_range("timeline_rounds", self.timeline_rounds, 0)
        if not isinstance(self.fading, Fading):
            raise ValidationError("fading must be a Fading")
        for name, allowed in (("acceptance", ACCEPTANCE_MODELS), ("server", SERVER_MODELS),
                              ("compute", COMPUTE_MODELS)):
            if getattr(self, name) not in allowed:
                raise ValidationError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        check_nonnegative("temperature", self.temperature)
        if self.compute == "measured" and self.real_models is None:
            raise ValidationError("compute='measured' needs real_models (the engine measures the times)")


__all__ = ["ACCEPTANCE_MODELS", "SERVER_MODELS", "COMPUTE_MODELS", "EmulatorConfig"]
