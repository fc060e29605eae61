"""Two distinct real models across tokenizers: SmolLM2-135M-Instruct drafting for Gemma-3-270M.

Neither Leviathan's rule nor a shared KV position applies directly when the two models cut text
into different tokens, so this pair is **labelled separately** and measured two ways:

* **greedy with re-tokenisation** (the idea of Hugging Face's universal assisted generation):
  the draft continues the text in its own tokens, the continuation is re-tokenised with the
  target's tokenizer, and the target accepts the longest prefix that matches its own greedy
  choices, then adds its correction. Every committed token is the target's argmax, so the output
  equals plain greedy target decoding (checked). Reported: accepted per drafted (target) token
  and tokens per target call.
* **alpha through the vocabulary intersection**: tokens whose strings are identical in both
  vocabularies (after mapping the space markers "G-dot" and "lower one-eighth block" to a space)
  are identified; along the target's greedy trajectory, the draft's next-token distribution
  given the same text is carried onto the shared tokens and
  ``beta_t = sum_x min(p_t(x), q_t(x))`` over them (mass on unshared tokens counts as rejected).
  This is an approximation: it ignores multi-token matches across boundaries.

We do not implement cross-tokenizer *sampling*: transformers 5.24's universal assisted
generation path is not lossless under sampling (it re-tokenises drafts and compares texts).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .drafters import CrossTokenizerDrafter
from .engine import CachedLM, speculative_generate

CROSS_PAIR = "smollm2-to-gemma3"


def _norm(tok: str) -> str:
    return tok.replace("\u0120", " ").replace("\u2581", " ").replace("\u010a", "\n")


def vocabulary_map(draft_tok, target_tok) -> tuple[np.ndarray, np.ndarray]:
    """``(draft_ids, target_ids)`` of the tokens whose normalised strings are identical (1:1).

    Several tokens can normalise to the same string (e.g. a byte-level and a sentencepiece space
    marker); the *smallest id* wins on both sides. ``get_vocab()`` of a fast tokenizer is built from
    a hash map whose order changes between processes, so any order-dependent choice here made the
    cross-tokenizer acceptance (``alpha_intersection``) change from run to run.
    """
    t_index = {}
    for s, i in sorted(target_tok.get_vocab().items(), key=lambda kv: kv[1]):
        t_index.setdefault(_norm(s), i)
    d_ids, t_ids = [], []
    seen = set()
    for s, i in sorted(draft_tok.get_vocab().items(), key=lambda kv: kv[1]):
        n = _norm(s)
        if n in t_index and n not in seen:
            seen.add(n)
            d_ids.append(i)
            t_ids.append(t_index[n])
    return np.array(d_ids), np.array(t_ids)


@dataclass
class CrossResult:
    token_ids: list[int]
    drafted: int
    accepted: int
    target_calls: int

    @property
    def accepted_per_drafted(self) -> float:
        return self.accepted / max(self.drafted, 1)

    @property
    def tokens_per_target_call(self) -> float:
        return len(self.token_ids) / max(self.target_calls, 1)


def _ids(tok, text: str, special: bool) -> list[int]:
    return list(tok(text, add_special_tokens=special)["input_ids"])


def cross_greedy_generate(target, target_tok, draft, draft_tok, prompt: str, *, max_new_tokens: int,
                          draft_length: int) -> CrossResult:
    """Greedy speculative decoding across tokenizers: the engine (:func:`spinlib.sd.engine.speculative_generate`)
    with a :class:`~spinlib.sd.drafters.CrossTokenizerDrafter` that drafts ``draft_length`` of its own
    tokens every round (see the module docstring)."""
    prompt_ids = _ids(target_tok, prompt, True)
    drafter = CrossTokenizerDrafter(draft, draft_tok, target_tok, prompt, steps=draft_length)
    gen, records = speculative_generate(target, drafter, prompt_ids, max_new_tokens=max_new_tokens,
                                        draft_length=max_new_tokens, stop_ids=(target_tok.eos_token_id,))
    return CrossResult(gen, sum(r.drafted for r in records), sum(r.accepted for r in records), len(records))


@torch.no_grad()
def intersection_beta(target, target_tok, draft, draft_tok, prompt: str, *, max_new_tokens: int,
                      vocab_map=None) -> np.ndarray:
    """``beta_t`` over the shared vocabulary along the target's greedy trajectory (T = 1 probabilities)."""
    from .engine import target_generate

    d_map, t_map = vocab_map if vocab_map is not None else vocabulary_map(draft_tok, target_tok)
    prompt_ids = _ids(target_tok, prompt, True)
    gen, p_logits = target_generate(target, prompt_ids, max_new_tokens=max_new_tokens, return_logits=True,
                                    stop_ids=(target_tok.eos_token_id,))
    p = torch.softmax(p_logits, -1).numpy()
    betas = []
    for t in range(len(gen)):
        text = prompt + target_tok.decode(gen[:t])
        q_logits = CachedLM(draft).feed(_ids(draft_tok, text, False), keep=1)[-1]
        q = torch.softmax(q_logits, -1).numpy()
        betas.append(float(np.minimum(p[t, t_map], q[d_map]).sum()))
    return np.array(betas)


def cross_pair_check(tasks, max_new_tokens: int, draft_length: int = 4, prompt_chars: int = 1500) -> dict:
    """SmolLM2-135M drafting for Gemma-3-270M across tokenizers, one prompt per task (notebook 05).

    Per task: whether the greedy output equals the target's own greedy output, accepted drafts
    per drafted token, tokens per target call, and the mean ``beta_t`` over the shared
    vocabulary (:func:`intersection_beta`). Returns ``{"shared_tokens", "rows"}``.
    """
    from .engine import target_generate
    from .models import load_target
    from .prompts import load_prompts

    target, ttok = load_target("gemma-3-270m")
    draft, dtok = load_target("smollm2-135m-instruct")
    vm = vocabulary_map(dtok, ttok)
    rows = []
    for t in tasks:
        text = "Question: " + load_prompts(t, 1)[0]["prompt"][-prompt_chars:] + "\n\nAnswer:"
        ref = target_generate(target, list(ttok(text)["input_ids"]), max_new_tokens=max_new_tokens,
                              stop_ids=(ttok.eos_token_id,))  # both stop at the end-of-sequence token
        res = cross_greedy_generate(target, ttok, draft, dtok, text, max_new_tokens=max_new_tokens,
                                    draft_length=draft_length)
        beta = intersection_beta(target, ttok, draft, dtok, text, max_new_tokens=max_new_tokens, vocab_map=vm)
        rows.append({"task": t, "identical_to_target_greedy": res.token_ids == ref,
                     "accepted_per_drafted": res.accepted_per_drafted, "tokens_per_target_call": res.tokens_per_target_call,
                     "alpha_intersection_T1": float(beta.mean())})
    return {"shared_tokens": int(len(vm[0])), "rows": rows}
