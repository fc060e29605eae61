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
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from ..validation import ValidationError, check_bool
from .engine import CachedLM, target_generate
from .prompts import MAX_PROMPT_TOKENS  # noqa: F401 -- re-exported (benchmarks, notebooks)


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
def time_draft(draft, prompt_ids: list[int], n_tokens: int = 16, warmup: int = 3) -> dict:
    """Seconds per drafted token: cached single-token forwards after a prefill (warm-up excluded).

    Returns ``{"median_s", "q25_s", "q75_s", "n"}`` over the ``n_tokens`` timed forwards
    (:func:`spinlib.timing` conventions: medians and quartiles, never the best).
    """
    from ..timing import timing_of

    lm = CachedLM(draft)
    logits = lm.feed(list(prompt_ids), keep=1)[-1]
    for _ in range(warmup):
        logits = lm.feed([int(torch.argmax(logits))], keep=1)[-1]
    out = []
    for _ in range(n_tokens):
        t = time.perf_counter()
        logits = lm.feed([int(torch.argmax(logits))], keep=1)[-1]
        out.append(time.perf_counter() - t)
    return timing_of(out).to_dict()


def fit_verification(sizes, seconds):
    """Least squares ``T_ver(N) = t0 + t1 N`` with its residuals.

    Returns ``(t0, t1, rms_residual_s, effect_s, ok)``: ``effect_s = t1 (N_max - N_min)`` is what the
    slope explains across the sizes measured; the fit is ``ok`` only when the RMS residual is
    smaller than that effect and both coefficients are >= 0 (else the timings were too noisy to
    tell t1 apart, e.g. on a busy machine).
    """
    x = np.asarray(sizes, float)
    y = np.asarray(seconds, float)
    A = np.vstack([np.ones(len(x)), x]).T
    (t0, t1), *_ = np.linalg.lstsq(A, y, rcond=None)
    rms = float(np.sqrt(np.mean((A @ np.array([t0, t1]) - y) ** 2)))
    effect = float(t1 * (x.max() - x.min()))
    return float(t0), float(t1), rms, effect, bool(t0 >= 0 and t1 >= 0 and rms < effect)


@torch.no_grad()
def time_verification(target, prompt_ids: list[int], sizes=(1, 2, 4, 8, 16), repeats: int = 5):
    """Median seconds of one cached target pass over N positions, for each N (sizes interleaved in
    every repeat, so that a load change hits all sizes); returns ``(sizes, seconds, t0, t1, fit)``
    with ``fit`` the dict of :func:`fit_verification` and the quartiles per size."""
    lm = CachedLM(target)
    lm.feed(list(prompt_ids), keep=1)
    base = len(lm)
    filler = int(prompt_ids[-1])
    lm.feed([filler] * max(sizes))  # warm-up
    lm.crop(base)
    samples = {n: [] for n in sizes}
    for _ in range(repeats):
        for n in sizes:
            t = time.perf_counter()
            lm.feed([filler] * n)
            samples[n].append(time.perf_counter() - t)
            lm.crop(base)
    secs = [float(np.median(samples[n])) for n in sizes]
    t0, t1, rms, effect, ok = fit_verification(sizes, secs)
    fit = {"rms_residual_s": rms, "effect_s": effect, "ok": ok,
           "q25_s": [float(np.quantile(samples[n], 0.25)) for n in sizes],
           "q75_s": [float(np.quantile(samples[n], 0.75)) for n in sizes]}
    return list(sizes), secs, t0, t1, fit


