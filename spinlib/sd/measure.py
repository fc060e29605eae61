"""Acceptance and timing measurement of a real draft/target pair.

Teacher-forced acceptance (cheap and exact in expectation): decode the prompt with the target
(recording its next-token logits at every generated position), then score the whole sequence
with **one** draft forward pass. At position t, with temperature T,

    beta_t = sum_x min(p_t(x), q_t(x)) = 1 - TV(p_t, q_t)            (T > 0)
    beta_t = 1[argmax p_t = argmax q_t]                               (T = 0)

is the probability that a draft token proposed there is accepted. ``alpha`` is the mean of
beta over positions; the prefix profile ``pi_i`` is the mean over start positions t of
``prod_{j<i} beta_{t+j}`` along the target's trajectory (the probability that i consecutive
drafts are all accepted, under teacher forcing); the i.i.d. model predicts ``alpha^i``.
Timings: draft seconds per token (cached single-token forwards) and target verification
seconds for N positions, fitted to ``T_ver(N) = t0 + t1 N`` by least squares.
"""
from __future__ import annotations

import time

import numpy as np
import torch

from .engine import CachedLM, target_generate


@torch.no_grad()
def teacher_forced_beta(target, draft, prompt_ids: list[int], *, max_new_tokens: int, temperature: float,
                        generator: torch.Generator | None = None, stop_ids=()) -> np.ndarray:
    """``beta_t`` [n_new] along the target's own trajectory (one target decode + one draft pass)."""
    gen, p_logits = target_generate(target, prompt_ids, max_new_tokens=max_new_tokens, temperature=temperature,
                                    generator=generator, stop_ids=stop_ids, return_logits=True)
    full = list(prompt_ids) + gen
    q_logits = CachedLM(draft).feed(full[:-1], keep=len(gen))
    if temperature == 0:
        return (p_logits.argmax(-1) == q_logits.argmax(-1)).double().numpy()
    p = torch.softmax(p_logits.double() / temperature, -1)
    q = torch.softmax(q_logits.double() / temperature, -1)
    return torch.minimum(p, q).sum(-1).clamp(0, 1).numpy()


def prefix_profile(betas: list[np.ndarray], L_max: int) -> np.ndarray:
    """``pi_i``, i = 1..L_max: mean over start positions of ``prod_{j<i} beta_{t+j}`` (windows inside each sequence)."""
    out = np.zeros(L_max)
    for i in range(1, L_max + 1):
        vals = []
        for b in betas:
            if len(b) >= i:
                c = np.cumprod(np.lib.stride_tricks.sliding_window_view(b, i), axis=1)[:, -1]
                vals.append(c)
        out[i - 1] = float(np.mean(np.concatenate(vals))) if vals else np.nan
    return out


def bootstrap_alpha(betas: list[np.ndarray], seed: int = 0, confidence: float = 0.95):
    """Mean acceptance (pooled over positions) and a bootstrap interval resampling whole sequences."""
    from scipy.stats import bootstrap

    lens = np.array([len(b) for b in betas], dtype=float)
    sums = np.array([b.sum() for b in betas])
    alpha = float(sums.sum() / lens.sum())
    if len(betas) < 2:
        return alpha, float("nan"), float("nan")

    def ratio(idx, axis=-1):
        idx = idx.astype(int)
        return sums[idx].sum(axis=axis) / lens[idx].sum(axis=axis)

    res = bootstrap((np.arange(len(betas)),), ratio, vectorized=True, n_resamples=2000, confidence_level=confidence,
                    method="percentile", random_state=np.random.default_rng(seed))
    return alpha, float(res.confidence_interval.low), float(res.confidence_interval.high)


@torch.no_grad()
def time_draft(draft, prompt_ids: list[int], n_tokens: int = 16, warmup: int = 3) -> float:
    """Seconds per drafted token: cached single-token forwards after a prefill (warm-up excluded)."""
    lm = CachedLM(draft)
    logits = lm.feed(list(prompt_ids), keep=1)[-1]
    for _ in range(warmup):
        logits = lm.feed([int(torch.argmax(logits))], keep=1)[-1]
    t = time.perf_counter()
    for _ in range(n_tokens):
        logits = lm.feed([int(torch.argmax(logits))], keep=1)[-1]
    return (time.perf_counter() - t) / n_tokens


