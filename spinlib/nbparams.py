"""Notebook parameters as declared: one place that types and bounds ``run_all.sh -p NAME VALUE``.

Each numbered notebook's ``parameters`` cell declares every parameter on one line::

    N_SEEDS = 20  # random cells per sweep value (integer, 1 or more)
    H_GRID = "0.3,0.5,0.7,0.9"  # comma-separated thresholds (each in (0, 1))

The default gives the type (``bool``, ``int``, ``float`` or ``str``), and the comment's last
parenthesised group gives the range, in one of four forms, optionally after ``integer,`` (required
for ``int`` parameters) and ``each`` (a comma-separated list of numbers in a ``str`` parameter)::

    A or more      A..B      > A      in (A, B)

:func:`declared` reads the declarations, :func:`check` checks ``-p`` values against them before any
notebook runs and returns papermill's arguments (``-r`` for strings, so papermill never turns
``"2"`` into an integer), and ``python -m spinlib.nbparams NOTEBOOK SMOKE NAME VALUE ...`` is the
command ``run_all.sh`` calls. Every refusal is one line naming the parameter and its allowed range.
A notebook joins by declaration: ``tests/test_nbparams.py`` requires every numeric parameter of
every notebook to declare a range this module reads.
"""
from __future__ import annotations

import ast
import difflib
import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from .validation import ValidationError

_NUM = r"[+-]?[0-9][0-9,]*(?:\.[0-9]+)?"
_FORMS = [  # (pattern after the optional "integer, " and "each ", bounds from its groups)
    (re.compile(rf"({_NUM}) or more"), lambda g: (g[0], None, False, False)),
    (re.compile(rf"({_NUM})\.\.({_NUM})"), lambda g: (g[0], g[1], False, False)),
    (re.compile(rf"> ({_NUM})"), lambda g: (g[0], None, True, False)),
    (re.compile(rf"in \(({_NUM}), ({_NUM})\)"), lambda g: (g[0], g[1], True, True)),
]
_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)


@dataclass(frozen=True)
class Parameter:
    """One declared notebook parameter.

    ``kind`` is the default's type name; ``lo``/``hi`` bound the value (or each list element when
    ``each``), open at the ends flagged ``lo_open``/``hi_open``; ``None`` means unbounded.
    """
    name: str
    default: object
    comment: str
    kind: str
    integer: bool = False
    each: bool = False
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False

    @property
    def ranged(self) -> bool:
        return self.lo is not None or self.hi is not None

    def describe(self) -> str:
        """The allowed values in words, e.g. ``an integer, 1 or more``."""
        if self.kind == "bool":
            return "True or False"
        what = {"int": "an integer", "float": "a finite number"}.get(self.kind, "a string")
        if self.each:
            what = "a comma-separated list of " + ("integers" if self.integer else "finite numbers")
        if not self.ranged:
            return what
        lo, hi = (_fmt(self.lo), _fmt(self.hi))
        if self.hi is None:
            rng = f"> {lo}" if self.lo_open else f"{lo} or more"
        elif self.lo_open and self.hi_open:
            rng = f"in ({lo}, {hi})"
        else:
            rng = f"{lo}..{hi}"
        return f"{what}, {'each ' if self.each else ''}{rng}"


def _fmt(x: float | None) -> str:
    return "" if x is None else (str(int(x)) if float(x).is_integer() else repr(x))


def _last_group(comment: str) -> str:
    """The last top-level parenthesised group of ``comment`` (nested groups kept), or ''."""
    depth, start, last = 0, None, ""
    for i, ch in enumerate(comment):
        if ch == "(":
            if depth == 0:
                start = i + 1
            depth += 1
        elif ch == ")" and depth:
            depth -= 1
            if depth == 0:
                last = comment[start:i]
    return last


def _declaration(name: str, default: object, comment: str) -> Parameter:
    kind = type(default).__name__
    if kind not in ("bool", "int", "float", "str"):
        raise ValidationError(f"parameter {name}: default {default!r} is not a bool, int, float or str")
    group = _last_group(comment).strip()
    integer = group.startswith("integer")
    rest = group[len("integer"):].lstrip(",; ").strip() if integer else group
    each = kind == "str" and rest.startswith("each ")
    rest = rest[len("each "):] if each else rest
    for pat, bounds in _FORMS:
        m = pat.match(rest)
        if m:
            lo, hi, lo_open, hi_open = bounds([g.replace(",", "") for g in m.groups()])
            return Parameter(name, default, comment, kind, integer, each, float(lo),
                             None if hi is None else float(hi), lo_open, hi_open)
    return Parameter(name, default, comment, kind, integer, each)


