"""Claims as code: every number or property stated in a notebook is rendered from computed values.

A claim is a sentence template, the values that fill it, the condition the sentence asserts
(``holds``), the range it speaks of (``scope``) and the paper's figure where there is one::

    claim("het_gain_over_agnostic",
          "heterogeneous lengths gain {mean:.0%} on average and up to {max:.0%} over the agnostic baseline",
          mean=g.mean(), max=g.max(), holds=bool((g >= -1e-9).all()),
          scope="6 sweeps x 20 seeds, Llama-2 preset", paper="up to +88 % (paper 1, abstract)")

:func:`claim` displays the sentence in the notebook (Markdown; "does not hold here" when
``holds`` is False, with ``where`` saying where it does when it holds in part) and records it;
each record is written at once to ``<results>/claims/.partial/<notebook>.json`` (atomically), the
notebook being named by :func:`begin`, and :func:`complete` (called by
:func:`spinlib.notebook.finish`) moves that file over ``<results>/claims/<notebook>.json``: the
claims of a notebook are replaced only when the notebook completes, so an interrupted run never
erases the claims of the last complete one. :func:`merge` joins every notebook's file into
``results/claims.json``; :func:`readme_table` renders the README's results table from it (the
rows between ``<!-- claims:begin -->`` and ``<!-- claims:end -->``; a test regenerates and compares).

A notebook declares up front which of its claims it expects not to hold (``begin(notebook,
not_holding=[ids])``, through :func:`spinlib.notebook.start`): each record carries ``expected`` (False
for a declared id), and a test fails on a committed run where a verdict differs from its declaration
-- a paper's statement our measurement does not reproduce is said so once, at the top, and a claim
that stops holding (or starts to) is noticed.

Comparative words are verdicts with one definition each (:mod:`spinlib.verdicts`: "within",
"agrees", "closest", "over-predicts", "grows", "shrinks", "flat", "log-like"): a template that uses
one must pass the word's test (``tests=[verdicts.grows(y, lo, hi)]``), the claim holds only if every
test passes, and each test's rule, with its numbers, is shown beside the sentence and recorded. A
claim map that holds but not at every point of its region is recorded as holding "in part" (a map
claim that uses a verdict word carries :func:`spinlib.verdicts.on_map`, which holds only at every
point: such a claim holds or fails, never in part). Only the template is read for verdict words, not
the values that fill it.

Values are numbers (or short strings); wall-clock times are not claims (they are measurements of
the machine: ``benchmarks/``).
"""
from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .cache import atomic_write_text, json_default
from .validation import ValidationError

BEGIN, END = "<!-- claims:begin -->", "<!-- claims:end -->"
REAL_BEGIN, REAL_END = "<!-- realmodels:begin -->", "<!-- realmodels:end -->"
#: the notebook whose claims make the README's "Real models: what we found" section
REAL_MODELS_NOTEBOOK = "12_real_models"
_ID = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


@dataclass(frozen=True)
class Claim:
    """One stated result: ``sentence`` is ``template`` filled with ``values``."""

    id: str
    notebook: str
    sentence: str
    values: dict
    holds: bool
    scope: str = ""
    paper: str | None = None
    where: str | None = None  # where a partly-holding claim holds (computed)
    region: dict | None = None  # a claim map's shares: {"cells", "holds", "undecided", "fails"}
    readme: bool = True  # a row of the README's results table
    template: str = field(default="", repr=False)
    expected: bool = True  # False: the notebook declared (begin's not_holding) that it does not hold
    tests: tuple = ()  # the verdict words' tests as run: ({"word", "holds", "rule"}, ...)
    verdict: str = "holds"  # "holds", "in part" (a map claim that holds but not at every point), "fails"

    def markdown(self) -> str:
        mark = {"holds": "", "in part": "**holds in part:** ", "fails": "**does not hold here:** "}[self.verdict]
        text = f"{mark}{self.sentence}"
        if self.where:
            text += f" (holds {self.where})"
        extra = []
        if self.scope:
            extra.append(self.scope)
        if self.paper:
            extra.append(f"paper: {self.paper}")
        extra += [f"test: {t['rule']}" for t in self.tests]
        if extra:
            text += f" <small>[{'; '.join(extra)}]</small>"
        return text


