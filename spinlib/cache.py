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


def config_key(name: str, config: dict) -> str:
    blob = json.dumps({"name": name, "config": config}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


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
    path = cache_dir / f"{name}-{config_key(name, config)}.json"
    canon = json.loads(json.dumps(config, sort_keys=True, default=str))
    if not recompute and path.exists():
        try:
            stored = json.loads(path.read_text())
            if stored.get("config") == canon:
                return stored["value"]
        except (json.JSONDecodeError, KeyError):
            pass  # a corrupt entry is recomputed
    value = compute()
    atomic_write_text(path, json.dumps({"name": name, "config": canon, "value": value}, sort_keys=True))
    return value


def write_summary(name: str, data: dict, directory: Path | None = None) -> Path:
    """Write a notebook's result summary to ``results/summaries/<name>.json`` (atomically)."""
    from .paths import RESULTS

    directory = Path(directory or RESULTS / "summaries")
    path = directory / f"{name}.json"
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True, default=_jsonable) + "\n")
    return path


def _jsonable(x):
    import numpy as np

    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    if isinstance(x, np.ndarray):
        return x.tolist()
    return str(x)
