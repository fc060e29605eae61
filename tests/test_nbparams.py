"""Notebook parameters: every notebook declares a type and range the library reads, and run_all.sh -p
values are refused in one line outside them (a generated campaign over every declared parameter)."""
import math
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spinlib.nbparams import Parameter, check, declared, parse
from spinlib.paths import ROOT
from spinlib.validation import ValidationError

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
PARAMS = [(nb, p) for nb in NOTEBOOKS for p in declared(nb).values()]
NUMBER_LIST = re.compile(r"[0-9.]+(,[0-9.]+)+")


def test_every_notebook_declares_its_parameters():
    assert len(NOTEBOOKS) >= 13 and all(declared(nb) for nb in NOTEBOOKS)
    for nb, p in PARAMS:
        where = f"{nb.name} {p.name}"
        if p.kind in ("int", "float"):
            assert p.ranged, f"{where}: a numeric parameter declares no range ('(integer, 1 or more)', 'A..B', '> A')"
        assert p.integer == (p.kind == "int"), f"{where}: 'integer' in the declaration iff the default is an int"
        if p.kind == "str" and NUMBER_LIST.fullmatch(p.default):
            assert p.each and p.ranged, f"{where}: a list of numbers declares '(each ...)'"
        # the default is a valid value of its own declaration
        text = p.default if isinstance(p.default, str) else str(p.default)
        assert parse(p, text) == p.default, where


ATTACKS = ["²", "--5", " nan", "nan", "+inf", "-inf", "1e999", "", " ", "0x10", "1_000", "٣", "5\n6", "True", "1.5.2",
           "abc", "None"]


@pytest.mark.parametrize("nb,p", [(nb, p) for nb, p in PARAMS if p.kind != "str"], ids=lambda x: getattr(x, "name", ""))
def test_known_bad_values_are_refused_in_one_line(nb, p):
    for text in ATTACKS:
        if p.kind == "bool" and text == "True":
            continue
        with pytest.raises(ValidationError) as e:
            parse(p, text)
        msg = str(e.value)
        assert msg.count("\n") == 0 and f"-p {p.name} must be" in msg, msg


def _inside(p: Parameter, x: float) -> bool:
    lo_ok = p.lo is None or (x > p.lo if p.lo_open else x >= p.lo)
    hi_ok = p.hi is None or (x < p.hi if p.hi_open else x <= p.hi)
    return math.isfinite(x) and lo_ok and hi_ok


@settings(max_examples=300, deadline=None)
@given(i=st.integers(0, len(PARAMS) - 1),
       text=st.one_of(st.text(max_size=12), st.floats(allow_nan=True, allow_infinity=True).map(repr),
                      st.integers(-10**6, 10**6).map(str),
                      st.lists(st.floats(-5, 5).map(lambda x: f"{x:g}"), min_size=1, max_size=4).map(",".join)))
def test_any_value_is_either_refused_in_one_line_or_inside_its_declaration(i, text):
    """Generated: every declared parameter of every notebook, any text."""
    nb, p = PARAMS[i]
    try:
        v = parse(p, text)
    except ValidationError as e:
        assert "\n" not in str(e) and p.name in str(e)
        return
    if p.kind == "bool":
        assert v in (True, False)
    elif p.kind in ("int", "float"):
        assert type(v) is (int if p.kind == "int" else float) and _inside(p, float(v)), (p, text)
    elif p.each:
        assert all(_inside(p, float(x)) for x in v.split(",")), (p, text)
    else:
        assert isinstance(v, str) and v.strip()


def test_integers_are_read_exactly():
    seed = declared(NOTEBOOKS[0])["SEED"]
    assert parse(seed, "12345678901234567891") == 12345678901234567891  # beyond a float's 53 bits


def test_a_hash_inside_a_string_default_is_not_its_comment(tmp_path):
    nb = tmp_path / "99_x.ipynb"
    src = 'TAG = "a#b (1 or more)"  # a label\nN = 3  # count (integer, 2..9)\n'
    nb.write_text('{"cells": [{"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": %s}]}'
                  % __import__("json").dumps(src))
    d = declared(nb)
    assert d["TAG"].comment == "a label" and not d["TAG"].ranged and (d["N"].lo, d["N"].hi) == (2, 9)


def test_check_gives_papermill_raw_strings_and_refuses_names():
    nb = next(n for n in NOTEBOOKS if n.name.startswith("10_"))
    assert check(nb, [("H_GRID", "0.5"), ("ROUNDS", "500")]) == ["-r", "H_GRID", "0.5", "-p", "ROUNDS", "500"]
    for pairs, smoke, match in [([("ROUNDZ", "5")], False, "has no parameter ROUNDZ (did you mean ROUNDS?)"),
                                ([("SEED", "1"), ("SEED", "2")], False, "given twice"),
                                ([("SMOKE", "True")], False, "use --smoke"),
                                ([("ROUNDS", "5")], True, "no effect under --smoke"),
                                ([("H_GRID", "0.5,1")], False, "each in (0, 1)")]:
        with pytest.raises(ValidationError, match=re.escape(match)):
            check(nb, pairs, smoke)


@pytest.mark.parametrize("value", ["²", "--5", " nan", "+inf"])
def test_run_all_refuses_a_bad_value_before_anything_runs(value):
    r = subprocess.run(["bash", str(ROOT / "run_all.sh"), "--only", "00", "-p", "NUM_USERS", value],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "NUM_USERS must be an integer, 2 or more" in r.stderr
    assert "results in" not in r.stdout
