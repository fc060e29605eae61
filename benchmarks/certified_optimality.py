"""Certified optimality of the integer policies against exhaustive search on fresh random instances.

    .venv/bin/python benchmarks/certified_optimality.py --policy heterogeneous-sync [--n 500] [--seed S]

Policies and their references:

* ``heterogeneous-sync`` / ``heterogeneous-async``: :func:`spinlib.control.exhaustive.solve_exhaustive`
  (every length vector; about 7 s at K = 5, L_max = 16). Instances: K in 2..5, presets "llama2-7b-l4" / "qwen-7b-l4", access latency
  log-uniform in [1 ms, 1 s], payload ids / top-8 / full, L_max in {8, 16}.
* ``uldl-optimal``: :func:`spinlib.control.uldl.exhaustive_joint` (every mode assignment x every length
  vector, exact continuous sub-problems). Instances from :func:`spinlib.presets.random_uldl_scenario`
  (random preset, DL power, DL band, top-k or full payload, variant) with the same latency range;
  K in 2..5 with L_max in {8, 16}, L_max = 8 at K = 5 (the reference's cost grows as (2 L_max + 1)^K:
  K = 4 at L_max = 16 is ~20 s, K = 5 at L_max = 8 ~12 s). Payload "ids" does not apply: the UL/DL modes move distributions.

Each policy runs with its default parameters, except that it is told not to enumerate
(``exhaustive_max=0``: by default the solvers evaluate every length vector, or every (mode, length)
pair, up to 5,000 of them, which would leave nothing to certify at K = 2, 3). Counts misses (goodput below the optimum by more than
1e-9 relative), false certificates (gap <= the policy's tolerance reported but the goodput below the
optimum by more than that tolerance), invalid bounds (upper bound below the optimum by more than 1e-9
relative) and, for ``uldl-optimal``, the misses of its heuristic part alone (``heuristic_goodput``).
Writes ``results/benchmarks/certified_optimality[_<policy>].json``.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

from bench_common import source_state
from spinlib import random_scenario
from spinlib.cache import atomic_write_text
from spinlib.control import solve
from spinlib.control.exhaustive import solve_exhaustive
from spinlib.control.uldl import exhaustive_joint
from spinlib.experiments import payload_of
from spinlib.paths import RESULTS
from spinlib.presets import get_preset, random_uldl_scenario

TOL = 1e-9
POLICIES = {"heterogeneous-sync": 1e-9, "heterogeneous-async": 1e-9, "uldl-optimal": 1e-6}  # default gap tolerances


def instance(policy: str, rng: np.random.Generator):
    K = int(rng.integers(2, 6))
    latency = float(10 ** rng.uniform(-3, 0))
    L_max = int(rng.choice([8, 16]))
    if policy == "uldl-optimal":
        L_max = 8 if K == 5 else L_max  # the joint reference: (2 L_max + 1)^K points, 3.9e7 at K = 5, L_max = 16
        s = random_uldl_scenario(K, np.random.default_rng(int(rng.integers(1 << 31))), access_latency_s=latency)
        desc = dict(preset=s.name, payload=s.payload.mode)
        return s, L_max, desc, lambda: exhaustive_joint(s, L_max)[0]
    preset = str(rng.choice(["llama2-7b-l4", "qwen-7b-l4"]))
    pay = str(rng.choice(["ids", "topk-8", "full"]))
    s = random_scenario(K, seed=int(rng.integers(1 << 31)), preset=preset, access_latency_s=latency,
                        payload=payload_of(pay, get_preset(preset).vocab_size))
    model = "sync" if policy == "heterogeneous-sync" else "async"
    return s, L_max, dict(preset=preset, payload=pay), \
        lambda: solve_exhaustive(s, L_max, model).goodput_tokens_per_s


def main(policy: str, n: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    tol_gap = POLICIES[policy]
    rows = []
    for i in range(n):
        s, L_max, desc, reference = instance(policy, rng)
        opt = reference()
        t = time.perf_counter()
        # the branch-and-bound itself (the solvers enumerate tiny instances by default: nothing to certify there)
        a = solve(s, policy, L_max=L_max, exhaustive_max=0)
        dt = time.perf_counter() - t
        G, ub, gap = a.goodput_tokens_per_s, a.info["upper_bound"], a.info["gap"]
        row = dict(i=i, K=s.num_users, access_latency_s=s.radio.access_latency_s, L_max=L_max, **desc,
                   goodput=G, optimum=opt, upper_bound=ub, gap=gap, status=a.info["status"],
                   nodes=a.info["bnb_nodes"], time_s=dt,
                   miss=bool(G < opt * (1 - TOL)),
                   false_certificate=bool(gap <= tol_gap and G < opt * (1 - max(TOL, tol_gap))),
                   invalid_bound=bool(ub < opt * (1 - TOL)))
        if "heuristic_goodput" in a.info:
            row["heuristic_miss"] = bool(a.info["heuristic_goodput"] < opt * (1 - TOL))
        rows.append(row)
        print(f"{i + 1}/{n} K={row['K']} L_max={L_max} gap={gap:.1e} {row['status']} {dt:.2f}s"
              + (" MISS" if row["miss"] else ""), flush=True)
    summary = dict(
        policy=policy, instances=n, seed=seed, gap_tolerance=tol_gap,
        misses=sum(r["miss"] for r in rows),
        false_certificates=sum(r["false_certificate"] for r in rows),
        invalid_bounds=sum(r["invalid_bound"] for r in rows),
        proven_optimal=sum(r["gap"] <= tol_gap for r in rows),
        max_gap=max(r["gap"] for r in rows),
        max_shortfall=max(1 - r["goodput"] / r["optimum"] for r in rows),
        max_time_s=max(r["time_s"] for r in rows),
        mean_time_s=float(np.mean([r["time_s"] for r in rows])),
    )
    if rows and "heuristic_miss" in rows[0]:
        summary["heuristic_misses"] = sum(r["heuristic_miss"] for r in rows)
    print(json.dumps(summary, indent=2))
    name = "certified_optimality" + ("" if policy == "heterogeneous-sync" else "_" + policy.replace("-", "_"))
    out = RESULTS / "benchmarks" / f"{name}.json"
    atomic_write_text(out, json.dumps({**source_state(), "summary": summary, "instances": rows}, indent=1) + "\n")
    print(f"wrote {out}")
    return summary


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", choices=sorted(POLICIES), default="heterogeneous-sync")
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--seed", type=int, default=20240611)
    args = ap.parse_args()
    if args.n < 1:
        ap.error("--n must be at least 1")
    main(args.policy, args.n, args.seed)
