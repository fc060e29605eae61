"""Point functions of the papers' claims mapped over their regions (notebooks 03 and 06), for
:func:`spinlib.maps.grid_records`: ``fn(cell: dict, seed: int) -> dict`` of metrics.

* :func:`paper1_gain_point` -- paper 1's "optimised draft control beats the channel-agnostic allocation";
* :func:`paper1_compensation_point` -- "bandwidth compensates weaker computation and communication";
* :func:`paper1_rewards_point` -- "bandwidth rewards higher acceptance";
* :func:`paper2_dl_side_point` -- paper 2's "far devices go DL";
* :func:`paper2_structure_point` -- paper 2's "top-m users in UL" structure.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..channel import dbm_to_w
from ..control import solve
from ..control import uldl as U
from ..control.homogeneous import per_token_makespan
from ..experiments import heterogeneity_kwargs, make_uldl_scenario
from ..maps import check_axes
from ..presets import random_scenario, random_uldl_scenario
from ..scenario import User

#: the key of these point functions in the results cache (:func:`spinlib.cache.cache_name`): the module
#: they were first cached under, kept when they moved here
CACHE_NAMESPACE = "spinlib.maps"


def paper1_gain_point(cell: dict, seed: int, *, preset: str = "llama2-7b-l4", num_users: int = 10,
                      L_max: int = 16) -> dict:
    """Paper 1's gain at one point: ``heterogeneous-sync`` and ``homogeneous`` over the channel-agnostic
    allocation, ``G / G_agnostic - 1``. ``cell`` may set ``bandwidth_mhz``, ``heterogeneity`` (in
    [0, 1], :func:`spinlib.experiments.heterogeneity_kwargs`), ``access_latency_ms`` and ``num_users``."""

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


__all__ = ["paper1_gain_point", "paper1_compensation_point", "paper1_rewards_point", "paper2_dl_side_point",
           "paper2_structure_point"]
