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

import math
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch

from ..decision import (Outcome, RoundContext, certain_rows, check_decider, check_lengths, check_rate, learns,
                        reads_confidence)
from ..modes import MODES, feedback_bits, realised_bits
from ..roundcost import user_round_time
from ..scenario import Payload
from ..validation import ValidationError
from .cachedlm import CachedLM, draft_confidence, draft_tokens, probs as _probs, sample as _sample
from .drafters import as_drafter

DEFAULT_PAYLOAD = Payload(2, "ids", 16, 1)  # bit accounting when no payload is given


def accept_drafts(logits: torch.Tensor, drafts: list[int], qs, greedy: bool, temperature: float, g):
    """Steps 3: accept/reject ``drafts`` against the target logits ``[L+1, V]`` of their positions.

    ``qs[i]`` is the ``[V]`` distribution draft ``i`` was drawn from, or ``None`` for a deterministic
    proposal (a point mass: :mod:`spinlib.sd.drafters`); unused when greedy.

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
            ratio = float(p[x]) if qs[i] is None else float(p[x] / qs[i][x])  # None: a point mass on x
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
        if j < L:  # residual max(0, p - q), renormalised (a point mass q: p without the rejected token)
            if qs[j] is None:
                r = p.clone()
                r[drafts[j]] = 0.0
            else:
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


def _round_delays(delay_s, n: int) -> np.ndarray:
    """``delay_s`` (one number, or one per round) as ``n`` delays [s] >= 0, one line otherwise."""
    if isinstance(delay_s, (int, float, np.integer, np.floating)) and not isinstance(delay_s, bool):
        d = np.full(n, float(delay_s))
    else:
        try:
            d = np.asarray(delay_s, dtype=float).ravel()
        except (TypeError, ValueError):
            raise ValidationError(f"delay_s must be a number or a sequence of numbers [s], got {type(delay_s).__name__}") \
                from None
        if d.size < n:
            raise ValidationError(f"delay_s has {d.size} per-round delays; a run of max_new_tokens = {n} may need {n}")
        d = d[:n]
    if d.size and not (np.all(np.isfinite(d)) and d.min() >= 0):
        raise ValidationError("delay_s must be finite and >= 0 [s]")
    return d


def stop_rule(decider, ctx, k: int, L_ref: np.ndarray):
    """User ``k``'s stop rule while it drafts, for the drafters (``rule(i, logits) -> L``): position ``i``'s
    confidence and entropy from the draft's ``logits``, stored in row ``k`` of ``ctx`` rounded as the traces
    store them (6 decimals, top probability in ``[1e-6, 1]``), then the decider's ``stop`` on the context,
    checked against ``L_ref [K]``. The one rule of the single-user (``k = 0``) and the batched engine."""
    def rule(i, logits):
        p, h = draft_confidence(logits[None])
        ctx.top_prob[k, i] = min(1.0, max(round(float(p[0]), 6), 1e-6))
        ctx.entropy[k, i] = round(float(h[0]), 6)
        return int(check_lengths(decider.stop(ctx, L_ref), len(L_ref), L_ref, "the decider's stop")[k])
    return rule


def decider_setup(decider, L_max, energy, K: int = 1):
    """``(L_max, energy model)`` for a decider driving a real engine of ``K`` users, one line for what is missing."""
    check_decider(decider, "draft_length")
    env = getattr(decider, "env", None)
    if env is not None and getattr(env, "K", K) != K:
        raise ValidationError(f"the real engine serves {K} user(s): the decider's env has K = {env.K}, needs K = {K}")
    for source in (env, decider):  # a controller carries L_max on its env, a fixed length on itself
        L_max = L_max if L_max is not None else getattr(source, "L_max", None)
    if isinstance(L_max, bool) or not isinstance(L_max, (int, np.integer)) or not 1 <= L_max <= 64:
        raise ValidationError(f"L_max must be an int in 1..64 (or the decider's env.L_max), got {L_max!r}")
    energy = energy if energy is not None else getattr(env, "energy", None)
    if energy is None and learns(decider):
        raise ValidationError("a decider that learns from its rounds needs an energy model: pass energy= "
                              "(spinlib.online.EnergyModel) or give the decider an env with one")
    return int(L_max), energy


@torch.no_grad()
def speculative_generate(target, draft, prompt_ids: list[int], *, max_new_tokens: int, draft_length,
                         temperature: float = 0.0, generator: torch.Generator | None = None, mode: str = "UL",
                         payload: Payload | None = None, stop_ids: tuple[int, ...] = (), delay_s=0.0,
                         uplink_bps: float = math.inf, energy=None, L_max: int | None = None):
    """Generate up to ``max_new_tokens`` with speculative sampling; returns ``(new_ids, records)``.

    Parameters
    ----------
    target : model
        A Hugging Face causal LM (or a toy callable, see :class:`CachedLM`).
    draft : model or drafter
        The draft model (a causal LM sharing the target's tokenizer: :class:`~spinlib.sd.drafters.ModelDrafter`
        wraps it) or any drafter (:mod:`spinlib.sd.drafters`: prompt lookup, hybrid, cross-tokenizer).
        It is started once with the prompt when drafting can happen.
    prompt_ids : list of int
        Prompt tokens (at least one).
    draft_length : int or decider
        ``L >= 0`` every round (0 is plain decoding, one target pass per token), or a decider
        (:mod:`spinlib.decision`: any :class:`spinlib.online.Controller`, ``K = 1``) that chooses
        each round's length, may stop drafting early on the draft's confidence, and learns from
        each round's :class:`~spinlib.decision.Outcome`.
    temperature : float
        0 for greedy, > 0 for sampling from ``softmax(logits / temperature)``.
    mode : {"UL", "DL"}
        Correction mode (only the bit accounting differs).
    payload : Payload
        Vocabulary size and bits per probability for the bit accounting.
    delay_s : float or sequence of float
        A decider's clock: the communication delay of each round [s] (one number for all rounds,
        or at least ``max_new_tokens`` of them, one per round).
    uplink_bps : float
        A decider's clock: the uplink rate [bit/s]; a round's upload takes ``bits_up / uplink_bps``.
    energy : EnergyModel, optional
        ``round_energy(L, upload_s, wait_s)`` [J] for the decider's outcome (default: its
        ``env.energy``).
    L_max : int, optional
        Width of the decider's per-position rows (default: its ``env.L_max``).

    Returns
    -------
    new_ids : list of int
        The generated tokens.
    records : list of RoundRecord
        One per round. With a decider each round's time is ``T = draft_s + bits_up / uplink_bps +
        delay + verify_s`` (measured drafting and verification) and its device energy
        ``E = energy.round_energy(L, upload, verify_s + delay)``: what its ``update`` sees.
    """
    check_mode(mode)
    if max_new_tokens < 1 or not prompt_ids:
        raise ValidationError("max_new_tokens must be >= 1 and the prompt non-empty")
    if temperature < 0:
        raise ValidationError(f"temperature must be >= 0, got {temperature}")
    if isinstance(draft_length, (int, np.integer)) and not isinstance(draft_length, bool):
        if draft_length < 0:
            raise ValidationError(f"draft_length must be >= 0, got {draft_length}")
        decider = None
    else:
        decider = draft_length
        L_max, energy = decider_setup(decider, L_max, energy)
        asks_stop = reads_confidence(decider)
        rate = check_rate("uplink_bps", uplink_bps)
        delays = _round_delays(delay_s, max_new_tokens)
        delay_mean = float(delays.mean())
    greedy = temperature == 0
    g = generator or torch.Generator().manual_seed(0)
    payload = payload or DEFAULT_PAYLOAD
    target_lm, drafter = CachedLM(target), as_drafter(draft)
    seq = list(prompt_ids)
    if len(seq) > 1:
        target_lm.feed(seq[:-1], keep=1)
    if decider is not None or draft_length > 0:
        drafter.start(seq)
    records: list[RoundRecord] = []
    n_new = 0
    while n_new < max_new_tokens:
        cap = max_new_tokens - n_new - 1
        rule = None
        t_start = time.perf_counter()
        if decider is None:
            L = min(draft_length, cap)
        else:
            top, ent = certain_rows(1, L_max)
            ctx = RoundContext(len(records), np.array([rate]), np.array([rate]), np.zeros(1, np.int64),
                               np.array([delay_mean]), top, ent)
            L = min(int(check_lengths(decider.choose(ctx), 1, L_max, "the decider's choose")[0]), cap)
            if asks_stop:  # a never-stopping stop gets no rule: no confidence to compute
                rule = stop_rule(decider, ctx, 0, np.array([L]))
        drafts, qs = drafter.propose(seq, L, greedy, temperature, g, rule)
        if len(drafts) > L:
            raise ValidationError(f"the drafter proposed {len(drafts)} tokens for a round of at most {L}")
        L = len(drafts)
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
        drafter.crop(len(seq) - 1)
        rec = RoundRecord.from_round(L, accepted, len(new), mode, payload, greedy, t_drafted - t_start,
                                     t_verified - t_drafted)
        records.append(rec)
        if decider is not None:
            D = float(delays[len(records) - 1])
            up = rec.bits_up / rate
            wait = rec.verify_s + D
            E = 0.0 if energy is None else float(np.asarray(energy.round_energy(L, up, wait)))
            decider.update(Outcome(np.array([L]), np.array([accepted]), np.array([len(new)]),
                                   np.array([user_round_time(rec.draft_s, up, wait)]), np.array([E]), np.array([D]),
                                   np.array([rate])))
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


__all__ = ["CachedLM", "RoundRecord", "DEFAULT_PAYLOAD", "check_mode", "speculative_generate", "stop_rule", "draft_confidence", "target_generate",
           "records_to_dicts", "mean_tokens_per_round"]
