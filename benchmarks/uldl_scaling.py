"""Solve time of the UL/DL policies vs the number of devices (notebook 06's base cell), and the
certificate of ``uldl-optimal`` at its default budget.

    .venv/bin/python benchmarks/uldl_scaling.py [--quick] [--allow-busy] [--threads N] [--wait-quiet S]

Per K: the median solve time (quartiles, repeats from a time budget; ``benchmarks/bench_common.py``)
of ``uldl-optimal`` and ``all-dl`` (and of the joint reference ``uldl-exhaustive`` at K <= 4), and
``uldl-optimal``'s certificate at its default node budget: gap, status, nodes, devices in UL and
what the branch-and-bound added to the heuristic's goodput (these are results, the same on every
machine, not timings). The downlink power split (one 1-D root) against its CVXPY reference runs
interleaved (ratio with a 95 % bootstrap interval; the CVXPY compile time recorded apart).
Refuses to run on a busy machine unless ``--allow-busy``.

Writes results/benchmarks/uldl_scaling.json (``--quick``: small sizes, under results/smoke/).
"""
from __future__ import annotations

import argparse

import numpy as np

from bench_common import Run, add_arguments, main_guard, ratio, ratio_record, timed, timing_record
from spinlib.control import solve
from spinlib.control.power import min_max_downlink_power
from spinlib.control.reference import downlink_power_cvxpy
from spinlib.experiments import make_uldl_scenario

BASE = dict(preset="qwen-7b-l4", payload_mode="topk", top_k=1024, bits_per_prob=16, dl_power_dbm=30.0)


def main(args) -> dict:
    quick = args.quick
    run = Run("uldl_scaling", args, what="the UL/DL solver benchmark")
    budget = 1.0 if quick else 6.0  # seconds of measurement per item beyond its warm-up
    rows = []
    for K in ([4, 8, 16] if quick else [4, 8, 16, 32, 100, 300, 1000]):
        s = make_uldl_scenario("num_users", K, K, **BASE)
        a = solve(s, "uldl-optimal", L_max=12)
        row = {"K": K,
               # the certificate at the default budget (1,000 nodes): reproducible, not a timing
               "certified_gap": a.info["gap"], "status": a.info["status"], "bnb_nodes": a.info["bnb_nodes"],
               "heuristic_gain": a.goodput_tokens_per_s / a.info["heuristic_goodput"] - 1, "m_ul": a.info["m_ul"],
               "solve_s": {"uldl-optimal": timing_record(timed(lambda: solve(s, "uldl-optimal", L_max=12), budget,
                                                               hi=9)),
                           "all-dl": timing_record(timed(lambda: solve(s, "all-dl", L_max=12), budget))}}
        if K <= 4:  # the joint reference: 2^K (L_max + 1)^K points
            row["solve_s"]["uldl-exhaustive (L_max 8)"] = timing_record(
                timed(lambda: solve(s, "uldl-exhaustive", L_max=8), budget, hi=9))
        rows.append(row)
        print(f"K={K}: gap {row['certified_gap']:.2g} ({row['status']}, {row['bnb_nodes']} nodes), uldl-optimal "
              f"{row['solve_s']['uldl-optimal']['median_s']:.3g} s", flush=True)
    power = []
    rng = np.random.default_rng(0)
    for K in ([10, 100] if quick else [10, 100, 1000, 10000]):
        s = make_uldl_scenario("num_users", K, K, **BASE)
        d = rng.uniform(1e3, 1e5, K)
        c = np.zeros(K)
        row = {"K": K}
        if K <= 1000:  # the first call compiles the CVXPY problem (recorded apart), the timed ones re-solve it
            info = downlink_power_cvxpy(s, d, c, return_info=True)[2]
            row["cvxpy_compile_s"], row["cvxpy_solver"] = info.compile_s, info.solver
            r = ratio(lambda: min_max_downlink_power(s, d, c), lambda: downlink_power_cvxpy(s, d, c), budget, hi=15)
            row["root_vs_cvxpy"] = ratio_record(r, "1-D root", "CVXPY")
        else:
            row["root_s"] = timing_record(timed(lambda: min_max_downlink_power(s, d, c), budget))
        power.append(row)
        print(f"DL power K={K}: done", flush=True)
    return run.finish({"budget_s": budget, "policies": rows, "dl_power": power})


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(ap)
    main_guard(lambda: main(ap.parse_args()))
