"""Studies, records first (:mod:`spinlib.study`): an interrupted study resumes from its store and ends with
the records of an uninterrupted one; the store is verified line by line before it is trusted (a torn last
line is recomputed, any other fault is one line naming the file, the line and the field); records do not
depend on where the tasks ran; a bad configuration is one line; the sweeps and claim maps are studies.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import spinlib.study as study_module
from spinlib.study import Study, library_digest, map_points, read_store, study_name, study_seeds
from spinlib.validation import ValidationError
from helpers import fresh_seed

CALLS = "calls"  # a file per call, so that worker processes can be counted too


def point(params, seed):
    """Metrics of one task; counts its call in ``params["log"]``; fails on the task ``params["fail"]`` names
    while that file exists (an interruption)."""
    log = Path(params["log"])
    (log / f"{params['a']}-{seed}-{len(list(log.iterdir()))}").touch()
    if params.get("fail") and Path(params["fail"]).exists() and params["a"] == 2:
        raise RuntimeError("interrupted")
    rng = np.random.default_rng(seed)
    return {"m": params["a"] * rng.standard_normal()}


def records_point(params, seed):
    """A point that returns records (a list), as a sweep's does."""
    return [{"policy": p, "value": params["a"] + seed % 7 + i} for i, p in enumerate(("x", "y"))]


def study(tmp_path, fail=None, **kw):
    log = tmp_path / "log"
    log.mkdir(exist_ok=True)
    points = tuple({"a": a, "log": str(log), **({"fail": str(fail)} if fail else {})} for a in (1, 2, 3))
    return Study("test-study", point, points, kw.get("n_seeds", 3), kw.get("seed", 11))


def test_an_interrupted_study_resumes_and_ends_as_an_uninterrupted_one(tmp_path):
    store = tmp_path / "store"
    flag = tmp_path / "fail-now"
    flag.touch()
    s = study(tmp_path, fail=flag)
    with pytest.raises(RuntimeError, match="interrupted"):
        s.run(n_jobs=1, progress=False, store_dir=store)
    path = s.store(store)
    kept = read_store(path, s.key, [sd for _, sd in s.tasks()])
    assert sorted(kept) == [0, 1, 2]  # the first point's three seeds were stored before the failure
    flag.unlink()
    calls_before = len(list((tmp_path / "log").iterdir()))
    resumed = s.run(n_jobs=1, progress=False, store_dir=store)
    assert len(list((tmp_path / "log").iterdir())) - calls_before == 6  # only the six tasks not stored ran
    assert not path.exists()  # a finished run removes its store
    fresh = study(tmp_path, fail=flag).run(n_jobs=1, progress=False, store_dir=tmp_path / "other")
    assert resumed == fresh and len(fresh) == 9
    seeds = study_seeds(11, 3)
    assert [(r["a"], r["seed"]) for r in fresh] == [(a, sd) for a in (1, 2, 3) for sd in seeds]


def test_records_do_not_depend_on_where_the_tasks_ran(tmp_path):
    s = Study("test-records", records_point, tuple({"a": a} for a in range(5)), 4, fresh_seed() % (1 << 32))
    one = s.run(n_jobs=1, progress=False, store_dir=tmp_path)
    two = s.run(n_jobs=2, progress=False, store_dir=tmp_path)
    assert one == two and len(one) == 5 * 4 * 2
    assert all(set(r) == {"a", "seed", "policy", "value"} for r in one)
    assert map_points(abs, [-3, 2, -1], n_jobs=2) == [3, 2, 1]


def _write_store(s, store, lines):
    path = s.store(store)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines))
    return path


def _line(s, i, **over):
    return json.dumps({"study": s.key, "task": i, "seed": s.tasks()[i][1], "output": {"m": 0.5}, **over}) + "\n"


