"""Run times of the last full run and of the test suite, recorded by ``run_all.sh`` (never typed by hand).

``run_all.sh`` writes the wall time of every notebook it ran to ``<results>/timings/notebooks.json``
(merged with earlier runs of other notebooks, each entry with the commit, whether the results
cache was empty at the start of the run and whether ``--recompute`` was given), and
``run_all.sh test --record [--all]`` writes the count and wall time of one test tier (``default``:
everything not marked slow; ``all``: every tier) to ``results/timings/test_suite.json``. A plain
``run_all.sh test`` records nothing, so a test run changes no tracked file. :func:`readme_block` renders both as the README's run-time
table, between ``<!-- runtimes:begin -->`` and ``<!-- runtimes:end -->``::

    python -m spinlib.runtimes readme    # regenerate the README block
    python -m spinlib.runtimes check     # exit 1 when the README block differs from the files

These are wall-clock measurements of this machine, not results: they live under ``timings/``.
"""
from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from .cache import atomic_write_text
from .validation import ValidationError

BEGIN, END = "<!-- runtimes:begin -->", "<!-- runtimes:end -->"


def _commit() -> str | None:
    from .paths import ROOT

    r = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    return r.stdout.strip() or None


def _load(path: Path) -> dict:
    if Path(path).is_symlink():  # read and then rewritten: a link would be followed by the read
        raise ValidationError(f"{path} is a symbolic link: a run-time record is read and rewritten, so it must be "
                              "a regular file (remove the link)")
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, ValueError) as e:
        raise ValidationError(f"{path}: not a readable run-time record ({type(e).__name__})") from None
    if not isinstance(data, dict):
        raise ValidationError(f"{path}: must be a JSON object")
    return data


def record_notebooks(path: Path, smoke: bool, recompute: bool, cache: str, walls: dict[str, int]) -> Path:
    """Merge the wall times ``{notebook: seconds}`` of one ``run_all.sh`` run into ``path``."""
    if cache not in ("empty", "reused"):
        raise ValidationError(f"cache must be 'empty' or 'reused', got {cache!r}")
    data = _load(path)
    entries = data.get("notebooks", {})
    commit = _commit()
    for name, wall in walls.items():
        entries[name] = {"wall_s": int(wall), "results_cache": cache, "recompute": bool(recompute),
                         "smoke": bool(smoke), "commit": commit}
    atomic_write_text(Path(path), json.dumps({"notebooks": dict(sorted(entries.items()))}, indent=1,
                                             sort_keys=True) + "\n")
    return Path(path)


TIERS = ("default", "all")
SLOWEST = 15  # the longest tests a record keeps


def record_tests(junit: Path, wall_s: int, exit_code: int, tier: str = "default", out: Path | None = None) -> Path:
    """One test tier's counts (from pytest's JUnit XML) and wall time, merged into ``results/timings/test_suite.json``.

    The file maps each tier (``default``: the README's test command; ``all``: every tier, slow
    included) to ``{tests, passed, failures, errors, skipped, wall_s, exit_code, commit, by_module,
    slowest}``: ``by_module`` the summed test time [s] of each test module (``tests.control.test_search``;
    the README names the largest), ``slowest`` the :data:`SLOWEST` longest tests ``[id, seconds]`` (pytest's
    ``--durations``, kept with the run).
    """
    from .paths import ROOT

    if tier not in TIERS:
        raise ValidationError(f"tier must be one of {', '.join(TIERS)}, got {tier!r}")
    out = Path(out or ROOT / "results" / "timings" / "test_suite.json")
    try:
        root = ET.parse(junit).getroot()
    except (OSError, ET.ParseError) as e:
        raise ValidationError(f"{junit}: not a pytest JUnit XML report ({type(e).__name__})") from None
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    count = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
    cases = [(c.get("classname", ""), c.get("name", ""), float(c.get("time", 0) or 0)) for c in root.iter("testcase")]
    by_module: dict = {}
    for mod, _, t in cases:
        by_module[mod] = by_module.get(mod, 0.0) + t
    slowest = sorted(cases, key=lambda c: -c[2])[:SLOWEST]
    rec = {**count, "passed": count["tests"] - count["failures"] - count["errors"] - count["skipped"],
           "wall_s": int(wall_s), "exit_code": int(exit_code), "commit": _commit(),
           "by_module": {m: round(t, 1) for m, t in by_module.items()},
           "slowest": [[f"{m}::{n}", round(t, 1)] for m, n, t in slowest]}
    tiers = _load(out).get("tiers", {}) if out.exists() else {}
    tiers = {t: r for t, r in tiers.items() if t in TIERS}
    tiers[tier] = rec
    atomic_write_text(out, json.dumps({"tiers": tiers}, indent=1, sort_keys=True) + "\n")
    return out


