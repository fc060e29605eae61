"""Certified optimality of ``heterogeneous-sync`` against exhaustive search on random instances.

    .venv/bin/python benchmarks/certified_optimality.py [--n 500] [--seed S]

Instances: K in 2..4, presets "llama2-7b-l4" / "qwen-7b-l4", access latency log-uniform in
[1 ms, 1 s], payload ids / top-8 / full, L_max in {8, 16}; the policy runs with its default
parameters. Counts misses (goodput below the exhaustive optimum by more than 1e-9 relative),
false certificates (gap <= 1e-9 reported but not optimal) and invalid bounds (upper bound below
the optimum by more than 1e-9 relative), and writes results/benchmarks/certified_optimality.json.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

from spinlib import random_scenario
from spinlib.cache import atomic_write_text
from spinlib.control import solve
from spinlib.control.exhaustive import solve_exhaustive
from spinlib.experiments import payload_of
from spinlib.paths import RESULTS
from spinlib.presets import get_preset

TOL = 1e-9


def main(n: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        K = int(rng.integers(2, 5))
        preset = str(rng.choice(["llama2-7b-l4", "qwen-7b-l4"]))
        pay = str(rng.choice(["ids", "topk-8", "full"]))
        latency = float(10 ** rng.uniform(-3, 0))
        L_max = int(rng.choice([8, 16]))
        s = random_scenario(K, seed=int(rng.integers(1 << 31)), preset=preset, access_latency_s=latency,
                            payload=payload_of(pay, get_preset(preset).vocab_size))
        opt = solve_exhaustive(s, L_max, "sync").goodput_tokens_per_s
        t = time.perf_counter()
        a = solve(s, "heterogeneous-sync", L_max=L_max)
        dt = time.perf_counter() - t
        G, ub, gap = a.goodput_tokens_per_s, a.info["upper_bound"], a.info["gap"]
        rows.append(dict(i=i, K=K, preset=preset, payload=pay, access_latency_s=latency, L_max=L_max,
                         goodput=G, optimum=opt, upper_bound=ub, gap=gap, status=a.info["status"],
                         nodes=a.info["bnb_nodes"], time_s=dt,
                         miss=bool(G < opt * (1 - TOL)),
                         false_certificate=bool(gap <= TOL and G < opt * (1 - TOL)),
                         invalid_bound=bool(ub < opt * (1 - TOL))))
    summary = dict(
        instances=n, seed=seed,
        misses=sum(r["miss"] for r in rows),
        false_certificates=sum(r["false_certificate"] for r in rows),
        invalid_bounds=sum(r["invalid_bound"] for r in rows),
        proven_optimal=sum(r["gap"] <= TOL for r in rows),
        max_gap=max(r["gap"] for r in rows),
        max_shortfall=max(1 - r["goodput"] / r["optimum"] for r in rows),
        max_time_s=max(r["time_s"] for r in rows),
        mean_time_s=float(np.mean([r["time_s"] for r in rows])),
    )
    print(json.dumps(summary, indent=2))
    out = RESULTS / "benchmarks" / "certified_optimality.json"
    atomic_write_text(out, json.dumps({"summary": summary, "instances": rows}, indent=1) + "\n")
    print(f"wrote {out}")
    return summary


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--seed", type=int, default=20240611)
    args = ap.parse_args()
    main(args.n, args.seed)
