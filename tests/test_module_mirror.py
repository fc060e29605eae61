"""Every library module has tests, and the list of modules without a test file of their own is
explicit and checked.

A module is *tested directly* when some test file imports it (any ``import`` statement, top level
or inside a function). The others are listed in ``INDIRECT`` with the test that exercises them and
how: through an import of a module that reaches it (checked on the library's import graph), through
the command line (the test runs ``python -m spinlib``), or through a notebook that imports it (run
by the notebooks tier). The test fails on a module in neither group (a new, untested module), on a
listed module that is now imported by a test or no longer exists (a stale entry), and on a
justification that does not hold.
"""
from __future__ import annotations

import ast
import json
from pathlib import Path

from test_architecture import ROOT, _graph

TESTS = Path(__file__).resolve().parent
NOTEBOOKS = ROOT.parent / "notebooks"

# module -> (kind, where, why): kind "import" (a test imports a module that reaches it), "cli" (a
# test runs the command line) or "notebook" (the notebook imports it; tests/test_notebooks.py runs it)
INDIRECT = {
    "spinlib.__main__": ("cli", "test_cli.py", "the `python -m spinlib` entry point; every CLI test goes through it"),
    "spinlib.cliargs": ("cli", "test_cli.py", "argument types of both command lines, checked by the CLI's refusals"),
    "spinlib.online.cli": ("cli", "online/test_controllers.py", "the arena / replan / generate subcommands"),
    "spinlib.balance.registry": ("import", "balance/test_balance.py", "the BALANCE policy registry behind balance.solvers"),
    "spinlib.balance.wireless": ("import", "balance/test_balance.py", "FDMA time inside the deadline, used by the model"),
    "spinlib.control.baselines": ("import", "control/test_solvers.py", "the baselines, reached through the policy registry"),
    "spinlib.emulator.clock": ("import", "emulator/test_emulator.py", "the testbed's clock, through spinlib.emulator"),
    "spinlib.emulator.links": ("import", "emulator/test_emulator.py", "the testbed's links, through spinlib.emulator"),
    "spinlib.emulator.montecarlo": ("import", "emulator/test_emulator.py", "the Monte Carlo check, through spinlib.emulator"),
    "spinlib.emulator.real_traces": ("import", "emulator/test_emulator.py", "the real-model trace source of emulate"),
    "spinlib.emulator.traces": ("import", "emulator/test_emulator.py", "synthetic traces, through spinlib.emulator"),
    "spinlib.online.anchors": ("import", "online/test_controllers.py", "the anchor controllers, through the registry"),
}


def _modules() -> set[str]:
    return set(_graph())


def _imports(path: Path) -> set[str]:
    """Every absolute ``spinlib`` module a file names in an import statement."""
    out = set()
    for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(n, ast.Import):
            out |= {a.name for a in n.names}
        elif isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
            out |= {n.module} | {f"{n.module}.{a.name}" for a in n.names}
    return {m for m in out if m.startswith("spinlib")}


def _directly_tested() -> set[str]:
    mods = _modules()
    return {m for f in TESTS.rglob("*.py") for m in _imports(f) if m in mods}


def _reach(start: set[str], edges) -> set[str]:
    seen, todo = set(), list(start)
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(edges.get(m, ()))
    return seen


def _is_package(m: str) -> bool:
    return ROOT.joinpath(*m.split(".")[1:], "__init__.py").exists()


def _unlisted(mods: set[str], direct: set[str], indirect) -> list[str]:
    """Modules (not packages) that no test imports and ``indirect`` does not list."""
    return sorted(m for m in mods if m not in direct and m not in indirect and not _is_package(m))


def test_every_module_is_tested_directly_or_listed():
    mods, direct = _modules(), _directly_tested()
    untested = _unlisted(mods, direct, INDIRECT)
    assert not untested, f"modules no test imports and INDIRECT does not list: {untested}"
    stale = sorted(m for m in INDIRECT if m not in mods or m in direct)
    assert not stale, f"INDIRECT lists modules that are gone or now imported by a test: {stale}"


def test_every_listed_justification_holds():
    edges = _graph()
    for m, (kind, where, why) in INDIRECT.items():
        assert why.strip(), m
        if kind == "import":
            f = TESTS / where
            assert f.is_file(), (m, where)
            assert m in _reach({x for x in _imports(f) if x in edges}, edges), f"{where} does not reach {m}"
        elif kind == "cli":
            text = (TESTS / where).read_text(encoding="utf-8")
            assert "spinlib_cli" in text or '"-m", "spinlib"' in text, (m, where)
            assert m in _reach({"spinlib.__main__"}, edges), f"python -m spinlib does not reach {m}"
        else:
            assert kind == "notebook", (m, kind)
            cells = json.loads((NOTEBOOKS / where).read_text(encoding="utf-8"))["cells"]
            src = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
            assert f"from {m} import" in src or f"import {m}" in src, (m, where)
            assert (TESTS / "test_notebooks.py").is_file()


def test_the_checker_notices_an_untested_module():
    """The check can fail: a new module that no test imports is reported, a listed one is not, and
    a module with tests of its own counts as tested."""
    mods, direct = _modules(), _directly_tested()
    assert "spinlib.sd.drafters" in direct and "spinlib.sd" not in _unlisted(mods, direct, INDIRECT)
    assert _unlisted(mods | {"spinlib.sd.new_drafter"}, direct, INDIRECT) == ["spinlib.sd.new_drafter"]
    some = next(iter(INDIRECT))
    assert _unlisted(mods, direct, {k: v for k, v in INDIRECT.items() if k != some}) == [some]