def test_a_torn_last_line_is_recomputed(tmp_path):
    s = study(tmp_path)
    path = _write_store(s, tmp_path / "store", [_line(s, 0), _line(s, 1)[:17]])
    assert sorted(read_store(path, s.key, [sd for _, sd in s.tasks()])) == [0]
    out = s.run(n_jobs=1, progress=False, store_dir=tmp_path / "store")
    assert out[0]["m"] == 0.5  # the stored task is read back, not recomputed
    assert out[1]["m"] == study(tmp_path).run(n_jobs=1, progress=False, store_dir=tmp_path / "x")[1]["m"]


@pytest.mark.parametrize("fault, field", [
    ({"task": 99}, "task"), ({"task": True}, "task"), ({"seed": 1}, "seed"), ({"study": "0" * 16}, "study"),
    ({"output": 3}, "output"), ({"output": [1]}, "output"), ({"extra": 1}, "<record>"),
])
def test_a_bad_store_line_is_one_line_naming_the_field(tmp_path, fault, field):
    s = study(tmp_path)
    path = _write_store(s, tmp_path / "store", [_line(s, 0, **fault), _line(s, 1)])
    with pytest.raises(ValidationError, match=rf"{path.name}:1: {field} must be"):
        s.run(n_jobs=1, progress=False, store_dir=tmp_path / "store")


def test_a_repeated_task_and_a_line_that_is_not_json_are_refused(tmp_path):
    s = study(tmp_path)
    path = _write_store(s, tmp_path / "store", [_line(s, 0), _line(s, 0), _line(s, 1)])
    with pytest.raises(ValidationError, match=r":2: task must be a task not stored before \(task 0 repeats\)"):
        read_store(path, s.key, [sd for _, sd in s.tasks()])
    path.write_text(_line(s, 0) + "{not json\n" + _line(s, 1))
    with pytest.raises(ValidationError, match=r":2: <line> must be valid JSON"):
        read_store(path, s.key, [sd for _, sd in s.tasks()])


def test_the_store_key_names_the_configuration_and_the_library(tmp_path, monkeypatch):
    base = study(tmp_path)
    assert len({base.key, study(tmp_path, seed=12).key, study(tmp_path, n_seeds=4).key,
                Study("test-study", records_point, base.points, 3, 11).key}) == 4
    k0 = base.key
    assert k0 == study(tmp_path).key and len(library_digest()) == 16
    monkeypatch.setattr(study_module, "library_digest", lambda: "0" * 16)  # other library code: another store
    assert study(tmp_path).key != k0


def nan_point(params, seed):
    """A metric that is undefined (NaN) on some tasks, as a map's point may return."""
    if Path(params["stop"]).exists() and params["a"] == 2:
        raise RuntimeError("interrupted")
    return {"m": float("nan") if seed % 2 else 1.0, "a2": params["a"] * 2}


def test_a_store_with_undefined_metrics_resumes(tmp_path):
    stop = tmp_path / "stop"
    stop.touch()
    s = Study("test-nan", nan_point, tuple({"a": a, "stop": str(stop)} for a in (1, 2)), 4, 3)
    with pytest.raises(RuntimeError):
        s.run(n_jobs=1, progress=False, store_dir=tmp_path)
    stop.unlink()
    out = s.run(n_jobs=1, progress=False, store_dir=tmp_path)
    assert len(out) == 8 and sum(np.isnan(r["m"]) for r in out) == sum(sd % 2 for sd in study_seeds(3, 4)) * 2


def test_a_torn_line_is_dropped_from_the_file_before_a_resumed_run_appends(tmp_path):
    """Torn last line, a resumed run interrupted again, a third run: the store stays readable."""
    flag = tmp_path / "fail-now"
    flag.touch()
    s = study(tmp_path, fail=flag)
    path = _write_store(s, tmp_path / "store", [_line(s, 0), _line(s, 1)[:17]])
    with pytest.raises(RuntimeError, match="interrupted"):
        s.run(n_jobs=1, progress=False, store_dir=tmp_path / "store")
    assert sorted(read_store(path, s.key, [sd for _, sd in s.tasks()])) == [0, 1, 2]
    flag.unlink()
    assert len(s.run(n_jobs=1, progress=False, store_dir=tmp_path / "store")) == 9