_STATE: dict = {"notebook": None, "claims": {}, "directory": None, "not_holding": frozenset()}


def begin(notebook: str, directory: Path | None = None, not_holding=()) -> None:
    """Name the notebook whose claims follow (its partial claims file starts empty; the complete
    one of its last finished run is kept until :func:`complete`); ``not_holding``: the ids of the
    claims it expects not to hold (module docstring)."""
    from .paths import RESULTS

    if isinstance(not_holding, str) or not all(isinstance(i, str) and _ID.match(i) for i in not_holding):
        raise ValidationError(f"not_holding must be a list of claim ids, got {not_holding!r}")
    _STATE["notebook"] = notebook
    _STATE["claims"] = {}
    _STATE["not_holding"] = frozenset(not_holding)
    _STATE["directory"] = Path(directory or RESULTS / "claims")
    _write()


def _partial_path() -> Path:
    return _STATE["directory"] / ".partial" / f"{_STATE['notebook']}.json"


def complete() -> Path:
    """The notebook has completed: its claims replace those of its last complete run
    (``<directory>/<notebook>.json``, atomically). Returns that path."""
    import os

    if _STATE["notebook"] is None:
        raise ValidationError("claims.begin(notebook) must be called before claims.complete()")
    _write()
    final = _STATE["directory"] / f"{_STATE['notebook']}.json"
    if final.is_symlink() or (final.exists() and not final.is_file()):
        raise ValidationError(f"refusing to replace {final}: it is not a regular file")
    os.replace(_partial_path(), final)
    return final


def _finite(name: str, v):
    if isinstance(v, bool) or isinstance(v, str):
        return v
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise ValidationError(f"claim value {name!r} must be a number, a bool or a string, got {v!r}") from None
    if not math.isfinite(x):
        raise ValidationError(f"claim value {name!r} is not finite ({x}): a stated number must be computed")
    return int(v) if isinstance(v, int) or (hasattr(v, "dtype") and "int" in str(v.dtype)) else x


def region_shares(region) -> dict | None:
    """``{"cells", "holds", "undecided", "fails"}`` from :func:`spinlib.maps.region_text`'s answer
    (or such a dict), checked: shares in [0, 1] summing to 1, at least one cell; one line otherwise."""
    if region is None:
        return None
    try:
        shares = region["shares"] if "shares" in region else region
        out = {"cells": int(region["cells"]), **{k: float(shares[k]) for k in ("holds", "undecided", "fails")}}
    except (KeyError, TypeError, ValueError):
        raise ValidationError("region must be spinlib.maps.region_text's answer (cells and shares of holds, "
                              "undecided, fails)") from None
    if out["cells"] < 1 or not all(0 <= out[k] <= 1 for k in ("holds", "undecided", "fails")) \
            or abs(out["holds"] + out["undecided"] + out["fails"] - 1) > 1e-9:
        raise ValidationError(f"region: {out['cells']} cells with shares {out} (each in [0, 1], summing to 1)")
    return out


