"""Block fading: one power-gain factor per round and user, multiplying the average gain ``g_k``."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..validation import ValidationError, check_nonnegative

FADING_MODELS = ("static", "rayleigh", "markov")


@dataclass(frozen=True)
class Fading:
    """Block fading: the channel power gain of user ``k`` in round ``r`` is ``h[r, k] g_k``.

    ``"static"``: ``h = 1``. ``"rayleigh"``: ``h = max(X, 10^(floor_db/10))``, ``X ~ Exp(1)``
    i.i.d.: without a floor ``E[1/h]`` diverges (``1/R ~ 1/h`` in a deep fade), so the mean round
    time of any policy that uploads would be infinite; the floor (default -20 dB, i.e. fades
    deeper than 20 dB are absorbed by power control / link adaptation) keeps it finite and is a
    modelling choice reported with the results. ``"markov"``: a two-state Gilbert-Elliott chain
    per user, good (``h = 1``) and bad (``h = 10^(-bad_db/10)``), switching good -> bad with
    probability ``p_good_to_bad`` and back with ``p_bad_to_good`` per round, started from its
    stationary law ``P(bad) = p_gb / (p_gb + p_bg)``. Uplink and downlink see the same ``h``
    (reciprocity).

    Parameters
    ----------
    model : {"static", "rayleigh", "markov"}
    floor_db : float
        Rayleigh floor [dB], finite and <= 0.
    bad_db : float
        Markov bad-state attenuation [dB], >= 0.
    p_good_to_bad, p_bad_to_good : float
        Markov transition probabilities per round, in (0, 1].
    """

    model: str = "static"
    floor_db: float = -20.0
    bad_db: float = 10.0
    p_good_to_bad: float = 0.1
    p_bad_to_good: float = 0.3

    def __post_init__(self) -> None:
        if self.model not in FADING_MODELS:
            raise ValidationError(f"fading must be one of {FADING_MODELS}, got {self.model!r}")
        check_nonnegative("bad_db", self.bad_db)
        if not (isinstance(self.floor_db, (int, float)) and math.isfinite(self.floor_db) and self.floor_db <= 0):
            raise ValidationError(f"floor_db must be a finite number <= 0, got {self.floor_db!r}")
        for name in ("p_good_to_bad", "p_bad_to_good"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and 0 < v <= 1):
                raise ValidationError(f"{name} must be in (0, 1], got {v!r}")

    def draw(self, rounds: int, K: int, rng: np.random.Generator) -> np.ndarray:
        """Power-gain factors ``h`` (dimensionless), shape ``[rounds, K]``."""
        if self.model == "static":
            return np.ones((rounds, K))
        if self.model == "rayleigh":
            return np.maximum(rng.exponential(1.0, (rounds, K)), 10.0 ** (self.floor_db / 10.0))
        pi_bad = self.p_good_to_bad / (self.p_good_to_bad + self.p_bad_to_good)
        bad = np.empty((rounds, K), dtype=bool)
        bad[0] = rng.random(K) < pi_bad
        u = rng.random((rounds, K))
        for r in range(1, rounds):
            bad[r] = np.where(bad[r - 1], u[r] >= self.p_bad_to_good, u[r] < self.p_good_to_bad)
        return np.where(bad, 10.0 ** (-self.bad_db / 10.0), 1.0)


__all__ = ["FADING_MODELS", "Fading"]
