"""Tokens per second of our speculative engine vs Hugging Face assisted generation vs plain decoding.

    .venv/bin/python benchmarks/engine_throughput.py [--pair smollm2-rtn6] [--prompts 6] [--max-new-tokens 48]
        [--rounds 3] [--quick] [--allow-busy] [--threads N] [--wait-quiet S]

Same pair, same prompts (Spec-Bench, one per task), greedy, draft length L = 4 for both engines
(HF: ``num_assistant_tokens=4``, constant schedule, confidence threshold 0 so that it always
drafts 4). Five configurations -- plain decoding (ours, HF), speculative (ours), assisted (HF) and
teacher-forced acceptance measurement (T = 1, a seeded generator per prompt) -- run interleaved:
for every round and prompt each configuration runs once, in an order rotated from one prompt to
the next, after one warm-up of each. One sample is the seconds per generated token of one
(round, prompt) run; comparisons pair the samples of the same (round, prompt) and report
``time(b) / time(a)`` with a 95 % bootstrap interval over the pairs (``benchmarks/bench_common.py``;
a win only when the interval lies above 1); tokens/s per configuration are medians with quartiles.
Outputs (up to the end-of-sequence token) are checked identical to plain greedy decoding in every
round. Teacher-forced measurement is compared with one plain decode per token (it should cost one
decode plus one draft pass). Refuses to run on a busy machine unless ``--allow-busy``.

Writes results/benchmarks/engine_throughput.json (``--quick``: 2 prompts, 16 tokens, 2 rounds,
under results/smoke/). ~5 min on 2 quiet cores with the defaults.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from bench_common import Run, add_arguments, main_guard, ratio_from_samples, ratio_record, timing_of
from spinlib.scenario import ValidationError
from spinlib.sd.engine import speculative_generate, target_generate
from spinlib.sd.measure import teacher_forced_beta
from spinlib.sd.models import load_pair
from spinlib.sd.prompts import TASKS, encode, load_spec_bench

CONFIGS = ("plain_ours", "plain_hf", "speculative_ours", "assisted_hf", "teacher_forced")
# (key, a, b): ratio = time per token of b / time per token of a
COMPARISONS = (("speculative_ours_vs_assisted_hf", "speculative_ours", "assisted_hf"),
               ("speculative_ours_vs_plain_ours", "speculative_ours", "plain_ours"),
               ("assisted_hf_vs_plain_hf", "assisted_hf", "plain_hf"),
               ("plain_ours_vs_plain_hf", "plain_ours", "plain_hf"),
               ("teacher_forced_cost_in_plain_decodes", "plain_ours", "teacher_forced"))


def main(args) -> dict:
    n_prompts, max_new, rounds = (2, 16, 2) if args.quick else (args.prompts, args.max_new_tokens, args.rounds)
    L = args.L
    if n_prompts * rounds < 3:
        raise ValidationError(f"prompts x rounds must be >= 3 (pairs for an interval), got {n_prompts} x {rounds}")
    run = Run("engine_throughput", args, what="the engine benchmark")
    torch.manual_seed(0)
    target, draft, tok = load_pair(args.pair)
    draft.generation_config.num_assistant_tokens = L
    draft.generation_config.num_assistant_tokens_schedule = "constant"
    draft.generation_config.assistant_confidence_threshold = 0.0
    prompts = [encode(tok, load_spec_bench(t, 1)[0]["prompt"], chat=True) for t in TASKS][:n_prompts]
    stop = (tok.eos_token_id,)

    def config(name, ids, p, n_new):
        """Run one configuration; returns the generated ids (teacher-forced: the number of positions)."""
        x = torch.tensor([ids])
        if name == "plain_ours":
            return target_generate(target, ids, max_new_tokens=n_new, stop_ids=stop)
        if name == "plain_hf":
            return target.generate(x, attention_mask=torch.ones_like(x), do_sample=False,
                                   max_new_tokens=n_new)[0, len(ids):].tolist()
        if name == "speculative_ours":
            return speculative_generate(target, draft, ids, max_new_tokens=n_new, draft_length=L, stop_ids=stop)[0]
        if name == "assisted_hf":
            return target.generate(x, attention_mask=torch.ones_like(x), assistant_model=draft, do_sample=False,
                                   max_new_tokens=n_new)[0, len(ids):].tolist()
        beta = teacher_forced_beta(target, draft, ids, max_new_tokens=n_new, temperature=1.0,
                                   generator=torch.Generator().manual_seed(p), stop_ids=stop)
        return len(beta)

    for name in CONFIGS:  # warm-up, untimed
        config(name, prompts[0], 0, 8)
    sec_per_token = {c: [] for c in CONFIGS}
    seconds = {c: 0.0 for c in CONFIGS}
    tokens = {c: 0 for c in CONFIGS}
    identical = True
    visit = 0
    for r in range(rounds):
        for p, ids in enumerate(prompts):
            order = CONFIGS[visit % len(CONFIGS):] + CONFIGS[:visit % len(CONFIGS)]
            visit += 1
            outs = {}
            for name in order:
                t = time.perf_counter()
                outs[name] = config(name, ids, p, max_new)
                dt = time.perf_counter() - t
                n = outs[name] if name == "teacher_forced" else len(outs[name])
                sec_per_token[name].append(dt / max(n, 1))
                seconds[name] += dt
                tokens[name] += n
            same = outs["plain_ours"] == outs["plain_hf"] == outs["speculative_ours"] == outs["assisted_hf"]
            identical &= same
            print(f"round {r} prompt {p}: " + ", ".join(f"{c} {1 / sec_per_token[c][-1]:.1f} tok/s" for c in CONFIGS)
                  + ("" if same else "  OUTPUTS DIFFER"), flush=True)
    configs = {}
    for c in CONFIGS:
        tps = 1.0 / np.asarray(sec_per_token[c])
        configs[c] = {"tokens_per_s": {"median": float(np.median(tps)), "q25": float(np.quantile(tps, 0.25)),
                                       "q75": float(np.quantile(tps, 0.75))},
                      "s_per_token": timing_of(sec_per_token[c]).to_dict(),
                      "overall_tokens_per_s": tokens[c] / seconds[c], "tokens": tokens[c]}
    comparisons = {key: ratio_record(ratio_from_samples(sec_per_token[a], sec_per_token[b]), a, b)
                   for key, a, b in COMPARISONS}
    out = run.finish({"pair": args.pair, "L": L, "prompts": len(prompts), "max_new_tokens": max_new,
                      "rounds": rounds, "sample": "seconds per generated token of one (round, prompt) run",
                      "outputs_identical": bool(identical), "configs": configs, "comparisons": comparisons})
    for key, v in comparisons.items():
        print(f"{key}: {v['ratio']:.3g}x [{v['ci_low']:.3g}, {v['ci_high']:.3g}] {v['verdict']} (n={v['pairs']})")
    if not identical:
        raise SystemExit("outputs differ from plain greedy decoding (recorded in the JSON)")
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(p)
    p.add_argument("--pair", default="smollm2-rtn6")
    p.add_argument("--prompts", type=int, default=6)
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("-L", type=int, default=4, help="draft length (both engines)")
    main_guard(lambda: main(p.parse_args()))