@torch.no_grad()
def time_verification_grid(target, prompt_ids: list[int], Ns=(1, 2, 3, 5, 9), Ks=(1, 2, 4, 8), repeats: int = 5,
                           prefix: int = 128) -> dict:
    """``T_ver(N, K)``: median seconds of one batched target pass verifying ``N`` positions for each of
    ``K`` users, each user with its own cached prefix (``prompt_ids``), as an edge server verifies.

    Each user's cache holds the first ``prefix`` tokens of ``prompt_ids`` (the same length for all,
    so no padding). Cells are interleaved inside every repeat (a load change hits all of them). Returns
    ``{"N": [...], "K": [...], "median_s": [[K x N]], "q25_s", "q75_s", "fit"}`` where ``fit`` is the
    least-squares ``T = t0 + t1 * (K N)`` (the library's :class:`~spinlib.scenario.Server` model,
    N K positions per pass) with its RMS residual and largest relative residual.
    """
    import copy

    from transformers import DynamicCache

    prompt_ids = list(prompt_ids)[:prefix]
    base = {}
    for K in Ks:
        cache = DynamicCache(config=target.config)
        target(input_ids=torch.tensor([prompt_ids] * K), past_key_values=cache, use_cache=True, logits_to_keep=1)
        base[K] = cache
    filler = int(prompt_ids[-1])

    def one(K, N):
        c = copy.deepcopy(base[K])
        t = time.perf_counter()
        target(input_ids=torch.full((K, N), filler), past_key_values=c, use_cache=True, logits_to_keep=N)
        return time.perf_counter() - t

    for K in Ks:  # warm-up
        one(K, max(Ns))
    samples = {(K, N): [] for K in Ks for N in Ns}
    for _ in range(repeats):
        for K in Ks:
            for N in Ns:
                samples[(K, N)].append(one(K, N))
    med = [[float(np.median(samples[(K, N)])) for N in Ns] for K in Ks]
    q25 = [[float(np.quantile(samples[(K, N)], 0.25)) for N in Ns] for K in Ks]
    q75 = [[float(np.quantile(samples[(K, N)], 0.75)) for N in Ns] for K in Ks]
    x = np.array([K * N for K in Ks for N in Ns], float)
    y = np.array(med, float).ravel()
    A = np.vstack([np.ones(len(x)), x]).T
    (t0, t1), *_ = np.linalg.lstsq(A, y, rcond=None)
    res = A @ np.array([t0, t1]) - y
    fit = {"t0_s": float(t0), "t1_s": float(t1), "rms_residual_s": float(np.sqrt(np.mean(res**2))),
           "max_rel_residual": float(np.max(np.abs(res) / y)), "model": "T = t0 + t1 * K * N"}
    # with a per-user term (each user's cache is read once per pass): T = t0 + tu K + t1 K N
    A2 = np.vstack([np.ones(len(x)), [K for K in Ks for _ in Ns], x]).T
    c2, *_ = np.linalg.lstsq(A2, y, rcond=None)
    res2 = A2 @ c2 - y
    fit_user = {"t0_s": float(c2[0]), "tu_s": float(c2[1]), "t1_s": float(c2[2]),
                "rms_residual_s": float(np.sqrt(np.mean(res2**2))), "max_rel_residual": float(np.max(np.abs(res2) / y)),
                "model": "T = t0 + tu * K + t1 * K * N"}
    return {"N": list(Ns), "K": list(Ks), "median_s": med, "q25_s": q25, "q75_s": q75, "repeats": repeats,
            "prefix_tokens": len(prompt_ids), "fit": fit, "fit_per_user": fit_user}


# ----------------------------------------------------------------------------------------------
# the measurement pipeline: raw JSONL records (resumable) + a JSON summary, keyed by the config
# ----------------------------------------------------------------------------------------------
def default_measurement_dir():
    """Where new measurements go unless asked otherwise: ``<repo>/.cache/measurements`` (untracked).

    The committed measurements (``data/measurements``) are written only when a caller passes that
    folder (notebook 05 in a full run, or ``measure --out-dir data/measurements``).
    """
    from ..paths import ROOT
    return ROOT / ".cache" / "measurements"


def _record_error(path, lineno: int, field: str, allowed: str) -> ValidationError:
    return ValidationError(f"{path}:{lineno}: field {field!r} must be {allowed}; delete the line (it is then "
                           "measured again) or rerun with --recompute")