def _duration(s: float) -> str:
    return f"{s:.0f} s" if s < 90 else f"{s / 60:.1f} min"


def readme_block(notebooks_json: Path, tests_json: Path) -> str:
    """The README's run-time table (Markdown) from the two records."""
    nbs = _load(notebooks_json).get("notebooks", {})
    full = {n: e for n, e in nbs.items() if not e.get("smoke")}
    lines = ["| notebook | wall time, last full run | results cache at its start | commit |", "|---|---|---|---|"]
    for n, e in full.items():
        cache = "empty (as in a fresh clone)" if e["results_cache"] == "empty" else "reused from an earlier run"
        if e.get("recompute"):
            cache += ", --recompute"
        lines.append(f"| `{n}` | {_duration(e['wall_s'])} | {cache} | `{(e.get('commit') or '?')[:7]}` |")
    if full:
        lines.append(f"| all | {_duration(sum(e['wall_s'] for e in full.values()))} | | |")
    tiers = _load(tests_json).get("tiers", {})
    commands = {"default": "`bash run_all.sh test` (every tier but slow)", "all": "`bash run_all.sh test --all` (every tier)"}
    for tier in TIERS:
        t = tiers.get(tier)
        if not t:
            continue
        lines.append("")
        lines.append(f"{commands[tier]}, last run: {t['tests']} tests ({t['passed']} passed, {t['failures']} "
                     f"failed, {t['errors']} errors, {t['skipped']} skipped) in {_duration(t['wall_s'])} "
                     f"(commit `{(t.get('commit') or '?')[:7]}`).")
        if t.get("by_module"):
            top = sorted(t["by_module"].items(), key=lambda kv: -kv[1])[:5]  # the file keeps keys sorted by name
            lines.append("Longest modules: " + ", ".join(f"`{m}` {_duration(x)}" for m, x in top) + "; longest test: "
                         + (f"`{t['slowest'][0][0]}` {_duration(t['slowest'][0][1])}." if t.get("slowest") else "none."))
    return "\n".join(lines) + "\n"


def replace_block(text: str, body: str) -> str:
    if BEGIN not in text or END not in text:
        raise ValidationError(f"the README markers {BEGIN} and {END} are missing")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + BEGIN + "\n" + body + END + tail


def main(argv=None) -> int:
    """``python -m spinlib.runtimes notebooks|tests|readme|check ...`` (see the module docstring)."""
    from .paths import ROOT

    argv = list(sys.argv[1:] if argv is None else argv)
    usage = ("usage: python -m spinlib.runtimes notebooks OUT.json SMOKE RECOMPUTE CACHE [NAME SECONDS]... | "
             "tests JUNIT.xml SECONDS EXIT_CODE [default|all] | readme | check")
    try:
        if argv[:1] == ["notebooks"] and len(argv) >= 5 and len(argv) % 2 == 1:
            pairs = argv[5:]
            walls = {pairs[i]: int(pairs[i + 1]) for i in range(0, len(pairs), 2)}
            record_notebooks(Path(argv[1]), argv[2] == "True", argv[3] == "True", argv[4], walls)
            return 0
        if argv[:1] == ["tests"] and len(argv) in (4, 5):
            print("test suite record:", record_tests(Path(argv[1]), int(argv[2]), int(argv[3]), *argv[4:]))
            return 0
        if argv in (["readme"], ["check"]):
            readme = ROOT / "README.md"
            timings = ROOT / "results" / "timings"
            new = replace_block(readme.read_text(encoding="utf-8"),
                                readme_block(timings / "notebooks.json", timings / "test_suite.json"))
            if argv == ["readme"]:
                atomic_write_text(readme, new)
                print("README run-time table regenerated from results/timings/")
                return 0
            if new != readme.read_text(encoding="utf-8"):
                print("README run-time table differs from results/timings/: run python -m spinlib.runtimes readme")
                return 1
            return 0
    except (ValidationError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(usage, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
