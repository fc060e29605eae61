"""The field's stopping rules, as practitioners run them (our re-implementations).

* **fixed**: ``L`` every round (``L = 0`` is server-only decoding: one target step per token).
* **specdec++**: SpecDec++ (Huang et al. 2024) stops drafting once the predicted probability
  that at least one draft is rejected passes a threshold ``h``. Its trained acceptance head is
  replaced here by the draft's own top-token probability ``q_i``: after drafting token ``i``,
  stop when ``1 - prod_{j<=i} q_j > h``.
* **hf-heuristic**: Hugging Face assisted generation's ``num_assistant_tokens_schedule =
  "heuristic"``: start at ``start`` (HF's default ``num_assistant_tokens = 20``, clipped to
  ``L_max``), ``+2`` after a round whose drafts were all accepted, ``-1`` (at least 1) otherwise.
* **hf-confidence**: HF's ``assistant_confidence_threshold`` (default 0.4): the draft stops after
  a token whose top probability is below the threshold, at most ``max_tokens`` drafts.

Observables beyond the first rejected position are the teacher-forced ones (see
:mod:`spinlib.online.arena`): exact token counts, approximate count of wasted drafts.
"""
from __future__ import annotations

import numpy as np

from ..validation import ValidationError, check_int_range
from .registry import Controller, Env, register_controller


def first_true(mask: np.ndarray, default: int) -> np.ndarray:
    """1-based index of the first True per row of ``mask [K, M]`` (``default`` where none)."""
    any_ = mask.any(axis=1)
    return np.where(any_, np.argmax(mask, axis=1) + 1, default)


@register_controller("fixed", "the same draft length every round (L = 0: server-only decoding)", family="anchor")
class Fixed(Controller):
    def __init__(self, env: Env, L: int = 4):
        super().__init__(env)
        self.L = check_int_range("L", L, 0, env.L_max)

    def choose(self, ctx):
        return np.full(self.env.K, self.L)


@register_controller("specdec++", "stop when 1 - prod(top-token probabilities) exceeds h (SpecDec++ rule, draft "
                     "confidence as predictor)", family="anchor")
class SpecDecPP(Controller):
    def __init__(self, env: Env, h: float = 0.7):
        super().__init__(env)
        if not (isinstance(h, (int, float)) and 0 < h < 1):
            raise ValidationError(f"h must be in (0, 1), got {h!r}")
        self.h = float(h)

    def stop(self, ctx, L_ref):
        reject = 1.0 - np.cumprod(ctx.top_prob, axis=1) > self.h
        return np.minimum(first_true(reject, self.env.L_max), L_ref)


@register_controller("hf-heuristic", "Hugging Face assisted generation: +2 after full acceptance, -1 otherwise",
                     family="anchor")
class HFHeuristic(Controller):
    def __init__(self, env: Env, start: int = 20):
        super().__init__(env)
        start = check_int_range("start", start, 1)
        self.L = np.full(env.K, min(start, env.L_max))

    def choose(self, ctx):
        return self.L.copy()

    def update(self, out):
        full = out.A == out.L
        self.L = np.clip(np.where(full, self.L + 2, self.L - 1), 1, self.env.L_max)


@register_controller("hf-confidence", "Hugging Face assisted generation: stop after a draft token whose top "
                     "probability is below the threshold", family="anchor")
class HFConfidence(Controller):
    def __init__(self, env: Env, threshold: float = 0.4, max_tokens: int = 20):
        super().__init__(env)
        if not (isinstance(threshold, (int, float)) and 0 <= threshold <= 1):
            raise ValidationError(f"threshold must be in [0, 1], got {threshold!r}")
        self.threshold = float(threshold)
        self.max_tokens = min(check_int_range("max_tokens", max_tokens, 1), env.L_max)

    def choose(self, ctx):
        return np.full(self.env.K, self.max_tokens)

    def stop(self, ctx, L_ref):
        low = ctx.top_prob < self.threshold
        return np.minimum(first_true(low, self.env.L_max), L_ref)


__all__ = ["Fixed", "SpecDecPP", "HFHeuristic", "HFConfidence", "first_true"]