def check_record(r, path="<record>", lineno: int = 0) -> tuple:
    """Validate one measurement JSONL record; returns its key ``(kind, question_id, temperature, L)``.

    A ``beta`` record: ``beta`` a list of probabilities in [0, 1]. An ``engine`` record: ``L`` an
    int >= 1, ``tokens_per_round`` a finite number >= 1, ``rounds`` a list of 4-number rows.
    Anything else is one :class:`ValidationError` line naming the file, the line and the field.
    """
    if not isinstance(r, dict):
        raise _record_error(path, lineno, "<line>", "a JSON object")
    kind = r.get("kind")
    if kind not in ("beta", "engine"):
        raise _record_error(path, lineno, "kind", "'beta' or 'engine'")
    if "kernel" in r and not isinstance(r["kernel"], str):
        raise _record_error(path, lineno, "kernel", "the name of a torch kernel (a string)")
    qid = r.get("question_id")
    if not isinstance(qid, int) or isinstance(qid, bool):
        raise _record_error(path, lineno, "question_id", "an integer")
    T = r.get("temperature")
    if not isinstance(T, (int, float)) or isinstance(T, bool) or not np.isfinite(T) or T < 0:
        raise _record_error(path, lineno, "temperature", "a finite number >= 0")
    L = r.get("L")
    if kind == "beta":
        b = r.get("beta")
        if L is not None:
            raise _record_error(path, lineno, "L", "null in a beta record")
        if not isinstance(b, list) or not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                              and 0.0 <= x <= 1.0 for x in b):
            raise _record_error(path, lineno, "beta", "a list of probabilities in [0, 1]")
    else:
        if not isinstance(L, int) or isinstance(L, bool) or L < 1:
            raise _record_error(path, lineno, "L", "an integer >= 1")
        tpr = r.get("tokens_per_round")
        if not isinstance(tpr, (int, float)) or isinstance(tpr, bool) or not np.isfinite(tpr) or tpr < 1:
            raise _record_error(path, lineno, "tokens_per_round", "a finite number >= 1")
        rounds = r.get("rounds")
        if not isinstance(rounds, list) or not all(
                isinstance(x, list) and len(x) == 4 and all(isinstance(v, (int, float)) for v in x) for x in rounds):
            raise _record_error(path, lineno, "rounds", "a list of [drafted, accepted, bits_up, bits_down] rows")
    return (kind, qid, float(T), L)


def read_records(path, same: dict | None = None, kept: list | None = None) -> dict:
    """The finished records of a measurement JSONL, keyed by (kind, question_id, temperature, L).

    A torn *last* line (an interrupted run) is dropped and measured again; any other line that is not
    a valid record (strict JSON: :func:`spinlib.jsonio.loads_json`), or that repeats the key of an
    earlier line, is refused with one line naming the file, the line and the field (a repeated line
    would otherwise be pooled twice, or the last one would silently win).
    """
    from ..jsonio import read_jsonl_records

    return read_jsonl_records(path, "measurement", check_record, _record_error, "a record not written before ({key} repeats)",
                              same, good_lines=kept)


def read_summary(path):
    """A summary that :func:`spinlib.measurements.read_measured_summary` accepts (the one check every
    reader of a summary applies), or None when it does not (the caller recomputes it)."""
    from ..measurements import read_measured_summary

    try:
        return read_measured_summary(path)
    except ValidationError:
        return None


#: tokens a measurement may generate or score (:func:`measure_tokens`); about an hour at 5 tokens/s, the
#: Qwen pair's engine on a 2-core CPU. ``allow_long`` lifts it.
MEASURE_TOKEN_BUDGET = 20_000


def measure_tokens(n_prompts: int, max_new_tokens: int, temperatures=(0.0, 1.0), L_values=tuple(range(1, 9)),
                   engine_prompts: int = 2) -> int:
    """Tokens a :func:`measure_pair` run generates or scores: the engine runs (``engine_prompts x |L_values| x
    |temperatures| x max_new_tokens``) plus the teacher-forced passes (``n_prompts x |temperatures| x
    max_new_tokens``)."""
    per = len(tuple(temperatures)) * int(max_new_tokens)
    return min(int(engine_prompts), int(n_prompts)) * len(tuple(L_values)) * per + int(n_prompts) * per


