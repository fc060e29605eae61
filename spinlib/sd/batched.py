"""Synchronous multi-user speculative decoding: every round, one batched, cached target pass for all users.

Each user drafts ``L_k`` tokens with its own KV-cached copy of the draft model (its device). The
server keeps **one KV cache per user** (ragged lengths). Every round it stacks the users' caches
into one batch -- each left-padded to the longest, the padding masked out -- and scores every
user's ``L_k + 1`` new positions (its last committed token and its drafts, right-padded to the
longest) in **one** forward pass with per-row position ids. Each user then accepts or rejects its
drafts exactly as in :func:`spinlib.sd.engine.speculative_generate` (greedy or speculative
sampling), and its cache is cut back out of the batch and cropped to its committed tokens. No
position is scored twice: a round's pass costs ``sum_k (L_k + 1)`` new positions, the synchronous
round model's verification (``T_ver = t0 + t1 sum_k (L_k + 1)``). Each user's prompt is prefilled
once, on its own, before the first round (not part of any round's time). Each round's bits come
from :mod:`spinlib.modes` (:meth:`spinlib.sd.engine.RoundRecord.from_round`), with each user's mode
"UL" or "DL".

Toy callables without a cache (``f(ids [K, n], attention_mask, position_ids) -> logits``) are not
supported here; the single-user engine covers them.
"""
from __future__ import annotations

import time

import torch

from ..modes import mode_names, parse_modes
from ..scenario import Payload
from ..validation import ValidationError
from .engine import DEFAULT_PAYLOAD, CachedLM, RoundRecord, accept_drafts, draft_tokens


def _layers(cache) -> list:
    """``[(keys, values)]`` per layer of a batch-1 DynamicCache, each ``[1, heads, T, D]``."""
    return [(layer.keys, layer.values) for layer in cache.layers]


def _stack_caches(config, user_layers: list[list], lengths: list[int]):
    """One DynamicCache of batch K: user k's ``lengths[k]`` cached positions right-aligned at ``P``."""
    from transformers import DynamicCache

    K, P = len(user_layers), max(lengths)
    batch = DynamicCache(config=config)
    for i in range(len(user_layers[0])):
        k0, v0 = user_layers[0][i]
        keys = k0.new_zeros((K, k0.shape[1], P, k0.shape[3]))
        values = v0.new_zeros((K, v0.shape[1], P, v0.shape[3]))
        for u in range(K):
            n = lengths[u]
            if n:
                keys[u, :, P - n:] = user_layers[u][i][0][0, :, :n]
                values[u, :, P - n:] = user_layers[u][i][1][0, :, :n]
        batch.update(keys, values, i)
    return batch


