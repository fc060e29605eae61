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

A claim of an exact property (a structure every instance must have) is judged with
``cell_verdicts(..., rule="every")``: a point holds when every instance of it holds, fails when none
does, and is undecided when some do and some do not.

Point functions of the claims mapped here: :func:`paper1_gain_point` (paper 1's "optimised draft
control beats the channel-agnostic allocation"), :func:`paper1_compensation_point` ("bandwidth
compensates weaker computation and communication"), :func:`paper1_rewards_point` ("bandwidth rewards
higher acceptance"), :func:`paper2_dl_side_point` (paper 2's "far devices go DL") and
:func:`paper2_structure_point` (paper 2's "top-m users in UL" structure). The online controllers'
point functions live with their studies (:mod:`spinlib.online.experiments`), BALANCE's in
:mod:`spinlib.balance.experiments`.
"""
from __future__ import annotations

import dataclasses
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


def paper1_compensation_point(cell: dict, seed: int, *, preset: str = "llama2-7b-l4", num_users: int = 10,
                              draft_step: float = 1.2, loss_step_db: float = 2.0) -> dict:
    """Paper 1's "the homogeneous split compensates weaker computation and communication" at one point.

    On a random cell (:func:`spinlib.random_scenario`; ``cell`` may set ``num_users``,
    ``bandwidth_mhz`` and ``heterogeneity`` as in :func:`paper1_gain_point`) the L-independent
    split ``b*`` of :func:`spinlib.control.homogeneous.per_token_makespan` is recomputed once per user
    with that user's draft time multiplied by ``draft_step`` (weaker computation) and once with its
    path loss raised by ``loss_step_db`` dB (weaker communication), all else fixed. Returns
    ``compensated_compute`` / ``compensated_channel``: the share of users whose bandwidth rose
    strictly (1.0: every user was compensated), and ``compensated`` (the smaller of the two).
    """
    from . import random_scenario
    from .control.homogeneous import per_token_makespan
    from .experiments import heterogeneity_kwargs

    check_axes("paper1_compensation_point", cell, {"bandwidth_mhz", "heterogeneity", "num_users"})
    kw = heterogeneity_kwargs(float(cell.get("heterogeneity", 0.5)))
    if "bandwidth_mhz" in cell:
        kw["bandwidth_hz"] = float(cell["bandwidth_mhz"]) * 1e6
    s = random_scenario(int(cell.get("num_users", num_users)), seed=seed, preset=preset, **kw)
    _, b = per_token_makespan(s)
    up = {"compute": [], "channel": []}
    for k, u in enumerate(s.users):
        for what, changed in (("compute", dataclasses.replace(u, draft_time_s=u.draft_time_s * draft_step)),
                              ("channel", dataclasses.replace(u, channel_gain=u.channel_gain
                                                              * 10 ** (-loss_step_db / 10)))):
            users = list(s.users)
            users[k] = changed
            _, b2 = per_token_makespan(s.replace(users=tuple(users)))
            up[what].append(bool(b2[k] > b[k]))
    cc, ch = float(np.mean(up["compute"])), float(np.mean(up["channel"]))
    return {"compensated_compute": cc, "compensated_channel": ch, "compensated": min(cc, ch)}


def paper1_rewards_point(cell: dict, seed: int, *, preset: str = "llama2-7b-l4", num_users: int = 8,
                         alpha_range: tuple = (0.3, 0.95), draft_time_s: float = 0.004) -> dict:
    """Paper 1's "the heterogeneous optimum's bandwidth rewards higher acceptance" at one point.

    ``num_users`` users identical except for their acceptance rate (drawn uniformly in ``alpha_range``;
    draft time ``draft_time_s`` and the channel of the random cell's first user), solved by
    ``heterogeneous-sync`` (model A) and ``heterogeneous-async`` (model B). ``cell`` may set
    ``num_users``, ``bandwidth_mhz`` and ``access_latency_ms``. Returns per model ``rewards_sync`` /
    ``rewards_async``: 1.0 when the bandwidth and the draft length are both non-decreasing in alpha
    (bandwidth within 1e-9 of the band), else 0.0; ``rewards`` is the smaller, and ``drafting_sync`` the
    share of users drafting in model A (a cell where nobody drafts rewards no one: 0 bandwidth each).
    """
    from . import User, random_scenario
    from .control import solve

    check_axes("paper1_rewards_point", cell, {"bandwidth_mhz", "num_users", "access_latency_ms"})
    K = int(cell.get("num_users", num_users))
    kw = {}
    if "bandwidth_mhz" in cell:
        kw["bandwidth_hz"] = float(cell["bandwidth_mhz"]) * 1e6
    if "access_latency_ms" in cell:
        kw["access_latency_s"] = float(cell["access_latency_ms"]) * 1e-3
    s = random_scenario(K, seed=seed, preset=preset, **kw)
    rng = np.random.default_rng(seed)
    alphas = np.sort(rng.uniform(*alpha_range, K))
    u0 = s.users[0]
    s = s.replace(users=tuple(User(draft_time_s, float(a), u0.channel_gain, u0.tx_power_w) for a in alphas))
    B = s.radio.bandwidth_hz
    out = {}
    for model in ("sync", "async"):
        a = solve(s, f"heterogeneous-{model}")
        ok = bool(np.all(np.diff(a.b) >= -1e-9 * B) and np.all(np.diff(a.L) >= 0))
        out[f"rewards_{model}"] = float(ok)
        if model == "sync":
            out["drafting_sync"] = float(np.mean(np.asarray(a.L) > 0))
    out["rewards"] = min(out["rewards_sync"], out["rewards_async"])
    return out


def paper2_structure_point(cell: dict, seed: int, *, num_users: int = 6, L_max: int = 8) -> dict:
    """Paper 2's "top-m users in UL" structure at one point: on a random UL/DL cell
    (:func:`spinlib.presets.random_uldl_scenario`, with ``cell``'s ``dl_power_dbm`` and ``num_users``)
    and random fixed lengths ``0..L_max``, the structured search (sort by the marginal index, try
    m = 0..K) against all ``2^K`` mode assignments. Returns ``structure_optimal`` (1.0 when it reaches
    the exhaustive optimum within 1e-9, else 0.0), ``gap`` (``1 - G_structured / G_exhaustive``) and
    ``drafting`` (devices with ``L_k > 0``, whose modes matter)."""
    from .channel import dbm_to_w
    from .control import uldl as U
    from .presets import random_uldl_scenario

    check_axes("paper2_structure_point", cell, {"dl_power_dbm", "num_users"})
    rng = np.random.default_rng(seed)
    K = int(cell.get("num_users", num_users))
    s = random_uldl_scenario(K, rng)
    if "dl_power_dbm" in cell:
        s = s.replace(downlink=dataclasses.replace(s.downlink, power_w=float(dbm_to_w(float(cell["dl_power_dbm"])))))
    prob = U.Problem(s, L_max)
    L = rng.integers(0, L_max + 1, K)
    _, G_x = U.exhaustive_modes(prob, L)
    _, G_s, _ = U.structured_modes(prob, L, index="marginal")
    gap = max(0.0, 1 - G_s / G_x) if G_x > 0 else 0.0
    return {"structure_optimal": float(gap <= 1e-9), "gap": float(gap), "drafting": int((L > 0).sum())}


__all__ = ["Grid", "check_axes", "grid_seeds", "grid_records", "cell_verdicts", "region_text", "plot_map",
           "paper1_gain_point", "paper1_compensation_point", "paper1_rewards_point", "paper2_dl_side_point",
           "paper2_structure_point"]