def measure_pair(pair_name: str, task: str, *, n_prompts: int, max_new_tokens: int, seed: int = 0,
                 temperatures=(0.0, 1.0), L_values=tuple(range(1, 9)), engine_prompts: int = 2,
                 recompute: bool = False, out_dir=None, progress: bool = True, threads: int | None = None,
                 allow_busy: bool = False, cached_only: bool = False, allow_long: bool = False) -> dict:
    """Measure a pair on one task (Spec-Bench group or HumanEval); returns the summary (also written next to the JSONL).

    Per prompt and temperature: teacher-forced ``beta_t`` (one JSONL line each). On the first
    ``engine_prompts`` prompts: real engine runs at every L in ``L_values`` (greedy and T = 1),
    recording mean tokens per round. Then timings (:mod:`spinlib.timing`): torch's threads set to
    ``threads`` (default all cores), refused on a busy machine unless ``allow_busy`` (then recorded
    with ``reliable = False``), medians and quartiles, the verification fit with its residuals
    (refused when they exceed the effect it estimates). Rerunning with the same config reuses the
    finished lines (resumable); ``recompute`` starts over. ``cached_only``: return the finished
    summary of this configuration or refuse with one line (nothing is loaded, measured or written:
    a smoke run reading committed measurements). A run of more than :data:`MEASURE_TOKEN_BUDGET` tokens
    (:func:`measure_tokens`) is refused unless ``allow_long``.
    """
    import json
    import platform
    from pathlib import Path

    import transformers
    from tqdm import tqdm

    from ..acceptance import iid_profile
    from ..cache import atomic_write_text, config_key
    from ..jsonio import exclusive_lock, open_append, resume_jsonl
    from ..scenario import Payload
    from .engine import mean_tokens_per_round, speculative_generate
    from .models import PACKAGED, get_pair, load_pair, pair_kernel
    from .prompts import encode, encode_intact, load_prompts

    pair = get_pair(pair_name)
    check_bool("allow_long", allow_long)
    work = measure_tokens(n_prompts, max_new_tokens, temperatures, L_values, engine_prompts)
    if work > MEASURE_TOKEN_BUDGET and not allow_long and not cached_only:
        raise ValidationError(f"measure: {work:,} tokens to generate or score ({n_prompts} prompts x {max_new_tokens} "
                              f"new tokens, engine runs at {len(tuple(L_values))} draft lengths), past the budget of "
                              f"{MEASURE_TOKEN_BUDGET:,} (about an hour on a 2-core CPU); fewer prompts or new tokens, "
                              f"or allow_long=True (measure --allow-long)")
    cfg = {"pair": pair_name, "task": task, "n_prompts": n_prompts, "max_new_tokens": max_new_tokens,
           "seed": seed, "temperatures": list(temperatures), "L_values": list(L_values),
           "engine_prompts": engine_prompts, "version": 1}
    key = config_key(cfg, 12)
    out_dir = Path(out_dir or default_measurement_dir())
    raw = out_dir / pair_name / f"{task}-{key}.jsonl"
    summ = out_dir / pair_name / f"{task}-{key}.summary.json"
    if summ.exists() and not recompute:
        cached = read_summary(summ)
        if cached is not None and cached.get("config") == cfg:
            return cached
        warnings.warn(f"{summ}: not a summary of this configuration; recomputing it", stacklevel=2)
    if cached_only:
        raise ValidationError(f"no finished measurement of {pair_name} on {task} for this configuration under "
                              f"{out_dir} (file {summ.name}): measure it first (the full notebook 05 or "
                              "python -m spinlib measure)")
    raw.parent.mkdir(parents=True, exist_ok=True)
    kernel = pair_kernel(pair_name).kernel  # every record names it; a resumed file must hold this kernel's only
    # one writer per output folder (a second measurement of this pair, of any task or configuration, is refused
    # in one line); recompute starts over only once the lock is held, never under a running writer
    with exclusive_lock(raw, f"the measurements of {pair_name} in {raw.parent}", scope="folder"):
        if recompute:
            raw.unlink(missing_ok=True)
        # a torn last line (an interrupted run) is dropped from the file before anything is appended
        done = resume_jsonl(raw, lambda kept: read_records(raw, same={"kernel": kernel}, kept=kept))
        prompts = load_prompts(task, n_prompts)
        jobs = [("beta", p, T, None) for p in prompts for T in temperatures]
        jobs += [("engine", p, T, L) for p in prompts[:engine_prompts] for T in temperatures for L in L_values]
        wanted = {(kind, p["question_id"], float(T), L) for kind, p, T, L in jobs}
        foreign = sorted(set(done) - wanted, key=repr)
        if foreign:  # a line of another question, temperature or length: never pooled into this summary
            raise ValidationError(f"{raw}: holds {len(foreign)} record(s) this configuration does not measure "
                                  f"(first: {foreign[0]}); delete those lines or measure with recompute")
        target, draft, tok = load_pair(pair_name, kernel)
        spec = PACKAGED[pair.target]
        stop = (tok.eos_token_id,) if tok.eos_token_id is not None else ()
        # packaged-draft pairs: prompts up to MAX_PROMPT_TOKENS with their template intact (middle cut,
        # counted); the low-bit pairs keep encode's left cut at 384 (their committed data)
        intact = pair.draft_model is not None
        encoded, cuts = {}, {}
        for p in prompts:
            if intact:
                encoded[p["question_id"]], cuts[p["question_id"]] = encode_intact(tok, p["prompt"], spec.chat,
                                                                                  MAX_PROMPT_TOKENS)
            else:  # left cut: the chat header of an over-long prompt is lost (counted in the summary)
                full = encode(tok, p["prompt"], spec.chat, None)
                encoded[p["question_id"]] = encode(tok, p["prompt"], spec.chat)
                cuts[p["question_id"]] = len(full) - len(encoded[p["question_id"]])
        with open_append(raw) as f:
            for kind, p, T, L in tqdm(jobs, desc=f"measure {pair_name}/{task}", disable=not progress, leave=False):
                k = (kind, p["question_id"], float(T), L)
                if k in done:
                    continue
                ids = encoded[p["question_id"]]
                g = torch.Generator().manual_seed(seed * 1_000_003 + p["question_id"] * 101 + int(T * 10) + (L or 0))
                if kind == "beta":
                    b = teacher_forced_beta(target, draft, ids, max_new_tokens=max_new_tokens, temperature=T,
                                            generator=g, stop_ids=stop)
                    rec = {"kind": kind, "question_id": p["question_id"], "temperature": T, "L": None,
                           "beta": [round(float(x), 6) for x in b], "kernel": kernel}
                else:
                    _, rounds = speculative_generate(target, draft, ids, max_new_tokens=max_new_tokens, draft_length=L,
                                                     temperature=T, generator=g, stop_ids=stop,
                                                     payload=Payload(spec.vocab_size, "full"))
                    rec = {"kind": kind, "question_id": p["question_id"], "temperature": T, "L": L,
                           "tokens_per_round": mean_tokens_per_round(rounds),
                           "rounds": [[r.drafted, r.accepted, r.bits_up, r.bits_down] for r in rounds], "kernel": kernel}
                f.write(json.dumps(rec) + "\n")
                f.flush()
                done[k] = rec
        summary = {"config": cfg, "pair": pair_name, "target": pair.target, "draft": pair.draft, "task": task,
                   "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                                "python": platform.python_version()}, "by_temperature": {},
                   "kernel": pair_kernel(pair_name).to_dict()}
        if intact:
            summary["prompts"] = {"max_tokens": MAX_PROMPT_TOKENS, "truncation": "middle of the content, template intact",
                                  "cut": sum(1 for c in cuts.values() if c > 0), "of": len(cuts),
                                  "chars_cut": int(sum(cuts.values()))}
        else:
            summary["prompts"] = {"max_tokens": 384, "truncation": "left: an over-long prompt loses its start (chat header)",
                                  "cut": sum(1 for c in cuts.values() if c > 0), "of": len(cuts),
                                  "tokens_cut": int(sum(cuts.values()))}
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
        probe = encoded[prompts[0]["question_id"]]
        summary["timing"] = time_pair(target, draft, probe, threads=threads, allow_busy=allow_busy, grid=intact)
        atomic_write_text(summ, json.dumps(summary, indent=2) + "\n")
        return summary



