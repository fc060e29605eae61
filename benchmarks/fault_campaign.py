"""The long fault-injection campaign of every cache and record kind: the properties of
``tests/test_faults.py`` with many more generated faults each.

    SPINLIB_FAULT_EXAMPLES=500 .venv/bin/python benchmarks/fault_campaign.py

Writes ``results/benchmarks/fault_campaign.json``: faults tried per kind, what followed (refused,
recomputed, unchanged content, loaded), failing properties (the first falsifying example of each, as
hypothesis reports it) and the run time. ``benchmarks/speed_table.py`` puts its line in the README.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
os.environ.setdefault("SPINLIB_FAULT_EXAMPLES", "500")

import pytest  # noqa: E402

import test_faults as F  # noqa: E402

from bench_common import source_state  # noqa: E402
from spinlib.cache import atomic_write_text  # noqa: E402
from spinlib.paths import RESULTS  # noqa: E402


class _Plugin:
    """Collects each property's outcome from a pytest run of tests/test_faults.py."""

    def __init__(self):
        self.failures = {}

    def pytest_runtest_logreport(self, report):
        if report.when == "call" and report.failed:
            self.failures[report.nodeid.split("::")[-1]] = str(report.longrepr)[-2000:]


def main() -> dict:
    plugin = _Plugin()
    t = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        rc = pytest.main(["-q", "-p", "no:cacheprovider", f"--basetemp={tmp}/t", "-m", "",
                          str(Path(F.__file__))], plugins=[plugin])
    out = {**source_state(), "examples_per_property": F.EXAMPLES, "cases": dict(sorted(F.CASES.items())),
           "outcomes": {k: dict(sorted(v.items())) for k, v in sorted(F.OUTCOMES.items())},
           "cases_total": sum(F.CASES.values()), "failures": plugin.failures,
           "failing_properties": len(plugin.failures), "pytest_exit_code": int(rc),
           "time_s": round(time.perf_counter() - t, 1)}
    print(json.dumps(out, indent=2))
    atomic_write_text(RESULTS / "benchmarks" / "fault_campaign.json", json.dumps(out, indent=1) + "\n")
    return out


if __name__ == "__main__":
    raise SystemExit(1 if main()["failing_properties"] else 0)
