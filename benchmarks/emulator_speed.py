"""Speed of the testbed's fast mode, and its cost against the closed-form analysis of the same allocation.

    .venv/bin/python benchmarks/emulator_speed.py [--quick] [--allow-busy] [--threads N] [--wait-quiet S]

For each size (users x rounds) and case (sync static / Markov fading, async with one batching
server / ideal servers) the emulation (:func:`spinlib.emulator.emulate`) and the closed-form
evaluation of the same allocation (:func:`spinlib.rounds.evaluate`) run interleaved; the JSON
records the emulation's median time with quartiles, users x rounds per second at the median, and
the ratio ``time(emulate) / time(evaluate)`` (``emulate_vs_evaluate``: a = evaluate, b = emulate),
what an emulation costs in closed-form evaluations, with a 95 % bootstrap interval over the pairs
(``benchmarks/bench_common.py``). (The emulation
itself calls ``evaluate`` once, for its predicted goodput.) The goal is 1,000 x 1,000 in
under a minute. Refuses to run on a busy machine unless ``--allow-busy``.

Writes results/benchmarks/emulator_speed.json (``--quick``: two sizes, under results/smoke/).
~4 min on 2 quiet cores.
"""
from __future__ import annotations

import argparse

from bench_common import Run, add_arguments, main_guard, ratio, ratio_record
from spinlib.control import solve
from spinlib.emulator import EmulatorConfig, Fading, emulate
from spinlib.presets import random_scenario
from spinlib.rounds import evaluate


def main(args) -> dict:
    quick = args.quick
    run = Run("emulator_speed", args, what="the emulator benchmark")
    budget = 1.0 if quick else 10.0  # seconds of measurement per row beyond its warm-up (>= 3 pairs)
    sizes = [(100, 1000), (1000, 1000)] if quick else [(100, 1000), (1000, 1000), (3000, 1000), (1000, 10000)]
    rows = []
    for K, R in sizes:
        s = random_scenario(K, seed=K)
        allocs = {"sync": solve(s, "heterogeneous-sync"), "async": solve(s, "heterogeneous-async")}
        for name, a, cfg in [("sync, static", allocs["sync"], EmulatorConfig(rounds=R)),
                             ("sync, Markov", allocs["sync"], EmulatorConfig(rounds=R, fading=Fading("markov"))),
                             ("async, batching server", allocs["async"], EmulatorConfig(rounds=R)),
                             ("async, ideal servers", allocs["async"], EmulatorConfig(rounds=R, server="ideal"))]:
            r = ratio(lambda: evaluate(s, a), lambda: emulate(s, a, cfg), budget, hi=15)
            rec = ratio_record(r, "evaluate", "emulate")
            rows.append({"K": K, "rounds": R, "case": name, "user_rounds_per_s": K * R / r.b.median_s,
                         "emulate_vs_evaluate": rec})
            print(f"K={K} R={R} {name}: emulate {r.b.median_s:.3g} s [{r.b.q25_s:.3g}, {r.b.q75_s:.3g}], "
                  f"{r.ratio:.3g}x evaluate [{r.ci_low:.3g}, {r.ci_high:.3g}] (n={r.a.n})", flush=True)
    return run.finish({"budget_s": budget, "rows": rows})


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(ap)
    main_guard(lambda: main(ap.parse_args()))