def time_pair(target, draft, probe_ids: list[int], *, threads: int | None = None, allow_busy: bool = False,
              grid: bool = False) -> dict:
    """The ``timing`` block of a summary: draft and target seconds per token (medians, quartiles) and
    the verification fit ``T_ver(N) = t0 + t1 N`` with its residuals, on the prompt ``probe_ids``.

    torch's threads are set to ``threads`` (default all cores); a busy machine is refused unless
    ``allow_busy`` (then ``reliable = False``), and so is a fit whose RMS residual is not below the
    effect of ``t1`` across the sizes. The load checks before and after are recorded.
    """
    import platform

    from ..timing import load_check, require_quiet, set_threads

    threads = set_threads(threads)
    load = require_quiet(threads, allow_busy, what="the timing part of this measurement")
    sizes, secs, t0, t1, fit = time_verification(target, probe_ids)
    draft_t, target_t = time_draft(draft, probe_ids), time_draft(target, probe_ids)
    vgrid = time_verification_grid(target, probe_ids) if grid else None
    load_after = load_check(threads)
    timing = {"draft_s_per_token": draft_t["median_s"], "target_s_per_token": target_t["median_s"],
              "draft_spread": draft_t, "target_spread": target_t,
              "verify_sizes": sizes, "verify_s": secs, "verify_t0_s": t0, "verify_t1_s": t1,
              "verify_fit": fit, "threads": threads, "load_before": load.to_dict(),
              "load_after": load_after.to_dict(), "reliable": bool(load.reliable and load_after.reliable and fit["ok"]),
              "machine": platform.processor() or platform.machine(),
              "dtype": str(next(target.parameters()).dtype).replace("torch.", "")}
    if vgrid is not None:
        timing["verify_grid"] = vgrid
        timing["draft_to_target_step"] = draft_t["median_s"] / target_t["median_s"]
    if not fit["ok"] and not allow_busy:
        raise ValidationError(
            f"verification-time fit refused: residual {fit['rms_residual_s'] * 1e3:.2f} ms RMS is not below the "
            f"effect of t1 across the sizes ({fit['effect_s'] * 1e3:.2f} ms) -- the timings are noise "
            "(busy machine?); rerun, or pass --allow-busy to keep them marked unreliable")
    return timing


