"""Claim maps: a claim checked over the region of parameters it speaks of, not at one point (issue 25).

A map is records first. A :class:`Grid` names the axes (a parameter and its values each), the
scenarios per cell and the master seed; :func:`grid_records` runs a *point function*
``fn(cell: dict, seed: int) -> dict`` of metrics once per (cell, seed) and returns one flat record
each (the cell's values, the seed, the metrics). The seeds are common to every cell
(``SeedSequence(seed).generate_state(n_seeds)``), so that neighbouring cells differ only in their
parameters. Verdicts come after, from the records:

* :func:`cell_verdicts` -- per cell the mean of a metric over the seeds, its t-interval, and
  ``holds``: the interval lies above the claim's threshold (a cell where it straddles the threshold
  is "undecided", never counted as holding);
* :func:`region_text` -- the share of the region's cells where the claim holds, where it is undecided,
  and the boundary along one axis (per value of the other axes, the smallest value from which it
  holds);
* :func:`plot_map` -- a heat map of the mean with one marker per verdict (colour is not the only cue).

Point functions of the claims mapped here: :func:`paper1_gain_point` (paper 1's "optimised draft
control beats the channel-agnostic allocation") and :func:`paper2_dl_side_point` (paper 2's "far
devices go DL").
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from .validation import ValidationError


@dataclass(frozen=True)
class Grid:
    """The region of a claim map.

    axes : ``((name, (values...)), ...)`` -- the parameters and their values (the map is their product).
    n_seeds : scenarios per cell (>= 2: an interval needs two).
    seed : master seed (:func:`grid_seeds`).
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


def grid_seeds(seed: int, n_seeds: int) -> list[int]:
    """The scenario seeds of every cell: ``SeedSequence(seed).generate_state(n_seeds)``."""
    return [int(s) for s in np.random.SeedSequence(seed).generate_state(n_seeds)]


def check_axes(point: str, cell: dict, allowed) -> None:
    """One line naming ``point`` and the axes of ``cell`` it does not know (a point function's guard:
    an axis it would ignore silently is refused)."""
    unknown = set(cell) - set(allowed)
    if unknown:
        raise ValidationError(f"{point}: unknown axes {sorted(unknown)}")


class _GridPoint:
    def __init__(self, fn, cell, seed):
        self.fn, self.cell, self.seed = fn, cell, seed

    def __call__(self):
        return {**self.cell, "seed": self.seed, **self.fn(self.cell, self.seed)}


def _call(p: _GridPoint) -> dict:
    return p()


def grid_records(fn, grid: Grid, *, n_jobs: int | None = None, progress: bool = True) -> list[dict]:
    """One record per (cell, seed) of ``grid``: the cell, the seed and ``fn(cell, seed)``'s metrics,
    on the joblib / Dask backends of :func:`spinlib.experiments.map_points` (records do not depend on them)."""
    from .experiments import map_points

    points = [_GridPoint(fn, c, s) for c in grid.cells() for s in grid_seeds(grid.seed, grid.n_seeds)]
    return map_points(_call, points, n_jobs=n_jobs, progress=progress, desc="claim map")


def cell_verdicts(records, axes, metric: str, threshold: float = 0.0, confidence: float = 0.95):
    """Per cell: ``mean``, the t-interval ``lo``/``hi`` of the mean over seeds, ``n`` and ``verdict``
    ("holds": ``lo > threshold``; "fails": ``hi <= threshold``, which includes a metric equal to the
    threshold in every seed, e.g. a gain that is 0 by construction; else "undecided"). A DataFrame."""
    import pandas as pd
    from scipy import stats

    df = pd.DataFrame(records)
    g = df.groupby(list(axes))[metric]
    out = g.agg(["mean", "std", "count"]).reset_index()
    half = stats.t.ppf(0.5 + confidence / 2, np.maximum(out["count"] - 1, 1)) * out["std"] / np.sqrt(out["count"])
    out["lo"], out["hi"] = out["mean"] - half, out["mean"] + half
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
    verdict (o: holds, x: fails, ?: undecided) and annotated with its mean; ``center``: a value the
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
            ax.text(j, i, f"{glyph[ver.iat[i, j]]}\n{fmt.format(piv.iat[i, j])}", ha="center", va="center",
                    fontsize=7, color="white" if abs(im.norm(piv.iat[i, j]) - 0.5) > 0.3 else "black")
    ax.figure.colorbar(im, ax=ax, label=label)
    return im


