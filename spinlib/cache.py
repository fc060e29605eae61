"""A small results cache: JSON files keyed by a hash of the configuration, written atomically.

>>> value = cached("goodput-sweep", {"seed": 1, "K": 10}, lambda: {"g": 1.0})   # doctest: +SKIP

The key is the SHA-256 of the canonical JSON of ``(name, config)``; the file stores both the
config and the value, so a cache hit is checked against the config it was computed for.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

from .paths import CACHE


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and ``os.replace`` (no torn files)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def json_default(x):
    """The one JSON encoder of the library (``json.dumps(..., default=json_default)``): NumPy
    scalars and arrays, tuples and paths; anything else is an error, never a silent ``str``."""
    import numpy as np

    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, Path):
        return str(x)
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")


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
    """
    cache_dir = Path(cache_dir or os.environ.get("SPINLIB_CACHE_DIR", CACHE))
    path = cache_dir / f"{name}-{config_key({'name': name, 'config': config})}.json"
    canon = json.loads(canonical_json(config))
    if not recompute and path.exists():
        try:
            stored = json.loads(path.read_text())
            if stored.get("config") == canon:
                return stored["value"]
        except (json.JSONDecodeError, KeyError):
            pass  # a corrupt entry is recomputed
    value = compute()
    atomic_write_text(path, json.dumps({"name": name, "config": canon, "value": value}, sort_keys=True, default=json_default))
    return value


def write_summary(name: str, data: dict, directory: Path | None = None) -> Path:
    """Write a notebook's result summary to ``results/summaries/<name>.json`` (atomically)."""
    from .paths import RESULTS

    directory = Path(directory or RESULTS / "summaries")
    path = directory / f"{name}.json"
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True, default=json_default) + "\n")
    return path