def retime_summary(path, *, threads: int | None = None, allow_busy: bool = False) -> dict:
    """Re-take the timings of an existing summary in place (acceptance data untouched).

    Same pair and probe as :func:`measure_pair` (the first prompt of the summary's task, with the
    pair's chat template); the new ``timing`` block (:func:`time_pair`) replaces the old one and the
    file is rewritten atomically. A summary that does not read as one is refused with one line.
    Returns the updated summary.
    """
    import json
    from pathlib import Path

    from ..cache import atomic_write_text
    from .models import PACKAGED, get_pair, load_pair
    from .prompts import encode, encode_for_pair, load_prompts

    from ..jsonio import loads_json, read_text_checked

    path = Path(path)
    # read, not checked as a whole: the timing block it replaces may be the part that is broken
    try:
        summary = loads_json(read_text_checked(path, "measurement summary"), str(path), allow_nonfinite=True)
    except ValidationError:
        summary = None
    if not isinstance(summary, dict) or not isinstance(summary.get("config"), dict) \
            or not isinstance(summary.get("by_temperature"), dict):
        raise ValidationError(f"{path}: not a measurement summary (expected the JSON written by measure)")
    cfg = summary["config"]
    pair = get_pair(cfg.get("pair"))
    target, draft, tok = load_pair(pair.name)
    text = load_prompts(cfg["task"], cfg["n_prompts"])[0]["prompt"]
    probe = encode_for_pair(pair, tok, text) if PACKAGED[pair.target].chat else encode(tok, text, False)
    summary["timing"] = time_pair(target, draft, probe, threads=threads, allow_busy=allow_busy,
                                  grid="verify_grid" in summary.get("timing", {}))
    if "kernel" in summary:
        from .models import pair_kernel

        summary["kernel"] = pair_kernel(pair.name).to_dict()
    atomic_write_text(path, json.dumps(summary, indent=2) + "\n")
    return summary


