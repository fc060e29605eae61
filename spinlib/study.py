"""Studies, records first: a frozen configuration, one master seed, a point function,
and raw records written as they are produced; metrics come after, from the records.

A :class:`Study` names its points (the parameters of each, in order), the scenarios per point and the
master seed. Each (point, seed) pair is a *task*; the point function ``point(params, seed)`` returns the
task's metrics (a dict) or its records (a list of dicts), and every record carries the point's
parameters and its seed (:meth:`Study.run`). The seeds are common to every point,
``SeedSequence(seed).generate_state(n_seeds)``: neighbouring points differ only in their parameters
(common random numbers), which is what a comparison across points or policies needs.

While a study runs, each finished task is appended to a JSONL store (``.cache/records/<name>-<key>.jsonl``
under the repository, untracked, or ``store_dir``; one line per task). The key hashes the study's
configuration and the library's source, so a resumed store never pools records computed by other
*library* code (a point function outside the library is keyed by its name only: change its name, or pass
``store_dir``, when you change its code mid-study). An interrupted run leaves only that partial store, which
nothing else reads: the next run reads back the tasks it holds (a torn last line is dropped and the file
rewritten without it, any other bad line refused in one line) and computes only the rest. Two runs of one
study at once are refused in one line (a lock beside the store). A finished run returns every record in
task order and removes its store; what it returns is what the results cache keeps
(:func:`spinlib.cache.cached_call`). The tasks run on the joblib or Dask backends of
:func:`iter_points`, and the records never depend on where they ran.

The claim maps (:func:`spinlib.maps.grid_records`), the policy sweeps (:func:`spinlib.experiments.sweep`) and
every randomised campaign of the notebooks (:mod:`spinlib.studies`: the exhaustive and structure checks, the
testbed's agreement, queueing and fading studies, the closed form against simulated rounds, BALANCE's sweeps,
ratio campaign, hybrid regime and drawn rounds, and the multi-user re-planning study) are studies.
"""
from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np

from .cache import canonical_json, config_key, key_form
from .jsonio import exclusive_lock, json_default, open_append, read_jsonl_records, resume_jsonl
from .paths import ROOT, quiet
from .validation import ValidationError, check_int_range

NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
SCHEDULER_ENV = "SPINLIB_DASK_SCHEDULER"
STORES = ROOT / ".cache" / "records"  # the partial stores of running or interrupted studies (untracked)


def study_name(prefix: str, fn) -> str:
    """A store-safe study name from ``prefix`` and a function (any callable: a lambda, a partial)."""
    name = getattr(fn, "__name__", None) or type(fn).__name__
    return re.sub(r"[^A-Za-z0-9_.-]", "_", f"{prefix}-{name}")


# ----------------------------------------------------------------------------------------------
# Where tasks run
# ----------------------------------------------------------------------------------------------
#: a dask.distributed scheduler address: ``tcp://host:port`` (or another protocol dask knows) or ``host:port``
_ADDRESS = re.compile(r"^(?:(?:tcp|tls|inproc|ucx|ws|wss)://)?[A-Za-z0-9_.\-\[\]:]+:[0-9]{1,5}$")


def scheduler_address() -> str | None:
    """``$SPINLIB_DASK_SCHEDULER``: a scheduler address, or None (unset: local processes). Set but empty, or not an
    address (``tcp://host:8786``, ``host:8786``), is refused in one line."""
    value = os.environ.get(SCHEDULER_ENV)
    if value is None:
        return None
    if not _ADDRESS.match(value):
        raise ValidationError(f"${SCHEDULER_ENV} must be a dask scheduler address such as tcp://host:8786 "
                              f"(or unset), got {value!r}")
    return value


