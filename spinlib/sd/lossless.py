"""Losslessness of the engine, stated for the precision it runs in, and checked.

**Greedy.** Speculative decoding scores ``L + 1`` positions in one target pass; plain decoding
scores one position per pass. In float32 the two give the same argmax on every position we have
met; in bfloat16 (or any low-precision kernel) a pass over several positions rounds differently
from single-position passes, so at a near-tie the argmax can flip. We therefore state:

    The engine is greedy-lossless for a kernel when its output equals the target's own greedy
    decoding *on the same kernel*, or, at the first position t where they differ, the reference's
    logit margin between its token a and the engine's token b, ``m_t = z_t(a) - z_t(b) >= 0``, is
    at most ``2 tau``: ``tau`` is the largest absolute logit difference, over the same sequence,
    between single-position decoding and verification-shaped passes (chunks of ``L + 1``
    positions on a cached prefix) -- the rounding noise the kernel itself shows.

A divergence with ``m_t > 2 tau`` is a bug, not a tie-break: :func:`greedy_check` counts both.

**Sampling.** The first committed token of a round has law ``p_1`` whatever the draft
(Leviathan et al. 2023, Theorem 1). :func:`first_token_counts` draws it ``n`` times through the
engine's own accept/residual code (:func:`spinlib.sd.engine.accept_drafts`) from the real
models' ``p_1`` and ``q_1`` (151,936-token distributions for the Qwen pair), for a chi-square
test against ``p_1``.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch

from .engine import CachedLM, accept_drafts, speculative_generate, target_generate


@dataclass(frozen=True)
class GreedyCheck:
    """One prompt: engine vs the target's own greedy decoding on the same kernel.

    ``first_divergence``: index of the first differing new token (None when identical);
    ``margin``: reference logit margin ``z(a) - z(b)`` there; ``tau``: the kernel's measured
    rounding noise on this sequence (see the module docstring); ``explained``: identical, or
    ``margin <= 2 tau`` (a tie-break).
    """

    tokens: int
    identical: bool
    first_divergence: int | None
    margin: float | None
    tau: float
    explained: bool

    def to_dict(self) -> dict:
        return asdict(self)


@torch.no_grad()
def rounding_noise(target, prompt_ids: list[int], new_ids: list[int], ref_logits: torch.Tensor, chunk: int) -> float:
    """``tau``: max |logit difference| between ``ref_logits`` (single-position decoding, ``[n, V]``)
    and the same positions scored in passes of ``chunk`` positions on a cached prefix."""
    lm = CachedLM(target)
    full = list(prompt_ids) + list(new_ids)
    if len(prompt_ids) > 1:
        lm.feed(full[: len(prompt_ids) - 1], keep=1)
    rows = []
    pos = len(prompt_ids) - 1
    end = len(full) - 1  # positions whose next-token logits are in ref_logits: len(prompt)-1 .. len(full)-2
    while pos < end:
        k = min(chunk, end - pos)
        rows.append(lm.feed(full[pos:pos + k], keep=k).float())
        pos += k
    n = min(len(ref_logits), sum(len(r) for r in rows))
    if n == 0:
        return 0.0
    chunked = torch.cat(rows)[:n]
    return float((chunked - ref_logits[:n].float()).abs().max())


@torch.no_grad()
def greedy_check(target, draft, prompt_ids: list[int], *, draft_length: int, max_new_tokens: int,
                 stop_ids=()) -> GreedyCheck:
    """Compare the engine's greedy output with plain greedy decoding of ``target`` (same kernel)."""
    return greedy_checks(target, draft, prompt_ids, draft_lengths=(draft_length,), max_new_tokens=max_new_tokens,
                         stop_ids=stop_ids)[0][1]


