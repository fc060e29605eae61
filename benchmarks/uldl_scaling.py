"""Solve time of the UL/DL policies vs the number of devices (notebook 06's base cell).

Usage: ``.venv/bin/python benchmarks/uldl_scaling.py [--quick]``; writes
``results/benchmarks/uldl_scaling.json``. Times in seconds, best of ``rep`` runs; for
``uldl-optimal`` also the certificate at its default budget (gap, status, nodes, devices in UL) and
what the branch-and-bound added to the heuristic's goodput.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from spinlib.cache import write_summary
from spinlib.control import solve
from spinlib.control.power import min_max_downlink_power
from spinlib.control.reference import downlink_power_cvxpy
from spinlib.experiments import make_uldl_scenario
from spinlib.paths import RESULTS

BASE = dict(preset="qwen-7b-l4", payload_mode="topk", top_k=1024, bits_per_prob=16, dl_power_dbm=30.0)


def best(fn, rep):
    ts = []
    for _ in range(rep):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def main(quick: bool) -> dict:
    rows = []
    for K in ([4, 8, 16, 32] if quick else [4, 8, 16, 32, 100, 300, 1000]):
        s = make_uldl_scenario("num_users", K, K, **BASE)
        t0 = time.perf_counter()
        a = solve(s, "uldl-optimal", L_max=12)
        t_first = time.perf_counter() - t0
        row = {"K": K, "uldl-optimal": min(t_first, best(lambda: solve(s, "uldl-optimal", L_max=12), 1)) if K <= 32
               else t_first, "all-dl": best(lambda: solve(s, "all-dl", L_max=12), 1),
               # the certificate of the default budget (1,000 nodes): reproducible, not a timing
               "certified_gap": a.info["gap"], "status": a.info["status"], "bnb_nodes": a.info["bnb_nodes"],
               "heuristic_gain": a.goodput_tokens_per_s / a.info["heuristic_goodput"] - 1,
               "m_ul": a.info["m_ul"]}
        if K <= 4:  # the joint reference: 2^K (L_max + 1)^K points
            row["uldl-exhaustive (L_max 8)"] = best(lambda: solve(s, "uldl-exhaustive", L_max=8), 1)
        rows.append(row)
        print(row, flush=True)
    power = []
    rng = np.random.default_rng(0)
    for K in (10, 100, 1000, 10000):
        s = make_uldl_scenario("num_users", K, K, **BASE)
        d = rng.uniform(1e3, 1e5, K)
        c = np.zeros(K)
        row = {"K": K, "dl_power_root_s": best(lambda: min_max_downlink_power(s, d, c), 5)}
        if K <= 1000:  # the first call compiles the CVXPY problem (recorded apart), the timed one re-solves it
            info = downlink_power_cvxpy(s, d, c, return_info=True)[2]
            row["dl_power_cvxpy_compile_s"], row["dl_power_cvxpy_solver"] = info.compile_s, info.solver
            row["dl_power_cvxpy_s"] = best(lambda: downlink_power_cvxpy(s, d, c), 1)
        power.append(row)
        print(row, flush=True)
    return {"policies": rows, "dl_power": power}


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    print("wrote", write_summary("uldl_scaling", main(ap.parse_args().quick), RESULTS / "benchmarks"))