def claim(id: str, template: str, *, holds: bool, scope: str = "", paper: str | None = None,
          where: str | None = None, region=None, readme: bool = True, display: bool = True, tests=(),
          **values) -> Claim:
    """Render, display and record one claim (module docstring). Returns the :class:`Claim`.

    ``region``: for a claim map, :func:`spinlib.maps.region_text`'s answer; the README's results
    table then shows the share of the region where the claim holds, and a claim that holds but not
    at every point of its map is recorded as holding "in part".

    ``tests``: :class:`spinlib.verdicts.Verdict` objects, one for each verdict word the template uses
    (:func:`spinlib.verdicts.words_in`; refused without it); the claim holds only if ``holds`` and
    every test hold."""
    from .verdicts import Verdict, words_in
    if _STATE["notebook"] is None:
        raise ValidationError("claims.begin(notebook) must be called before claim()")
    if not _ID.match(id):
        raise ValidationError(f"claim id must match {_ID.pattern}, got {id!r}")
    if id in _STATE["claims"]:
        raise ValidationError(f"claim id {id!r} stated twice in {_STATE['notebook']}")
    tests = tuple(tests)
    if not all(isinstance(t, Verdict) for t in tests):
        raise ValidationError(f"claim {id!r}: tests must be spinlib.verdicts tests (Verdict objects)")
    missing = sorted(words_in(template) - {t.word for t in tests})
    if missing:
        raise ValidationError(f"claim {id!r} uses {', '.join(repr(w) for w in missing)} without the word's test "
                              f"(spinlib.verdicts.{missing[0].replace('-', '_')}): a verdict word needs its test")
    holds = bool(holds) and all(t.holds for t in tests)
    vals = {k: _finite(k, v) for k, v in values.items()}
    try:
        sentence = template.format(**vals)
    except (KeyError, IndexError, ValueError) as e:
        raise ValidationError(f"claim {id!r}: template does not fit its values ({e})") from None
    shares = region_shares(region)
    verdict = verdict_of(holds, shares)
    c = Claim(id=id, notebook=_STATE["notebook"], sentence=sentence, values=vals, holds=holds,
              scope=scope, paper=paper, where=where, region=shares, readme=readme,
              template=template, expected=id not in _STATE["not_holding"],
              tests=tuple({"word": t.word, "holds": t.holds, "rule": t.rule} for t in tests), verdict=verdict)
    _STATE["claims"][id] = c
    _write()
    if display:
        shell = None
        try:
            from IPython import get_ipython
            shell = get_ipython()
        except ImportError:
            pass
        if shell is not None and shell.__class__.__name__ == "ZMQInteractiveShell":
            from IPython.display import Markdown, display as show
            show(Markdown(c.markdown()))
        else:  # a plain interpreter: the sentence as text
            print(c.markdown())
    return c


def _write() -> None:
    records = [asdict(c) for c in _STATE["claims"].values()]
    atomic_write_text(_partial_path(), json.dumps(records, indent=1, default=json_default, sort_keys=True) + "\n")


#: a claim record's fields (:class:`Claim`), each with the check of its type
_FIELDS = {"id": str, "notebook": str, "sentence": str, "values": dict, "holds": bool, "scope": str,
           "paper": (str, type(None)), "where": (str, type(None)), "region": (dict, type(None)), "readme": bool,
           "template": str, "expected": bool, "tests": list, "verdict": str}
VERDICTS = ("holds", "in part", "fails")


def verdict_of(holds: bool, region: dict | None) -> str:
    """The one rule from a claim's condition and its map's shares to its verdict word."""
    return "fails" if not holds else ("in part" if region and region["holds"] < 1.0 - 1e-12 else "holds")


def check_record(r, where: str) -> dict:
    """One claim record checked for meaning, not only shape; one line naming ``where`` and the field otherwise.

    Every field of :class:`Claim` and no other, each of its type (booleans are booleans); the id's pattern; the
    values finite numbers, booleans or strings; the sentence is its template filled with its values (an edited
    sentence or value is refused); a claim holds only if every verdict-word test recorded with it holds; the verdict
    is :func:`verdict_of` its condition and region (a hand-flipped ``holds`` or ``verdict`` is refused)."""
    if not isinstance(r, dict):
        raise ValidationError(f"{where}: a claim record must be a JSON object")
    missing, unknown = sorted(set(_FIELDS) - set(r)), sorted(set(r) - set(_FIELDS))
    if missing or unknown:
        raise ValidationError(f"{where}: claim record {r.get('id')!r} " + (f"lacks {missing}" if missing else
                                                                        f"has unknown fields {unknown}"))
    cid = r["id"]
    for k, t in _FIELDS.items():
        if not isinstance(r[k], t) or (t is not bool and isinstance(r[k], bool)):
            raise ValidationError(f"{where}: claim {cid!r}: {k} must be {getattr(t, '__name__', t)}, got {r[k]!r}")
    if not _ID.match(cid):
        raise ValidationError(f"{where}: claim id must match {_ID.pattern}, got {cid!r}")
    vals = {}
    for k, v in r["values"].items():
        try:
            vals[k] = _finite(k, v)
        except ValidationError as e:
            raise ValidationError(f"{where}: claim {cid!r}: {e}") from None
    try:
        sentence = r["template"].format(**vals)
    except (KeyError, IndexError, ValueError) as e:
        raise ValidationError(f"{where}: claim {cid!r}: template does not fit its values ({e})") from None
    if sentence != r["sentence"]:
        raise ValidationError(f"{where}: claim {cid!r}: its sentence is not its template filled with its values "
                              "(edited by hand?)")
    for t in r["tests"]:
        if not (isinstance(t, dict) and set(t) == {"word", "holds", "rule"} and isinstance(t["holds"], bool)
                and isinstance(t["word"], str) and isinstance(t["rule"], str)):
            raise ValidationError(f"{where}: claim {cid!r}: each test must be {{word, holds (a boolean), rule}}")
    if r["holds"] and not all(t["holds"] for t in r["tests"]):
        raise ValidationError(f"{where}: claim {cid!r} holds although a test of its verdict words fails")
    try:
        region = region_shares(r["region"]) if r["region"] is not None else None
    except ValidationError as e:
        raise ValidationError(f"{where}: claim {cid!r}: {e}") from None
    if region is not None and region != r["region"]:
        raise ValidationError(f"{where}: claim {cid!r}: region must hold exactly cells, holds, undecided, fails")
    if r["verdict"] not in VERDICTS or r["verdict"] != verdict_of(r["holds"], region):
        raise ValidationError(f"{where}: claim {cid!r}: verdict {r['verdict']!r} does not follow from holds = "
                              f"{r['holds']} and its region (expected {verdict_of(r['holds'], region)!r})")
    return r


