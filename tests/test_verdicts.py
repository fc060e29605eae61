"""Verdict words tied to tests: each word has one definition (spinlib.verdicts), checked here against
a brute reading of that definition on generated cases; a claim cannot use a word without its test,
holds only when the test passes, and a partly holding map is stored as "in part"; every committed
claim carries the tests of the words it uses."""
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spinlib import claims as C
from spinlib import verdicts as V
from spinlib.paths import RESULTS
from spinlib.validation import ValidationError

finite = st.floats(-1e3, 1e3, allow_nan=False)


def test_words_are_found_outside_fields_and_the_swept_axis_phrase():
    assert V.words_in("the gain grows with K") == {"grows"}
    assert V.words_in("L shrinks as K grows: from {a} to {b}") == {"shrinks"}
    assert V.words_in("as the DL power grows, more devices download") == set()
    assert V.words_in("{within} of {n} cells; the model over-predicts") == {"over-predicts"}
    assert V.words_in("it Matches the paper, log-consistent, nearly flat") == {"agrees", "log-like", "flat"}
    assert V.words_in("growth and flatten and withinness") == set()  # whole words only
    assert V.words_in("L shrinks as {knob} grows") == {"shrinks"}  # a field names the swept axis
    assert V.words_in("it grew, then the gap was narrowing; the model overpredicts") == {"grows", "shrinks",
                                                                                          "over-predicts"}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(finite, finite), min_size=1, max_size=8), st.floats(0, 500))
def test_within_is_every_interval_inside_the_tolerance(pairs, tol):
    lo = np.array([min(a, b) for a, b in pairs])
    hi = np.array([max(a, b) for a, b in pairs])
    v = V.within(lo, hi, tol)
    assert v.word == "within" and v.holds == all(-tol <= a and b <= tol for a, b in zip(lo, hi))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(finite, finite, finite), min_size=1, max_size=8))
def test_agrees_and_predictions_against_intervals(rows):
    lo = np.array([min(a, b) for a, b, _ in rows])
    hi = np.array([max(a, b) for a, b, _ in rows])
    ref = np.array([c for _, _, c in rows])
    assert V.agrees(lo, hi, ref).holds == all(a <= c <= b for a, b, c in zip(lo, hi, ref))
    assert V.over_predicts(ref, lo, hi).holds == all(c > b for b, c in zip(hi, ref))
    assert V.under_predicts(ref, lo, hi).holds == all(c < a for a, c in zip(lo, ref))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(-10, 10, allow_nan=False), min_size=0, max_size=7), st.floats(0, 1),
       st.floats(0, 3))
def test_grows_and_shrinks_need_three_points_no_step_back_and_separated_ends(y, tol, half):
    y = np.array(y)
    v = V.grows(y, y - half, y + half, tol=tol)
    brute = (len(y) >= 3 and all(b - a >= -tol for a, b in zip(y[:-1], y[1:]))
             and (y[-1] - half) > (y[0] + half))
    assert v.holds == brute
    w = V.shrinks(-y, -y - half, -y + half, tol=tol)
    assert w.holds == brute and w.word == "shrinks"


def test_a_two_point_rise_or_an_overlapping_interval_is_not_growth():
    assert not V.grows([1.0, 2.0]).holds
    assert V.grows([1.0, 1.5, 2.0]).holds
    assert not V.grows([1.0, 1.5, 2.0], lo=[0.5, 1.0, 1.4], hi=[1.5, 2.0, 2.6]).holds  # ends' intervals overlap
    assert not V.grows([1.0, 0.9, 2.0]).holds and V.grows([1.0, 0.9, 2.0], tol=0.2).holds


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(1e-3, 1e3), min_size=1, max_size=8), st.floats(0, 2))
def test_flat_is_the_spread_ratio(y, tol):
    assert V.flat(y, tol).holds == (len(y) >= 2 and max(y) / min(y) <= 1 + tol)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 5), min_size=1, max_size=6), st.integers(1, 4), st.integers(0, 2**32 - 1))
def test_closest_needs_the_whole_interval_below_every_other(own_hi, m, seed):
    rng = np.random.default_rng(seed)
    others = rng.uniform(0, 5, (m, len(own_hi)))
    assert V.closest(own_hi, others).holds == all(o < others[:, i].min() for i, o in enumerate(own_hi))


def test_log_like_reads_the_upper_bound():
    assert V.log_like([0.05, 0.09]).holds and not V.log_like([0.05, 0.11]).holds
    assert not V.log_like(0.1).holds  # at the bound is not below it


