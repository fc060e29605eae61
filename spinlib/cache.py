"""A small results cache: JSON files keyed by a hash of the configuration, written atomically.

>>> value = cached("goodput-sweep", {"seed": 1, "K": 10}, lambda: {"g": 1.0})   # doctest: +SKIP

The key is the SHA-256 of the canonical JSON of ``(name, config)``; the file stores the config,
the value and the SHA-256 of the value, so a cache hit is checked against the config it was
computed for and against its own content (an edited entry is recomputed, never returned).
"""
from __future__ import annotations

import contextvars
import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any, Callable

from .jsonio import atomic_write_text, json_default, loads_json  # noqa: F401 (re-exported)
from .paths import CACHE, env_dir
from .validation import ValidationError


def sha256_file(path) -> str:
    """sha256 (hex) of a file's bytes, read in 1 MiB chunks."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def canonical_json(obj) -> str:
    """Canonical JSON (sorted keys, :func:`json_default`) of ``obj``: what :func:`config_key` hashes."""
    return json.dumps(obj, sort_keys=True, default=json_default)


def config_key(config, length: int = 16) -> str:
    """The one configuration hash: SHA-256 of :func:`canonical_json`, first ``length`` hex digits."""
    return hashlib.sha256(canonical_json(config).encode()).hexdigest()[:length]


def cached(
    name: str,
    config: dict,
    compute: Callable[[], Any],
    *,
    recompute: bool = False,
    cache_dir: Path | None = None,
) -> Any:
    """Return the cached JSON value for ``(name, config)`` or compute, store and return it.

    Parameters
    ----------
    name : str
        Human-readable prefix of the file name.
    config : dict
        Everything the result depends on (JSON-serialisable).
    compute : callable
        Returns a JSON-serialisable value.
    recompute : bool
        Ignore an existing entry and overwrite it.
    cache_dir : Path, optional
        Defaults to ``results/cache`` (or ``$SPINLIB_CACHE_DIR``).

    An entry is trusted only if it parses as ``{"name", "config", "value", "value_sha256"}`` with
    the same name and config and the sha256 of its value's canonical JSON matches the recorded one
    (content-addressed: an edited value is a miss); anything else (torn, edited, a list, a
    directory, a symbolic link) is recomputed and replaced, the link itself and never its target.
    """
    cache_dir = Path(cache_dir) if cache_dir else env_dir("SPINLIB_CACHE_DIR", CACHE)
    path = cache_dir / f"{name}-{config_key({'name': name, 'config': config})}.json"
    canon = json.loads(canonical_json(config))
    if path.parent.resolve() == Path(CACHE).resolve():
        _USED.add(path.name)
    if not recompute and path.is_file() and not path.is_symlink():
        stored = _verified_entry(path, name, canon)
        if stored is not _MISS:
            return stored
    if path.is_dir() and not path.is_symlink():
        import shutil

        shutil.rmtree(path)
    # the value as a hit returns it (keys sorted, as stored): the same bytes whether or not it was cached
    value = json.loads(json.dumps(compute(), default=json_default, sort_keys=True))
    atomic_write_text(path, json.dumps({"name": name, "config": canon, "value": value,
                                        "value_sha256": value_digest(value)}, sort_keys=True))
    return value


_MISS = object()
_USED: set = set()


def used_entries() -> list[str]:
    """The entries of the results cache (``results/cache``, file names) that :func:`cached` read or wrote
    in this process, sorted. A notebook's provenance records them (:func:`spinlib.notebook.finish`), so
    the committed cache can be checked to hold exactly the entries the committed run used
    (``python -m spinlib.notebook prune-cache`` removes the others)."""
    return sorted(_USED)


def value_digest(value) -> str:
    """sha256 of a JSON value's canonical text (what a cache entry records of its own content)."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def read_entry(path: Path) -> dict | None:
    """A results-cache entry as stored, if it is whole and unedited: it parses (strictly:
    :func:`spinlib.jsonio.loads_json`) as ``{"name", "config", "value", "value_sha256"}``, its value's
    digest matches the recorded one and the file is named by its key (``<name>-<config hash>.json``,
    as :func:`cached` names it); ``None`` otherwise."""
    try:
        stored = loads_json(path.read_text(encoding="utf-8"), f"cache entry {path.name}", allow_nonfinite=True)
    except (OSError, ValueError, ValidationError):  # torn, not UTF-8, not JSON
        return None
    if (isinstance(stored, dict) and set(stored) == {"name", "config", "value", "value_sha256"}
            and isinstance(stored["name"], str)
            and path.name == f"{stored['name']}-{config_key({'name': stored['name'], 'config': stored['config']})}.json"
            and stored["value_sha256"] == value_digest(stored["value"])):
        return stored
    return None


