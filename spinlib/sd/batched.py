"""Synchronous multi-user speculative decoding: every round, one batched, cached target pass for all users.

Each user drafts ``L_k`` tokens with its own drafter (:mod:`spinlib.sd.drafters`; by default its
own KV-cached copy of the draft model: its device), the lengths fixed or chosen every round by a
``K``-user decider (:mod:`spinlib.decision`). The
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

import math
import time

import numpy as np
import torch

from ..decision import Outcome, RoundContext, certain_rows, check_lengths, reads_confidence
from ..modes import mode_names, parse_modes
from ..roundcost import makespan, sync_round_time
from ..scenario import Payload
from ..validation import ValidationError
from .drafters import Drafter, as_drafter
from .engine import DEFAULT_PAYLOAD, CachedLM, RoundRecord, accept_drafts, decider_setup, stop_rule


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
def batched_sync_generate(target, draft, prompts: list[list[int]], draft_lengths, rounds: int, *,
                          temperature: float = 0.0, seed: int = 0, modes: list[str] | None = None,
                          payload: Payload | None = None, pad_id: int = 0, delay_s=0.0, uplink_bps=math.inf,
                          energy=None, L_max: int | None = None):
    """Run ``rounds`` synchronous rounds for all users; returns ``(outputs, records, batch_s)``.

    Parameters
    ----------
    target : model
        A Hugging Face causal LM; the server keeps one cache of it per user.
    draft : model or list of K drafters
        The draft model, sharing the target's tokenizer (every user gets its own
        :class:`~spinlib.sd.drafters.ModelDrafter`, its own KV cache), or one drafter per user
        (:mod:`spinlib.sd.drafters`: prompt lookup, hybrid, ...).
    prompts : list of list of int, length K
        Each user's prompt tokens (at least two each: the last is fed in the first round).
    draft_lengths : list of int (length K) or decider
        ``L_k >= 0`` every round (0: plain decoding inside the batch), or a decider for the ``K``
        users (:mod:`spinlib.decision`: any multi-user controller or :class:`~spinlib.decision.FixedLength`)
        that chooses every round's lengths, may stop each user's drafting on its draft's confidence,
        and learns from each round's :class:`~spinlib.decision.Outcome`.
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
    delay_s, uplink_bps : float or [K]
        A decider's clock: each user's communication delay [s] and uplink rate [bit/s] (one
        number for all users, or one per user).
    energy : EnergyModel, optional
        ``round_energy(L, upload_s, wait_s)`` [J] per user for a learning decider (default: its ``env.energy``).
    L_max : int, optional
        Width of the decider's per-position rows (default: its ``env.L_max`` or its own ``L_max``).

    Returns
    -------
    outputs : list of list of int
        ``outputs[k]``: user k's new tokens.
    records : list of list of RoundRecord
        ``records[k]``: user k's rounds: its own drafting time and the batched pass's time [s] as
        ``verify_s`` (the same for every user of a round).
    batch_s : list of float
        ``batch_s[r]``: the time [s] of round r's batched target pass on this machine.

    With a decider the round's time is the synchronous round of :mod:`spinlib.roundcost`,
    ``T = max_k (draft_k + bits_up_k / rate_k + delay_k) + T_ver`` (measured drafting and batched
    verification), the same for every user, and user k's energy is
    ``energy.round_energy(L_k, upload_k, T - draft_k - upload_k)``: what the decider's ``update`` sees.
    """
    from transformers import DynamicCache

    K = len(prompts)
    decider = None if isinstance(draft_lengths, (list, tuple, np.ndarray)) else draft_lengths
    if decider is None:
        if len(draft_lengths) != K:
            raise ValidationError(f"draft_lengths has {len(draft_lengths)} entries for {K} prompts")
        if any(int(L) < 0 for L in draft_lengths):
            raise ValidationError("draft_lengths must be >= 0")
        fixed = [int(L) for L in draft_lengths]
    else:
        L_max, energy = decider_setup(decider, L_max, energy, K)
        asks_stop = reads_confidence(decider)
        rates = _per_user("uplink_bps", uplink_bps, K, positive=True)
        delays = _per_user("delay_s", delay_s, K, positive=False)
    modes = mode_names(parse_modes(["UL"] * K if modes is None else modes, K))
    if any(len(p) < 2 for p in prompts):
        raise ValidationError("every prompt needs at least two tokens")
    if not hasattr(target, "config"):
        raise ValidationError("batched verification needs a Hugging Face target (a KV cache per user)")
    if isinstance(draft, (list, tuple)):
        if len(draft) != K:
            raise ValidationError(f"draft has {len(draft)} drafters for {K} prompts")
        drafters = [as_drafter(d) for d in draft]
    else:
        if isinstance(draft, Drafter) and K > 1:  # one drafter holds one user's state: it cannot serve K users
            raise ValidationError("draft must be a model (one drafter per user is made) or a list of K drafters")
        drafters = [as_drafter(draft) for _ in range(K)]
    payload = payload or DEFAULT_PAYLOAD
    greedy = temperature == 0
    gens = [torch.Generator().manual_seed(seed + k) for k in range(K)]
    servers = [CachedLM(target) for _ in range(K)]
    seqs = [list(p) for p in prompts]
    starts = [len(p) for p in prompts]
    for k in range(K):  # prefill: every prompt token but the last, once per user, on the server and the device
        servers[k].feed(seqs[k][:-1], keep=1)
        drafters[k].start(seqs[k])
    records: list[list[RoundRecord]] = [[] for _ in range(K)]
    batch_s = []
    for r in range(rounds):
        if decider is None:
            lengths_ref, rules = fixed, [None] * K
        else:
            top, ent = certain_rows(K, L_max)
            ctx = RoundContext(r, rates.copy(), rates.copy(), np.zeros(K, np.int64), delays.copy(), top, ent)
            lengths_ref = check_lengths(decider.choose(ctx), K, L_max, "the decider's choose").tolist()
            rules = [stop_rule(decider, ctx, k, np.asarray(lengths_ref)) if asks_stop else None for k in range(K)]
        proposals, draft_s = [], []
        for k in range(K):
            t0 = time.perf_counter()
            proposals.append(drafters[k].propose(seqs[k], int(lengths_ref[k]), greedy, temperature, gens[k], rules[k]))
            draft_s.append(time.perf_counter() - t0)
            if len(proposals[k][0]) > lengths_ref[k]:
                raise ValidationError(f"user {k}'s drafter proposed {len(proposals[k][0])} tokens for a round of at "
                                      f"most {lengths_ref[k]}")
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
            drafted, qs = proposals[k]
            L = len(drafted)
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
            drafters[k].crop(keep)
            records[k].append(RoundRecord.from_round(L, accepted, len(new), modes[k], payload, greedy,
                                                     draft_s[k], t_verified - t_drafted))
        if decider is not None:
            decider.update(_outcome([records[k][-1] for k in range(K)], rates, delays, energy))
    return [seqs[k][starts[k]:] for k in range(K)], records, batch_s


def _per_user(name: str, x, K: int, positive: bool) -> np.ndarray:
    """``x`` (one number or ``K``) as a float array ``[K]``: finite and >= 0 (``positive``: > 0, inf allowed)."""
    arr = np.asarray(x, dtype=float) if not isinstance(x, bool) else np.array(np.nan)
    arr = np.broadcast_to(arr, (K,)).astype(float) if arr.ndim == 0 else arr
    bad = arr.shape != (K,) or np.any(np.isnan(arr)) or (np.any(arr <= 0) if positive else
                                                        (np.any(arr < 0) or not np.all(np.isfinite(arr))))
    if bad:
        rng = "> 0 (inf: instant)" if positive else "finite and >= 0"
        raise ValidationError(f"{name} must be one number or {K} numbers, {rng}, got {x!r}")
    return arr.copy()


def _outcome(recs, rates, delays, energy) -> Outcome:
    """The synchronous round every user of the batch realised (:mod:`spinlib.roundcost`)."""
    L = np.array([r.drafted for r in recs])
    draft = np.array([r.draft_s for r in recs])
    up = np.array([r.bits_up for r in recs]) / rates
    verify = recs[0].verify_s
    T = sync_round_time(makespan(draft, up + delays), verify)
    Tk = np.full(len(recs), float(T))
    E = np.zeros(len(recs)) if energy is None else np.asarray(energy.round_energy(L, up, Tk - draft - up), dtype=float)
    return Outcome(L, np.array([r.accepted for r in recs]), np.array([r.tokens for r in recs]), Tk,
                   np.broadcast_to(E, L.shape).astype(float), delays.copy(), rates.copy())
