"""BALANCE: the measured approximation ratio of every policy against the exact MILP, on random instances.

    .venv/bin/python benchmarks/balance_ratio.py [--quick] [--instances N] [--seed S]

Writes results/benchmarks/balance_ratio.json (with ``--quick``: results/smoke/benchmarks/): for each
policy the worst and mean ratio ``served / served(MILP)`` (an instance where the MILP serves nobody
counts as ratio 1), the misses (instances below the MILP) and the proven fraction where there is one.
Instances: ``spinlib.balance.random_instance`` with its default parameters, ``K ~ U{1..30}``, all
drawn from one ``numpy`` Generator seeded by ``--seed``; share grid ``phi_steps`` = 20 for the
algorithm, the greedy and the MILP alike (the MILP fixes phi per solve and enumerates the grid).
Not a timing benchmark (no load check): the counts do not depend on the machine.
"""
from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

import numpy as np

from bench_common import default_out
from spinlib.balance import feasible, random_instance, solve_balance
from spinlib.cache import atomic_write_text

POLICIES = {"balance": 1.0, "greedy": None, "ad-only": None, "sd-only": None}  # name: proven fraction of OPT_G
K_MAX, PHI_STEPS = 30, 20


def main(args) -> dict:
    n = args.instances or (200 if args.quick else 400)
    if n < 200 and not args.quick:
        raise SystemExit("balance_ratio.py: error: --instances must be >= 200 (the issue's campaign size)")
    rng = np.random.default_rng(args.seed)
    ratios = {p: [] for p in POLICIES}
    uncertified, infeasible, rows = 0, 0, []
    for i in range(n):
        K = int(rng.integers(1, K_MAX + 1))
        inst = random_instance(K, rng)
        ref = solve_balance(inst, "milp", phi_steps=PHI_STEPS)
        uncertified += not ref.info["certified"]
        row = {"K": K, "milp": ref.served}
        for p in POLICIES:
            s = solve_balance(inst, p, **({"phi_steps": PHI_STEPS} if p in ("balance", "greedy") else {}))
            infeasible += not feasible(inst, s).ok
            ratios[p].append(s.served / ref.served if ref.served else 1.0)
            row[p] = s.served
        rows.append(row)
        if (i + 1) % 50 == 0:
            print(f"{i + 1}/{n}: " + ", ".join(f"{p} worst {min(r):.3f}" for p, r in ratios.items()), flush=True)
    summary = {}
    for p, r in ratios.items():
        r = np.asarray(r)
        summary[p] = {"proven_fraction": POLICIES[p], "worst_ratio": float(r.min()), "mean_ratio": float(r.mean()),
                      "misses": int((r < 1 - 1e-12).sum()), "instances": int(r.size)}
    doc = {"benchmark": "balance_ratio", "schema": "spinlib-balance-ratio/1", "quick": bool(args.quick),
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"), "seed": args.seed,
           "instances": n, "K_range": [1, K_MAX], "phi_steps": PHI_STEPS,
           "generator": "spinlib.balance.random_instance (default parameters)",
           "milp_uncertified": uncertified, "infeasible_schedules": infeasible, "policies": summary, "rows": rows}
    out = Path(args.out) if args.out else default_out("balance_ratio", args.quick)
    atomic_write_text(out, json.dumps(doc, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    print("wrote", out)
    if infeasible or uncertified or summary["balance"]["worst_ratio"] < POLICIES["balance"]:
        print("balance_ratio.py: error: a schedule was infeasible, a MILP uncertified or the guarantee missed",
              file=sys.stderr)
        raise SystemExit(1)
    return doc


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="200 instances, written under results/smoke/")
    ap.add_argument("--instances", type=int, default=None, help="number of random instances (default 400)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None)
    main(ap.parse_args())
