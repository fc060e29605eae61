"""Tokens per second of our speculative engine vs Hugging Face assisted generation vs plain decoding.

    .venv/bin/python benchmarks/engine_throughput.py [--pair qwen-coder] [--tasks humaneval,summarization,...]
        [--prompts 2] [--max-new-tokens 48] [--rounds 1] [--configs a,b,...] [--quick] [--allow-busy]

Same pair, on the kernel :func:`spinlib.sd.models.pair_kernel` chooses (recorded), same prompts
(the first ``--prompts`` of each task group: Spec-Bench groups and HumanEval, templates intact),
greedy, draft length L = 4 for both engines (HF: ``num_assistant_tokens=4``, constant schedule,
confidence threshold 0 so that it always drafts 4). Configurations (:data:`ALL_CONFIGS`): plain
decoding (ours, HF), speculative (ours), assisted (HF, L = 4), assisted with HF's own defaults
(its dynamic draft-length schedule and confidence threshold: the tuning HF ships),
prompt lookup (HF, n-gram drafts of up to 8 tokens), our engine with our drafters
(:mod:`spinlib.sd.drafters`): prompt lookup (the same rule, up to 8 tokens) and the hybrid
(lookup when it matches, the draft model otherwise, L = 4), and teacher-forced acceptance measurement
(T = 1, a seeded generator per prompt); they run interleaved:
for every round and prompt each configuration runs once, in an order rotated from one prompt to
the next, after one warm-up of each. One sample is the seconds per generated token of one
(round, prompt) run; comparisons pair the samples of the same (round, prompt) and report
``time(b) / time(a)`` with a 95 % bootstrap interval over the pairs (``benchmarks/bench_common.py``;
a win only when the interval lies above 1); tokens/s per configuration are medians with quartiles.
Outputs (up to the end-of-sequence token) are checked identical to plain greedy decoding in every
round on float32; on a low-precision kernel a difference is allowed only as a tie-break explained
by the target's logit margin (:mod:`spinlib.sd.lossless`), and counted. Ratios are reported over
all samples and per task group. Teacher-forced measurement is compared with one plain decode per token (it should cost one
decode plus one draft pass). Refuses to run on a busy machine unless ``--allow-busy``.

Our engine's configurations also record their rounds and their drafted and accepted tokens
(accepted per drafted token, tokens per round; for the hybrid, the rounds the lookup drafted).
Each configuration also records, per generated token, the forward calls, new positions and seconds
of the target and of the draft (hooks on both models) and the rest of its time (the engine's own
work): where a ratio comes from, not only its size.

Writes results/benchmarks/engine_throughput.json (``--quick``: 2 prompts, 16 tokens, 2 rounds,
under results/smoke/). ~5 min on 2 quiet cores with the defaults.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from bench_common import Run, add_arguments, main_guard, ratio_from_samples, ratio_record, timing_of
from spinlib.validation import ValidationError
from spinlib.sd.drafters import HybridDrafter, NgramDrafter
from spinlib.sd.engine import speculative_generate, target_generate
from spinlib.sd.measure import teacher_forced_beta
from spinlib.sd.models import load_pair

ALL_CONFIGS = ("plain_ours", "plain_hf", "speculative_ours", "prompt_lookup_ours", "hybrid_ours", "assisted_hf",
               "assisted_hf_default", "prompt_lookup_hf", "teacher_forced")
OURS = ("speculative_ours", "prompt_lookup_ours", "hybrid_ours")  # our engine's drafters: acceptance recorded
LOOKUP_TOKENS = 8  # prompt lookup proposes up to 8 tokens, ours and Hugging Face's (prompt_lookup_num_tokens)
# (key, a, b): ratio = time per token of b / time per token of a
ALL_COMPARISONS = (("speculative_ours_vs_assisted_hf", "speculative_ours", "assisted_hf"),
                   ("speculative_ours_vs_assisted_hf_default", "speculative_ours", "assisted_hf_default"),
                   ("speculative_ours_vs_plain_ours", "speculative_ours", "plain_ours"),
                   ("speculative_ours_vs_prompt_lookup_hf", "speculative_ours", "prompt_lookup_hf"),
                   ("prompt_lookup_ours_vs_plain_ours", "prompt_lookup_ours", "plain_ours"),
                   ("prompt_lookup_ours_vs_prompt_lookup_hf", "prompt_lookup_ours", "prompt_lookup_hf"),
                   ("hybrid_ours_vs_plain_ours", "hybrid_ours", "plain_ours"),
                   ("hybrid_ours_vs_speculative_ours", "hybrid_ours", "speculative_ours"),
                   ("prompt_lookup_hf_vs_plain_ours", "prompt_lookup_hf", "plain_ours"),
                   ("assisted_hf_vs_plain_hf", "assisted_hf", "plain_hf"),
                   ("plain_ours_vs_plain_hf", "plain_ours", "plain_hf"),
                   ("teacher_forced_cost_in_plain_decodes", "plain_ours", "teacher_forced"))


class ForwardMeter:
    """Where the time of a generation goes: every forward call of each named model is counted with
    its new positions and its wall time (forward pre/post hooks on the top-level module). What is
    left of a run's time is the engine's own work (sampling, acceptance, cache bookkeeping)."""

    def __init__(self, **models):
        self.acc = {name: {"calls": 0, "positions": 0, "seconds": 0.0} for name in models}
        self._t = {}
        for name, m in models.items():
            m.register_forward_pre_hook(self._pre(name), with_kwargs=True)
            m.register_forward_hook(self._post(name))

    def _pre(self, name):
        def hook(module, args, kwargs):
            ids = kwargs.get("input_ids", args[0] if args else None)
            self.acc[name]["calls"] += 1
            self.acc[name]["positions"] += int(ids.shape[-1]) if ids is not None else 0
            self._t[name] = time.perf_counter()
        return hook

    def _post(self, name):
        def hook(module, args, output):
            self.acc[name]["seconds"] += time.perf_counter() - self._t.pop(name)
        return hook

    def snapshot(self) -> dict:
        return {n: dict(v) for n, v in self.acc.items()}


def main(args) -> dict:
    import copy

    from spinlib.sd.lossless import compare_greedy
    from spinlib.sd.measure import MAX_PROMPT_TOKENS
    from spinlib.sd.models import get_pair, pair_kernel
    from spinlib.sd.prompts import ALL_TASKS, encode_intact, load_prompts

    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    bad = [t for t in tasks if t not in ALL_TASKS]
    if bad or len(set(tasks)) != len(tasks) or not tasks:
        raise ValidationError(f"--tasks must be distinct names from {list(ALL_TASKS)}, got {args.tasks!r}")
    configs_sel = tuple(c.strip() for c in args.configs.split(","))
    if any(c not in ALL_CONFIGS for c in configs_sel) or len(set(configs_sel)) != len(configs_sel) \
            or "plain_ours" not in configs_sel:
        raise ValidationError(f"--configs must be distinct names from {list(ALL_CONFIGS)} including plain_ours, "
                              f"got {args.configs!r}")
    CONFIGS = configs_sel
    COMPARISONS = tuple(c for c in ALL_COMPARISONS if c[1] in CONFIGS and c[2] in CONFIGS)
    n_prompts, max_new, rounds = (1, 16, 1) if args.quick else (args.prompts, args.max_new_tokens, args.rounds)
    if args.quick:
        tasks = tasks[:3]
    L = args.L
    if n_prompts * rounds * len(tasks) < 3:
        raise ValidationError(f"tasks x prompts x rounds must be >= 3 (pairs for an interval), got "
                              f"{len(tasks)} x {n_prompts} x {rounds}")
    run = Run("engine_throughput", args, what="the engine benchmark")
    torch.manual_seed(0)
    get_pair(args.pair)
    kernel = pair_kernel(args.pair)
    target, draft, tok = load_pair(args.pair)
    draft_default = copy.copy(draft)  # same weights, its own generation config (HF's shipped defaults)
    draft_default.generation_config = copy.deepcopy(draft.generation_config)
    draft.generation_config.num_assistant_tokens = L
    draft.generation_config.num_assistant_tokens_schedule = "constant"
    draft.generation_config.assistant_confidence_threshold = 0.0
    hf_default = {k: getattr(draft_default.generation_config, k, None) for k in
                  ("num_assistant_tokens", "num_assistant_tokens_schedule", "assistant_confidence_threshold")}
    items = [(t, encode_intact(tok, r["prompt"], True, MAX_PROMPT_TOKENS)[0]) for t in tasks
             for r in load_prompts(t, n_prompts)]
    prompts = [ids for _, ids in items]
    task_of_prompt = [t for t, _ in items]
    stop = (tok.eos_token_id,)

    def config(name, ids, p, n_new):
        """Run one configuration; returns the generated ids (teacher-forced: the number of positions)."""
        x = torch.tensor([ids])
        if name == "plain_ours":
            return target_generate(target, ids, max_new_tokens=n_new, stop_ids=stop)
        if name == "plain_hf":
            return target.generate(x, attention_mask=torch.ones_like(x), do_sample=False,
                                   max_new_tokens=n_new)[0, len(ids):].tolist()
        if name in OURS:
            drafter = {"speculative_ours": lambda: draft, "prompt_lookup_ours": NgramDrafter,
                       "hybrid_ours": lambda: HybridDrafter(draft)}[name]()
            out, recs = speculative_generate(target, drafter, ids, max_new_tokens=n_new, stop_ids=stop,
                                             draft_length=LOOKUP_TOKENS if name == "prompt_lookup_ours" else L)
            last_records[name] = (recs, drafter)
            return out
        if name in ("assisted_hf", "assisted_hf_default"):
            return target.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=n_new,
                                   assistant_model=draft if name == "assisted_hf" else draft_default)[0, len(ids):].tolist()
        if name == "prompt_lookup_hf":
            return target.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=n_new,
                                   prompt_lookup_num_tokens=8)[0, len(ids):].tolist()
        beta = teacher_forced_beta(target, draft, ids, max_new_tokens=n_new, temperature=1.0,
                                   generator=torch.Generator().manual_seed(p), stop_ids=stop)
        return len(beta)

    last_records = {}  # our configurations' rounds of their latest run
    acceptance = {c: {"rounds": 0, "drafted": 0, "accepted": 0, "lookup_rounds": 0, "model_rounds": 0} for c in OURS}
    for name in CONFIGS:  # warm-up, untimed
        config(name, prompts[0], 0, 8)
    meter = ForwardMeter(target=target, draft=draft)  # draft_default shares the draft's modules and hooks
    breakdown = {c: {f"{m}_{k}": 0.0 for m in ("target", "draft") for k in ("calls", "positions", "seconds")}
                 for c in CONFIGS}
    sec_per_token = {c: [] for c in CONFIGS}
    seconds = {c: 0.0 for c in CONFIGS}
    tokens = {c: 0 for c in CONFIGS}
    identical = True
    divergences = []  # (config, task, GreedyCheck) of every output that differs from plain_ours
    visit = 0
    for r in range(rounds):
        for p, ids in enumerate(prompts):
            order = CONFIGS[visit % len(CONFIGS):] + CONFIGS[:visit % len(CONFIGS)]
            visit += 1
            outs = {}
            for name in order:
                before = meter.snapshot()
                t = time.perf_counter()
                outs[name] = config(name, ids, p, max_new)
                dt = time.perf_counter() - t
                for m, v in meter.snapshot().items():
                    for k in ("calls", "positions", "seconds"):
                        breakdown[name][f"{m}_{k}"] += v[k] - before[m][k]
                n = outs[name] if name == "teacher_forced" else len(outs[name])
                if name in OURS:
                    recs, drafter = last_records.pop(name)
                    acc = acceptance[name]
                    acc["rounds"] += len(recs)
                    acc["drafted"] += sum(x.drafted for x in recs)
                    acc["accepted"] += sum(x.accepted for x in recs)
                    acc["lookup_rounds"] += getattr(drafter, "ngram_rounds", 0)
                    acc["model_rounds"] += getattr(drafter, "model_rounds", 0)
                sec_per_token[name].append(dt / max(n, 1))
                seconds[name] += dt
                tokens[name] += n
            gens = [c for c in CONFIGS if c != "teacher_forced"]
            same = all(_upto_eos(outs[c], stop) == _upto_eos(outs["plain_ours"], stop) for c in gens)
            identical &= same
            if not same:
                ref, ref_logits = target_generate(target, ids, max_new_tokens=max_new, stop_ids=stop,
                                                  return_logits=True)
                from spinlib.sd.lossless import rounding_noise
                tau = rounding_noise(target, ids, ref, ref_logits, L + 1)
                for c in gens:
                    if _upto_eos(outs[c], stop) != _upto_eos(ref, stop):
                        divergences.append({"config": c, "task": task_of_prompt[p], "round": r,
                                            **compare_greedy(_upto_eos(ref, stop), ref_logits,
                                                             _upto_eos(outs[c], stop), tau).to_dict()})
            print(f"round {r} prompt {p}: " + ", ".join(f"{c} {1 / sec_per_token[c][-1]:.1f} tok/s" for c in CONFIGS)
                  + ("" if same else "  OUTPUTS DIFFER"), flush=True)
    configs = {}
    for c in CONFIGS:
        tps = 1.0 / np.asarray(sec_per_token[c])
        configs[c] = {"tokens_per_s": {"median": float(np.median(tps)), "q25": float(np.quantile(tps, 0.25)),
                                       "q75": float(np.quantile(tps, 0.75))},
                      "s_per_token": timing_of(sec_per_token[c]).to_dict(),
                      "overall_tokens_per_s": tokens[c] / seconds[c], "tokens": tokens[c],
                      # per generated token: forward calls, positions and seconds of each model, and the rest
                      "per_token": {**{k: v / max(tokens[c], 1) for k, v in breakdown[c].items()},
                                    "other_seconds": (seconds[c] - breakdown[c]["target_seconds"]
                                                      - breakdown[c]["draft_seconds"]) / max(tokens[c], 1)}}
    comparisons = {key: ratio_record(ratio_from_samples(sec_per_token[a], sec_per_token[b]), a, b)
                   for key, a, b in COMPARISONS}
    sample_task = [task_of_prompt[i % len(prompts)] for i in range(rounds * len(prompts))]
    by_task = {}
    for t in tasks:
        idx = [i for i, tt in enumerate(sample_task) if tt == t]
        by_task[t] = {key: ratio_record(ratio_from_samples([sec_per_token[a][i] for i in idx],
                                                           [sec_per_token[b][i] for i in idx]), a, b)
                      for key, a, b in COMPARISONS} if len(idx) >= 3 else {
            key: {"ratio": float(np.median(np.asarray([sec_per_token[b][i] for i in idx])
                                           / np.asarray([sec_per_token[a][i] for i in idx]))),
                  "pairs": len(idx), "verdict": "too few pairs for an interval"} for key, a, b in COMPARISONS}
    unexplained = [d for d in divergences if not d["explained"]]
    out = run.finish({"pair": args.pair, "kernel": kernel.to_dict(), "kernel_summary": kernel.describe(),
                      "L": L, "tasks": tasks, "prompts_per_task": n_prompts, "prompts": len(prompts),
                      "max_new_tokens": max_new, "rounds": rounds, "hf_default_assistant": hf_default,
                      "sample": "seconds per generated token of one (round, prompt) run",
                      "outputs_identical": bool(identical), "divergences": divergences,
                      "divergences_unexplained": len(unexplained), "configs": configs, "comparisons": comparisons,
                      "by_task": by_task, "lookup_tokens": LOOKUP_TOKENS,
                      "acceptance": {c: {**a, "accepted_per_drafted": a["accepted"] / max(a["drafted"], 1),
                                         "tokens_per_round": tokens[c] / max(a["rounds"], 1)}
                                     for c, a in acceptance.items() if c in CONFIGS}})
    for key, v in comparisons.items():
        print(f"{key}: {v['ratio']:.3g}x [{v['ci_low']:.3g}, {v['ci_high']:.3g}] {v['verdict']} (n={v['pairs']})")
    if unexplained:
        raise SystemExit(f"{len(unexplained)} output(s) differ from plain greedy decoding beyond a tie-break "
                         "(recorded in the JSON)")
    return out


def _upto_eos(ids, stop):
    """The tokens up to and including the first stop token (HF keeps generating pad after it)."""
    ids = list(ids)
    k = next((i for i, x in enumerate(ids) if x in stop), None)
    return ids if k is None else ids[:k + 1]


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(p)
    p.add_argument("--pair", default="qwen-coder")
    p.add_argument("--tasks", default="humaneval,summarization,mt_bench,math_reasoning",
                   help="comma-separated task groups (Spec-Bench groups, humaneval)")
    p.add_argument("--prompts", type=int, default=3, help="prompts per task group")
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--configs", default="plain_ours,speculative_ours,prompt_lookup_ours,hybrid_ours,assisted_hf,"
                                        "assisted_hf_default,prompt_lookup_hf",
                   help=f"comma-separated, from {', '.join(ALL_CONFIGS)}")
    p.add_argument("-L", type=int, default=4, help="draft length (both engines)")
    main_guard(lambda: main(p.parse_args()))