def declared(notebook: Path) -> dict[str, Parameter]:
    """The parameters cell of ``notebook``: name -> :class:`Parameter` (in the cell's order)."""
    nb = json.loads(Path(notebook).read_text(encoding="utf-8"))
    cell = next((c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])), None)
    if cell is None:
        return {}
    src = "".join(cell["source"])
    lines = src.splitlines()
    out = {}
    for node in ast.parse(src).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            tail = lines[node.end_lineno - 1][node.value.end_col_offset:]  # after the value (a '#' in a string is not a comment)
            comment = tail.split("#", 1)[1].strip() if "#" in tail else ""
            name = node.targets[0].id
            out[name] = _declaration(name, ast.literal_eval(node.value), comment)
    return out


def _number(p: Parameter, text: str, what: str) -> float:
    pat = _INT if (p.integer or p.kind == "int") else _FLOAT
    if not pat.fullmatch(text):
        raise ValidationError(f"-p {p.name} must be {p.describe()}, got {what}")
    x = float(text)
    if not math.isfinite(x):
        raise ValidationError(f"-p {p.name} must be {p.describe()}, got {what}")
    below = p.lo is not None and (x <= p.lo if p.lo_open else x < p.lo)
    above = p.hi is not None and (x >= p.hi if p.hi_open else x > p.hi)
    if below or above:
        raise ValidationError(f"-p {p.name} must be {p.describe()}, got {what}")
    return x


def parse(p: Parameter, text: str) -> object:
    """``text`` as the value of ``p``: checked against its type and range, or one line naming both."""
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise ValidationError(f"-p {p.name} must be {p.describe()}, got a value with control characters")
    shown = repr(text) if len(text) <= 40 else repr(text[:40]) + "..."
    if p.kind == "bool":
        if text not in ("True", "False"):
            raise ValidationError(f"-p {p.name} must be True or False, got {shown}")
        return text == "True"
    if p.kind == "int":
        _number(p, text, shown)
        return int(text)  # exact: the float above only bounds it
    if p.kind == "float":
        return _number(p, text, shown)
    if p.each:
        items = text.split(",")
        if not text or any(not i.strip() for i in items):
            raise ValidationError(f"-p {p.name} must be {p.describe()}, got {shown}")
        for i in items:
            _number(p, i.strip(), f"{i.strip()!r} in {shown}")
        return text
    if not text.strip():
        raise ValidationError(f"-p {p.name} must be a non-empty string, got {shown}")
    return text


def smoke_fixed(notebook: Path) -> set[str]:
    """Names the notebook sets itself under ``SMOKE`` (``x = a if not SMOKE else b``, ``if SMOKE:``)."""
    nb = json.loads(Path(notebook).read_text(encoding="utf-8"))
    fixed: set[str] = set()
    for c in nb["cells"]:
        if c["cell_type"] != "code":
            continue
        src = "\n".join(l for l in "".join(c["source"]).splitlines() if not l.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, (ast.IfExp, ast.If)) and isinstance(node.test, ast.Name) and node.test.id == "SMOKE":
                other = node.orelse if isinstance(node.orelse, list) else [node.orelse]
                fixed |= {x.id for o in other for x in ast.walk(o) if isinstance(x, ast.Name)}
    return fixed


def check(notebook: Path, pairs: list[tuple[str, str]], smoke: bool = False) -> list[str]:
    """Check ``-p NAME VALUE`` pairs for ``notebook``; return papermill's arguments for them.

    Refused (one line each): a name the notebook does not declare (with the nearest one), a name given
    twice, ``SMOKE``/``RECOMPUTE`` (run_all.sh has flags for them), a value outside its declaration,
    and under ``smoke`` a parameter the smoke run replaces.
    """
    params = declared(notebook)
    names = [n for n, _ in pairs]
    out: list[str] = []
    for n, v in pairs:
        if n in ("SMOKE", "RECOMPUTE"):
            raise ValidationError(f"use --smoke / --recompute, not -p {n}")
        if n not in params:
            near = difflib.get_close_matches(n, sorted(params), n=1)
            raise ValidationError(f"-p {n}: {notebook} has no parameter {n}"
                                  + (f" (did you mean {near[0]}?)" if near else f" (its parameters: {', '.join(params)})"))
        if names.count(n) > 1:
            raise ValidationError(f"-p {n} is given twice")
        parse(params[n], v)
        out += ["-r" if params[n].kind == "str" else "-p", n, v]
    fixed = smoke_fixed(notebook) if smoke else set()
    for n in names:
        if n in fixed:
            raise ValidationError(f"-p {n} has no effect under --smoke (the smoke run sets its own value); "
                                  "drop --smoke or the parameter")
    return out


def main(argv=None) -> int:
    """``python -m spinlib.nbparams NOTEBOOK SMOKE [NAME VALUE]...``: papermill's arguments, one per line."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2 or len(args) % 2 or args[1] not in ("True", "False"):
        print("usage: python -m spinlib.nbparams NOTEBOOK True|False [NAME VALUE]...", file=sys.stderr)
        return 2
    try:
        out = check(Path(args[0]), list(zip(args[2::2], args[3::2])), args[1] == "True")
    except (ValidationError, OSError, ValueError, SyntaxError) as e:
        print(f"run_all.sh: {e}", file=sys.stderr)
        return 2
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
