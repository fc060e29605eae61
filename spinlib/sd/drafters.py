"""The drafter seam: what proposes a round's tokens, for the single-user and the batched engine.

A *drafter* answers three calls (:class:`Drafter`); the engines (:func:`spinlib.sd.engine.speculative_generate`,
:func:`spinlib.sd.batched.batched_sync_generate`) call nothing else of it:

1. ``start(prompt_ids)``: once, before the first round (a model drafter prefills its KV cache with
   every prompt token but the last);
2. ``propose(seq, L, greedy, temperature, g, rule=None) -> (tokens, qs)``: at most ``L`` tokens to
   follow the committed sequence ``seq``, and for sampling (``greedy=False``) the distribution each
   was drawn from: ``qs[i]`` a ``[V]`` float64 tensor, or ``None`` for a deterministic proposal (a
   point mass on ``tokens[i]``; the accept test then reads ``q_i(x_i) = 1`` and the residual is
   ``p_i`` without ``x_i``, :func:`spinlib.sd.engine.accept_drafts`: still lossless). ``rule(i,
   logits)``, when given, is the decider's stop rule (:func:`spinlib.sd.cachedlm.draft_tokens`): it
   sees position ``i``'s next-token logits before token ``i`` is proposed;
3. ``crop(n)``: the first ``n`` tokens of the sequence are committed, forget anything after them
   (a model drafter crops its KV cache: the rollback after a rejection).

Instances here: :class:`ModelDrafter` (a causal LM with its own KV cache: the draft model on the
device), :class:`NgramDrafter` (prompt lookup: the tokens that followed the latest n-gram's first
earlier occurrence, no model), :class:`HybridDrafter` (n-gram when the lookup finds a match, the
model otherwise) and :class:`CrossTokenizerDrafter` (a model with its own tokenizer: draft in its
tokens, re-tokenise with the target's, greedy only). A new drafter is one class with these three
methods; nothing in the engines changes.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np
import torch

from ..validation import ValidationError
from .cachedlm import CachedLM, draft_tokens

# next-token logits of a certain position (one token with all the mass): what a stop rule sees for a
# deterministic proposal (top probability 1, entropy 0: registered rules never stop on it)
CERTAIN_LOGITS = torch.tensor([0.0, -float("inf")], dtype=torch.float64)


@runtime_checkable
class Drafter(Protocol):
    """What proposes a round's draft tokens (module docstring)."""

    def start(self, prompt_ids: list[int]) -> None: ...

    def propose(self, seq: list[int], L: int, greedy: bool, temperature: float, g: torch.Generator,
                rule=None) -> tuple[list[int], list]: ...

    def crop(self, n: int) -> None: ...


def as_drafter(draft) -> "Drafter":
    """``draft`` itself when it is a drafter, else a :class:`ModelDrafter` around the model ``draft``."""
    if isinstance(draft, Drafter):
        return draft
    if not callable(draft):
        raise ValidationError(f"draft must be a model or a drafter (start, propose, crop), got {type(draft).__name__}")
    return ModelDrafter(draft)


def _apply_rule(tokens: list[int], rule) -> list[int]:
    """Cut a deterministic proposal where ``rule`` ends the round (every position certain)."""
    if rule is None:
        return tokens
    for i in range(len(tokens)):
        want = rule(i, CERTAIN_LOGITS)
        if want <= i:
            return tokens[:want]
        if want == i + 1:
            return tokens[:i + 1]
    return tokens


class ModelDrafter:
    """A causal LM with its own KV cache (:class:`spinlib.sd.cachedlm.CachedLM`) drafting autoregressively.

    ``propose`` is :func:`spinlib.sd.cachedlm.draft_tokens`: one cached forward per drafted token, the
    cache catching up with the committed tokens first; ``crop`` rolls the cache back.
    """

    def __init__(self, model):
        self.lm = CachedLM(model)

    def start(self, prompt_ids: list[int]) -> None:
        if len(prompt_ids) > 1:
            self.lm.feed(list(prompt_ids[:-1]), keep=1)

    def propose(self, seq, L, greedy, temperature, g, rule=None):
        return draft_tokens(self.lm, seq, L, greedy, temperature, g, rule)

    def crop(self, n: int) -> None:
        self.lm.crop(n)


