"""Speculative sampling (Leviathan et al. 2023, arXiv 2211.17192) with KV caches, in UL or DL mode.

One round with draft q and target p (notation of the paper):

1. the draft proposes ``x_1..x_L`` autoregressively, ``x_i ~ q_i`` (one cached forward per token);
2. the target scores the L+1 positions in **one** cached forward pass: ``p_1..p_{L+1}``;
3. ``x_i`` is accepted with probability ``min(1, p_i(x_i) / q_i(x_i))``; at the first rejection j
   the round ends with a token from the residual ``norm(max(0, p_j - q_j))``; if all L are
   accepted a bonus token comes from ``p_{L+1}``;
4. both caches are rolled back (cropped) to the committed tokens.

The output has exactly the target's distribution. At temperature 0 both distributions are
one-hot (argmax) and the rule reduces to "accept while the draft's token is the target's argmax".

Correction modes of paper 2 (the output is the same, only the bits differ):

* ``"UL"``: the device uploads ids and its draft distributions, the server corrects; the downlink
  carries the feedback (accepted count and one token id).
* ``"DL"``: the device uploads ids and the scalars ``q_i(x_i)`` (``Q`` bits each); the server runs
  the accept test and, on a rejection, sends ``p_j`` (``D_dist`` bits: ``V Q``, or ``k (id + Q)``
  for a top-k payload) for the device to sample the residual with its own ``q_j``; if everything
  is accepted, the bonus id.

At temperature 0 only ids travel in both modes. The bits of each round are
:func:`spinlib.modes.realised_bits` (uplink, and distribution bits down) plus
:func:`spinlib.modes.feedback_bits` on the downlink (:meth:`RoundRecord.from_round`).
Randomness comes from one ``torch.Generator``.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import torch

from ..modes import MODES, feedback_bits, realised_bits
from ..scenario import Payload, ValidationError

DEFAULT_PAYLOAD = Payload(2, "ids", 16, 1)  # bit accounting when no payload is given


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


def _probs(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    return torch.softmax(logits.double() / temperature, dim=-1)


def _sample(p: torch.Tensor, g: torch.Generator) -> int:
    return int(torch.multinomial(p.float(), 1, generator=g))


def draft_tokens(draft_lm: CachedLM, seq: list[int], L: int, greedy: bool, temperature: float, g):
    """Step 1: the draft proposes ``L`` tokens after ``seq`` (its cache catches up first).

    Returns the tokens and, when sampling, the draft distributions ``q_i`` they were drawn from.
    """
    drafts, qs = [], []
    if L > 0:
        logits = draft_lm.catch_up(seq)
        for i in range(L):
            if greedy:
                x = int(torch.argmax(logits))
            else:
                q = _probs(logits, temperature)
                x = _sample(q, g)
                qs.append(q)
            drafts.append(x)
            if i < L - 1:
                logits = draft_lm.feed([x], keep=1)[-1]
    return drafts, qs


def accept_drafts(logits: torch.Tensor, drafts: list[int], qs, greedy: bool, temperature: float, g):
    """Steps 3: accept/reject ``drafts`` against the target logits ``[L+1, V]`` of their positions.

    Returns the committed tokens (accepted drafts + the correction or bonus token) and the
    number accepted.
    """
    L = len(drafts)
    accepted = 0
    new: list[int] = []
    for i, x in enumerate(drafts):
        if greedy:
            ok = x == int(torch.argmax(logits[i]))
        else:
            p = _probs(logits[i], temperature)
            ratio = float(p[x] / qs[i][x])
            ok = float(torch.rand((), generator=g, dtype=torch.float64)) < min(1.0, ratio)
        if not ok:
            break
        accepted += 1
        new.append(x)
    j = accepted
    if greedy:
        new.append(int(torch.argmax(logits[j])))
    else:
        p = _probs(logits[j], temperature)
        if j < L:  # residual max(0, p - q), renormalised
            r = torch.clamp(p - qs[j], min=0.0)
            s = float(r.sum())
            new.append(_sample(r / s, g) if s > 0 else _sample(p, g))
        else:
            new.append(_sample(p, g))
    return new, accepted


@dataclass
class RoundRecord:
    """One round: what was drafted, accepted and carried over the air.

    ``bits_up`` [bit]: the drafts' uplink payload; ``bits_down`` [bit]: distribution bits sent down
    plus the feedback; ``draft_s`` / ``verify_s`` [s]: measured drafting and verification time.
    """

    drafted: int
    accepted: int
    tokens: int  # accepted + 1 (correction or bonus), fewer at a stop token or the length limit
    bits_up: float
    bits_down: float
    mode: str  # "UL" or "DL"
    draft_s: float
    verify_s: float

    @classmethod
    def from_round(cls, drafted: int, accepted: int, tokens: int, mode: str, payload: Payload, greedy: bool,
                   draft_s: float, verify_s: float) -> "RoundRecord":
        """The record of one round, its bits from :mod:`spinlib.modes`::

            bits_up, dist = realised_bits(payload, L, A, mode == "UL", greedy)
            bits_down = dist + feedback_bits(payload, dist)

        i.e. greedy or ``L = 0``: ``L id`` up, ``8 + id`` down; UL: ``L S_UL`` up, ``8 + id`` down;
        DL: ``L (id + Q)`` up, ``8 + D_dist`` down on a rejection, else ``8 + id``.
        """
        up, dist = realised_bits(payload, drafted, accepted, mode == "UL", greedy=greedy)
        down = dist + feedback_bits(payload, dist)
        return cls(drafted, accepted, tokens, float(up), float(down), mode, draft_s, verify_s)


def check_mode(mode: str) -> str:
    """``mode`` if it is ``"UL"`` or ``"DL"``, else :class:`ValidationError`."""
    if mode not in MODES:
        raise ValidationError(f"mode must be 'UL' or 'DL', got {mode!r}")
    return mode


@torch.no_grad()
def speculative_generate(target, draft, prompt_ids: list[int], *, max_new_tokens: int, draft_length: int,
                         temperature: float = 0.0, generator: torch.Generator | None = None, mode: str = "UL",
                         payload: Payload | None = None, stop_ids: tuple[int, ...] = ()):
    """Generate up to ``max_new_tokens`` with speculative sampling; returns ``(new_ids, records)``.

    Parameters
    ----------
    target, draft : model
        Hugging Face causal LMs sharing a tokenizer (or toy callables, see :class:`CachedLM`).
    prompt_ids : list of int
        Prompt tokens (at least one).
    draft_length : int
        L >= 0 (0 is plain decoding, one target pass per token).
    temperature : float
        0 for greedy, > 0 for sampling from ``softmax(logits / temperature)``.
    mode : {"UL", "DL"}
        Correction mode (only the bit accounting differs).
    payload : Payload
        Vocabulary size and bits per probability for the bit accounting.

    Returns
    -------
    new_ids : list of int
        The generated tokens.
    records : list of RoundRecord
        One per round.
    """
    check_mode(mode)
    if draft_length < 0 or max_new_tokens < 1 or not prompt_ids:
        raise ValidationError("draft_length must be >= 0, max_new_tokens >= 1 and the prompt non-empty")
    if temperature < 0:
        raise ValidationError(f"temperature must be >= 0, got {temperature}")
    greedy = temperature == 0
    g = generator or torch.Generator().manual_seed(0)
    payload = payload or DEFAULT_PAYLOAD
    target_lm, draft_lm = CachedLM(target), CachedLM(draft)
    seq = list(prompt_ids)
    if len(seq) > 1:
        target_lm.feed(seq[:-1], keep=1)
        if draft_length > 0:
            draft_lm.feed(seq[:-1], keep=1)
    records: list[RoundRecord] = []
    n_new = 0
    while n_new < max_new_tokens:
        L = min(draft_length, max_new_tokens - n_new - 1)
        t_start = time.perf_counter()
        drafts, qs = draft_tokens(draft_lm, seq, L, greedy, temperature, g)
        t_drafted = time.perf_counter()
        logits = target_lm.feed(seq[len(target_lm):] + drafts, keep=L + 1)
        new, accepted = accept_drafts(logits, drafts, qs, greedy, temperature, g)
        t_verified = time.perf_counter()
        stop_at = next((k for k, x in enumerate(new) if x in stop_ids), None)
        if stop_at is not None:
            new = new[: stop_at + 1]
        new = new[: max_new_tokens - n_new]
        seq.extend(new)
        n_new += len(new)
        target_lm.crop(len(seq) - 1)
        draft_lm.crop(len(seq) - 1)
        records.append(RoundRecord.from_round(L, accepted, len(new), mode, payload, greedy,
                                              t_drafted - t_start, t_verified - t_drafted))
        if stop_at is not None:
            break
    return seq[len(prompt_ids):], records


@torch.no_grad()
def target_generate(target, prompt_ids: list[int], *, max_new_tokens: int, temperature: float = 0.0,
                    generator: torch.Generator | None = None, stop_ids: tuple[int, ...] = (),
                    return_logits: bool = False):
    """Plain autoregressive decoding with a KV cache (the reference for losslessness).

    With ``return_logits`` also returns the ``[n_new, V]`` next-token logits at every generated
    position (what teacher-forced acceptance measurement needs; no extra target pass).
    """
    g = generator or torch.Generator().manual_seed(0)
    target_lm = CachedLM(target)
    logits = target_lm.feed(list(prompt_ids), keep=1)[-1]
    out, rows = [], []
    for _ in range(max_new_tokens):
        rows.append(logits)
        x = int(torch.argmax(logits)) if temperature == 0 else _sample(_probs(logits, temperature), g)
        out.append(x)
        if x in stop_ids or len(out) == max_new_tokens:
            break
        logits = target_lm.feed([x], keep=1)[-1]
    if return_logits:
        return out, torch.stack(rows)
    return out


def records_to_dicts(records) -> list[dict]:
    return [asdict(r) for r in records]


def mean_tokens_per_round(records) -> float:
    return sum(r.tokens for r in records) / max(len(records), 1)


__all__ = ["CachedLM", "RoundRecord", "DEFAULT_PAYLOAD", "check_mode", "speculative_generate", "target_generate",
           "records_to_dicts", "mean_tokens_per_round"]
