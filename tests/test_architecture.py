"""The library's module floor (issue 23, item 5): no import cycles, counted over every import
statement (top level and inside functions, where a cycle likes to hide).

No cycle remains: validation (``spinlib.validation``) and JSON I/O (``spinlib.jsonio``) are the
ground floor, importing nothing else of the library; ``KNOWN`` lists the cycles accepted for now
(none), so that a new one fails this test.
"""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import spinlib

ROOT = Path(spinlib.__file__).resolve().parent
KNOWN: list[list[str]] = []


def _graph() -> dict[str, set[str]]:
    mods = {}
    for f in ROOT.rglob("*.py"):
        parts = f.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mods[name] = f
    edges = {m: set() for m in mods}
    for m, f in mods.items():
        pkg = m if f.name == "__init__.py" else m.rsplit(".", 1)[0]
        for n in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(n, ast.ImportFrom):
                base = pkg.split(".")[:len(pkg.split(".")) - (n.level - 1)] if n.level else []
                target = ".".join(base + ([n.module] if n.module else [])) if n.level else (n.module or "")
                cands = [target] + [f"{target}.{a.name}" for a in n.names]
            elif isinstance(n, ast.Import):
                cands = [a.name for a in n.names]
            else:
                continue
            edges[m] |= {c for c in cands if c in mods and c != m}
    return edges


def _cycles(edges) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return sorted(out)


def test_the_cycle_finder_finds_cycles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle():
    assert _cycles(_graph()) == KNOWN


def test_the_library_ships_no_test_tool():
    assert not (ROOT / "fuzz.py").exists()


def test_validation_and_json_io_are_the_ground_floor():
    """spinlib.validation imports nothing of the library; spinlib.jsonio only spinlib.validation."""
    g = _graph()
    assert g["spinlib.validation"] == set()
    assert g["spinlib.jsonio"] == {"spinlib.validation"}


REPO = ROOT.parent
NAMED = re.compile(r"(?<![\w/.-])((?:tests|benchmarks|spinlib|notebooks)/[\w/*.-]*?\.(?:py|ipynb))")


def _doc_texts():
    """(where, text) of every place that names a file for a reader: the README, the notebooks' cell
    sources, and the library's, tests' and benchmarks' sources."""
    yield "README.md", (REPO / "README.md").read_text(encoding="utf-8")
    for nb in sorted((REPO / "notebooks").glob("*.ipynb")):
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        yield nb.name, "\n".join("".join(c["source"]) for c in cells)
    for d in ("spinlib", "tests", "benchmarks"):
        for f in sorted((REPO / d).rglob("*.py")):
            yield str(f.relative_to(REPO)), f.read_text(encoding="utf-8")


def test_every_file_a_reader_is_pointed_to_exists():
    """A path like ``tests/online/test_multiuser.py`` (or a glob, ``tests/control/test_certified*.py``)
    in the README, a notebook or a source file names a file of the repository: moving a file without
    its references fails here. (In the tests only paths under ``tests/`` count: a test names the
    notebooks and files it creates itself.)"""
    missing = []
    for where, text in _doc_texts():
        for path in set(NAMED.findall(text)):
            if where.startswith("tests/") and not path.startswith("tests/"):
                continue
            if not list(REPO.glob(path)):
                missing.append(f"{where}: {path}")
    assert not missing, missing


def test_nothing_below_the_studies_imports_them():
    """``spinlib.studies`` is the top layer: no module outside it imports it (at any depth)."""
    edges = _graph()
    offenders = sorted(f"{m} -> {t}" for m, ts in edges.items() if not m.startswith("spinlib.studies")
                       for t in ts if t == "spinlib.studies" or t.startswith("spinlib.studies."))
    assert not offenders, offenders
    assert any(m.startswith("spinlib.studies.") for m in edges)  # the layer exists, so the check can fail


def test_a_moved_study_keeps_its_cache_key():
    """A study module's ``CACHE_NAMESPACE`` keys its functions (the module they were first cached under);
    a module without one keys by its own name."""
    from spinlib.cache import cache_name
    from spinlib.experiments import sweep
    from spinlib.studies import allocation, balance, engine_runs, online, paper_maps, replanning, replay

    assert cache_name(online.regret_study) == "spinlib.online.experiments.regret_study"
    assert cache_name(balance.served_sweep) == "spinlib.balance.experiments.served_sweep"
    assert cache_name(replay.prompt_betas) == "spinlib.emulator.replay.prompt_betas"
    assert cache_name(replanning.replan_under_fading) == "spinlib.online.replan.replan_under_fading"
    assert cache_name(allocation.exhaustive_gaps) == "spinlib.experiments.exhaustive_gaps"
    assert cache_name(paper_maps.paper1_gain_point) == "spinlib.maps.paper1_gain_point"
    assert cache_name(sweep) == "spinlib.experiments.sweep"
    assert cache_name(engine_runs.ul_dl_runs) == "spinlib.studies.engine_runs.ul_dl_runs"


def test_tests_mirror_the_library():
    """``tests/<package>/`` exists only for a package of ``spinlib`` (the layout mirrors the library)."""
    packages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}
    dirs = {p.name for p in (REPO / "tests").iterdir() if p.is_dir() and not p.name.startswith((".", "__"))}
    assert dirs <= packages, dirs - packages
    assert {"control", "online", "emulator", "sd", "balance", "studies"} <= dirs