def iter_points(fn: Callable, items: Sequence, *, n_jobs: int | None = None, scheduler: str | None = None,
                progress: bool = False, desc: str = "points", total: int | None = None,
                initial: int = 0) -> Iterator:
    """``fn(item)`` of every item, yielded as each finishes: in item order in this process, in completion
    order on joblib workers or a Dask cluster (``fn`` returns what identifies its item, if the caller needs it).

    Parameters
    ----------
    n_jobs : int, optional
        joblib workers (``None``: all cores, ``1``: in this process).
    scheduler : str, optional
        A ``dask.distributed`` scheduler address (``tcp://host:8786``); default ``$SPINLIB_DASK_SCHEDULER``.
    progress, desc, total, initial :
        A tqdm bar of ``total`` tasks (default: the items) starting at ``initial`` (off when
        ``$SPINLIB_NO_PROGRESS`` is set, as ``run_all.sh`` does under papermill).
    """
    from tqdm.auto import tqdm

    items = list(items)
    progress = progress and not quiet()
    scheduler = scheduler or scheduler_address()
    bar = tqdm(total=len(items) if total is None else total, initial=initial, desc=desc, disable=not progress,
               leave=False)
    try:
        if scheduler:
            from distributed import Client, as_completed

            with Client(scheduler) as client:
                for _, result in as_completed(client.map(fn, items, pure=False), with_results=True):
                    bar.update()
                    yield result
            return
        if n_jobs is None:
            n_jobs = os.cpu_count() or 1
        if n_jobs == 1 or len(items) <= 1:
            for it in items:
                result = fn(it)
                bar.update()
                yield result
            return
        from joblib import Parallel, delayed

        for result in Parallel(n_jobs=n_jobs, return_as="generator_unordered", verbose=0)(delayed(fn)(it) for it in items):
            bar.update()
            yield result
    finally:
        bar.close()


@dataclass(frozen=True)
class _Indexed:
    fn: Callable

    def __call__(self, item):
        return item[0], self.fn(item[1])


def map_points(fn: Callable, items: Sequence, *, n_jobs: int | None = None, scheduler: str | None = None,
               progress: bool = False, desc: str = "points") -> list:
    """``[fn(item) for item in items]``, in item order, on the backends of :func:`iter_points`."""
    items = list(items)
    out = dict(iter_points(_Indexed(fn), list(enumerate(items)), n_jobs=n_jobs, scheduler=scheduler,
                           progress=progress, desc=desc))
    return [out[i] for i in range(len(items))]


@functools.lru_cache(maxsize=1)
def library_digest() -> str:
    """sha256 (first 16 hex digits) of every ``spinlib`` source file, by relative path: a study's store
    is keyed by it, so records computed by different library code never meet in one store."""
    import hashlib

    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def study_seeds(seed: int, n_seeds: int) -> list[int]:
    """The scenario seeds of every point: ``SeedSequence(seed).generate_state(n_seeds)``."""
    return [int(s) for s in np.random.SeedSequence(seed).generate_state(n_seeds)]