def paper1_gain_point(cell: dict, seed: int, *, preset: str = "llama2-7b-l4", num_users: int = 10,
                      L_max: int = 16) -> dict:
    """Paper 1's gain at one point: ``heterogeneous-sync`` and ``homogeneous`` over the channel-agnostic
    allocation, ``G / G_agnostic - 1``. ``cell`` may set ``bandwidth_mhz``, ``heterogeneity`` (in
    [0, 1], :func:`spinlib.experiments.heterogeneity_kwargs`), ``access_latency_ms`` and ``num_users``."""
    from . import random_scenario
    from .control import solve
    from .experiments import heterogeneity_kwargs

    check_axes("paper1_gain_point", cell, {"bandwidth_mhz", "heterogeneity", "access_latency_ms", "num_users"})
    kw = heterogeneity_kwargs(float(cell.get("heterogeneity", 0.5)))
    if "bandwidth_mhz" in cell:
        kw["bandwidth_hz"] = float(cell["bandwidth_mhz"]) * 1e6
    if "access_latency_ms" in cell:
        kw["access_latency_s"] = float(cell["access_latency_ms"]) * 1e-3
    s = random_scenario(int(cell.get("num_users", num_users)), seed=seed, preset=preset, **kw)
    G = {p: solve(s, p, **({} if p == "agnostic" else {"L_max": L_max})).goodput_tokens_per_s
         for p in ("agnostic", "homogeneous", "heterogeneous-sync")}
    return {"goodput_agnostic": G["agnostic"], "gain_het": G["heterogeneous-sync"] / G["agnostic"] - 1.0,
            "gain_hom": G["homogeneous"] / G["agnostic"] - 1.0}


def paper2_dl_side_point(cell: dict, seed: int, *, num_users: int = 8) -> dict:
    """Paper 2's "far devices go DL" at one point: ``uldl-optimal`` on
    :func:`spinlib.experiments.make_uldl_scenario` (``cell`` may set ``dl_power_dbm``, ``cell_radius_m``,
    ``num_users`` and, as single-valued axes, the settings ``preset``, ``payload_mode``, ``top_k``,
    ``bits_per_prob``, ``heterogeneity``); ``far_dl_db`` = mean channel gain [dB] of the drafting UL devices minus that of the
    drafting DL devices (> 0: the DL devices are the far ones; NaN when either side is empty), and the
    share of drafting devices in DL."""
    from .control import solve
    from .experiments import make_uldl_scenario

    settings = {"preset", "payload_mode", "top_k", "bits_per_prob", "heterogeneity"}  # passed through as they are
    check_axes("paper2_dl_side_point", cell, {"dl_power_dbm", "cell_radius_m", "num_users"} | settings)
    kw = {"num_users": int(cell.get("num_users", num_users)), **{k: cell[k] for k in settings if k in cell}}
    if "dl_power_dbm" in cell:
        kw["dl_power_dbm"] = float(cell["dl_power_dbm"])
    s = make_uldl_scenario("cell_radius_m", float(cell.get("cell_radius_m", 1000.0)), seed, **kw)
    a = solve(s, "uldl-optimal")
    gain_db = 10 * np.log10(s.gain)
    drafting = np.array(a.draft_lengths) > 0
    ul = drafting & (np.array(a.modes) == "UL")
    dl = drafting & (np.array(a.modes) == "DL")
    diff = float(gain_db[ul].mean() - gain_db[dl].mean()) if ul.any() and dl.any() else float("nan")
    return {"far_dl_db": diff, "dl_share": float(dl.sum() / drafting.sum()) if drafting.any() else 0.0,
            "drafting": int(drafting.sum())}


__all__ = ["Grid", "check_axes", "grid_seeds", "grid_records", "cell_verdicts", "region_text", "plot_map", "paper1_gain_point",
           "paper2_dl_side_point"]