@torch.no_grad()
def time_verification(target, prompt_ids: list[int], sizes=(1, 2, 4, 8, 16), repeats: int = 3):
    """Seconds of one cached target pass over N positions, for each N; returns (sizes, seconds, t0, t1)."""
    lm = CachedLM(target)
    lm.feed(list(prompt_ids), keep=1)
    base = len(lm)
    secs = []
    filler = int(prompt_ids[-1])
    lm.feed([filler] * max(sizes))  # warm-up
    lm.crop(base)
    for n in sizes:
        best = np.inf
        for _ in range(repeats):
            t = time.perf_counter()
            lm.feed([filler] * n)
            best = min(best, time.perf_counter() - t)
            lm.crop(base)
        secs.append(best)
    A = np.vstack([np.ones(len(sizes)), np.asarray(sizes, float)]).T
    (t0, t1), *_ = np.linalg.lstsq(A, np.asarray(secs), rcond=None)
    return list(sizes), secs, float(t0), float(t1)


# ----------------------------------------------------------------------------------------------
# the measurement pipeline: raw JSONL records (resumable) + a JSON summary, keyed by the config
# ----------------------------------------------------------------------------------------------
def measure_pair(pair_name: str, task: str, *, n_prompts: int, max_new_tokens: int, seed: int = 0,
                 temperatures=(0.0, 1.0), L_values=tuple(range(1, 9)), engine_prompts: int = 2,
                 recompute: bool = False, out_dir=None, progress: bool = True) -> dict:
    """Measure a pair on one task (Spec-Bench group or HumanEval); returns the summary (also written next to the JSONL).

    Per prompt and temperature: teacher-forced ``beta_t`` (one JSONL line each). On the first
    ``engine_prompts`` prompts: real engine runs at every L in ``L_values`` (greedy and T = 1),
    recording mean tokens per round. Then timings. Rerunning with the same config reuses the
    finished lines (resumable); ``recompute`` starts over.
    """
    import json
    import platform
    from pathlib import Path

    import transformers
    from tqdm import tqdm

    from ..acceptance import iid_profile
    from ..cache import atomic_write_text, config_key
    from ..paths import DATA
    from ..scenario import Payload
    from .engine import mean_tokens_per_round, speculative_generate
    from .models import PACKAGED, get_pair, load_pair
    from .prompts import encode, load_prompts

    pair = get_pair(pair_name)
    cfg = {"pair": pair_name, "task": task, "n_prompts": n_prompts, "max_new_tokens": max_new_tokens,
           "seed": seed, "temperatures": list(temperatures), "L_values": list(L_values),
           "engine_prompts": engine_prompts, "version": 1}
    key = config_key(cfg, 12)
    out_dir = Path(out_dir or DATA / "measurements")
    raw = out_dir / pair_name / f"{task}-{key}.jsonl"
    summ = out_dir / pair_name / f"{task}-{key}.summary.json"
    if summ.exists() and not recompute:
        return json.loads(summ.read_text())
    if recompute and raw.exists():
        raw.unlink()
    raw.parent.mkdir(parents=True, exist_ok=True)
    done = {}
    if raw.exists():
        for line in raw.read_text().splitlines():
            try:
                r = json.loads(line)
                done[(r["kind"], r["question_id"], r["temperature"], r.get("L"))] = r
            except json.JSONDecodeError:
                pass  # a torn last line from an interrupted run is redone
    target, draft, tok = load_pair(pair_name)
    spec = PACKAGED[pair.target]
    stop = (tok.eos_token_id,) if tok.eos_token_id is not None else ()
    prompts = load_prompts(task, n_prompts)
    jobs = [("beta", p, T, None) for p in prompts for T in temperatures]
    jobs += [("engine", p, T, L) for p in prompts[:engine_prompts] for T in temperatures for L in L_values]
    with raw.open("a") as f:
        for kind, p, T, L in tqdm(jobs, desc=f"measure {pair_name}/{task}", disable=not progress, leave=False):
            k = (kind, p["question_id"], T, L)
            if k in done:
                continue
            ids = encode(tok, p["prompt"], spec.chat)
            g = torch.Generator().manual_seed(seed * 1_000_003 + p["question_id"] * 101 + int(T * 10) + (L or 0))
            if kind == "beta":
                b = teacher_forced_beta(target, draft, ids, max_new_tokens=max_new_tokens, temperature=T,
                                        generator=g, stop_ids=stop)
                rec = {"kind": kind, "question_id": p["question_id"], "temperature": T, "L": None,
                       "beta": [round(float(x), 6) for x in b]}
            else:
                _, rounds = speculative_generate(target, draft, ids, max_new_tokens=max_new_tokens, draft_length=L,
                                                 temperature=T, generator=g, stop_ids=stop,
                                                 payload=Payload(spec.vocab_size, "full"))
                rec = {"kind": kind, "question_id": p["question_id"], "temperature": T, "L": L,
                       "tokens_per_round": mean_tokens_per_round(rounds),
                       "rounds": [[r.drafted, r.accepted, r.bits_up, r.bits_down] for r in rounds]}
            f.write(json.dumps(rec) + "\n")
            f.flush()
            done[k] = rec
    summary = {"config": cfg, "pair": pair_name, "target": pair.target, "draft": pair.draft, "task": task,
               "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                            "python": platform.python_version()}, "by_temperature": {}}
    L_max = max(L_values)
    for T in temperatures:
        betas = [np.array(r["beta"]) for (kind, _, t, _), r in done.items() if kind == "beta" and t == T]
        alpha, lo, hi = bootstrap_alpha(betas, seed)
        prof = prefix_profile(betas, L_max)
        eng = {}
        for L in L_values:
            v = [r["tokens_per_round"] for (kind, _, t, l), r in done.items() if kind == "engine" and t == T and l == L]
            eng[str(L)] = float(np.mean(v)) if v else None
        summary["by_temperature"][str(T)] = {
            "alpha": alpha, "alpha_ci95": [lo, hi], "positions": int(sum(len(b) for b in betas)),
            "prefix_profile": prof.tolist(), "iid_profile": iid_profile(alpha, L_max).tolist(),
            "tokens_per_round_teacher_forced": {str(L): float(1 + prof[:L].sum()) for L in L_values},
            "tokens_per_round_engine": eng,
        }
    probe = encode(tok, prompts[0]["prompt"], spec.chat)
    sizes, secs, t0, t1 = time_verification(target, probe)
    summary["timing"] = {"draft_s_per_token": time_draft(draft, probe), "target_s_per_token": time_draft(target, probe),
                         "verify_sizes": sizes, "verify_s": secs, "verify_t0_s": t0, "verify_t1_s": t1,
                         "threads": torch.get_num_threads(), "machine": platform.processor() or platform.machine()}
    atomic_write_text(summ, json.dumps(summary, indent=2) + "\n")
    return summary


def engine_round_traces(pair_name: str, task: str, n_prompts: int, max_new_tokens: int, draft_length: int,
                        payloads: dict, seed: int = 0, temperature: float = 1.0) -> list[dict]:
    """Per-round records of the real engine in both modes (notebook 06's bits-vs-model check).

    For each of the first ``n_prompts`` prompts of ``task`` (chat template), each payload in
    ``payloads`` (name -> :class:`~spinlib.scenario.Payload`) and each mode ("UL", "DL"): one
    speculative generation at ``temperature`` with generator seed ``seed + prompt index``; one
    record per round with the drafted and accepted counts and the bits the engine sent.
    """
    import torch

    from .engine import speculative_generate
    from .models import load_pair
    from .prompts import encode, load_spec_bench

    target, draft, tok = load_pair(pair_name)
    rows = []
    for i, p in enumerate(load_spec_bench(task, n_prompts)):
        ids = encode(tok, p["prompt"], chat=True)
        for pname, pay in payloads.items():
            for mode in ("UL", "DL"):
                _, rr = speculative_generate(target, draft, ids, max_new_tokens=max_new_tokens,
                                             draft_length=draft_length, temperature=temperature,
                                             generator=torch.Generator().manual_seed(seed + i), mode=mode,
                                             payload=pay, stop_ids=(tok.eos_token_id,))
                rows += [{"prompt": i, "payload": pname, "mode": mode, "drafted": r.drafted, "accepted": r.accepted,
                          "bits_up": r.bits_up, "bits_down": r.bits_down} for r in rr]
    return rows
