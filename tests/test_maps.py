"""Claim maps (:mod:`spinlib.maps`): grid records, per-cell verdicts with intervals, region shares and
boundaries, on synthetic records with known answers (the papers' point functions: tests/studies)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from spinlib.maps import Grid, cell_verdicts, grid_records, region_text
from spinlib.study import study_seeds
from spinlib.validation import ValidationError


def _noise_point(cell, seed):
    rng = np.random.default_rng(seed)
    return {"m": cell["a"] * cell["b"] + 0.01 * rng.standard_normal(), "seed_echo": seed}


def test_grid_refuses_what_cannot_give_an_interval():
    for bad in [dict(axes=(), n_seeds=3, seed=0), dict(axes=(("a", ()),), n_seeds=3, seed=0),
                dict(axes=(("a", (1,)),), n_seeds=1, seed=0)]:
        with pytest.raises(ValidationError):
            Grid(**bad)


def test_grid_records_are_complete_deterministic_and_share_seeds():
    g = Grid((("a", (0.0, 1.0, 2.0)), ("b", (-1.0, 1.0))), 3, 5)
    r1 = grid_records(_noise_point, g, n_jobs=1, progress=False)
    r2 = grid_records(_noise_point, g, n_jobs=2, progress=False)
    assert r1 == r2 and len(r1) == 3 * 2 * 3
    df = pd.DataFrame(r1)
    assert (df["seed"] == df["seed_echo"]).all()
    assert set(df["seed"]) == set(study_seeds(5, 3))
    assert df.groupby(["a", "b"])["seed"].apply(lambda s: sorted(s)).map(tuple).nunique() == 1  # common seeds


@pytest.mark.parametrize("seed", range(5))
def test_cell_verdicts_match_the_t_interval(seed):
    rng = np.random.default_rng([25, seed])
    rec = [{"x": x, "seed": i, "m": float(mu + rng.normal(0, 0.5))}
           for x, mu in ((1, -3.0), (2, 0.0), (3, 3.0)) for i in range(int(rng.integers(2, 9)))]
    v = cell_verdicts(rec, ["x"], "m", threshold=0.0).set_index("x")
    for x in (1, 2, 3):
        d = np.array([r["m"] for r in rec if r["x"] == x])
        half = stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d))
        assert v.loc[x, "lo"] == pytest.approx(d.mean() - half) and v.loc[x, "hi"] == pytest.approx(d.mean() + half)
        expect = "holds" if d.mean() - half > 0 else ("fails" if d.mean() + half <= 0 else "undecided")
        assert v.loc[x, "verdict"] == expect
    # a metric at the threshold in every seed (zero spread) fails "above the threshold": not undecided
    flat = cell_verdicts([{"x": 0, "seed": i, "m": 0.0} for i in range(4)], ["x"], "m", threshold=0.0)
    assert flat["verdict"].tolist() == ["fails"]


def test_region_text_shares_and_boundary():
    # holds for a >= 2 when b = 0, never when b = 1
    rows = []
    for b in (0, 1):
        for a in (1, 2, 3):
            verdict = "holds" if (b == 0 and a >= 2) else ("fails" if b == 1 else "undecided")
            rows.append({"a": a, "b": b, "mean": 0.0, "lo": 0.0, "hi": 0.0, "n": 2, "verdict": verdict})
    out = region_text(pd.DataFrame(rows), "a")
    assert out["shares"] == pytest.approx({"holds": 2 / 6, "undecided": 1 / 6, "fails": 3 / 6})
    assert {b["b"]: b["holds_from"] for b in out["boundary"]} == {0: 2, 1: None}


def test_plot_map_marks_every_cell(tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from spinlib.maps import plot_map
    v = pd.DataFrame([{"a": a, "b": b, "mean": a - b, "lo": 0, "hi": 0, "n": 2,
                       "verdict": ["holds", "fails", "undecided"][(a + b) % 3]} for a in (1, 2) for b in (1, 2, 3)])
    fig, ax = plt.subplots()
    plot_map(ax, v, "a", "b", label="m", fmt="{:+.0f}", center=0.0)
    texts = [t.get_text() for t in ax.texts]
    assert len(texts) == 6 and {t[0] for t in texts} == {"o", "x", "?"}
    plt.close(fig)


@pytest.mark.parametrize("seed", range(5))
def test_cell_verdicts_every_rule_is_the_seedwise_min_and_max(seed):
    """rule="every" (an exact property): holds when every instance is above the threshold, fails when none
    is, undecided when some are; lo/hi are the smallest and largest value over the seeds."""
    rng = np.random.default_rng([26, seed])
    rec = [{"x": x, "seed": i, "m": float(rng.choice(vals))}
           for x, vals in ((1, (1.0,)), (2, (0.0,)), (3, (0.0, 1.0))) for i in range(int(rng.integers(2, 9)))]
    v = cell_verdicts(rec, ["x"], "m", threshold=0.5, rule="every").set_index("x")
    for x in (1, 2, 3):
        d = np.array([r["m"] for r in rec if r["x"] == x])
        assert (v.loc[x, "lo"], v.loc[x, "hi"]) == (d.min(), d.max())
        expect = "holds" if d.min() > 0.5 else ("fails" if d.max() <= 0.5 else "undecided")
        assert v.loc[x, "verdict"] == expect
    with pytest.raises(ValidationError, match="rule"):
        cell_verdicts(rec, ["x"], "m", rule="most")
    with pytest.raises(ValidationError, match="metric"):
        cell_verdicts(rec, ["x"], "missing")
