"""Speed of the testbed's fast mode: users x rounds per second (issue 6 asks for 1,000 x 1,000 < 1 min).

Usage: ``.venv/bin/python benchmarks/emulator_speed.py [--quick]``; writes
``results/benchmarks/emulator_speed.json``.
"""
from __future__ import annotations

import argparse
import platform
import time

from spinlib.cache import write_summary
from spinlib.control import solve
from spinlib.emulator import EmulatorConfig, Fading, emulate
from spinlib.paths import RESULTS
from spinlib.presets import random_scenario


def main(quick: bool) -> dict:
    rows = []
    for K, R in ([(100, 1000), (1000, 1000)] if quick else [(100, 1000), (1000, 1000), (3000, 1000), (1000, 10000)]):
        s = random_scenario(K, seed=K)
        allocs = {"sync": solve(s, "heterogeneous-sync"), "async": solve(s, "heterogeneous-async")}
        for name, a, cfg in [("sync, static", allocs["sync"], EmulatorConfig(rounds=R)),
                             ("sync, Markov", allocs["sync"], EmulatorConfig(rounds=R, fading=Fading("markov"))),
                             ("async, batching server", allocs["async"], EmulatorConfig(rounds=R)),
                             ("async, ideal servers", allocs["async"], EmulatorConfig(rounds=R, server="ideal"))]:
            t0 = time.perf_counter()
            emulate(s, a, cfg)
            dt = time.perf_counter() - t0
            rows.append({"K": K, "rounds": R, "case": name, "seconds": dt, "user_rounds_per_s": K * R / dt})
            print(rows[-1], flush=True)
    return {"machine": platform.processor() or platform.machine(), "rows": rows}


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    print("wrote", write_summary("emulator_speed", main(ap.parse_args().quick), RESULTS / "benchmarks"))