@torch.no_grad()
def batched_sync_generate(target, draft, prompts: list[list[int]], draft_lengths: list[int], rounds: int, *,
                          temperature: float = 0.0, seed: int = 0, modes: list[str] | None = None,
                          payload: Payload | None = None, pad_id: int = 0):
    """Run ``rounds`` synchronous rounds for all users; returns ``(outputs, records, batch_s)``.

    Parameters
    ----------
    target, draft : model
        Hugging Face causal LMs sharing a tokenizer; every user gets its own cached draft and its
        own target cache on the server.
    prompts : list of list of int, length K
        Each user's prompt tokens (at least two each: the last is fed in the first round).
    draft_lengths : list of int, length K
        ``L_k >= 0`` (0: plain decoding inside the batch).
    rounds : int
        Rounds to run.
    temperature : float
        0 for greedy, > 0 for speculative sampling; user k samples with seed ``seed + k``.
    modes : list of {"UL", "DL"}, length K, optional
        Each user's correction mode (bit accounting only); all "UL" if omitted.
    payload : Payload, optional
        Vocabulary size and bits per probability for the bit accounting.
    pad_id : int
        Token id placed in the padded slots of the new positions (masked out; any id works).

    Returns
    -------
    outputs : list of list of int
        ``outputs[k]``: user k's new tokens.
    records : list of list of RoundRecord
        ``records[k]``: user k's rounds (the ``verify_s`` of every user of a round is the
        batched pass's time [s]).
    batch_s : list of float
        ``batch_s[r]``: the time [s] of round r's batched target pass on this machine.
    """
    from transformers import DynamicCache

    K = len(prompts)
    if len(draft_lengths) != K:
        raise ValidationError(f"draft_lengths has {len(draft_lengths)} entries for {K} prompts")
    modes = mode_names(parse_modes(["UL"] * K if modes is None else modes, K))
    if any(int(L) < 0 for L in draft_lengths):
        raise ValidationError("draft_lengths must be >= 0")
    if any(len(p) < 2 for p in prompts):
        raise ValidationError("every prompt needs at least two tokens")
    if not hasattr(target, "config"):
        raise ValidationError("batched verification needs a Hugging Face target (a KV cache per user)")
    payload = payload or DEFAULT_PAYLOAD
    greedy = temperature == 0
    gens = [torch.Generator().manual_seed(seed + k) for k in range(K)]
    drafts_lm = [CachedLM(draft) for _ in range(K)]
    servers = [CachedLM(target) for _ in range(K)]
    seqs = [list(p) for p in prompts]
    starts = [len(p) for p in prompts]
    for k in range(K):  # prefill: every prompt token but the last, once per user
        servers[k].feed(seqs[k][:-1], keep=1)
    records: list[list[RoundRecord]] = [[] for _ in range(K)]
    batch_s = []
    for _ in range(rounds):
        t_start = time.perf_counter()
        proposals = [draft_tokens(drafts_lm[k], seqs[k], int(draft_lengths[k]), greedy, temperature, gens[k])
                     for k in range(K)]
        t_drafted = time.perf_counter()
        news = [seqs[k][len(servers[k]):] + proposals[k][0] for k in range(K)]
        lengths = [len(servers[k]) for k in range(K)]
        n, P = max(len(x) for x in news), max(lengths)
        ids = torch.full((K, n), pad_id, dtype=torch.long)
        mask = torch.zeros((K, P + n), dtype=torch.long)
        pos = torch.zeros((K, n), dtype=torch.long)
        for k, x in enumerate(news):
            ids[k, :len(x)] = torch.tensor(x)
            mask[k, P - lengths[k]:P + len(x)] = 1
            pos[k] = lengths[k] + torch.arange(n)
        cache = _stack_caches(target.config, [_layers(s.cache) for s in servers], lengths)
        logits = target(input_ids=ids, attention_mask=mask, position_ids=pos, cache=cache, use_cache=True,
                        logits_to_keep=n).logits  # [K, n, V]
        t_verified = time.perf_counter()
        batch_s.append(t_verified - t_drafted)
        for k in range(K):
            L = int(draft_lengths[k])
            drafted, qs = proposals[k]
            new, accepted = accept_drafts(logits[k, :len(news[k])][-(L + 1):], drafted, qs, greedy, temperature,
                                          gens[k])
            seqs[k].extend(new)
            keep = len(seqs[k]) - 1  # committed tokens whose keys/values stay on the server
            own = DynamicCache(config=target.config)
            for i, layer in enumerate(cache.layers):
                lo = P - lengths[k]
                own.update(layer.keys[k:k + 1, :, lo:lo + keep].clone(), layer.values[k:k + 1, :, lo:lo + keep].clone(), i)
            servers[k].cache = own
            servers[k].ids = seqs[k][:keep]
            drafts_lm[k].crop(keep)
            records[k].append(RoundRecord.from_round(L, accepted, len(new), modes[k], payload, greedy,
                                                     (t_drafted - t_start) / K, t_verified - t_drafted))
    return [seqs[k][starts[k]:] for k in range(K)], records, batch_s
