"""Solve time vs number of users for every solver, and our splits/solvers against their references.

    .venv/bin/python benchmarks/solver_scaling.py [--quick] [--allow-busy] [--threads N] [--wait-quiet S]

Writes results/benchmarks/solver_scaling.json and results/figures/bench_solver_scaling.{pdf,png}
(with ``--quick``: under results/smoke/). Conventions in ``benchmarks/bench_common.py``: absolute
times are medians with quartiles; each comparison runs ours and the reference interleaved in one
process and reports ``time(reference) / time(ours)`` with a 95 % bootstrap interval over the pairs
(a win only when the interval lies above 1). Refuses to run on a busy machine unless ``--allow-busy``.

Comparisons, per K (Llama-2 preset, T_acc = 50 ms, L = 3 for every user):

* synchronous split (:func:`min_makespan_bandwidth`) vs :func:`min_makespan_cvxpy` (a bisection
  over CVXPY feasibility problems, as a user of a generic solver would write it; K <= 100: at
  K = 1,000 one solve takes minutes);
* asynchronous split (:func:`async_optimal_bandwidth`) vs :func:`async_bandwidth_cvxpy` (one
  convex program; K <= 1,000);
* at K = 2..4, L_max = 8: ``heterogeneous-sync`` / ``-async`` vs exhaustive search.

The CVXPY references' first call compiles the parametrised problem: its compile time is recorded
apart (``cvxpy_compile_s``) and that call is the warm-up, not a sample.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from bench_common import Run, add_arguments, main_guard, plot_scaling, ratio, ratio_record, timed, timing_record
from spinlib import random_scenario, tokens_table
from spinlib.control import solve
from spinlib.control.bandwidth import async_optimal_bandwidth, min_makespan_bandwidth
from spinlib.control.exhaustive import solve_exhaustive
from spinlib.control.reference import ReferenceSolverError, async_bandwidth_cvxpy, min_makespan_cvxpy

PRESET, T_ACC, L_FIXED, L_MAX_EX = "llama2-7b-l4", 0.05, 3, 8
SYNC_CVXPY_MAX_K, ASYNC_CVXPY_MAX_K = 100, 1000
POLICIES = ("homogeneous", "heterogeneous-sync", "heterogeneous-async")


def main(args) -> dict:
    quick = args.quick
    run = Run("solver_scaling", args, what="the solver benchmark")
    sizes = [10, 100, 1000] if quick else [10, 100, 1000, 3000, 10000]
    # seconds of measurement per item (beyond its warm-up); at least 3 runs / pairs whatever it costs
    budget = {"time": 0.5, "ratio": 1.0} if quick else {"time": 4.0, "ratio": 6.0}
    rows = []
    for K in sizes:
        s = random_scenario(K, seed=K, preset=PRESET, access_latency_s=T_ACC)
        L = np.full(K, L_FIXED)
        N = tokens_table(s, L_FIXED)[:, L_FIXED]
        times = {pol: timed(lambda: solve(s, pol), budget["time"]) for pol in POLICIES}
        times["sync_split"] = timed(lambda: min_makespan_bandwidth(s, L), budget["time"])
        times["async_split"] = timed(lambda: async_optimal_bandwidth(s, L, N), budget["time"])
        row = {"K": K, "times": {k: timing_record(t) for k, t in times.items()},
               "cvxpy_compile_s": {}, "comparisons": {}, "not_run": {}}
        if K <= SYNC_CVXPY_MAX_K and not (quick and K > 10):
            ref = lambda: min_makespan_cvxpy(s, L, rel_tol=1e-7)  # noqa: E731
            try:
                t0 = time.perf_counter()  # the first call compiles (recorded apart) and is the warm-up
                info = min_makespan_cvxpy(s, L, rel_tol=1e-7, return_info=True)[1]
                probe = time.perf_counter() - t0 - info.compile_s
                row["cvxpy_compile_s"]["sync_split_cvxpy"] = info.compile_s
                r = ratio(lambda: min_makespan_bandwidth(s, L), ref, budget["ratio"], probe_b=probe)
                row["comparisons"]["sync_split_vs_cvxpy"] = ratio_record(r, "sync_split", "min_makespan_cvxpy")
            except ReferenceSolverError as e:  # recorded, not timed: an inaccurate reference is no reference
                statuses = sorted({st for _, st in e.attempts})
                row["not_run"]["sync_split_vs_cvxpy"] = (f"the CVXPY reference failed: no solver reached 'optimal' on "
                                                         f"{e.problem} ({', '.join(statuses)})")
        else:
            row["not_run"]["sync_split_vs_cvxpy"] = (
                "quick run" if K <= SYNC_CVXPY_MAX_K else
                f"K > {SYNC_CVXPY_MAX_K}: the CVXPY bisection takes minutes per solve")
        if K <= ASYNC_CVXPY_MAX_K:
            t0 = time.perf_counter()
            info = async_bandwidth_cvxpy(s, L, N, return_info=True)[2]
            probe = time.perf_counter() - t0 - info.compile_s
            row["cvxpy_compile_s"]["async_split_cvxpy"] = info.compile_s
            r = ratio(lambda: async_optimal_bandwidth(s, L, N), lambda: async_bandwidth_cvxpy(s, L, N),
                      budget["ratio"], probe_b=probe)
            row["comparisons"]["async_split_vs_cvxpy"] = ratio_record(r, "async_split", "async_bandwidth_cvxpy")
        else:
            row["not_run"]["async_split_vs_cvxpy"] = f"K > {ASYNC_CVXPY_MAX_K}: the CVXPY program grows too slow"
        rows.append(row)
        print(K, {k: f"{v['median_s'] * 1e3:.3g} ms (n={v['n']})" for k, v in row["times"].items()},
              {k: f"{v['ratio']:.3g}x [{v['ci_low']:.3g}, {v['ci_high']:.3g}] n={v['pairs']}"
               for k, v in row["comparisons"].items()}, flush=True)
    ex = []
    for K in ((2, 3) if quick else (2, 3, 4)):
        s = random_scenario(K, seed=K)
        row = {"K": K, "L_max": L_MAX_EX, "comparisons": {}}
        for model in ("sync", "async"):
            pol = f"heterogeneous-{model}"
            r = ratio(lambda: solve(s, pol, L_max=L_MAX_EX), lambda: solve_exhaustive(s, L_MAX_EX, model),
                      budget["ratio"])
            row["comparisons"][f"{pol}_vs_exhaustive"] = ratio_record(r, pol, f"exhaustive_{model}")
        ex.append(row)
        print(K, {k: f"{v['ratio']:.3g}x [{v['ci_low']:.3g}, {v['ci_high']:.3g}] n={v['pairs']}"
                  for k, v in row["comparisons"].items()}, flush=True)
    out = run.finish({"preset": PRESET, "access_latency_s": T_ACC, "L": L_FIXED,
                      "budget_s": budget, "scaling": rows, "exhaustive": ex})
    plot(out, run.out.parent / "figures" if quick else None)
    return out


def plot(out, directory=None):
    rows = out["scaling"]
    series = [(k, lambda r, k=k: r["times"].get(k)) for k in (*POLICIES, "sync_split", "async_split")]
    series += [(f"{k} (CVXPY)", lambda r, k=k: r["comparisons"].get(f"{k}_vs_cvxpy", {}).get("b"))
               for k in ("sync_split", "async_split")]
    plot_scaling([(label, [(r["K"], get(r)) for r in rows if get(r)]) for label, get in series],
                 "bench_solver_scaling", "number of users K", directory, legend_size=7)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(p)
    main_guard(lambda: main(p.parse_args()))