@dataclass(frozen=True)
class Study:
    """A study (module docstring).

    name : the store's file-name prefix (letters, digits, ``_ . -``).
    point : ``point(params: dict, seed: int) -> dict | list[dict]``, importable (a module-level function,
        or a frozen dataclass instance with ``__call__``) so that joblib and Dask workers can run it.
    points : the parameters of each point (dicts), in order.
    n_seeds : scenarios per point (>= 1).
    seed : master seed (an integer >= 0, :func:`study_seeds`).
    """

    name: str
    point: Callable
    points: tuple
    n_seeds: int
    seed: int

    def __post_init__(self):
        if hasattr(self.points, "__iter__") and not isinstance(self.points, (str, dict)):
            object.__setattr__(self, "points", tuple(self.points))  # (a generator is read once, here)
        if not isinstance(self.name, str) or not NAME.match(self.name):
            raise ValidationError(f"study name must be letters, digits, '_', '.' or '-', got {self.name!r}")
        if not callable(self.point):
            raise ValidationError(f"study {self.name}: point must be callable, got {type(self.point).__name__}")
        if not isinstance(self.points, tuple) or not self.points or not all(isinstance(p, dict) for p in self.points):
            raise ValidationError(f"study {self.name}: points must be a non-empty sequence of dicts")
        check_int_range(f"study {self.name}: n_seeds", self.n_seeds, 1)
        check_int_range(f"study {self.name}: seed", self.seed, 0)

    def seeds(self) -> list[int]:
        return study_seeds(int(self.seed), int(self.n_seeds))

    def tasks(self) -> list[tuple[dict, int]]:
        """Every (point parameters, seed), points outer, seeds inner: the order of the records."""
        seeds = self.seeds()
        return [(p, s) for p in self.points for s in seeds]

    @property
    def key(self) -> str:
        """The configuration's hash (point function by name, dataclasses by their identity fields, as the
        results cache keys them) with the library's source digest (:func:`library_digest`)."""
        cfg = {"name": self.name, "point": self.point, "points": list(self.points), "n_seeds": int(self.n_seeds),
               "seed": int(self.seed), "library": library_digest()}
        return config_key(key_form(cfg))

    def store(self, directory: Path | None = None, key: str | None = None) -> Path:
        """Where a run appends its finished tasks (module docstring)."""
        return Path(directory or STORES) / f"{self.name}-{key or self.key}.jsonl"

    def run(self, *, n_jobs: int | None = None, scheduler: str | None = None, progress: bool = True,
            store_dir: Path | None = None) -> list[dict]:
        """Every task's records, in task order: ``{**params, "seed": seed, **metrics}`` per task whose point
        returns a dict, ``{**params, "seed": seed, **record}`` per record of one that returns a list (the
        parameters as record fields: scalars as they are, anything else as canonical JSON). Finished tasks
        are read back from an interrupted run's store (module docstring)."""
        tasks, key = self.tasks(), self.key
        path = self.store(store_dir, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(path, "this study's store"):
            # rewritten from the lines kept: a torn last line is never appended onto
            done = resume_jsonl(path, lambda kept: read_store(path, key, [s for _, s in tasks], kept))
            todo = [i for i in range(len(tasks)) if i not in done]
            if todo:
                with open_append(path) as f:
                    for i, out in iter_points(_Task(self.point), [(i, *tasks[i]) for i in todo], n_jobs=n_jobs,
                                              scheduler=scheduler, progress=progress, desc=f"study {self.name}",
                                              total=len(tasks), initial=len(done)):
                        text = json.dumps({"study": key, "task": i, "seed": tasks[i][1], "output": out},
                                          default=json_default, sort_keys=True)
                        f.write(text + "\n")
                        f.flush()
                        os.fsync(f.fileno())
                        done[i] = json.loads(text)
            records = []
            for i, (params, seed) in enumerate(tasks):
                out = done[i]["output"]
                head = {**_plain(params), "seed": seed}
                records += [{**head, **r} for r in (out if isinstance(out, list) else [out])]
            path.unlink(missing_ok=True)
        return records


@dataclass(frozen=True)
class _Task:
    point: Callable

    def __call__(self, task) -> tuple[int, object]:
        i, params, seed = task
        out = self.point(params, seed)
        if not _is_output(out):
            raise ValidationError(f"a study's point must return a dict or a list of dicts, got {type(out).__name__}")
        return i, out


def _is_output(out) -> bool:
    """Whether a point's output is what a study stores: a dict of metrics or a list of dict records."""
    return isinstance(out, dict) or (isinstance(out, list) and all(isinstance(r, dict) for r in out))


def _plain(params: dict) -> dict:
    """A point's parameters as record fields: scalars as they are, anything else as canonical JSON."""
    def plain(v):
        if isinstance(v, np.generic) and np.ndim(v) == 0 and isinstance(v.item(), (bool, int, float)):
            return v.item()
        return v if v is None or isinstance(v, (str, bool, int, float)) else canonical_json(v)

    return {k: plain(v) for k, v in params.items()}


def read_store(path: Path, key: str, seeds: list[int], kept: list | None = None) -> dict:
    """The finished tasks of a study's store, by task index (``seeds``: each task's seed, checked; ``kept``:
    a list the good lines are appended to): a torn last line is dropped, any other bad line is one
    :class:`ValidationError` naming the file, the line and the field (module docstring). An undefined metric
    (``NaN``) is read as it was written."""
    n_tasks = len(seeds)

    def error(p, line, field, allowed):
        return ValidationError(f"{p}:{line}: {field} must be {allowed} (a study's partial store; delete it to "
                               f"start the study over)")

    def check(r, p, line):
        if not isinstance(r, dict) or set(r) != {"study", "task", "seed", "output"}:
            raise error(p, line, "<record>", "an object with the fields output, seed, study, task")
        if isinstance(r["task"], bool) or not isinstance(r["task"], int) or not 0 <= r["task"] < n_tasks:
            raise error(p, line, "task", f"an integer in [0, {n_tasks})")
        if r["seed"] != seeds[r["task"]]:
            raise error(p, line, "seed", f"{seeds[r['task']]}, task {r['task']}'s seed")
        if not _is_output(r["output"]):
            raise error(p, line, "output", "a dict or a list of dicts")
        return r["task"]

    return read_jsonl_records(path, "study records", check, error, "a task not stored before (task {key} repeats)",
                              same={"study": key}, key_field="task", allow_nonfinite=True, good_lines=kept)


__all__ = ["Study", "study_seeds", "study_name", "library_digest", "read_store", "iter_points", "map_points",
           "SCHEDULER_ENV", "STORES"]