class NgramDrafter:
    """Prompt lookup (n-gram) drafting: no model, deterministic proposals.

    For ``n = max_ngram, ..., min_ngram`` the last ``n`` tokens of ``seq`` are searched for in
    ``seq`` (the prompt and what was generated); at the first (earliest) earlier occurrence the
    tokens that followed it, up to ``L``, are the proposal (the rule of Hugging Face's prompt
    lookup, ``max_matching_ngram_size = 2`` by default). No match: nothing is proposed and the
    round is one plain decoding step. Each proposed token is a point mass (``qs[i] = None``).
    """

    def __init__(self, max_ngram: int = 2, min_ngram: int = 1):
        for name, v in (("max_ngram", max_ngram), ("min_ngram", min_ngram)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 1 <= v <= 16:
                raise ValidationError(f"{name} must be an int in 1..16, got {v!r}")
        if min_ngram > max_ngram:
            raise ValidationError(f"min_ngram ({min_ngram}) must be <= max_ngram ({max_ngram})")
        self.max_ngram, self.min_ngram = int(max_ngram), int(min_ngram)

    def lookup(self, seq: list[int], L: int) -> list[int]:
        """The proposal of at most ``L`` tokens (empty when no n-gram matches)."""
        if L <= 0 or len(seq) < 2:
            return []
        arr = np.asarray(seq, dtype=np.int64)
        for n in range(min(self.max_ngram, len(arr) - 1), self.min_ngram - 1, -1):
            windows = np.lib.stride_tricks.sliding_window_view(arr[:-1], n)  # every earlier n-gram
            hits = np.flatnonzero((windows == arr[-n:]).all(axis=1))
            for i in hits:
                follow = arr[i + n: i + n + L]
                if follow.size:
                    return follow.tolist()
        return []

    def start(self, prompt_ids: list[int]) -> None:
        pass

    def propose(self, seq, L, greedy, temperature, g, rule=None):
        tokens = _apply_rule(self.lookup(seq, L), rule)
        return tokens, ([] if greedy else [None] * len(tokens))

    def crop(self, n: int) -> None:
        pass


class HybridDrafter:
    """Prompt lookup when it finds a match, the draft model otherwise (the model's cache catches up
    with the committed tokens whenever it drafts again)."""

    def __init__(self, model_or_drafter, ngram: NgramDrafter | None = None):
        self.model = as_drafter(model_or_drafter)
        self.ngram = ngram if ngram is not None else NgramDrafter()
        self.ngram_rounds = self.model_rounds = 0

    def start(self, prompt_ids: list[int]) -> None:
        self.ngram.start(prompt_ids)
        self.model.start(prompt_ids)

    def propose(self, seq, L, greedy, temperature, g, rule=None):
        tokens = self.ngram.lookup(seq, L)
        if tokens:
            self.ngram_rounds += 1
            tokens = _apply_rule(tokens, rule)
            return tokens, ([] if greedy else [None] * len(tokens))
        if L > 0:
            self.model_rounds += 1
        return self.model.propose(seq, L, greedy, temperature, g, rule)

    def crop(self, n: int) -> None:
        self.ngram.crop(n)
        self.model.crop(n)


class CrossTokenizerDrafter:
    """A draft model with another tokenizer (greedy only): the idea of Hugging Face's universal
    assisted generation.

    Each round the committed text (``prompt`` plus the target tokens generated so far, decoded) is
    tokenised with the draft's tokenizer, the draft continues it greedily for ``steps`` of its own
    tokens (default: ``L``), and the continuation is decoded and re-tokenised with the target's
    tokenizer; the first ``L`` target tokens are the proposal, each a point mass. The draft has no
    cache across rounds (its tokens change with the re-tokenisation). Cross-tokenizer *sampling* is
    not offered: Leviathan's rule needs both distributions over one vocabulary.
    """

    def __init__(self, draft, draft_tok, target_tok, prompt: str, steps: int | None = None):
        if steps is not None and (isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1):
            raise ValidationError(f"steps must be an int >= 1 (or None: L), got {steps!r}")
        self.draft, self.draft_tok, self.target_tok = draft, draft_tok, target_tok
        self.prompt, self.steps = prompt, steps
        self.n_prompt = None

    def start(self, prompt_ids: list[int]) -> None:
        self.n_prompt = len(prompt_ids)

    def propose(self, seq, L, greedy, temperature, g, rule=None):
        if not greedy:
            raise ValidationError("the cross-tokenizer drafter is greedy only (temperature 0)")
        if rule is not None:
            raise ValidationError("the cross-tokenizer drafter reports no per-position confidence: use a decider "
                                  "whose stop never reads it")
        if self.n_prompt is None:
            raise ValidationError("the cross-tokenizer drafter was not started (start(prompt_ids) first)")
        if L <= 0:
            return [], []
        text = self.prompt + self.target_tok.decode(seq[self.n_prompt:])
        lm = CachedLM(self.draft)
        logits = lm.feed(list(self.draft_tok(text, add_special_tokens=False)["input_ids"]), keep=1)[-1]
        new: list[int] = []
        n = self.steps or L
        for i in range(n):
            x = int(torch.argmax(logits))
            new.append(x)
            if i < n - 1:
                logits = lm.feed([x], keep=1)[-1]
        cand = list(self.target_tok(self.draft_tok.decode(new), add_special_tokens=False)["input_ids"])
        return cand[:L], []

    def crop(self, n: int) -> None:
        pass


__all__ = ["Drafter", "as_drafter", "ModelDrafter", "NgramDrafter", "HybridDrafter", "CrossTokenizerDrafter",
           "CERTAIN_LOGITS"]