def test_two_runs_of_one_study_at_once_are_one_line(tmp_path):
    import fcntl

    s = study(tmp_path)
    path = s.store(tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(ValidationError, match="another run holds this study's store"):
            s.run(n_jobs=1, progress=False, store_dir=tmp_path)
    assert len(s.run(n_jobs=1, progress=False, store_dir=tmp_path)) == 9  # released: it runs
    assert not list(tmp_path.glob("*.lock")) and not list(tmp_path.glob("*.jsonl"))


def test_points_from_a_generator_and_names_from_any_callable():
    s = Study("gen", records_point, ({"a": a} for a in range(3)), 2, 0)
    assert len(s.points) == 3 and len(s.tasks()) == 6
    assert study_name("map", lambda c, sd: {}) == "map-_lambda_"
    import functools
    assert study_name("map", functools.partial(records_point)) == "map-partial"


@pytest.mark.parametrize("bad, message", [
    ({"name": "a/b"}, "study name must be"), ({"name": ""}, "study name must be"),
    ({"point": 3}, "point must be callable"), ({"points": ()}, "points must be"), ({"points": (1,)}, "points must be"),
    ({"n_seeds": 0}, r"^study ok: n_seeds must be an integer in \[1, inf\), got 0$"),
    ({"n_seeds": 2.0}, r"^study ok: n_seeds must be an integer, got 2.0$"),
    ({"seed": -1}, r"^study ok: seed must be an integer in \[0, inf\), got -1$"),
    ({"seed": True}, r"^study ok: seed must be an integer, got True$"),
])
def test_a_bad_study_is_one_line(bad, message):
    kw = {"name": "ok", "point": records_point, "points": ({"a": 1},), "n_seeds": 2, "seed": 0, **bad}
    with pytest.raises(ValidationError, match=message):
        Study(**kw)


def test_a_point_that_returns_neither_a_dict_nor_records_is_one_line(tmp_path):
    s = Study("test-bad-point", lambda p, sd: 3.0, ({"a": 1},), 1, 0)
    with pytest.raises(ValidationError, match="must return a dict or a list of dicts, got float"):
        s.run(n_jobs=1, progress=False, store_dir=tmp_path)


def test_resumable_jsonl_drops_a_torn_tail_and_one_writer_holds_the_lock(tmp_path):
    """The helper every resumable record file uses (a study's store, a measurement, a trace recording): the torn last
    line is removed from the file before any append (not appended onto), and a second writer is one line."""
    from spinlib.jsonio import exclusive_lock, read_jsonl_records, resume_jsonl

    def read(path, kept):
        return read_jsonl_records(path, "records", lambda r, p, i: r["k"],
                                  lambda p, i, f, a: ValidationError(f"{p}:{i}: {f} must be {a}"), "new ({key})",
                                  good_lines=kept)

    f = tmp_path / "r.jsonl"
    f.write_text('{"k": 1}\n{"k": 2}\n{"k": 3, "torn')
    with exclusive_lock(f, "these records"):
        done = resume_jsonl(f, lambda kept: read(f, kept))
        assert sorted(done) == [1, 2] and f.read_text() == '{"k": 1}\n{"k": 2}\n'
        with open(f, "a") as out:
            out.write('{"k": 3}\n')
        with pytest.raises(ValidationError, match="another run holds these records"):
            with exclusive_lock(f, "these records"):
                pass
    assert sorted(read(f, [])) == [1, 2, 3] and not (tmp_path / "r.jsonl.lock").exists()
    assert resume_jsonl(tmp_path / "missing.jsonl", lambda kept: {1: 1}) == {}


@pytest.mark.parametrize("which", ["measure", "traces"])
def test_a_second_measurement_or_trace_writer_is_refused_before_any_work(tmp_path, which):
    """``measure_pair`` and ``record_traces`` take the file's lock before loading a model: a second run into the same
    folder is one line (it once wrote every record twice)."""
    from spinlib.cache import config_key
    from spinlib.jsonio import exclusive_lock
    from spinlib.online.traces import TRACE_VERSION, record_traces
    from spinlib.sd.measure import measure_pair

    pair, task = "smollm2-rtn4g16", "qa"
    if which == "measure":
        cfg = {"pair": pair, "task": task, "n_prompts": 1, "max_new_tokens": 4, "seed": 0, "temperatures": [0.0, 1.0],
               "L_values": list(range(1, 9)), "engine_prompts": 2, "version": 1}
        call = lambda: measure_pair(pair, task, n_prompts=1, max_new_tokens=4, out_dir=tmp_path, progress=False)
    else:
        cfg = {"pair": pair, "task": task, "n_prompts": 1, "max_new_tokens": 4, "temperature": 0.0,
               "version": TRACE_VERSION}
        call = lambda: record_traces(pair, task, n_prompts=1, max_new_tokens=4, out_dir=tmp_path)
    raw = tmp_path / pair / f"{task}-{config_key(cfg, 12)}.jsonl"
    raw.parent.mkdir(parents=True)
    live = '{"a live run": "its records"}\n'
    raw.write_text(live)
    # the lock is the output folder's: a writer of another file there (another task or configuration) holds it too
    with exclusive_lock(raw.with_name("other-task-0123456789ab.jsonl"), "another writer's records", scope="folder"):
        with pytest.raises(ValidationError, match="another run holds"):
            call()
        if which == "measure":  # recompute never deletes the records of a run that holds the folder
            with pytest.raises(ValidationError, match="another run holds"):
                measure_pair(pair, task, n_prompts=1, max_new_tokens=4, out_dir=tmp_path, progress=False,
                             recompute=True)
        else:
            with pytest.raises(ValidationError, match="another run holds"):
                record_traces(pair, task, n_prompts=1, max_new_tokens=4, out_dir=tmp_path, recompute=True)
    assert raw.read_text() == live


def test_a_lock_released_between_another_runs_open_and_flock_is_not_held_twice(tmp_path):
    """The flock-and-unlink race: run B opens the lock file, run A releases (and removes) it, run C creates a new
    one; B's flock then succeeds on the removed file. B checks that the path still names what it locked, so B and
    C never both hold the lock."""
    import fcntl

    from spinlib.jsonio import exclusive_lock

    f = tmp_path / "r.jsonl"
    lock = tmp_path / "r.jsonl.lock"
    stale = os.open(lock, os.O_WRONLY | os.O_CREAT)  # B's open, before A's release
    lock.unlink()  # A released
    with exclusive_lock(f, "these records"):  # C holds the new lock file
        fcntl.flock(stale, fcntl.LOCK_EX | fcntl.LOCK_NB)  # B's flock succeeds on the removed inode ...
        assert os.fstat(stale).st_ino != os.stat(lock).st_ino  # ... which exclusive_lock detects and retries on
        with pytest.raises(ValidationError, match="another run holds"):
            with exclusive_lock(f, "these records"):
                pass
    os.close(stale)


@pytest.mark.parametrize("what", ["lock", "store"])
@pytest.mark.parametrize("dangling", [True, False])
def test_record_files_and_their_locks_are_never_opened_through_a_link(tmp_path, what, dangling):
    """A link planted at a lock or at a resumable record file (dangling or not) is refused in one line; its target is
    neither created nor written."""
    s = study(tmp_path)
    path = s.store(tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    target = tmp_path / "target.txt"
    if not dangling:
        target.write_text("keep\n")
    (path.with_name(path.name + ".lock") if what == "lock" else path).symlink_to(target)
    with pytest.raises(ValidationError, match="symbolic link"):
        s.run(n_jobs=1, progress=False, store_dir=tmp_path)
    assert (not target.exists()) if dangling else target.read_text() == "keep\n"
