"""Synchronous multi-user speculative decoding: every round, one batched target pass for all users.

Each user drafts ``L_k`` tokens with its own KV-cached copy of the draft model; the target then
scores every user's committed sequence plus its drafts in **one** forward pass over the
left-padded batch (attention mask and position ids per row), and each user accepts or rejects
its drafts exactly as in :func:`spinlib.sd.engine.speculative_generate` (greedy or speculative
sampling). The target keeps no KV cache across rounds here -- rows grow and shrink independently,
so each round re-scores the full sequences (more compute than a cached pass, but one real
batched pass, as the synchronous round model assumes). ``logits_to_keep`` limits the output
head to the last ``max_k L_k + 1`` positions. Each round's bits come from :mod:`spinlib.modes`
(:meth:`spinlib.sd.engine.RoundRecord.from_round`), with each user's mode "UL" or "DL".
"""
from __future__ import annotations

import time

import torch

from ..modes import mode_names, parse_modes
from ..scenario import Payload, ValidationError
from .engine import DEFAULT_PAYLOAD, CachedLM, RoundRecord, accept_drafts, draft_tokens


@torch.no_grad()
def batched_sync_generate(target, draft, prompts: list[list[int]], draft_lengths: list[int], rounds: int, *,
                          temperature: float = 0.0, seed: int = 0, modes: list[str] | None = None,
                          payload: Payload | None = None, pad_id: int = 0):
    """Run ``rounds`` synchronous rounds for all users; returns ``(outputs, records, batch_s)``.

    Parameters
    ----------
    target, draft : model
        Hugging Face causal LMs sharing a tokenizer; every user gets its own cached draft.
    prompts : list of list of int, length K
        Each user's prompt tokens (at least one each).
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
        Left-padding token of the batch.

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
    K = len(prompts)
    if len(draft_lengths) != K:
        raise ValidationError(f"draft_lengths has {len(draft_lengths)} entries for {K} prompts")
    if any(not p for p in prompts):
        raise ValidationError("every prompt needs at least one token")
    modes = mode_names(parse_modes(["UL"] * K if modes is None else modes, K))
    payload = payload or DEFAULT_PAYLOAD
    greedy = temperature == 0
    gens = [torch.Generator().manual_seed(seed + k) for k in range(K)]
    drafts_lm = [CachedLM(draft) for _ in range(K)]
    seqs = [list(p) for p in prompts]
    starts = [len(p) for p in prompts]
    records: list[list[RoundRecord]] = [[] for _ in range(K)]
    batch_s = []
    for _ in range(rounds):
        t_start = time.perf_counter()
        proposals = []
        for k in range(K):
            proposals.append(draft_tokens(drafts_lm[k], seqs[k], draft_lengths[k], greedy, temperature, gens[k]))
        t_drafted = time.perf_counter()
        rows = [seqs[k] + proposals[k][0] for k in range(K)]
        n = max(len(r) for r in rows)
        keep = max(draft_lengths) + 1
        ids = torch.full((K, n), pad_id, dtype=torch.long)
        mask = torch.zeros((K, n), dtype=torch.long)
        for k, r in enumerate(rows):
            ids[k, n - len(r):] = torch.tensor(r)
            mask[k, n - len(r):] = 1
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        logits = target(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=False,
                        logits_to_keep=keep).logits  # [K, keep, V]
        t_verified = time.perf_counter()
        batch_s.append(t_verified - t_drafted)
        for k in range(K):
            L = draft_lengths[k]
            drafted, qs = proposals[k]
            new, accepted = accept_drafts(logits[k, keep - (L + 1):], drafted, qs, greedy, temperature, gens[k])
            seqs[k].extend(new)
            drafts_lm[k].crop(len(seqs[k]) - 1)
            records[k].append(RoundRecord.from_round(L, accepted, len(new), modes[k], payload, greedy,
                                                     (t_drafted - t_start) / K, t_verified - t_drafted))
    return [seqs[k][starts[k]:] for k in range(K)], records, batch_s