def load(path: Path) -> list[dict]:
    """Claims of a notebook's file (a list of records), each checked by :func:`check_record`, every record naming
    the file's notebook, no id twice: one line naming the file otherwise."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValidationError(f"{path}: not a readable claims file ({type(e).__name__})") from None
    if not isinstance(data, list):
        raise ValidationError(f"{path}: must be a list of claim records")
    seen = set()
    for i, r in enumerate(data):
        check_record(r, f"{path}: record {i}")
        if r["notebook"] != Path(path).stem:
            raise ValidationError(f"{path}: record {i} names notebook {r['notebook']!r}, not {Path(path).stem!r}")
        if r["id"] in seen:
            raise ValidationError(f"{path}: claim id {r['id']!r} twice")
        seen.add(r["id"])
    return data


def load_merged(claims_json: Path) -> dict:
    """``results/claims.json`` (:func:`merge`'s output) checked as :func:`load` checks a notebook's file."""
    try:
        doc = json.loads(Path(claims_json).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValidationError(f"{claims_json}: not a readable claims file ({type(e).__name__})") from None
    if not isinstance(doc, dict) or set(doc) != {"commit", "claims"} or not isinstance(doc["claims"], list) \
            or not isinstance(doc["commit"], (str, type(None))):
        raise ValidationError(f"{claims_json}: must be an object with commit (a string or null) and claims (a list)")
    seen = set()
    for i, r in enumerate(doc["claims"]):
        check_record(r, f"{claims_json}: record {i}")
        if (r["notebook"], r["id"]) in seen:
            raise ValidationError(f"{claims_json}: claim {r['id']!r} of {r['notebook']} twice")
        seen.add((r["notebook"], r["id"]))
    return doc


def merge(directory: Path | None = None, out: Path | None = None, commit: str | None = None) -> Path:
    """Join ``<results>/claims/*.json`` into ``<results>/claims.json`` (sorted by notebook, then order)."""
    from .paths import RESULTS

    directory = Path(directory or RESULTS / "claims")
    out = Path(out or directory.parent / "claims.json")
    records = []
    for f in sorted(directory.glob("*.json")):
        records += load(f)
    doc = {"commit": commit, "claims": records}
    atomic_write_text(out, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return out


def readme_table(claims_json: Path) -> str:
    """The README's results table (Markdown) from ``results/claims.json``."""
    doc = load_merged(claims_json)
    rows = ["| result (computed by the run) | holds | region where it holds | notebook |", "|---|---|---|---|"]
    for r in doc["claims"]:
        if not r.get("readme", True):
            continue
        text = r["sentence"] + (f" (holds {r['where']})" if r.get("where") else "")
        if r.get("scope"):
            text += f"; {r['scope']}"
        if r.get("paper"):
            text += f"; paper: {r['paper']}"
        text = text.replace("|", "\\|").replace("\n", " ")
        rows.append(f"| {text} | {holds_cell(r['holds'], r.get('region'))} | {region_cell(r.get('region'))} "
                    f"| {r['notebook'][:2]} |")
    return "\n".join(rows) + "\n"


def holds_cell(holds: bool, region: dict | None) -> str:
    """The results table's verdict: "**no**", "yes", or "in part" for a map claim that holds but not
    at every point of its region (the region column says how much)."""
    if not holds:
        return "**no**"
    return "yes" if not region or region["holds"] >= 1.0 - 1e-12 else "in part"


def region_cell(region: dict | None) -> str:
    """The results table's region column: a map's share of points where the claim holds (and the
    undecided share), or "at its scope" for a claim checked on the instances its scope names."""
    if not region:
        return "at its scope"
    text = f"{region['holds']:.0%} of {region['cells']} points"
    if region["undecided"]:
        text += f" ({region['undecided']:.0%} undecided)"
    return text


def real_models_text(claims_json: Path) -> str:
    """The README's "Real models: what we found" section (Markdown bullets) from the claims of
    :data:`REAL_MODELS_NOTEBOOK` in ``results/claims.json``, each with its verdict."""
    doc = load_merged(claims_json)
    rows = [r for r in doc["claims"] if r["notebook"] == REAL_MODELS_NOTEBOOK]
    if not rows:
        raise ValidationError(f"{claims_json}: no claims of {REAL_MODELS_NOTEBOOK} (run it first)")
    mark = {"holds": "", "in part": "**(holds in part)** ", "fails": "**(does not hold here)** "}
    out = [f"Generated from `{REAL_MODELS_NOTEBOOK}`'s claims in `results/claims.json` (commit "
           f"`{(doc.get('commit') or 'uncommitted')[:7]}`):", ""]
    for r in rows:
        cell = holds_cell(r["holds"], r.get("region"))
        verdict = r.get("verdict") or {"**no**": "fails", "yes": "holds"}.get(cell, "in part")
        text = r["sentence"] + (f" (holds {r['where']})" if r.get("where") else "")
        out.append(f"- {mark[verdict]}{text}".replace("\n", " "))
    return "\n".join(out) + "\n"


def _replace_block(text: str, begin: str, end: str, body: str, readme: Path) -> str:
    if begin not in text or end not in text or text.index(end) < text.index(begin):
        raise ValidationError(f"{readme}: the markers {begin} and {end} are missing or out of order")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return head + begin + "\n" + body + end + tail


def replace_readme_table(readme: Path, claims_json: Path) -> str:
    """README text with the generated blocks regenerated from ``claims_json`` (returns the new text): the
    results table (between :data:`BEGIN` and :data:`END`) and the real-models section (between
    :data:`REAL_BEGIN` and :data:`REAL_END`)."""
    text = Path(readme).read_text(encoding="utf-8")
    text = _replace_block(text, BEGIN, END, readme_table(claims_json), readme)
    return _replace_block(text, REAL_BEGIN, REAL_END, real_models_text(claims_json), readme)


def main(argv=None) -> int:
    """``python -m spinlib.claims merge|readme|check``: merge the run's claims; write or check the README table."""
    import argparse
    import subprocess

    from .paths import RESULTS, ROOT

    ap = argparse.ArgumentParser(prog="python -m spinlib.claims")
    ap.add_argument("action", choices=("merge", "readme", "check"))
    args = ap.parse_args(argv)
    claims_json = RESULTS / "claims.json"
    readme = ROOT / "README.md"
    try:
        if args.action == "merge":
            commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                    cwd=ROOT).stdout.strip() or None
            print("wrote", merge(commit=commit))
            return 0
        new = replace_readme_table(readme, claims_json)
        if args.action == "readme":
            atomic_write_text(readme, new)
            print("README results table and real-models section regenerated from", claims_json)
        elif new != readme.read_text(encoding="utf-8"):
            print("README results table or real-models section differs from results/claims.json: run python -m spinlib.claims readme")
            return 1
    except ValidationError as e:
        print(f"spinlib.claims: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