@dataclass(frozen=True)
class RoundTracePoint:
    """One (prompt, payload, mode) of :func:`engine_round_traces`: one speculative generation of prompt
    ``params["prompt"]`` of ``task`` with the payload ``params["payload"]`` names, sampled with
    ``torch.Generator().manual_seed(seed)``; one record per round."""

    pair_name: str
    task: str
    n_prompts: int
    max_new_tokens: int
    draft_length: int
    payloads: tuple  # (name, Payload) pairs
    temperature: float
    kernel: str

    def __call__(self, params: dict, seed: int) -> list[dict]:
        import torch

        from .engine import speculative_generate
        from .models import get_pair, load_pair
        from .prompts import encode_for_pair, load_spec_bench

        target, draft, tok = load_pair(self.pair_name, self.kernel)
        p = load_spec_bench(self.task, self.n_prompts)[int(params["prompt"])]
        ids = encode_for_pair(get_pair(self.pair_name), tok, p["prompt"])
        _, rr = speculative_generate(target, draft, ids, max_new_tokens=self.max_new_tokens,
                                     draft_length=self.draft_length, temperature=self.temperature,
                                     generator=torch.Generator().manual_seed(int(seed)), mode=params["mode"],
                                     payload=dict(self.payloads)[params["payload"]], stop_ids=(tok.eos_token_id,))
        return [{"drafted": r.drafted, "accepted": r.accepted, "bits_up": r.bits_up, "bits_down": r.bits_down}
                for r in rr]


def engine_round_traces(pair_name: str, task: str, n_prompts: int, max_new_tokens: int, draft_length: int,
                        payloads: dict, seed: int = 0, temperature: float = 1.0, *, kernel: str,
                        n_jobs: int | None = 1) -> list[dict]:
    """Per-round records of the real engine in both modes (notebook 06's bits-vs-model check), on
    ``kernel``, which must be this machine's for the pair (:func:`spinlib.sd.models.check_kernel`; part of
    the cache key).

    For each of the first ``n_prompts`` prompts of ``task`` (chat template), each payload in
    ``payloads`` (name -> :class:`~spinlib.scenario.Payload`) and each mode ("UL", "DL"): one
    speculative generation at ``temperature``, a :class:`~spinlib.study.Study` task
    (:class:`RoundTracePoint`; one sampler seed common to every point, so both modes and every payload
    draw the same tokens; resumable; one worker by default, as each worker loads the pair); one record
    per round with ``prompt``, ``payload``, ``mode``, ``seed``, the drafted and accepted counts and the
    bits the engine sent.
    """
    from ..study import Study
    from .models import check_kernel
    from .prompts import load_spec_bench

    point = RoundTracePoint(pair_name, task, int(n_prompts), int(max_new_tokens), int(draft_length),
                            tuple(payloads.items()), float(temperature), check_kernel(pair_name, kernel))
    points = [{"prompt": i, "payload": name, "mode": mode} for i in range(len(load_spec_bench(task, n_prompts)))
              for name in payloads for mode in ("UL", "DL")]
    return Study(f"engine-round-traces-{pair_name}", point, points, 1, seed).run(n_jobs=n_jobs)
