"""A causal LM with a KV cache that grows and rolls back, and autoregressive drafting with it.

:class:`CachedLM` serves both sides of a round: the target's cache on the server and the draft
model's on the device (:class:`spinlib.sd.drafters.ModelDrafter`); :func:`draft_tokens` is step 1
of a round (:mod:`spinlib.sd.engine`), one cached forward per drafted token.
"""
from __future__ import annotations

import torch


class CachedLM:
    """A causal LM with a KV cache that can be extended and cropped (rollback).

    Works with Hugging Face models (``DynamicCache.crop``) and with plain callables
    ``f(ids [1, n]) -> logits [1, n, V]`` without a cache (toy models for tests).
    """

    def __init__(self, model):
        self.model = model
        self.hf = hasattr(model, "config")
        self.cache = None
        self.ids: list[int] = []  # tokens whose keys/values are in the cache

    def __len__(self) -> int:
        return len(self.ids)

    @torch.no_grad()
    def feed(self, tokens: list[int], keep: int | None = None) -> torch.Tensor:
        """Append ``tokens``; return the next-token logits of the last ``keep`` of them (all if None).

        Shape ``[keep, V]``, the model's dtype (float32; probabilities are formed in float64).
        ``keep`` spares the output-head product over a long prefill (``logits_to_keep`` of Hugging
        Face models): 2.8 GFLOP per 100 prompt tokens for V = 49,152.
        """
        if not tokens:
            raise ValueError("feed needs at least one token")
        n = len(tokens) if keep is None else min(keep, len(tokens))
        if self.hf:
            from transformers import DynamicCache

            if self.cache is None:
                self.cache = DynamicCache(config=self.model.config)
            out = self.model(input_ids=torch.tensor([tokens]), cache=self.cache, use_cache=True, logits_to_keep=n)
            logits = out.logits[0, -n:]
        else:
            logits = self.model(torch.tensor([self.ids + tokens]))[0, len(self.ids):][-n:]
        self.ids.extend(tokens)
        return logits

    def crop(self, n: int) -> None:
        """Keep the first ``n`` cached positions."""
        if n < len(self.ids):
            if self.hf and self.cache is not None:
                self.cache.crop(n - len(self.ids))  # transformers 5: a negative count removes tokens
            del self.ids[n:]

    def catch_up(self, seq: list[int]) -> torch.Tensor:
        """Feed the tokens of ``seq`` missing from the cache; return the last position's logits."""
        assert seq[: len(self.ids)] == self.ids, "cache diverged from the committed sequence"
        return self.feed(seq[len(self.ids):], keep=1)[-1]


def probs(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """``softmax(logits / temperature)`` in float64."""
    return torch.softmax(logits.double() / temperature, dim=-1)


def sample(p: torch.Tensor, g: torch.Generator) -> int:
    """One token drawn from ``p`` with the generator ``g``."""
    return int(torch.multinomial(p.float(), 1, generator=g))


def draft_confidence(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The draft's confidence at each position of ``logits [n, V]``: its largest probability and
    its entropy [nat] under ``q = softmax(logits)`` (float64), both ``[n]`` (what a stop rule reads:
    :mod:`spinlib.decision`; the same numbers the recorded traces carry)."""
    logq = torch.log_softmax(logits.double(), -1)
    q = logq.exp()
    return q.max(-1).values, (-(q * logq)).nan_to_num(0.0).sum(-1).clamp(min=0.0)


def draft_tokens(draft_lm: CachedLM, seq: list[int], L: int, greedy: bool, temperature: float, g, rule=None):
    """Step 1: the draft proposes up to ``L`` tokens after ``seq`` (its cache catches up first).

    ``rule(i, logits) -> int``, when given, sees position ``i``'s logits before token ``i`` is
    drawn and answers the length its stop rule wants so far: the round ends before token ``i``
    when the answer is ``<= i`` and after it when it is ``i + 1`` (:mod:`spinlib.decision`).
    Returns the tokens and, when sampling, the draft distributions ``q_i`` they were drawn from.
    """
    drafts, qs = [], []
    if L > 0:
        logits = draft_lm.catch_up(seq)
        for i in range(L):
            want = L if rule is None else rule(i, logits)
            if want <= i:
                del drafts[want:], qs[want:]
                break
            if greedy:
                x = int(torch.argmax(logits))
            else:
                q = probs(logits, temperature)
                x = sample(q, g)
                qs.append(q)
            drafts.append(x)
            if i < L - 1 and want > i + 1:
                logits = draft_lm.feed([x], keep=1)[-1]
            elif want == i + 1:
                break
    return drafts, qs


__all__ = ["CachedLM", "draft_tokens", "draft_confidence", "probs", "sample"]