def _verified_entry(path: Path, name: str, canon) -> Any:
    """The value of the entry at ``path`` if :func:`read_entry` trusts it and it holds this name and
    config; :data:`_MISS` otherwise (then recomputed)."""
    stored = read_entry(path)
    if stored is not None and stored["name"] == name and stored["config"] == canon:
        return stored["value"]
    return _MISS


def cache_name(fn: Callable) -> str:
    """The name a function is keyed by in the results cache: ``<namespace>.<qualified name>``, the
    namespace being its module's ``CACHE_NAMESPACE`` when the module sets one (the module its studies
    were first cached under: a study that moves keeps its cached results) and the module's name
    otherwise."""
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    namespace = getattr(module, "CACHE_NAMESPACE", None) or fn.__module__
    return f"{namespace}.{fn.__qualname__}"


def _key_default(x):
    """Key encoding beyond :func:`json_default`: functions by qualified name, dataclasses as dicts."""
    import dataclasses

    if isinstance(x, (range, set, frozenset)):
        return sorted(x) if isinstance(x, (set, frozenset)) else list(x)
    if callable(x) and hasattr(x, "__qualname__"):
        return cache_name(x)
    if callable(getattr(x, "cache_key_form", None)) and not isinstance(x, type):  # e.g. spinlib.online.deciders.Spec
        return x.cache_key_form()
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        # the fields that define the object (compare=True): diagnostics such as Allocation.info
        # (solver timings) or Scenario.meta do not change what a computation means
        return {"__type__": type(x).__qualname__,
                **{f.name: getattr(x, f.name) for f in dataclasses.fields(x) if f.compare}}
    return json_default(x)


def key_form(obj):
    """``obj`` as the results cache keys it (canonical JSON-able form): functions by :func:`cache_name`,
    dataclasses by their identity fields (``compare=True``), ranges and sets as sorted lists."""
    return json.loads(json.dumps(obj, sort_keys=True, default=_key_default))


def cached_call(fn: Callable, *args, version: int | str = 0, recompute: bool = False,
                exclude: tuple[str, ...] = ("n_jobs", "scheduler", "progress", "store_dir", "allow_long"), depends_on: dict | None = None,
                cache_dir: Path | None = None, **kwargs) -> Any:
    """``fn(*args, **kwargs)`` through the results cache, keyed by the function and its bound arguments.

    The key is the function's name (:func:`cache_name`), ``version`` (bump it when the function's output
    changes) and every argument after :meth:`inspect.Signature.bind` and defaults applied, except
    those in ``exclude`` (where the work runs, not what it computes), plus ``depends_on`` (data the
    function reads that is not an argument, e.g. a measured preset's values). Functions in arguments are
    keyed by their names (:func:`cache_name`), dataclasses by their identity fields (``compare=True``: an
    allocation's solver diagnostics in ``info`` are not part of its key). No hand-built keys::

        records = cached_call(sweep, make_scenario, "num_users", [2, 5], n_seeds=4, seed=0,
                              specs=paper1_specs(), version=RECORD_VERSION)
    """
    import inspect

    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    arguments = {}
    for k, v in bound.arguments.items():
        if k in exclude:
            continue
        param = inspect.signature(fn).parameters[k]
        if param.kind == inspect.Parameter.VAR_KEYWORD:
            arguments.update({kk: vv for kk, vv in v.items() if kk not in exclude})
        else:
            arguments[k] = v
    config = key_form({"fn": cache_name(fn), "version": version, "arguments": arguments,
                       "depends_on": depends_on or {}})

    def compute():
        token = _STUDY.set({"fn": config["fn"], "arguments": config["arguments"]})
        try:
            return fn(*args, **kwargs)
        finally:
            _STUDY.reset(token)

    return cached(fn.__name__, config, compute, recompute=recompute, cache_dir=cache_dir)


