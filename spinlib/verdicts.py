"""Verdict words: each comparative word a claim may use has one definition here, a test over all its
points and, where the numbers are measured, their intervals.

A claim whose sentence uses one of these words must carry the word's test
(``claims.claim(..., tests=[verdicts.grows(y)])``); :func:`spinlib.claims.claim` refuses it otherwise,
and the claim holds only if every test passes. The surface forms each word covers are in
:data:`WORDS`; the phrase "as <up to three words> grow(s)" names the axis that is swept, not a
verdict, and is not read as one.

Definitions (points are the arrays' entries; an interval ``[lo, hi]`` is given per point, equal to
the value where the number is computed exactly):

- **within** ``tol``: every point's interval of the difference lies inside ``[-tol, tol]``.
- **agrees**: every point's reference value lies inside its measured interval.
- **closest**: at every point the named model's error interval lies wholly below every other
  model's (its upper bound under their lower bounds).
- **over-predicts** / **under-predicts**: at every point the prediction lies above (below) the
  measured interval.
- **grows** (rises) / **shrinks** (narrows): at least three points, no step against the direction
  (beyond ``tol``), and the last point's interval wholly beyond the first's.
- **flat** ``tol``: the largest value is at most ``1 + tol`` times the smallest (positive values).
- **log-like**: the fitted power-law exponent ``p`` of a growth ``t^p`` has its interval's upper
  bound below ``p_max`` (0.1 unless stated).

Each test returns a :class:`Verdict`: the word, whether it holds and the rule as run, with its
numbers (shown beside the claim and stored in ``results/claims.json``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .validation import ValidationError

#: canonical word -> the surface forms a template may use for it
WORDS = {
    "within": ("within",),
    "agrees": ("agrees", "agree", "agreed", "matches", "match", "matched", "consistent"),
    "closest": ("closest",),
    "over-predicts": ("over-predicts", "over-predict", "over-predicted", "overpredicts", "overpredict"),
    "under-predicts": ("under-predicts", "under-predict", "under-predicted", "underpredicts", "underpredict"),
    "grows": ("grows", "grow", "grew", "growing", "rises", "rise", "rose", "rising"),
    "shrinks": ("shrinks", "shrink", "shrank", "shrinking", "narrows", "narrow", "narrowed", "narrowing"),
    "flat": ("flat",),
    "log-like": ("log-like", "log-consistent", "logarithmic"),
}
_FORM = {form: word for word, forms in WORDS.items() for form in forms}
_FORMS = re.compile(r"(?<![\w-])(" + "|".join(sorted(map(re.escape, _FORM), key=len, reverse=True))
                    + r")(?![\w-])", re.IGNORECASE)
_AXIS = re.compile(r"\bas (?:the )?(?:[\w./*=-]+ ){0,2}[\w./*=-]+ grows?\b", re.IGNORECASE)
_FIELD = re.compile(r"\{[^{}]*\}")


@dataclass(frozen=True)
class Verdict:
    """One word's test as run: ``word`` (a key of :data:`WORDS`), ``holds`` and ``rule`` (the test
    with its numbers)."""

    word: str
    holds: bool
    rule: str


def words_in(template: str) -> set[str]:
    """The verdict words (keys of :data:`WORDS`) a claim template uses, outside its ``{fields}`` and
    outside the swept-axis phrase "as ... grows" (a field there counts as a word: "as {knob} grows").

    Only the template is read, not the values filling its fields. A negated use ("never rises") is still
    a use: the word's test then decides, so write what the test checks ("with no step up")."""
    text = _AXIS.sub(" ", _FIELD.sub("X", template))
    return {_FORM[m.group(1).lower()] for m in _FORMS.finditer(text)}


