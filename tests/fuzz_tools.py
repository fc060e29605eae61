"""Mutation fuzzing of the command-line boundary (issue 12): every command either succeeds with
finite, validated output or fails with one line and a non-zero exit -- never a traceback.

The strategies (``hypothesis``) start from a valid scenario or allocation and apply 1-3 mutations:
drop a field, rename it, retype it (null, strings, lists, objects, booleans, huge integers, nesting),
give a number an extreme value (0, -1, 5e-324, 1e308, NaN, inf, ...), or replace the file by random
bytes. :func:`run_cli` runs ``python -m spinlib`` in-process and :func:`check_outcome` states the
contract. Used by ``tests/test_fuzz.py`` (a CI-sized share) and ``benchmarks/fuzz_campaign.py``.
"""
from __future__ import annotations

import contextlib
import copy
import io
import json
import math

EXTREMES = [0, -0.0, -1, 1, 5e-324, 1e-300, 1e300, 1e308, -1e308, float("nan"), float("inf"), float("-inf"),
            10**400, 10**5000, 2**63, 0.5, 1e15]
RETYPES = [None, "x", "", [], {}, True, False, [[1]], {"a": {"b": []}}, "1e6", "nan"]


def paths(obj, prefix=()):
    """Every path (tuple of keys/indices) to a node of a JSON value, the root excluded."""
    out = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.append(prefix + (k,))
            out += paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.append(prefix + (i,))
            out += paths(v, prefix + (i,))
    return out


def _parent(obj, path):
    for k in path[:-1]:
        obj = obj[k]
    return obj


def mutations():
    """A hypothesis strategy of mutation lists ``[(op, path_index, value_index), ...]``."""
    from hypothesis import strategies as st

    op = st.sampled_from(["drop", "rename", "retype", "extreme", "extreme", "extreme"])
    return st.lists(st.tuples(op, st.integers(0, 10**6), st.integers(0, 10**6)), min_size=1, max_size=3)


def apply(doc, muts):
    """Apply mutations to a deep copy of a JSON value (paths chosen modulo the current node count)."""
    doc = json.loads(json.dumps(doc))
    for op, pi, vi in muts:
        ps = paths(doc)
        if not ps:
            break
        path = ps[pi % len(ps)]
        parent, key = _parent(doc, path), path[-1]
        if op == "drop":
            del parent[key]
        elif op == "rename" and isinstance(parent, dict):
            parent[str(key) + "_"] = parent.pop(key)
        elif op == "retype":
            parent[key] = copy.deepcopy(RETYPES[vi % len(RETYPES)])  # never share (or later mutate) the template
        else:
            numeric = [p for p in ps if isinstance(_parent(doc, p)[p[-1]], (int, float))
                       and not isinstance(_parent(doc, p)[p[-1]], bool)]
            if numeric:
                p = numeric[pi % len(numeric)]
                _parent(doc, p)[p[-1]] = EXTREMES[vi % len(EXTREMES)]
    return doc


def run_cli(argv):
    """``(exit code, stdout, stderr, exception or None)`` of ``python -m spinlib argv``, in-process."""
    from spinlib.cli import main

    out, err = io.StringIO(), io.StringIO()
    exc = None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as e:  # argparse usage errors
            rc = e.code if isinstance(e.code, int) else 1
        except Exception as e:  # noqa: BLE001 -- the contract says this never happens
            rc, exc = -1, e
    return rc, out.getvalue(), err.getvalue(), exc


def _all_finite(x) -> bool:
    if isinstance(x, float):
        return math.isfinite(x)
    if isinstance(x, dict):
        return all(_all_finite(v) for v in x.values())
    if isinstance(x, list):
        return all(_all_finite(v) for v in x)
    return True


def check_outcome(rc, out, err, exc) -> str | None:
    """None when the contract holds, else what broke it."""
    if exc is not None:
        return f"traceback: {type(exc).__name__}: {exc}"
    if rc == 0:
        try:
            doc = json.loads(out)
        except json.JSONDecodeError:
            return "exit 0 without JSON output"
        if not _all_finite(doc):
            return "exit 0 with a non-finite number in the output"
        return None
    lines = [ln for ln in err.strip().splitlines() if ln]
    if rc == 2 and len(lines) == 1 and lines[0].startswith("spinlib: error:"):
        return None
    if rc == 2 and lines and lines[0].startswith("usage:") and ": error:" in lines[-1]:
        return None  # argparse: its usage and one error line
    return f"exit {rc}, stderr {err[-300:]!r}"
