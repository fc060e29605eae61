"""Solve time vs number of users for every solver, against the CVXPY and exhaustive references.

    .venv/bin/python benchmarks/solver_scaling.py [--quick]

Writes results/benchmarks/solver_scaling.json and results/figures/bench_solver_scaling.{pdf,png}.
Times are the best of ``repeats`` runs (wall clock, this machine, one process). The CVXPY
references solve the *continuous* sub-problems only (bandwidth for fixed draft lengths): the
synchronous one by bisection over CVXPY feasibility problems (as a user of a generic solver
would), the asynchronous one as one convex program.
"""
from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np

from spinlib import random_scenario, tokens_table
from spinlib.cache import atomic_write_text
from spinlib.control import solve
from spinlib.control.bandwidth import async_optimal_bandwidth, min_makespan_bandwidth
from spinlib.control.exhaustive import solve_exhaustive
from spinlib.control.reference import async_bandwidth_cvxpy, min_makespan_cvxpy
from spinlib.paths import RESULTS


def best_time(fn, repeats):
    best = np.inf
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main(quick: bool) -> dict:
    sizes = [10, 100, 1000] if quick else [10, 100, 1000, 3000, 10000]
    rows = []
    for K in sizes:
        s = random_scenario(K, seed=K, preset="llama2-7b-l4", access_latency_s=0.05)
        L = np.full(K, 3)
        N = tokens_table(s, 3)[:, 3]
        rep = 5 if K <= 1000 else 2
        row = {"K": K}
        for pol in ("homogeneous", "heterogeneous-sync", "heterogeneous-async"):
            row[pol] = best_time(lambda: solve(s, pol), rep)
        row["sync_split"] = best_time(lambda: min_makespan_bandwidth(s, L), rep)
        row["async_split"] = best_time(lambda: async_optimal_bandwidth(s, L, N), rep)
        # CVXPY references: the first call compiles the problem (recorded apart), the timed calls
        # re-solve it; the bisection re-solves one feasibility problem ~20 times (K <= 100 only)
        if K <= 100:
            info = min_makespan_cvxpy(s, L, rel_tol=1e-7, return_info=True)[1]
            row["sync_split_cvxpy_compile"] = info.compile_s
            row["sync_split_cvxpy"] = best_time(lambda: min_makespan_cvxpy(s, L, rel_tol=1e-7), 1)
        if K <= 1000:
            row["async_split_cvxpy_compile"] = async_bandwidth_cvxpy(s, L, N, return_info=True)[2].compile_s
            row["async_split_cvxpy"] = best_time(lambda: async_bandwidth_cvxpy(s, L, N), 2)
        rows.append(row)
        print({k: (f"{v * 1e3:.1f} ms" if k != "K" else v) for k, v in row.items()}, flush=True)
    ex = []
    for K in (2, 3, 4):
        s = random_scenario(K, seed=K)
        ex.append({"K": K, "L_max": 8,
                   "exhaustive_sync": best_time(lambda: solve_exhaustive(s, 8, "sync"), 1),
                   "exhaustive_async": best_time(lambda: solve_exhaustive(s, 8, "async"), 1),
                   "heterogeneous-sync": best_time(lambda: solve(s, "heterogeneous-sync", L_max=8), 3),
                   "heterogeneous-async": best_time(lambda: solve(s, "heterogeneous-async", L_max=8), 3)})
        print(ex[-1], flush=True)
    out = {"machine": platform.platform(), "processor": platform.processor(), "scaling": rows, "exhaustive": ex}
    path = RESULTS / "benchmarks" / "solver_scaling.json"
    atomic_write_text(path, json.dumps(out, indent=2) + "\n")
    plot(out)
    return out


def plot(out):
    import matplotlib

    matplotlib.use("agg")
    import matplotlib.pyplot as plt

    from spinlib.plotting import save_figure, series_styles, set_style

    set_style()
    fig, ax = plt.subplots()
    rows = out["scaling"]
    for key, st in zip(["homogeneous", "heterogeneous-sync", "heterogeneous-async", "sync_split",
                        "async_split", "sync_split_cvxpy", "async_split_cvxpy"], series_styles()):
        pts = [(r["K"], r[key]) for r in rows if key in r]
        ax.plot(*zip(*pts), label=key, **st)
    ax.set(xscale="log", yscale="log", xlabel="number of users K", ylabel="solve time [s]")
    ax.legend(fontsize=7)
    save_figure(fig, "bench_solver_scaling")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    main(p.parse_args().quick)
