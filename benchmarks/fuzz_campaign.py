"""The long fuzz campaign of the CLI boundary: the properties of ``tests/test_fuzz.py``
with many more examples each.

    SPINLIB_FUZZ_EXAMPLES=2000 .venv/bin/python benchmarks/fuzz_campaign.py

Writes ``results/benchmarks/fuzz_campaign.json``: cases tried per property, failures (the first
falsifying example of each failing property, as hypothesis reports it) and the run time.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
os.environ.setdefault("SPINLIB_FUZZ_EXAMPLES", "2000")

import test_fuzz as F  # noqa: E402

from bench_common import source_state  # noqa: E402
from spinlib.cache import atomic_write_text  # noqa: E402
from spinlib.paths import RESULTS  # noqa: E402


# every hypothesis property of tests/test_fuzz.py (solve, evaluate, random bytes, BALANCE, the arena)
PROPERTIES = [n for n in dir(F) if n.startswith("test_") and hasattr(getattr(F, n), "hypothesis")]


def main() -> dict:
    failures = {}
    t = time.perf_counter()
    for name in PROPERTIES:
        try:
            getattr(F, name)()
        except Exception as e:  # noqa: BLE001 -- a falsified property (AssertionError) or a broken/flaky one
            failures[name] = f"{type(e).__name__}: {str(e)[:2000]}"
        print(name, "done", dict(F.CASES), flush=True)
    out = {**source_state(), "examples_per_property": F.EXAMPLES, "cases": dict(F.CASES), "cases_total": sum(F.CASES.values()),
           "failures": failures, "failing_properties": len(failures), "time_s": round(time.perf_counter() - t, 1)}
    print(json.dumps(out, indent=2))
    atomic_write_text(RESULTS / "benchmarks" / "fuzz_campaign.json", json.dumps(out, indent=1) + "\n")
    return out


if __name__ == "__main__":
    raise SystemExit(1 if main()["failing_properties"] else 0)
