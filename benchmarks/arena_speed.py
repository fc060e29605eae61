"""Speed of the online arena: 1,000 rounds x 10 controllers x 100 users.

    .venv/bin/python benchmarks/arena_speed.py [--quick] [--allow-busy] [--threads N] [--wait-quiet S]

One arena run (:func:`spinlib.online.run_arena`) of ten controllers on i.i.d. synthetic streams
with an exponential delay and Rayleigh fading, with and without the oracles (best fixed length
in hindsight per user: ``L_max`` extra fixed-length runs, and the per-round clairvoyant). Median
and quartiles over repeats (``benchmarks/bench_common.py``); the goal is seconds, not minutes.
Writes results/benchmarks/arena_speed.json (``--quick``: 100 rounds, under results/smoke/).
"""
from __future__ import annotations

import argparse

import numpy as np

from bench_common import Run, add_arguments, main_guard, timed, timing_record
from spinlib.emulator import Fading
from spinlib.online import ArenaConfig, Delay, Stream, run_arena

CONTROLLERS = ["ucb-specstop", "naive-ucb", "specdec++", "hf-heuristic", "hf-confidence", "gelato", "lyapunov-only",
               "entropy-only", "fixed:L=2", "fixed:L=4"]


def main(args) -> dict:
    run = Run("arena_speed", args, what="the arena benchmark")
    rounds, users = (100, 100) if args.quick else (1000, 100)
    streams = [Stream.synthetic(a, 20_000, np.random.default_rng(i)) for i, a in enumerate((0.6, 0.75, 0.9))]
    cfg = ArenaConfig(rounds=rounds, users=users, L_max=8, delay=Delay("exponential", 0.1), fading=Fading("rayleigh"),
                      energy_budget_j=0.5)
    rows = []
    for oracles in (False, True):
        t = timed(lambda: run_arena(CONTROLLERS, streams, cfg, seed=0, oracles=oracles), 5.0 if args.quick else 30.0,
                  lo=3, hi=7)
        rows.append(timing_record(t, rounds=rounds, users=users, controllers=len(CONTROLLERS), oracles=oracles,
                                  controller_user_rounds_per_s=len(CONTROLLERS) * users * rounds / t.median_s))
        print(f"{rounds} rounds x {len(CONTROLLERS)} controllers x {users} users, oracles={oracles}: "
              f"{t.median_s:.2f} s [{t.q25_s:.2f}, {t.q75_s:.2f}] (n={t.n})", flush=True)
    return run.finish({"rows": rows})


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(ap)
    main_guard(lambda: main(ap.parse_args()))
