"""Claim maps: a claim checked over the region of parameters it speaks of, not at one point.

A map is records first, a :class:`spinlib.study.Study`. A :class:`Grid` names the axes (a parameter and
its values each), the scenarios per cell and the master seed; :func:`grid_records` runs a *point function*
``fn(cell: dict, seed: int) -> dict`` of metrics once per (cell, seed) and returns one flat record
each (the cell's values, the seed, the metrics). The seeds are common to every cell
(:func:`spinlib.study.study_seeds`), so that neighbouring cells differ only in their
parameters. Verdicts come after, from the records:

* :func:`cell_verdicts` -- per cell the mean of a metric over the seeds, its t-interval, and
  ``holds``: the interval lies above the claim's threshold (a cell where it straddles the threshold
  is "undecided", never counted as holding);
* :func:`region_text` -- the share of the region's cells where the claim holds, where it is undecided,
  and the boundary along one axis (per value of the other axes, the smallest value from which it
  holds);
* :func:`plot_map` -- a heat map of the mean with one marker per verdict (colour is not the only cue).

A claim of an exact property (a structure every instance must have) is judged with
``cell_verdicts(..., rule="every")``: a point holds when every instance of it holds, fails when none
does, and is undecided when some do and some do not.

Point functions live with their studies: the papers' claims in :mod:`spinlib.studies.paper_maps`,
the online controllers' in :mod:`spinlib.studies.online`, BALANCE's in :mod:`spinlib.studies.balance`.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from .study import Study, study_name
from .validation import ValidationError


@dataclass(frozen=True)
class Grid:
    """The region of a claim map.

    axes : ``((name, (values...)), ...)`` -- the parameters and their values (the map is their product).
    n_seeds : scenarios per cell (>= 2: an interval needs two).
    seed : master seed (:func:`spinlib.study.study_seeds`).
    """

    axes: tuple
    n_seeds: int
    seed: int

    def __post_init__(self):
        if not self.axes or any(len(a) != 2 or not len(a[1]) for a in self.axes):
            raise ValidationError("axes must be ((name, (value, ...)), ...) with at least one value each")
        if int(self.n_seeds) < 2:
            raise ValidationError(f"n_seeds must be 2 or more (an interval needs two), got {self.n_seeds!r}")

    @property
    def names(self) -> list[str]:
        return [a[0] for a in self.axes]

    def cells(self) -> list[dict]:
        return [dict(zip(self.names, vals)) for vals in itertools.product(*[a[1] for a in self.axes])]


def check_axes(point: str, cell: dict, allowed) -> None:
    """One line naming ``point`` and the axes of ``cell`` it does not know (a point function's guard:
    an axis it would ignore silently is refused)."""
    unknown = set(cell) - set(allowed)
    if unknown:
        raise ValidationError(f"{point}: unknown axes {sorted(unknown)}")


def grid_records(fn, grid: Grid, *, n_jobs: int | None = None, progress: bool = True,
                 store_dir=None) -> list[dict]:
    """One record per (cell, seed) of ``grid``: the cell, the seed and ``fn(cell, seed)``'s metrics: the
    :class:`spinlib.study.Study` of ``fn`` over the cells, on the joblib / Dask backends of
    :func:`spinlib.study.iter_points` (records do not depend on them; ``store_dir``: where an unfinished
    run keeps its records, default :data:`spinlib.study.STORES`)."""
    return Study(study_name("map", fn), fn, tuple(grid.cells()), grid.n_seeds, grid.seed).run(
        n_jobs=n_jobs, progress=progress, store_dir=store_dir)


def cell_verdicts(records, axes, metric: str, threshold: float = 0.0, confidence: float = 0.95,
                  rule: str = "interval"):
    """Per cell: ``mean``, ``lo``/``hi``, ``n`` and ``verdict`` ("holds": ``lo > threshold``; "fails":
    ``hi <= threshold``, which includes a metric equal to the threshold in every seed, e.g. a gain that
    is 0 by construction; else "undecided"). A DataFrame.

    ``rule="interval"`` (a claim about a mean): ``lo``/``hi`` is the t-interval of the mean over the
    seeds at ``confidence``. ``rule="every"`` (a claim every instance must satisfy, e.g. a structure):
    ``lo``/``hi`` are the smallest and largest value over the seeds, so a cell holds when every
    instance is above the threshold, fails when none is, and is undecided when some are.
    """
    import pandas as pd
    from scipy import stats

    if rule not in ("interval", "every"):
        raise ValidationError(f"rule must be 'interval' or 'every', got {rule!r}")
    df = pd.DataFrame(records)
    if metric not in df.columns:
        raise ValidationError(f"metric {metric!r} is not in the records (columns: {sorted(df.columns)})")
    g = df.groupby(list(axes))[metric]
    out = g.agg(["mean", "std", "count", "min", "max"]).reset_index()
    if rule == "every":
        out["lo"], out["hi"] = out["min"], out["max"]
    else:
        half = stats.t.ppf(0.5 + confidence / 2, np.maximum(out["count"] - 1, 1)) * out["std"] / np.sqrt(out["count"])
        out["lo"], out["hi"] = out["mean"] - half, out["mean"] + half
    out = out.drop(columns=["min", "max"])
    out["verdict"] = np.where(out["lo"] > threshold, "holds", np.where(out["hi"] <= threshold, "fails", "undecided"))
    return out.rename(columns={"count": "n"}).drop(columns="std")


def region_text(verdicts, along: str) -> dict:
    """Shares of the region's cells per verdict and, per value of the other axes, the smallest value of
    ``along`` from which the claim holds at every larger value (``None``: nowhere). JSON-able."""
    n = len(verdicts)
    shares = {v: float((verdicts["verdict"] == v).mean()) if n else 0.0 for v in ("holds", "undecided", "fails")}
    others = [c for c in verdicts.columns if c not in (along, "mean", "lo", "hi", "n", "verdict")]
    boundary = []
    for key, d in (verdicts.groupby(others) if others else [((), verdicts)]):
        d = d.sort_values(along)
        ok = (d["verdict"] == "holds").to_numpy()
        tail = None
        for i in range(len(ok) - 1, -1, -1):
            if not ok[i]:
                break
            tail = d[along].iloc[i]
        key = key if isinstance(key, tuple) else (key,)
        boundary.append({**dict(zip(others, [_plain(k) for k in key])), "holds_from": _plain(tail)})
    return {"cells": n, "shares": shares, "boundary": boundary, "along": along}


def _plain(x):
    return x.item() if hasattr(x, "item") else x


def plot_map(ax, verdicts, x: str, y: str, *, label: str, cmap: str = "viridis", fmt: str = "{:.0%}",
             center: float | None = None):
    """Heat map of the cells' means over axes ``x`` (columns) and ``y`` (rows), each cell marked by its
    verdict (o: holds, x: fails, ?: undecided) and annotated with its mean ("no data" where no seed gave one); ``center``: a value the
    colour scale is symmetric about (a diverging map's neutral colour)."""
    piv = verdicts.pivot(index=y, columns=x, values="mean")
    ver = verdicts.pivot(index=y, columns=x, values="verdict")
    lim = {}
    if center is not None:
        half = float(np.nanmax(np.abs(piv.to_numpy() - center))) or 1.0
        lim = {"vmin": center - half, "vmax": center + half}
    im = ax.imshow(piv.to_numpy(), origin="lower", aspect="auto", cmap=cmap, **lim)
    ax.grid(False)
    ax.set_xticks(range(piv.shape[1]), [f"{v:g}" for v in piv.columns])
    ax.set_yticks(range(piv.shape[0]), [f"{v:g}" for v in piv.index])
    ax.set(xlabel=x, ylabel=y)
    glyph = {"holds": "o", "fails": "x", "undecided": "?"}
    for i in range(piv.shape[0]):
        for j in range(piv.shape[1]):
            v = piv.iat[i, j]  # no mean (no seed had a value, e.g. no DL device): said so, never "+nan"
            ax.text(j, i, f"{glyph[ver.iat[i, j]]}\n{fmt.format(v) if np.isfinite(v) else 'no data'}", ha="center",
                    va="center", fontsize=7, color="white" if np.isfinite(v) and abs(im.norm(v) - 0.5) > 0.3 else "black")
    ax.figure.colorbar(im, ax=ax, label=label)
    return im


__all__ = ["Grid", "check_axes", "grid_records", "cell_verdicts", "region_text", "plot_map"]