def _points(name: str, x, n: int | None = None) -> np.ndarray:
    a = np.atleast_1d(np.asarray(x, dtype=float))
    if a.ndim != 1:
        raise ValidationError(f"verdict {name}: must be a number or a 1-D array of points, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ValidationError(f"verdict {name}: every point must be finite")
    if n is not None and a.size not in (1, n):
        raise ValidationError(f"verdict {name}: {a.size} points where {n} are needed")
    return np.broadcast_to(a, (n,)) if n is not None else a


def _interval(lo, hi, name: str = "interval") -> tuple[np.ndarray, np.ndarray]:
    lo, hi = _points(f"{name} lo", lo), _points(f"{name} hi", hi)
    n = hi.size if lo.size == 1 else lo.size
    lo, hi = _points(f"{name} lo", lo, n), _points(f"{name} hi", hi, n)
    if (lo > hi).any():
        raise ValidationError(f"verdict {name}: lo must not exceed hi at any point")
    return lo, hi


def _with_points(lo, hi, values, name: str):
    """An interval and per-point values, each of one entry or the same number of entries (broadcast)."""
    lo, hi = _interval(lo, hi, name)
    v = _points(f"{name} values", values)
    n = v.size if lo.size == 1 else lo.size
    return (np.broadcast_to(lo, (n,)), np.broadcast_to(hi, (n,)), _points(f"{name} values", v, n))


def within(lo, hi, tol: float) -> Verdict:
    """"within ``tol``": every point's difference interval ``[lo, hi]`` inside ``[-tol, tol]``."""
    lo, hi = _interval(lo, hi, "within")
    if not lo.size:
        return Verdict("within", False, "within: no points")
    if not tol >= 0:
        raise ValidationError("verdict within: tol must be >= 0")
    ok = (lo >= -tol) & (hi <= tol)
    return Verdict("within", bool(ok.size and ok.all()),
                   f"within {tol:g}: difference in [{lo.min():.3g}, {hi.max():.3g}] at {ok.sum()} of {ok.size} points inside")


def agrees(lo, hi, reference, rtol: float = 1e-12) -> Verdict:
    """"agrees": every point's reference inside its measured interval ``[lo, hi]`` (each bound widened by
    ``rtol`` of its size: floating-point rounding, where a deterministic cell's interval is a point)."""
    lo, hi, ref = _with_points(lo, hi, reference, "agrees")
    if not 0 <= rtol < 1e-3:
        raise ValidationError("verdict agrees: rtol must be in [0, 1e-3) (rounding, not a tolerance)")
    ok = (lo - rtol * np.abs(lo) <= ref) & (ref <= hi + rtol * np.abs(hi))
    return Verdict("agrees", bool(ok.size and ok.all()),
                   f"agrees: the reference inside the interval at {ok.sum()} of {ok.size} points")


def closest(own_hi, others_lo) -> Verdict:
    """"closest": at every point the named model's error upper bound ``own_hi`` (shape (n,)) below
    every other model's error lower bound ``others_lo`` (shape (m, n) or (n,))."""
    own = _points("closest own_hi", own_hi)
    others = np.atleast_2d(np.asarray(others_lo, dtype=float))
    if others.shape[-1] != own.size or not np.isfinite(others).all():
        raise ValidationError(f"verdict closest: others_lo must be finite with {own.size} points per model")
    ok = own < others.min(axis=0)
    return Verdict("closest", bool(ok.size and ok.all()),
                   f"closest: its error interval wholly below the others' at {ok.sum()} of {ok.size} points")


def over_predicts(prediction, lo, hi) -> Verdict:
    """"over-predicts": every point's prediction above its measured interval's upper bound."""
    lo, hi, p = _with_points(lo, hi, prediction, "over-predicts")
    ok = p > hi
    return Verdict("over-predicts", bool(ok.size and ok.all()),
                   f"over-predicts: above the measured interval at {ok.sum()} of {ok.size} points")


def under_predicts(prediction, lo, hi) -> Verdict:
    """"under-predicts": every point's prediction below its measured interval's lower bound."""
    lo, hi, p = _with_points(lo, hi, prediction, "under-predicts")
    ok = p < lo
    return Verdict("under-predicts", bool(ok.size and ok.all()),
                   f"under-predicts: below the measured interval at {ok.sum()} of {ok.size} points")


def _trend(word: str, sign: float, y, lo, hi, tol: float) -> Verdict:
    if not tol >= 0:
        raise ValidationError(f"verdict {word}: tol must be a number >= 0, got {tol!r}")
    y = _points(f"{word} values", y)
    if (lo is None) != (hi is None):
        raise ValidationError(f"verdict {word}: give both bounds of the interval, or neither")
    if lo is None:
        lo = hi = y
    lo, hi = _interval(lo, hi, word)
    if lo.size != y.size:
        raise ValidationError(f"verdict {word}: the interval needs one entry per point ({y.size}), got {lo.size}")
    if y.size == 0:
        return Verdict(word, False, f"{word}: no points")
    steps = sign * np.diff(y)
    against = int((steps < -tol).sum())
    end = (lo[-1] > hi[0]) if sign > 0 else (hi[-1] < lo[0])
    ok = y.size >= 3 and against == 0 and bool(end)
    return Verdict(word, bool(ok),
                   f"{word}: {y.size} points (3 or more needed), {against} steps against it (tolerance {tol:g}), "
                   f"last point's interval {'beyond' if end else 'not beyond'} the first's")


def grows(y, lo=None, hi=None, tol: float = 0.0) -> Verdict:
    """"grows" (rises): at least 3 points, no step down beyond ``tol``, last interval above the first."""
    return _trend("grows", 1.0, y, lo, hi, tol)


def shrinks(y, lo=None, hi=None, tol: float = 0.0) -> Verdict:
    """"shrinks" (narrows): at least 3 points, no step up beyond ``tol``, last interval below the first."""
    return _trend("shrinks", -1.0, y, lo, hi, tol)


def flat(y, tol: float) -> Verdict:
    """"flat": positive values whose largest is at most ``1 + tol`` times the smallest."""
    y = _points("flat values", y)
    if y.size < 2:
        return Verdict("flat", False, f"flat: {y.size} point(s), 2 or more needed")
    if (y <= 0).any() or not tol >= 0:
        raise ValidationError("verdict flat: values must be positive and tol >= 0")
    ratio = float(y.max() / y.min())
    return Verdict("flat", ratio <= 1 + tol, f"flat: largest / smallest = {ratio:.3g} (at most {1 + tol:g})")


def log_like(p_hi, p_max: float = 0.1) -> Verdict:
    """"log-like": every point's power-law exponent interval upper bound ``p_hi`` below ``p_max`` (the
    upper bound only: a falling curve, ``p < 0``, passes too; pair it with :func:`grows` where growth
    itself is claimed)."""
    p = _points("log-like p_hi", p_hi)
    ok = p < p_max
    return Verdict("log-like", bool(ok.size and ok.all()),
                   f"log-like: exponent's upper bound below {p_max:g} at {ok.sum()} of {ok.size} points")


TESTS = {"within": within, "agrees": agrees, "closest": closest, "over-predicts": over_predicts,
         "under-predicts": under_predicts, "grows": grows, "shrinks": shrinks, "flat": flat, "log-like": log_like}


def mean_interval(samples, conf: float = 0.95, axis: int = 0):
    """The mean of ``samples`` along ``axis`` with its Student-t interval ``(mean, lo, hi)`` (the
    interval a trend or comparison over seeds is tested with; a single sample gives ``lo = hi``)."""
    from scipy import stats

    x = np.asarray(samples, dtype=float)
    if x.ndim == 0 or not np.isfinite(x).all() or x.size == 0:
        raise ValidationError("verdict mean_interval: samples must be a finite, non-empty array")
    if not 0 < conf < 1:
        raise ValidationError(f"verdict mean_interval: conf must be in (0, 1), got {conf!r}")
    n = x.shape[axis]
    m = x.mean(axis=axis)
    if n < 2:
        return m, m, m
    half = stats.t.ppf(0.5 + conf / 2, n - 1) * x.std(axis=axis, ddof=1) / np.sqrt(n)
    return m, m - half, m + half


def on_map(word: str, region) -> Verdict:
    """A verdict word tested at every point of a claim map: ``region`` is
    :func:`spinlib.maps.region_text`'s answer for the word's own per-point test (each point's
    interval against its threshold, :func:`spinlib.maps.cell_verdicts`); holds where every point holds."""
    if word not in WORDS:
        raise ValidationError(f"verdict on_map: word must be one of {', '.join(WORDS)}, got {word!r}")
    try:
        sh, n = region["shares"], int(region["cells"])
        h, u, f = float(sh["holds"]), float(sh["undecided"]), float(sh["fails"])
    except (KeyError, TypeError, ValueError):
        raise ValidationError("verdict on_map: region must be spinlib.maps.region_text's answer") from None
    return Verdict(word, bool(n > 0 and h >= 1.0 - 1e-12),
                   f"{word} at every point of the map: holds at {h:.0%} of {n} points, undecided at {u:.0%}, "
                   f"fails at {f:.0%}")