def test_tests_over_no_points_do_not_hold_and_bad_inputs_are_refused():
    for v in (V.within([], [], 1), V.agrees([], [], []), V.grows([]), V.flat([], 1), V.log_like([]),
              V.over_predicts([], [], []), V.closest([], np.zeros((2, 0)))):
        assert not v.holds
    with pytest.raises(ValidationError, match="finite"):
        V.within([0, np.nan], [1, 1], 1)
    with pytest.raises(ValidationError, match="lo must not exceed hi"):
        V.within([2], [1], 5)
    with pytest.raises(ValidationError, match="positive"):
        V.flat([1, -1], 1)
    with pytest.raises(ValidationError, match="tol"):
        V.grows([3, 2, 1, 4], tol=float("nan"))
    with pytest.raises(ValidationError, match="conf"):
        V.mean_interval([1.0, 2.0], conf=95)
    with pytest.raises(ValidationError, match="array"):
        V.mean_interval(3.0)
    assert not V.flat([2.0], 0.1).holds
    assert V.agrees(0, 1, [0.5, 0.6]).holds and not V.over_predicts([2, 0.5], 0, 1).holds
    with pytest.raises(ValidationError, match="one entry per point"):
        V.grows([1, 2, 3, 4], lo=[0, 1, 2], hi=[2, 3, 4])
    with pytest.raises(ValidationError, match="both bounds"):
        V.shrinks([3, 2, 1], lo=[2, 1, 0])
    with pytest.raises(ValidationError, match="one of"):
        V.on_map("bigger", {"cells": 1, "shares": {"holds": 1, "undecided": 0, "fails": 0}})


def test_mean_interval_is_the_t_interval():
    x = np.array([[1.0, 2.0], [3.0, 2.0], [2.0, 2.0]])
    m, lo, hi = V.mean_interval(x)
    assert np.allclose(m, [2, 2]) and lo[1] == hi[1] == 2.0 and lo[0] < 2 < hi[0]
    assert np.isclose(hi[0] - 2, 4.302652729911275 * 1.0 / np.sqrt(3))  # t(0.975, 2) x sd / sqrt(n)


def test_a_claim_needs_the_test_of_each_word_it_uses_and_holds_only_if_it_passes(tmp_path):
    C.begin("99_verdicts", tmp_path / "claims")
    with pytest.raises(ValidationError, match="'grows' without the word's test"):
        C.claim("g", "the gain grows with K: {a}", a=1, holds=True, display=False)
    with pytest.raises(ValidationError, match="Verdict objects"):
        C.claim("g", "the gain grows with K: {a}", a=1, holds=True, tests=[True], display=False)
    with pytest.raises(ValidationError, match="'within'"):
        C.claim("g", "the gain grows and is within 1 %: {a}", a=1, holds=True, tests=[V.grows([1, 2, 3])],
                display=False)
    ok = C.claim("g", "the gain grows with K: {a}", a=1, holds=True, tests=[V.grows([1, 2, 3])], display=False)
    assert ok.holds and ok.verdict == "holds" and ok.tests[0]["word"] == "grows" and "test: grows" in ok.markdown()
    bad = C.claim("h", "the gain grows with K: {a}", a=1, holds=True, tests=[V.grows([1, 3, 2])], display=False)
    assert not bad.holds and bad.verdict == "fails" and bad.markdown().startswith("**does not hold here:**")
    reg = {"cells": 4, "shares": {"holds": 0.5, "undecided": 0.25, "fails": 0.25}}
    part = C.claim("m", "faster at {h:.0%} of the points", h=0.5, holds=True, region=reg, display=False)
    assert part.holds and part.verdict == "in part" and part.markdown().startswith("**holds in part:**")
    every = C.claim("n", "log-like at {h:.0%} of the points", h=0.5, holds=True, region=reg,
                    tests=[V.on_map("log-like", reg)], display=False)
    assert not every.holds and every.verdict == "fails"
    C.complete()
    recs = {r["id"]: r for r in C.load(tmp_path / "claims" / "99_verdicts.json")}
    assert recs["m"]["verdict"] == "in part" and recs["h"]["tests"][0]["holds"] is False


def test_every_committed_claim_carries_the_tests_of_its_words_and_holds_only_with_them():
    doc = json.loads((RESULTS / "claims.json").read_text(encoding="utf-8"))
    checked = 0
    for r in doc["claims"]:
        words = V.words_in(r["template"])
        tested = {t["word"] for t in r.get("tests", ())}
        assert words <= tested, f"{r['id']} uses {sorted(words - tested)} without its test"
        assert not r["holds"] or all(t["holds"] for t in r.get("tests", ())), r["id"]
        if r.get("region") and r["holds"]:
            assert r["verdict"] == ("holds" if r["region"]["holds"] >= 1 - 1e-12 else "in part"), r["id"]
        checked += bool(words)
    assert checked >= 30  # the notebooks' verdict words are many; none escapes its test
