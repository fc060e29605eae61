"""BALANCE solve time vs number of requesting users: the exact algorithm (K = 10..10,000) and the MILP.

    .venv/bin/python benchmarks/balance_scaling.py [--quick] [--allow-busy] [--threads N] [--wait-quiet S]

Writes results/benchmarks/balance_scaling.json and results/figures/bench_balance_scaling.{pdf,png}
(with ``--quick``: under results/smoke/). Conventions of ``benchmarks/bench_common.py``: medians with
quartiles of repeated runs (:func:`spinlib.timing.measure`), repeats from a time budget. Both solvers
work on the same share grid (``phi_steps`` = 20): the algorithm over all shares at once, the MILP one
HiGHS solve per share (the time is the whole enumeration). The MILP ladder stops once one
enumeration passes ``MILP_STOP_S`` (about a minute); the whole run stays near five minutes.
Instances: ``spinlib.balance.random_instance(K, seed=K)`` (default parameters).
"""
from __future__ import annotations

import argparse

from bench_common import Run, add_arguments, main_guard, plot_scaling, timed, timing_record
from spinlib.balance import random_instance, solve_balance

PHI_STEPS, MILP_STOP_S, MILP_TIME_LIMIT_S = 20, 30.0, 120.0


def main(args) -> dict:
    quick = args.quick
    run = Run("balance_scaling", args, what="the BALANCE scaling benchmark")
    algo_sizes = [10, 100, 1000] if quick else [10, 30, 100, 300, 1000, 3000, 10000]
    milp_sizes = [10, 40] if quick else [10, 20, 40, 100, 200, 300]
    budget = 0.5 if quick else 3.0
    rows = []
    for K in algo_sizes:
        inst = random_instance(K, seed=K)
        t = timed(lambda: solve_balance(inst, "balance", phi_steps=PHI_STEPS), budget)
        s = solve_balance(inst, "balance", phi_steps=PHI_STEPS)
        rows.append({"K": K, "solver": "balance", "served": s.served,
                     "membership_tests": s.info["membership_tests"], **timing_record(t)})
        print(f"balance K={K}: {t.median_s * 1e3:.3g} ms (n={t.n}), served {s.served}", flush=True)
    milp_rows, stopped = [], None
    for K in milp_sizes:
        if stopped is not None:
            milp_rows.append({"K": K, "solver": "milp", "not_run": stopped})
            continue
        inst = random_instance(K, seed=K)
        t = timed(lambda: solve_balance(inst, "milp", phi_steps=PHI_STEPS, time_limit_s=MILP_TIME_LIMIT_S), budget,
                  lo=1)
        m = solve_balance(inst, "milp", phi_steps=PHI_STEPS, time_limit_s=MILP_TIME_LIMIT_S) if t.median_s < 5 else None
        served = m.served if m is not None else None
        ours = solve_balance(inst, "balance", phi_steps=PHI_STEPS).served
        milp_rows.append({"K": K, "solver": "milp", "served": served, "balance_served": ours, **timing_record(t)})
        print(f"milp K={K}: {t.median_s:.3g} s (n={t.n}), served {served} (balance {ours})", flush=True)
        if t.median_s > MILP_STOP_S:
            stopped = f"the MILP enumeration took {t.median_s:.0f} s at K = {K} (> {MILP_STOP_S:g} s)"
    out = run.finish({"phi_steps": PHI_STEPS, "generator": "spinlib.balance.random_instance(K, seed=K)",
                      "milp_stop_s": MILP_STOP_S, "balance": rows, "milp": milp_rows})
    plot(out, run.out.parent / "figures" if quick else None)
    return out


def plot(out, directory=None):
    plot_scaling([(label, [(r["K"], r) for r in rows if "median_s" in r])
                  for label, rows in (("BALANCE (ours, exact on the grid)", out["balance"]),
                                      ("MILP (HiGHS, phi enumerated)", out["milp"]))],
                 "bench_balance_scaling", "requesting users K", directory)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(p)
    main_guard(lambda: main(p.parse_args()))
