"""Tokens per second of our speculative engine vs Hugging Face assisted generation vs plain decoding.

    .venv/bin/python benchmarks/engine_throughput.py [--pair smollm2-rtn6] [--prompts 4] [--max-new-tokens 64]

Same pair, same prompts (Spec-Bench, one per task), greedy, draft length L = 4 for both engines
(HF: ``num_assistant_tokens=4``, constant schedule, confidence threshold 0 so that it always
drafts 4). Each configuration runs once per prompt after a warm-up; outputs (up to the end-of-sequence
token) are checked to be identical to plain greedy decoding. Also times teacher-forced acceptance measurement against a
plain target decode of the same length (it should cost one decode plus one draft pass).
Writes results/benchmarks/engine_throughput.json.
"""
from __future__ import annotations

import argparse
import json
import platform
import time

import torch

from spinlib.cache import atomic_write_text
from spinlib.paths import RESULTS
from spinlib.sd.engine import speculative_generate, target_generate
from spinlib.sd.measure import teacher_forced_beta
from spinlib.sd.models import load_pair
from spinlib.sd.prompts import TASKS, encode, load_spec_bench


def main(pair: str, n_prompts: int, max_new: int, L: int = 4) -> dict:
    torch.manual_seed(0)
    target, draft, tok = load_pair(pair)
    draft.generation_config.num_assistant_tokens = L
    draft.generation_config.num_assistant_tokens_schedule = "constant"
    draft.generation_config.assistant_confidence_threshold = 0.0
    prompts = [encode(tok, load_spec_bench(t, 1)[0]["prompt"], chat=True) for t in TASKS][:n_prompts]
    # outputs are compared up to the end-of-sequence token (HF stops there; ours is told to)
    runs = {"plain_ours": [], "plain_hf": [], "speculative_ours": [], "assisted_hf": [], "teacher_forced": []}
    identical = True
    n_tokens = []
    target_generate(target, prompts[0], max_new_tokens=8)  # warm-up
    for ids in prompts:
        x = torch.tensor([ids])
        attn = torch.ones_like(x)
        stop = (tok.eos_token_id,)
        t = time.perf_counter(); ref = target_generate(target, ids, max_new_tokens=max_new, stop_ids=stop)
        runs["plain_ours"].append(time.perf_counter() - t)
        t = time.perf_counter()
        hf = target.generate(x, attention_mask=attn, do_sample=False, max_new_tokens=max_new)
        runs["plain_hf"].append(time.perf_counter() - t)
        t = time.perf_counter()
        ours, _ = speculative_generate(target, draft, ids, max_new_tokens=max_new, draft_length=L, stop_ids=stop)
        runs["speculative_ours"].append(time.perf_counter() - t)
        t = time.perf_counter()
        ast = target.generate(x, attention_mask=attn, assistant_model=draft, do_sample=False, max_new_tokens=max_new)
        runs["assisted_hf"].append(time.perf_counter() - t)
        t = time.perf_counter(); teacher_forced_beta(target, draft, ids, max_new_tokens=max_new, temperature=1.0, stop_ids=stop)
        runs["teacher_forced"].append(time.perf_counter() - t)
        identical &= ours == ref == hf[0, len(ids):].tolist() == ast[0, len(ids):].tolist()
        n_tokens.append(len(ref))
    tokens = sum(n_tokens)
    out = {"pair": pair, "L": L, "prompts": len(prompts), "max_new_tokens": max_new, "threads": torch.get_num_threads(),
           "machine": platform.processor() or platform.machine(), "outputs_identical": bool(identical),
           "tokens_per_s": {k: tokens / sum(v) for k, v in runs.items() if k != "teacher_forced"},
           "teacher_forced_over_plain_decode": sum(runs["teacher_forced"]) / sum(runs["plain_ours"])}
    atomic_write_text(RESULTS / "benchmarks" / "engine_throughput.json", json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--pair", default="smollm2-rtn6")
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--max-new-tokens", type=int, default=64)
    a = p.parse_args()
    main(a.pair, a.prompts, a.max_new_tokens)