_STUDY: contextvars.ContextVar = contextvars.ContextVar("spinlib_cached_study", default=None)


def current_study() -> dict | None:
    """The study :func:`cached_call` is computing in this context: ``{"fn": its cache name, "arguments": its
    keyed arguments}``; ``None`` outside one, and in a worker process or a new thread, which do not inherit
    it: a study that loads models in one is not checked (the library's studies load them in the calling thread).

    What a result depends on beyond its arguments must be in its key; code that knows such a dependency
    checks it here (:func:`spinlib.sd.models.load_pair`: the torch kernel a pair runs on, chosen per
    machine, must be the study's ``kernel`` argument)."""
    return _STUDY.get()


#: wall-clock fields, recognised by name: times of a solve or a run, speeds, speed-ups (measurements
#: of the machine, not results). A new wall-clock field should be named ``wall_*``.
TIMING_KEY = re.compile(
    r"^wall_|^timing$|^timings$|speedup|^time_|^t_\w+_s$|_solve_ms|^fast_mode_\w*_s$|solve_time_s$|bnb_time_s$"
    r"|\[ms\]$|_per_s_wall$", re.IGNORECASE)


def is_timing(key) -> bool:
    """Whether a summary field is a wall-clock measurement (:data:`TIMING_KEY`)."""
    return bool(TIMING_KEY.search(str(key)))


_NO_TIMINGS = object()


def split_timings(data):
    """``(results, timings)``: ``data`` without its wall-clock fields, and those fields alone.

    Dicts are split key by key (a timing key takes its whole value), lists element by element
    (the timings part keeps the list's length, ``None`` where an element has none); the timings
    part is ``None`` when ``data`` holds no wall-clock field.
    """
    def split(x):
        if isinstance(x, dict):
            res, tim = {}, {}
            for k, v in x.items():
                if is_timing(k):
                    tim[k] = v
                    continue
                r, t = split(v)
                res[k] = r
                if t is not _NO_TIMINGS:
                    tim[k] = t
            return res, (tim if tim else _NO_TIMINGS)
        if isinstance(x, (list, tuple)):
            parts = [split(v) for v in x]
            tims = [t for _, t in parts]
            return [r for r, _ in parts], (_NO_TIMINGS if all(t is _NO_TIMINGS for t in tims)
                                           else [None if t is _NO_TIMINGS else t for t in tims])
        return x, _NO_TIMINGS

    res, tim = split(data)
    return res, (None if tim is _NO_TIMINGS else tim)


def write_summary(name: str, data: dict, directory: Path | None = None) -> Path:
    """Write a notebook's result summary to ``results/summaries/<name>.json`` (atomically).

    Wall-clock fields (:func:`is_timing`) go to ``results/timings/<name>.json`` instead (the
    ``timings`` folder beside ``directory``), so that a re-run's summary is byte-identical to the
    committed one; a stale timings file of the same name is removed when there is none.
    """
    from .paths import RESULTS

    directory = Path(directory or RESULTS / "summaries")
    results, timings = split_timings(data)
    path = directory / f"{name}.json"
    tpath = directory.parent / "timings" / f"{name}.json"
    atomic_write_text(path, json.dumps(results, indent=2, sort_keys=True, default=json_default) + "\n")
    if timings is not None:
        atomic_write_text(tpath, json.dumps(timings, indent=2, sort_keys=True, default=json_default) + "\n")
    elif tpath.exists():
        tpath.unlink()
    return path
