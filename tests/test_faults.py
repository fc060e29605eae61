"""Fault injection for every cache and record kind (issue 24, "keep it so").

Each kind is written once, then hit by a generated fault: a flipped, inserted or deleted byte, a
cut, a repeated line, junk appended, an empty file, the file removed or replaced by a symbolic link.
What must follow depends on the kind:

* **content-addressed** (results-cache entries, the kernel choice, model-cache folders, committed
  trace files with their provenance): the faulted copy is never used as it is. A cache recomputes
  and returns exactly what an intact entry gives; a committed record is refused with one line
  (a cache folder names its problem). A fault that leaves the parsed content unchanged (white
  space) may be trusted, and must then give the same content.
* **form-checked** (files a user hands us: scenarios, allocations; measurement JSONL, which a
  resumed run extends): the result either loads or is one :class:`ValidationError` line. These
  files carry no hash, so a plausible edit of a value is the user's input, not a fault.

Never a traceback, a NaN, or a write through a link. ``SPINLIB_FAULT_EXAMPLES`` sets the examples
per kind (default 25); ``benchmarks/fault_campaign.py`` runs the long campaign and writes its size
and result to the README.
"""
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spinlib.validation import ValidationError

EXAMPLES = int(os.environ.get("SPINLIB_FAULT_EXAMPLES", "25"))
FAULTS = settings(max_examples=EXAMPLES, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
CASES: dict[str, int] = {}  # examples run per kind (read by the campaign)
OUTCOMES: dict[str, dict[str, int]] = {}  # per kind: "refused", "recomputed", "unchanged" (content intact)

fault = st.one_of(
    st.tuples(st.just("flip"), st.floats(0, 1, exclude_max=True), st.integers(0, 255)),
    st.tuples(st.just("insert"), st.floats(0, 1), st.integers(0, 255)),
    st.tuples(st.just("delete"), st.floats(0, 1, exclude_max=True), st.integers(1, 16)),
    st.tuples(st.just("cut"), st.floats(0, 1, exclude_max=True), st.just(0)),
    st.tuples(st.just("repeat_line"), st.floats(0, 1, exclude_max=True), st.just(0)),
    st.tuples(st.just("append"), st.just(0.0), st.sampled_from([0, 10, 32, 123, 125])),
    st.tuples(st.sampled_from(["empty", "remove", "link"]), st.just(0.0), st.just(0)),
)


def inject(path: Path, f, decoy: Path) -> None:
    """Apply fault ``f`` to ``path`` (``decoy``: an unrelated file a link may point at)."""
    kind, where, b = f
    data = path.read_bytes()
    i = min(int(where * len(data)), max(len(data) - 1, 0))
    if kind == "flip" and data:
        new = data[:i] + bytes([b if b != data[i] else (b + 1) % 256]) + data[i + 1:]
    elif kind == "insert":
        new = data[:i] + bytes([b]) + data[i:]
    elif kind == "delete":
        new = data[:i] + data[i + b:]
    elif kind == "cut":
        new = data[:i]
    elif kind == "repeat_line":
        lines = data.splitlines(keepends=True) or [b""]
        j = min(int(where * len(lines)), len(lines) - 1)
        new = b"".join(lines[: j + 1] + [lines[j]] + lines[j + 1:])
    elif kind == "append":
        new = data + bytes([b]) * 3
    elif kind == "empty":
        new = b""
    elif kind == "remove":
        path.unlink()
        return
    elif kind == "link":
        path.unlink()
        path.symlink_to(decoy)
        return
    else:
        new = data
    path.write_bytes(new)


def _count(kind: str, outcome: str) -> None:
    CASES[kind] = CASES.get(kind, 0) + 1
    OUTCOMES.setdefault(kind, {}).setdefault(outcome, 0)
    OUTCOMES[kind][outcome] += 1


def _one_line(e: Exception) -> None:
    assert isinstance(e, ValidationError), f"{type(e).__name__}: {e}"
    assert "\n" not in str(e).strip(), str(e)


def _decoy(tmp: Path) -> Path:
    d = tmp / "decoy.txt"
    d.write_text("not yours")
    return d


def _fresh(tmp_path_factory, name):
    return tmp_path_factory.mktemp(name)


# ---------------------------------------------------------------- content-addressed: caches
@FAULTS
@given(f=fault, value=st.dictionaries(st.text(min_size=1, max_size=4), st.integers(-99, 99), min_size=1, max_size=4))
def test_a_faulted_results_cache_entry_is_recomputed(tmp_path_factory, f, value):
    from spinlib.cache import cached

    d = _fresh(tmp_path_factory, "cache")
    calls = []

    def compute():
        calls.append(1)
        return value

    cached("v", {"x": 1}, compute, cache_dir=d)
    (entry,) = d.glob("v-*.json")
    decoy = _decoy(d.parent)
    inject(entry, f, decoy)
    assert cached("v", {"x": 1}, compute, cache_dir=d) == value  # never the faulted content
    assert decoy.read_text() == "not yours" and not entry.is_symlink()  # never written through a link
    _count("results cache entry", "recomputed" if len(calls) == 2 else "unchanged")


@FAULTS
@given(f=fault)
def test_a_faulted_kernel_choice_is_measured_again(tmp_path_factory, monkeypatch, f):
    from spinlib.sd import kernels as KN

    d = _fresh(tmp_path_factory, "kernels")
    calls = []
    timings = {k: {"max_abs_err": 0.0, "rows": {"1": 0.01 * (i + 1), "5": 0.02 * (i + 1)}}
               for i, k in enumerate(KN.CANDIDATES)}
    monkeypatch.setattr(KN, "measure_kernels", lambda *a, **k: calls.append(1) or json.loads(json.dumps(timings)))
    monkeypatch.setattr(KN, "_score", lambda t: t["rows"]["1"] + t["rows"]["5"])
    monkeypatch.delenv("SPINLIB_KERNEL", raising=False)
    first = KN.choose_kernel(64, 128, cache_dir=d)
    (entry,) = d.glob("*.json")
    inject(entry, f, _decoy(d.parent))
    again = KN.choose_kernel(64, 128, cache_dir=d)
    assert (again.kernel, again.timings) == (first.kernel, first.timings)
    assert not entry.is_symlink()
    _count("kernel choice", "recomputed" if len(calls) == 2 else "unchanged")


@FAULTS
@given(f=fault, which=st.sampled_from(["spinlib-manifest.json", "config.json", "model.safetensors", "new"]))
def test_a_faulted_model_cache_folder_names_its_problem(tmp_path_factory, f, which):
    from spinlib.sd.models import MANIFEST, cache_problem, write_manifest

    d = _fresh(tmp_path_factory, "model")
    (d / "config.json").write_text(json.dumps({"hidden_size": 8, "vocab_size": 32}))
    (d / "model.safetensors").write_bytes(np.random.default_rng(0).bytes(4096))
    write_manifest(d)
    assert cache_problem(d) is None
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    if which == "new":  # a file planted beside the manifest
        (d / "extra.bin").write_bytes(b"x")
        problem = cache_problem(d)
        assert problem and "extra.bin" in problem
        _count("model cache folder", "refused")
        return
    inject(d / which, f, _decoy(d.parent))
    problem = cache_problem(d)
    if problem is None:  # trusted only with every weight and config byte as written, and no link
        assert all((d / n).read_bytes() == b for n, b in before.items() if n != MANIFEST), (f, which)
        assert not any(p.is_symlink() for p in d.iterdir())
        _count("model cache folder", "unchanged")
    else:
        assert "\n" not in problem
        _count("model cache folder", "refused")


# ---------------------------------------------------------------- content-addressed: committed records
@pytest.fixture(scope="module")
def trace_pair():
    from spinlib.online.traces import trace_files

    files = trace_files("smollm2-rtn4g16")
    assert files, "committed traces of smollm2-rtn4g16 (data/traces)"
    return files[0]


@FAULTS
@given(f=fault, target=st.sampled_from(["trace", "provenance"]))
def test_a_faulted_trace_file_or_its_provenance_is_refused(tmp_path_factory, trace_pair, f, target):
    from spinlib.online.traces import verified_traces

    d = _fresh(tmp_path_factory, "traces") / trace_pair.parent.name
    d.mkdir()
    src_prov = trace_pair.with_name(f"{trace_pair.stem}.provenance.json")
    shutil.copy(trace_pair, d / trace_pair.name)
    shutil.copy(src_prov, d / src_prov.name)
    good = verified_traces(d / trace_pair.name)
    path = d / (trace_pair.name if target == "trace" else src_prov.name)
    inject(path, f, _decoy(d.parent))
    try:
        got = verified_traces(d / trace_pair.name)
    except Exception as e:  # noqa: BLE001 -- anything but one ValidationError line fails the property
        _one_line(e)
        _count("trace file + provenance", "refused")
        return
    # trusted: only when what it holds is what was recorded
    assert [(t.question_id, t.accept.tolist(), t.top_prob.tolist(), t.entropy.tolist()) for t in got] == \
        [(t.question_id, t.accept.tolist(), t.top_prob.tolist(), t.entropy.tolist()) for t in good]
    _count("trace file + provenance", "unchanged")


# ---------------------------------------------------------------- form-checked: user files and resumable stores
def _scenario_file():
    from spinlib.presets import random_scenario
    from spinlib.scenario import Scenario

    return random_scenario(3, seed=1).to_json(), Scenario.from_json, lambda o: o.to_json()


def _allocation_file():
    from spinlib.control import solve
    from spinlib.presets import random_scenario
    from spinlib.rounds import Allocation

    return solve(random_scenario(3, seed=1), "homogeneous").to_json(), Allocation.from_json, lambda o: o.to_json()


def _balance_instance_file():
    from spinlib.balance.instances import random_instance
    from spinlib.balance.model import BalanceInstance

    return random_instance(4, 1).to_json(), BalanceInstance.from_json, lambda o: o.to_json()


def _balance_schedule_file():
    from spinlib.balance.model import Schedule
    from spinlib.jsonio import read_json

    text = json.dumps(Schedule(modes=("AD", "SD", "off", "SD"), phi=0.5).to_dict())
    return text, (lambda p: Schedule.from_dict(read_json(p, "schedule"))), lambda o: json.dumps(o.to_dict())


#: every document class a user hands the library (it has ``from_json`` or ``from_dict``), declared once with a
#: valid file, its reader and its writer: the fault campaign below runs on each; a new class joins here, or in
#: NOT_USER_FILES with why (a test fails on a class in neither)
USER_FILES = {"Scenario": _scenario_file, "Allocation": _allocation_file, "BalanceInstance": _balance_instance_file,
              "Schedule": _balance_schedule_file}
NOT_USER_FILES: dict[str, str] = {}


def test_every_document_class_is_in_the_fault_campaign():
    import importlib
    import inspect
    import pkgutil

    import spinlib

    found = set()
    for m in pkgutil.walk_packages(spinlib.__path__, "spinlib."):
        if m.name.endswith("__main__"):
            continue
        mod = importlib.import_module(m.name)
        for name, obj in vars(mod).items():
            if inspect.isclass(obj) and obj.__module__ == mod.__name__ and \
                    any(isinstance(vars(obj).get(a), classmethod) for a in ("from_json", "from_dict")):
                found.add(name)
    assert found, "no document class found: the walk is broken"
    assert found <= set(USER_FILES) | set(NOT_USER_FILES), f"not declared: {sorted(found - set(USER_FILES) - set(NOT_USER_FILES))}"
    assert not (set(USER_FILES) | set(NOT_USER_FILES)) - found, "declared classes that are gone"


@FAULTS
@given(f=fault, kind=st.sampled_from(sorted(USER_FILES)))
def test_a_faulted_user_file_loads_or_is_one_line(tmp_path_factory, f, kind):
    d = _fresh(tmp_path_factory, "user")
    text, load, write = USER_FILES[kind]()
    p = d / f"{kind}.json"
    p.write_text(text)
    inject(p, f, _decoy(d))
    try:
        obj = load(p)
    except Exception as e:  # noqa: BLE001
        _one_line(e)
        _count("user file", "refused")
        return
    back = write(obj)  # what loaded is finite and writes back
    assert "NaN" not in back and "Infinity" not in back
    _count("user file", "unchanged" if back == text else "loaded (edited value)")


def _measurement_store():
    from spinlib.sd import measure as M

    recs = [{"kind": "beta", "question_id": q, "temperature": 0.0, "L": None, "beta": [1.0, 0.5, 0.25]} for q in (1, 2, 3)]
    return recs, M.read_records


def _study_store():
    from spinlib.study import read_store

    seeds = [11, 12, 13]
    recs = [{"study": "s", "task": t, "seed": seeds[t], "output": {"x": float(t), "y": [1, 2]}} for t in range(3)]
    return recs, lambda p: read_store(p, "s", seeds)


def _trace_store():
    from spinlib.online.traces import read_traces

    recs = [{"kind": "trace", "question_id": q, "tokens": [5, 6, 7], "accept": [1, 0, 1], "top_prob": [0.9, 0.5, 0.7],
             "entropy": [0.1, 1.2, 0.4], "accept_prob": [1.0, 0.2, 0.8]} for q in (1, 2)]
    return recs, read_traces


#: every resumable JSONL store (a reader built on ``jsonio.read_jsonl_records``), declared once with valid
#: records and its reader: each is faulted below (a torn last line is dropped, any other fault is one line or
#: leaves finite records); a test finds every such reader in the library and fails on one not declared here
RECORD_STORES = {"spinlib.sd.measure.read_records": _measurement_store, "spinlib.study.read_store": _study_store,
                 "spinlib.online.traces.read_traces": _trace_store}


def test_every_resumable_store_is_in_the_fault_campaign():
    import ast

    from spinlib.paths import ROOT

    found = set()
    for f in (ROOT / "spinlib").rglob("*.py"):
        mod = ".".join(f.relative_to(ROOT).with_suffix("").parts)
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name != "read_jsonl_records" and any(
                    isinstance(c, ast.Call) and getattr(c.func, "id", getattr(c.func, "attr", None)) == "read_jsonl_records"
                    for c in ast.walk(node)):
                found.add(f"{mod}.{node.name}")
    assert found == set(RECORD_STORES), f"declared {sorted(RECORD_STORES)}, found {sorted(found)}"


def _finite(x) -> bool:
    if isinstance(x, float):
        return bool(np.isfinite(x))
    if isinstance(x, dict):
        return all(_finite(v) for v in x.values())
    if isinstance(x, list):
        return all(_finite(v) for v in x)
    return True


@FAULTS
@given(f=fault, store=st.sampled_from(sorted(RECORD_STORES)))
def test_a_faulted_record_store_loads_or_is_one_line(tmp_path_factory, f, store):
    d = _fresh(tmp_path_factory, "store")
    recs, read = RECORD_STORES[store]()
    p = d / "records.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    inject(p, f, _decoy(d))
    try:
        got = read(p)
    except Exception as e:  # noqa: BLE001
        _one_line(e)
        _count(f"record store ({store.rsplit('.', 1)[-1]})", "refused")
        return
    # form-checked: an edited value that passes the record's checks is the user's input; what loaded is finite
    # (a study's store keeps an undefined metric, NaN, as it was written: study.read_store)
    assert store == "spinlib.study.read_store" or _finite(list(got.values()))
    assert all(isinstance(r, dict) for r in got.values())
    _count(f"record store ({store.rsplit('.', 1)[-1]})", "unchanged" if list(got.values()) == recs
           else "loaded (torn last line or edited value)")


def test_a_second_valid_recording_of_a_task_is_refused_not_chosen(tmp_path, trace_pair):
    """Two valid recordings of one task (another configuration, its provenance consistent) are one line that
    names both files: never the later one silently replacing the committed one."""
    import json

    from spinlib.cache import config_key, sha256_file, value_digest
    from spinlib.online.traces import load_pair_traces, pair_tasks, task_files, task_of

    pair = trace_pair.parent.name
    d = tmp_path / pair
    d.mkdir()
    prov_src = trace_pair.with_name(f"{trace_pair.stem}.provenance.json")
    shutil.copy(trace_pair, d / trace_pair.name)
    shutil.copy(prov_src, d / prov_src.name)
    task = task_of(trace_pair)
    assert pair_tasks(pair, tmp_path) == [task] and len(load_pair_traces(pair, tmp_path)[task]) > 0
    prov = json.loads(prov_src.read_text())  # a second recording: the same prompts, another configuration
    prov["config"] = {**prov["config"], "max_new_tokens": prov["config"]["max_new_tokens"] + 1}
    key = config_key(prov["config"], 12)
    second = d / f"{task}-{key}.jsonl"
    shutil.copy(trace_pair, second)
    prov["sha256"] = sha256_file(second)
    prov.pop("record_sha256")
    prov["record_sha256"] = value_digest(prov)
    (d / f"{task}-{key}.provenance.json").write_text(json.dumps(prov))
    from spinlib.online.traces import verified_traces

    assert len(verified_traces(second)) > 0  # the second file is valid on its own
    for call in (lambda: task_files(pair, tmp_path), lambda: pair_tasks(pair, tmp_path),
                 lambda: load_pair_traces(pair, tmp_path)):
        with pytest.raises(ValidationError) as e:
            call()
        msg = str(e.value)
        assert "\n" not in msg and "two trace recordings" in msg and trace_pair.name in msg and second.name in msg
