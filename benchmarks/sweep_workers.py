"""Sweep time with 1 vs 2 workers: notebook 03's largest sweep (num_users, every paper-1 policy).

    .venv/bin/python benchmarks/sweep_workers.py [--quick] [--scheduler tcp://host:8786]

Runs ``spinlib.experiments.sweep`` on the same points with ``n_jobs = 1`` (in process) and
``n_jobs = 2`` (joblib/loky), optionally on a Dask cluster too, and checks that the records are
byte-identical. Wall-clock medians over ``repeats`` interleaved runs (1, 2, 1, 2, ...), this
machine. Writes ``results/benchmarks/sweep_workers.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np

from spinlib.cache import atomic_write_text, json_default
from spinlib.experiments import make_scenario, paper1_specs, sweep
from spinlib.paths import RESULTS


def main(quick: bool, scheduler: str | None, repeats: int) -> dict:
    values = [2, 5, 10] if quick else [2, 5, 10, 20, 50, 100]
    n_seeds = 2 if quick else 20
    kw = dict(n_seeds=n_seeds, seed=0, specs=paper1_specs(), num_users=10, heterogeneity=0.5, progress=False)
    times = {"n_jobs=1": [], "n_jobs=2": []}
    outputs = {}
    sweep(make_scenario, "num_users", values[:1], n_jobs=2, **{**kw, "n_seeds": 1})  # start the loky pool
    for _ in range(repeats):
        for label, n_jobs in (("n_jobs=1", 1), ("n_jobs=2", 2)):
            t = time.perf_counter()
            outputs[label] = sweep(make_scenario, "num_users", values, n_jobs=n_jobs, **kw)
            times[label].append(time.perf_counter() - t)
    if scheduler:
        times["dask"] = []
        for _ in range(repeats):
            t = time.perf_counter()
            outputs["dask"] = sweep(make_scenario, "num_users", values, scheduler=scheduler, **kw)
            times["dask"].append(time.perf_counter() - t)
    ref = json.dumps(outputs["n_jobs=1"])
    identical = {k: json.dumps(v) == ref for k, v in outputs.items()}
    assert all(identical.values()), identical
    med = {k: float(np.median(v)) for k, v in times.items()}
    return {"sweep": {"knob": "num_users", "values": values, "n_seeds": n_seeds, "points": len(values) * n_seeds,
                      "policies": len(kw["specs"])},
            "timings_s": {k: {"median": med[k], "runs": v} for k, v in times.items()},
            "speedup_2_workers_median": med["n_jobs=1"] / med["n_jobs=2"],
            "records_identical": identical, "cpu_count": os.cpu_count(), "machine": platform.platform()}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--scheduler", default=None)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    out = main(args.quick, args.scheduler, args.repeats)
    path = RESULTS / "benchmarks" / "sweep_workers.json"
    atomic_write_text(path, json.dumps(out, indent=2, default=json_default) + "\n")
    print(json.dumps({k: out[k] for k in ("sweep", "speedup_2_workers_median")}, indent=1))
    print({k: round(v["median"], 2) for k, v in out["timings_s"].items()}, "->", path)
