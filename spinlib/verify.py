"""Compare the results of a re-run with a reference run (``bash run_all.sh --verify``).

Compared: every claim (``claims/<notebook>.json``: the values and whether it holds) and every
number of every summary (``summaries/<notebook>.json``). Wall-clock fields (times of a solve or a
run, speeds, speed-ups: measurements of the machine, not results; :data:`spinlib.cache.TIMING_KEY`)
are written to ``timings/<notebook>.json`` apart from the summaries and are not compared (they are
skipped here too, for runs made before that split). Numbers agree when ``|a - b| <= atol + rtol |b|``;
everything else (strings, booleans, structure) must be equal. Prints one line per difference and
how many result files are byte-identical; exit 1 when any difference exceeds the tolerance.

    python -m spinlib.verify REFERENCE_DIR RERUN_DIR [--only NN ...] [--rtol 1e-9]

What is byte-identical and what only within a tolerance is stated in the README (reproducibility).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from .cache import is_timing


def diff(a, b, path: str = "", rtol: float = 1e-9, atol: float = 1e-12) -> list[str]:
    """Differences between two JSON values (timing keys skipped), as ``path: a != b`` lines."""
    out = []
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if is_timing(k):
                continue
            p = f"{path}.{k}" if path else str(k)
            if k not in a or k not in b:
                out.append(f"{p}: only in {'reference' if k in a else 'rerun'}")
            else:
                out += diff(a[k], b[k], p, rtol, atol)
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items != {len(b)}"]
        for i, (x, y) in enumerate(zip(a, b)):
            out += diff(x, y, f"{path}[{i}]", rtol, atol)
        return out
    num = (int, float)
    if isinstance(a, num) and isinstance(b, num) and not isinstance(a, bool) and not isinstance(b, bool):
        if math.isnan(a) and math.isnan(b):
            return []
        if abs(a - b) <= atol + rtol * abs(a):
            return []
        return [f"{path}: {a!r} != {b!r}"]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def _claims(path: Path) -> dict:
    return {c["id"]: {"values": c["values"], "holds": c["holds"]} for c in json.loads(path.read_text())}


def compare_runs(ref: Path, rerun: Path, notebooks=None, rtol: float = 1e-9) -> list[str]:
    """All differences between two result folders (claims and summaries of the notebooks re-run)."""
    ref, rerun = Path(ref), Path(rerun)
    lines = []
    names = sorted({p.stem for p in (rerun / "claims").glob("*.json")} | {p.stem for p in (rerun / "summaries").glob("*.json")})
    if notebooks:
        names = [n for n in names if n[:2] in notebooks]
    if not names:
        return [f"{rerun}: no claims or summaries to compare"]
    for name in names:
        for kind, load in (("claims", _claims), ("summaries", lambda p: json.loads(p.read_text()))):
            r, n = ref / kind / f"{name}.json", rerun / kind / f"{name}.json"
            if not n.exists():
                continue
            if not r.exists():
                lines.append(f"{kind}/{name}.json: not in the reference run")
                continue
            lines += [f"{kind}/{name}.json: {d}" for d in diff(load(r), load(n), rtol=rtol)]
    return lines


def byte_identical(ref: Path, rerun: Path, notebooks=None) -> tuple[list[str], list[str]]:
    """``(same, differ)``: the re-run's result files (claims, summaries) whose bytes equal the reference's, and
    those that do not (they may still agree within the tolerance of :func:`compare_runs`)."""
    same, differ = [], []
    for kind in ("claims", "summaries"):
        for n in sorted((Path(rerun) / kind).glob("*.json")):
            if notebooks and n.stem[:2] not in notebooks:
                continue
            r = Path(ref) / kind / n.name
            (same if r.exists() and r.read_bytes() == n.read_bytes() else differ).append(f"{kind}/{n.name}")
    return same, differ


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m spinlib.verify", description=__doc__.splitlines()[0])
    ap.add_argument("reference", type=Path)
    ap.add_argument("rerun", type=Path)
    ap.add_argument("--only", nargs="*", default=None, help="notebook numbers (NN) to compare")
    ap.add_argument("--rtol", type=float, default=1e-9)
    args = ap.parse_args(argv)
    lines = compare_runs(args.reference, args.rerun, args.only, args.rtol)
    for line in lines:
        print(line)
    same, differ = byte_identical(args.reference, args.rerun, args.only)
    print(f"verify: {len(same)} of {len(same) + len(differ)} result files byte-identical"
          + (f"; differing bytes: {', '.join(differ)}" if differ else ""))
    print(f"verify: {len(lines)} difference(s) beyond rtol {args.rtol:g} (timings excluded)"
          if lines else f"verify: the re-run agrees with {args.reference} (rtol {args.rtol:g}; timings excluded)")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
