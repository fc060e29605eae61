"""What every numbered notebook calls first and last: claims and provenance.

    from spinlib.notebook import start, finish
    start("03_heterogeneous_draft_control", SEED=SEED, SMOKE=SMOKE, ...)   # parameters cell values
    ...
    finish()

:func:`start` names the notebook for :mod:`spinlib.claims` and starts recording every file the
process opens under ``data/`` (a Python audit hook). :func:`finish` replaces the notebook's claims by
this run's (:func:`spinlib.claims.complete`) and writes ``<results>/provenance/<notebook>.json``: the commit and whether the sources had uncommitted
changes, the parameters, and the sha256 of the notebook's source, of every ``spinlib`` module
imported and of every data file read, and the results-cache entries the run read or wrote
(:func:`spinlib.cache.used_entries`; ``python -m spinlib.notebook prune-cache`` deletes the entries no
record lists). :func:`stale` compares such a record with the files of
the work tree: ``bash run_all.sh --stale`` re-runs the stale notebooks and a test fails on a
committed executed notebook that is stale or was produced from uncommitted changes.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from . import cache, claims
from .cache import atomic_write_text, json_default, sha256_file
from .paths import DATA, RESULTS, ROOT
from .validation import ValidationError

_READ: set = set()
_STATE: dict = {"name": None, "params": None, "hook": False}


def _audit(event, args):
    if event == "open" and args and isinstance(args[0], (str, Path)):
        try:
            p = Path(args[0]).resolve()
        except (OSError, ValueError):
            return
        if p.is_relative_to(DATA.resolve()) and p.is_file():
            _READ.add(p)


def start(name: str, *, not_holding=(), **params) -> None:
    """Begin a notebook run: claims go to ``<results>/claims/<name>.json``; data reads are recorded.
    ``not_holding``: the ids of the claims the notebook expects not to hold (:func:`spinlib.claims.begin`);
    ``params``: the parameters cell's values (recorded in the provenance)."""
    _STATE["name"], _STATE["params"] = name, params
    _READ.clear()
    if not _STATE["hook"]:
        sys.addaudithook(_audit)
        _STATE["hook"] = True
    claims.begin(name, not_holding=not_holding)


def _git(*args) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT).stdout.strip()


def inputs_of(name: str) -> dict:
    """sha256 of the notebook source, of the spinlib modules now imported and of the data files read."""
    files = {f"notebooks/{name}.ipynb": ROOT / "notebooks" / f"{name}.ipynb"}
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        if f and Path(f).resolve().is_relative_to((ROOT / "spinlib").resolve()):
            files[Path(f).resolve().relative_to(ROOT.resolve()).as_posix()] = Path(f)
    for p in _READ:
        files[p.relative_to(ROOT.resolve()).as_posix()] = p
    return {k: sha256_file(v) for k, v in sorted(files.items()) if v.is_file()}


def finish() -> Path:
    """Write the provenance record of this run (module docstring); returns its path."""
    name = _STATE["name"]
    if name is None:
        raise RuntimeError("spinlib.notebook.start() was not called")
    dirty = _git("status", "--porcelain", "--", "spinlib", "notebooks", "data")
    rec = {"notebook": name, "commit": _git("rev-parse", "HEAD") or None, "uncommitted_changes": bool(dirty),
           "parameters": _STATE["params"], "inputs": inputs_of(name), "cache_entries": cache.used_entries()}
    claims.complete()  # the claims of this run replace the last complete run's only now, then its record
    path = RESULTS / "provenance" / f"{name}.json"
    atomic_write_text(path, json.dumps(rec, indent=1, sort_keys=True, default=json_default) + "\n")
    return path


_DIGEST = re.compile(r"^[0-9a-f]{64}$")


def stale(record_path: Path) -> list[str]:
    """The inputs of a provenance record whose files now differ (or are gone); empty when current."""
    try:
        rec = json.loads(Path(record_path).read_text(encoding="utf-8"))
        inputs = rec["inputs"]
        if not isinstance(inputs, dict) or not all(isinstance(k, str) and isinstance(v, str) and _DIGEST.match(v)
                                                   for k, v in inputs.items()):
            raise TypeError("inputs must map paths to sha256 digests")
        name = Path(record_path).stem
        if rec.get("notebook") != name:
            raise ValueError(f"it names notebook {rec.get('notebook')!r}, not {name!r}")
        # a record that lists nothing (or not its own source, or no library module) would read as current forever
        if f"notebooks/{name}.ipynb" not in inputs or not any(k.startswith("spinlib/") for k in inputs):
            raise ValueError("its inputs do not list the notebook's source and the library modules it imported")
        if any(Path(k).is_absolute() or ".." in Path(k).parts for k in inputs):
            raise ValueError("an input lies outside the repository")
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as e:  # fail closed: unknown is not current
        raise ValidationError(f"provenance record {record_path} cannot be read ({type(e).__name__}: {e}); "
                              "re-run its notebook (bash run_all.sh --only NN)") from None
    out = []
    for rel, digest in inputs.items():
        f = ROOT / rel
        if not f.is_file() or sha256_file(f) != digest:
            out.append(rel)
    return out


def cache_entries_used(results: Path = RESULTS) -> set[str]:
    """The results-cache entries the notebooks' last runs used (the ``cache_entries`` of their provenance
    records under ``results``).

    Raises ValidationError naming a notebook whose record is missing or predates the field."""
    used = set()
    for nb in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        rec = Path(results) / "provenance" / f"{nb.stem}.json"
        entries = json.loads(rec.read_text(encoding="utf-8")).get("cache_entries") if rec.is_file() else None
        if entries is None:
            raise ValidationError(f"notebook {nb.stem} has no provenance record listing its cache entries: run it first")
        used.update(entries)
    return used


def prune_cache(results: Path = RESULTS) -> list[str]:
    """Delete the entries of ``results/cache`` that no notebook's last run used (:func:`cache_entries_used`);
    returns their names. The committed cache then holds exactly what the committed results were computed from."""
    used = cache_entries_used(results)
    gone = sorted(p.name for p in (Path(results) / "cache").glob("*.json") if p.name not in used)
    for name in gone:
        (Path(results) / "cache" / name).unlink()
    return gone


def main(argv=None) -> int:
    """``python -m spinlib.notebook stale``: print the stale notebooks (one per line);
    ``python -m spinlib.notebook prune-cache``: delete the cache entries no notebook's last run used."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["prune-cache"]:
        try:
            gone = prune_cache()
        except ValidationError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(f"removed {len(gone)} unused cache entries" + "".join(f"\n  {g}" for g in gone))
        return 0
    if not args or args[0] != "stale":
        print("usage: python -m spinlib.notebook stale | prune-cache", file=sys.stderr)
        return 2
    found = []
    for nb in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        rec = RESULTS / "provenance" / f"{nb.stem}.json"
        try:
            if not rec.is_file() or stale(rec):
                found.append(nb.stem[:2])
        except ValidationError as e:  # one unreadable record: no answer at all (a partial list would fail open)
            print(f"error: {e}", file=sys.stderr)
            return 2
    print("\n".join(found))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