def greedy_checks(target, draft, prompt_ids: list[int], *, draft_lengths, max_new_tokens: int,
                  stop_ids=()) -> list[tuple[list[int], GreedyCheck]]:
    """:func:`greedy_check` at each of ``draft_lengths``, the target's greedy reference decoded once:
    ``(the engine's output ids, its GreedyCheck)`` per length, in order."""
    ref, ref_logits = target_generate(target, prompt_ids, max_new_tokens=max_new_tokens, stop_ids=stop_ids,
                                      return_logits=True)
    checks = []
    for L in draft_lengths:
        out, _ = speculative_generate(target, draft, prompt_ids, max_new_tokens=max_new_tokens,
                                      draft_length=L, stop_ids=stop_ids)
        checks.append((out, compare_greedy(ref, ref_logits, out, rounding_noise(target, prompt_ids, ref, ref_logits, L + 1))))
    return checks


def compare_greedy(ref: list[int], ref_logits: torch.Tensor, out: list[int], tau: float) -> GreedyCheck:
    """:class:`GreedyCheck` of an output ``out`` against the reference ``ref`` (its logits ``[n, V]``)."""
    if out == ref:
        return GreedyCheck(len(ref), True, None, None, tau, True)
    t = next((i for i, (a, b) in enumerate(zip(out, ref)) if a != b), min(len(out), len(ref)))
    if t >= len(ref) or t >= len(out):  # one is a prefix of the other: a stop token decided differently
        return GreedyCheck(len(ref), False, t, None, tau, False)
    z = ref_logits[t].float()
    margin = float(z[ref[t]] - z[out[t]])
    return GreedyCheck(len(ref), False, t, margin, tau, bool(margin <= 2 * tau))


@torch.no_grad()
def first_position_laws(target, draft, prompt_ids: list[int], temperature: float = 1.0):
    """``(p_1, q_1)``: the target's and the draft's next-token laws after ``prompt_ids`` (float64 [V])."""
    zp = CachedLM(target).feed(list(prompt_ids), keep=1)[-1].double()
    zq = CachedLM(draft).feed(list(prompt_ids), keep=1)[-1].double()
    V = min(zp.numel(), zq.numel())
    return torch.softmax(zp[:V] / temperature, -1), torch.softmax(zq[:V] / temperature, -1)


def first_token_counts(p: torch.Tensor, q: torch.Tensor, n: int, seed: int = 0, temperature: float = 1.0) -> np.ndarray:
    """Counts ``[V]`` of the first committed token over ``n`` rounds with one draft ``x ~ q``, accepted
    or corrected by :func:`~spinlib.sd.engine.accept_drafts` against ``p`` (the engine's code)."""
    g = torch.Generator().manual_seed(seed)
    logits_p = torch.log(p.clamp_min(1e-300)) * temperature  # softmax(logits / T) == p
    rows = torch.stack([logits_p, logits_p])  # [L + 1, V]; position 2's law does not touch token 1
    counts = np.zeros(p.numel())
    qf = q.float()
    for _ in range(n):
        x = int(torch.multinomial(qf, 1, generator=g))
        new, _ = accept_drafts(rows, [x], [q], False, temperature, g)
        counts[new[0]] += 1
    return counts


def chi_square_vs(counts: np.ndarray, law: np.ndarray, min_expected: float = 5.0):
    """Chi-square of ``counts`` against ``law`` with the bins of expected count < ``min_expected``
    pooled into one; returns ``(statistic, p_value, bins)``."""
    from scipy.stats import chisquare

    n = counts.sum()
    exp = np.asarray(law, float) * n
    keep = exp >= min_expected
    obs = np.append(counts[keep], counts[~keep].sum())
    e = np.append(exp[keep], exp[~keep].sum())
    if e[-1] == 0:
        obs, e = obs[:-1], e[:-1]
    e = e * obs.sum() / e.sum()
    r = chisquare(obs, e)
    return float(r.statistic), float(r.pvalue), int(len(obs))


__all__ = ["GreedyCheck", "chi_square_vs", "compare_greedy", "first_position_laws", "first_token_counts", "greedy_check",
           "greedy_checks", "rounding_noise"]
