"""Run times recorded by run_all.sh and the README's run-time table generated from them."""
import json
import os
import subprocess
import sys

import pytest

from spinlib.paths import ROOT
from spinlib.runtimes import BEGIN, END, readme_block, record_notebooks, record_tests, replace_block
from spinlib.validation import ValidationError


def test_notebook_times_merge_and_render(tmp_path):
    out = tmp_path / "timings" / "notebooks.json"
    record_notebooks(out, False, False, "empty", {"01_a": 13, "02_b": 95})
    record_notebooks(out, False, True, "reused", {"02_b": 40})  # a later --only run replaces its entry
    data = json.loads(out.read_text())["notebooks"]
    assert data["01_a"]["wall_s"] == 13 and data["01_a"]["results_cache"] == "empty"
    assert data["02_b"] == {**data["02_b"], "wall_s": 40, "results_cache": "reused", "recompute": True}
    block = readme_block(out, tmp_path / "missing.json")
    assert "| `01_a` | 13 s | empty (as in a fresh clone) |" in block
    assert "| `02_b` | 40 s | reused from an earlier run, --recompute |" in block
    assert "| all | 53 s |" in block
    with pytest.raises(ValidationError, match="cache"):
        record_notebooks(out, False, False, "warm", {"01_a": 1})


def test_test_suite_record_from_junit(tmp_path):
    junit = tmp_path / "j.xml"
    junit.write_text('<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="10" failures="1" '
                     'errors="0" skipped="2" time="5.0"></testsuite></testsuites>')
    out = record_tests(junit, 125, 1, "default", tmp_path / "t.json")
    rec = json.loads(out.read_text())["tiers"]["default"]
    assert (rec["tests"], rec["passed"], rec["failures"], rec["skipped"], rec["wall_s"], rec["exit_code"]) == \
        (10, 7, 1, 2, 125, 1)
    block = readme_block(tmp_path / "none.json", out)
    assert "`bash run_all.sh test` (every tier but slow), last run: 10 tests (7 passed, 1 failed, 0 errors, 2 skipped) " \
           "in 2.1 min" in block
    assert "--all" not in block  # no record of the whole suite yet
    record_tests(junit, 3000, 0, "all", out)  # the second tier is merged, the first kept
    tiers = json.loads(out.read_text())["tiers"]
    assert tiers["default"]["wall_s"] == 125 and tiers["all"]["wall_s"] == 3000
    assert "`bash run_all.sh test --all` (every tier), last run: 10 tests" in readme_block(tmp_path / "none.json", out)
    with pytest.raises(ValidationError, match="tier must be one of default, all"):
        record_tests(junit, 1, 0, "fast", out)
    # per-test durations: summed by module and the slowest tests kept with the run; the README names the
    # largest modules first (not in the file's order, which is by name: tests.b is the larger here)
    junit.write_text('<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="3" failures="0" errors="0" '
                     'skipped="0"><testcase classname="tests.a" name="t1" time="2.0"/><testcase classname="tests.b" '
                     'name="t2" time="9.5"/><testcase classname="tests.a" name="t3" time="4.0"/></testsuite></testsuites>')
    rec = json.loads(record_tests(junit, 12, 0, "default", out).read_text())["tiers"]["default"]
    assert rec["by_module"] == {"tests.a": 6.0, "tests.b": 9.5}
    assert rec["slowest"] == [["tests.b::t2", 9.5], ["tests.a::t3", 4.0], ["tests.a::t1", 2.0]]
    assert "Longest modules: `tests.b` 10 s, `tests.a` 6 s; longest test: `tests.b::t2` 10 s." in \
        readme_block(tmp_path / "none.json", out)
    junit.write_text("not xml")
    with pytest.raises(ValidationError, match="JUnit"):
        record_tests(junit, 1, 0, "default", tmp_path / "t.json")


def test_a_plain_test_run_records_nothing(tmp_path):
    # run_all.sh test without --record changes no tracked file: the committed record is written on request only
    record = ROOT / "results" / "timings" / "test_suite.json"
    before = record.read_bytes() if record.exists() else None
    r = subprocess.run(["bash", str(ROOT / "run_all.sh"), "test", "-q", "-p", "no:cacheprovider",
                        "tests/test_runtimes.py::test_replace_block_needs_its_markers"],
                       capture_output=True, text=True, cwd=ROOT, env={**os.environ, "SPINLIB_RUN_LOCK_HELD": "1"})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "1 passed" in r.stdout
    assert (record.read_bytes() if record.exists() else None) == before


def test_replace_block_needs_its_markers():
    assert replace_block(f"a\n{BEGIN}\nold\n{END}\nb", "new\n") == f"a\n{BEGIN}\nnew\n{END}\nb"
    with pytest.raises(ValidationError, match="markers"):
        replace_block("no markers", "x")


def test_readme_runtime_table_is_generated_from_the_records():
    r = subprocess.run([sys.executable, "-m", "spinlib.runtimes", "check"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


def test_bad_command_line_is_one_line():
    r = subprocess.run([sys.executable, "-m", "spinlib.runtimes", "frobnicate"], capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1
