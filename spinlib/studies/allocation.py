"""Studies of the static allocation policies (notebooks 01, 03, 06 and 07): checks of the certified
searches against exhaustive references, the closed form against simulated rounds, where speculation
starts to pay, the testbed against the analysis and a measured preset's gains with intervals.

Each returns JSON-able records for :func:`spinlib.cache.cached_call`; the sweep pipeline they share
with the notebooks (specs, factories, long records) is :mod:`spinlib.experiments`.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Sequence

import numpy as np

from ..control import declared_subset, solve
from ..control import uldl as U
from ..control.homogeneous import critical_access_latency
from ..emulator import EmulatorConfig, Fading, emulate
from ..experiments import heterogeneity_kwargs
from ..study import study_seeds
from ..presets import measured_preset, measured_tasks, random_scenario, random_uldl_scenario
from ..emulator.montecarlo import simulate_rounds
from ..rounds import Allocation, evaluate
from ..scenario import Scenario
from ..timing import median_standard_error

#: the key of these studies in the results cache (:func:`spinlib.cache.cache_name`): the module they were
#: first cached under, kept when they moved here
CACHE_NAMESPACE = "spinlib.experiments"


# ----------------------------------------------------------------------------------------------
# Checks against references (the notebooks' optimality tables)
# ----------------------------------------------------------------------------------------------
def exhaustive_gaps(n: int, seed: int, L_max: int = 6) -> list[dict]:
    """Paper 1: ``1 - G(policy) / G(exhaustive)`` of heterogeneous-sync / -async (told to branch, not to
    enumerate: ``exhaustive_max=0``) on ``n`` random
    instances (K in 2..4, both presets, heterogeneity uniform in [0, 1]), with each solver's
    certified gap and whether its upper bound covers the exhaustive optimum. Wall-clock times are
    in the ``*_ms`` fields (timings, not results)."""

    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        K = int(rng.integers(2, 5))
        preset = ["llama2-7b-l4", "qwen-7b-l4"][i % 2]
        s = random_scenario(K, seed=int(rng.integers(1 << 31)), preset=preset,
                            **heterogeneity_kwargs(float(rng.uniform(0, 1))))
        row = {"K": K, "preset": preset}
        for model, pol, ref in (("sync", "heterogeneous-sync", "exhaustive"),
                                ("async", "heterogeneous-async", "exhaustive-async")):
            t0 = time.perf_counter()
            opt = solve(s, pol, L_max=L_max, exhaustive_max=0)  # the search itself, not the tiny-K enumeration
            t1 = time.perf_counter()
            ex = solve(s, ref, L_max=L_max)
            t2 = time.perf_counter()
            row[f"gap_{model}"] = 1 - opt.goodput_tokens_per_s / ex.goodput_tokens_per_s
            # the solver's own certificate: its upper bound must cover the exhaustive optimum
            row[f"certified_gap_{model}"] = float(opt.info["gap"])
            row[f"bound_valid_{model}"] = bool(opt.info["upper_bound"] >= ex.goodput_tokens_per_s * (1 - 1e-9))
            row[f"solver_ms_{model}"] = 1e3 * (t1 - t0)
            row[f"exhaustive_ms_{model}"] = 1e3 * (t2 - t1)
        rows.append(row)
    return rows


def uldl_structure_check(n: int, seed: int, L_max: int = 8) -> list[dict]:
    """Paper 2, fixed lengths: the top-m mode structure (marginal and knapsack indices) against
    all ``2^K`` assignments on ``n`` random cells (K in 2..10, random lengths); gap per index."""

    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        K = int(rng.integers(2, 11))
        s = random_uldl_scenario(K, rng)
        prob = U.Problem(s, L_max)
        L = rng.integers(0, L_max + 1, K)
        ul_x, G_x = U.exhaustive_modes(prob, L)
        row = {"K": K, "dl_power_dbm": float(10 * np.log10(s.downlink.power_w) + 30), "payload": s.payload.mode,
               "variant": s.downlink.variant, "m_opt": int(ul_x[L > 0].sum()), "drafting": int((L > 0).sum())}
        for index in ("marginal", "knapsack"):
            _, G_s, _ = U.structured_modes(prob, L, index=index)
            row[f"gap_{index}"] = max(0.0, 1 - G_s / G_x)
        rows.append(row)
    return rows


def uldl_length_check(n: int, seed: int) -> list[dict]:
    """Paper 2: ``uldl-optimal`` (default parameters but L_max, and told to search rather than enumerate:
    ``exhaustive_max=0``) against the joint optimum over every
    (mode assignment, length vector) -- the ``uldl-exhaustive`` reference -- on ``n`` random cells
    of K = 3 (L_max = 5) and ``n`` of K = 4 (L_max = 8), drawn alternately from ``seed``.

    One row per pair of cells: ``gap_vs_joint_exhaustive`` (K = 3) and
    ``gap_vs_joint_exhaustive_K4`` = ``1 - G_optimal / G_joint`` (0 when uldl-optimal finds the
    optimum), the goodputs, wall-clock times in ``t_*_s`` (``t_optimal_s`` / ``t_exhaustive_s``:
    K = 4; ``t_optimal_K3_s`` / ``t_exhaustive_K3_s``: K = 3), and per K (suffix ``_K3`` / ``_K4``) the
    heuristic part's gap ``heuristic_gap`` (steps 1-3 before the branch-and-bound), the certified
    ``certified_gap`` and ``status`` the policy reports, and ``bound_valid`` (its upper bound >= the
    joint optimum, 1e-9 relative).
    """

    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        row = {}
        for K, L_max, sfx in ((3, 5, "_K3"), (4, 8, "")):
            s = random_uldl_scenario(K, rng)
            t0 = time.perf_counter()
            a = solve(s, "uldl-optimal", L_max=L_max, exhaustive_max=0)  # its search, not the tiny-K enumeration
            t1 = time.perf_counter()
            x = solve(s, "uldl-exhaustive", L_max=L_max)
            t2 = time.perf_counter()
            G, G_x = a.goodput_tokens_per_s, x.goodput_tokens_per_s
            gap_key = "gap_vs_joint_exhaustive" + ("" if sfx else "_K4")
            tag = sfx or "_K4"
            G_h = a.info["heuristic_goodput"]
            row.update({gap_key: 1 - G / G_x if G_x > 0 else 0.0, f"G_optimal{tag}": G,
                        f"G_joint{tag}": G_x, f"t_optimal{sfx}_s": t1 - t0, f"t_exhaustive{sfx}_s": t2 - t1,
                        f"heuristic_gap{tag}": 1 - G_h / G_x if G_x > 0 else 0.0,
                        f"certified_gap{tag}": a.info["gap"], f"status{tag}": a.info["status"],
                        f"bound_valid{tag}": bool(a.info["upper_bound"] >= G_x * (1 - 1e-9))})
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------------------------
# Notebook 01: the closed form against simulated rounds; where speculation starts to pay
# ----------------------------------------------------------------------------------------------
def mc_vs_closed_form(scenario: Scenario, L_values: Sequence[int], n_rounds: int, seed: int,
                      confidence: float = 0.99) -> list[dict]:
    """Closed-form goodput of a common length L (homogeneous optimal split) against ``n_rounds``
    simulated rounds (:func:`spinlib.emulator.montecarlo.simulate_rounds`, generator ``default_rng([seed, L])``),
    with the simulation's ``confidence`` interval, for every L in ``L_values``."""

    K = scenario.num_users
    hom = solve(scenario, "homogeneous")
    out = []
    for L in L_values:
        a = Allocation(tuple([int(L)] * K), tuple(hom.bandwidth_hz) if L > 0 else (0.0,) * K)
        sim = simulate_rounds(scenario, a, n_rounds, np.random.default_rng([seed, int(L)]), confidence)
        out.append({"L": int(L), "closed_form": evaluate(scenario, a).goodput_tokens_per_s,
                    "simulated": sim.goodput_tokens_per_s, "ci_low": sim.ci_low, "ci_high": sim.ci_high})
    return out


def speculation_boundary(scenario: Scenario, draft_time_scales: Sequence[float],
                         access_latencies_s: Sequence[float]) -> list[dict]:
    """Optimal common length L* and its gain over server-only decoding against the access
    latency, for the scenario's devices slowed down or sped up by each factor, with the critical
    latency of :func:`spinlib.control.homogeneous.critical_access_latency`."""


    out = []
    for scale in draft_time_scales:
        users = tuple(dataclasses.replace(u, draft_time_s=u.draft_time_s * scale) for u in scenario.users)
        s = scenario.replace(users=users)
        t_star = critical_access_latency(s)
        for t_acc in access_latencies_s:
            s2 = s.replace(radio=dataclasses.replace(s.radio, access_latency_s=float(t_acc)))
            hom = solve(s2, "homogeneous")
            base = solve(s2, "server-only").goodput_tokens_per_s
            out.append({"draft_time_scale": float(scale), "t_acc_ms": float(t_acc) * 1e3, "L_star": hom.draft_lengths[0],
                        "gain": hom.goodput_tokens_per_s / base - 1, "critical_ms": t_star * 1e3})
    return out


# ----------------------------------------------------------------------------------------------
# Notebook 07: the testbed against the analysis
# ----------------------------------------------------------------------------------------------
def testbed_agreement(policies: Sequence[str], n_scenarios: int, rounds: int, seed: int, L_max: int = 10) -> list[dict]:
    """Emulated vs predicted goodput (static channel, i.i.d. acceptances) of every policy on
    ``n_scenarios`` random cells (K in 2..15; odd cells are UL/DL cells); asynchronous policies on
    both server models. ``L_max`` is passed to the policies that declare it."""

    rows = []
    for i, sd in enumerate(study_seeds(seed, n_scenarios)):
        rng = np.random.default_rng(sd)
        K = int(rng.integers(2, 16))
        s = random_uldl_scenario(K, rng) if i % 2 else random_scenario(K, sd)
        for pol in policies:
            a = solve(s, pol, **declared_subset(pol, {"L_max": L_max}))
            servers = ["ideal", "batch"] if a.round_model == "async" else ["batch"]
            for server in servers:
                r = emulate(s, a, EmulatorConfig(rounds=rounds, seed=i, server=server))
                rows.append({"scenario": i, "K": K, "policy": pol + ("/" + server if a.round_model == "async" else ""),
                             "predicted": r.predicted_tokens_per_s, "emulated": r.goodput_tokens_per_s,
                             "ci_low": r.ci_low, "ci_high": r.ci_high,
                             "dl_devices": sum(m == "DL" and L > 0 for m, L in zip(a.modes or (), a.draft_lengths))})
    return rows


def queueing_gap(Ks: Sequence[int], seeds_per_K: int, rounds: int, L_max: int = 12) -> list[dict]:
    """Model B's goodput against the testbed with one batching server (and the synchronous
    policy on the testbed), for K in ``Ks`` and ``seeds_per_K`` cells each (seed ``1000 K + i``)."""

    rows = []
    for K in Ks:
        for sd in range(seeds_per_K):
            s = random_scenario(K, 1000 * K + sd)
            a = solve(s, "heterogeneous-async", L_max=L_max)
            ev = evaluate(s, a)
            r = emulate(s, a, EmulatorConfig(rounds=rounds, seed=sd, server="batch"))
            sync = solve(s, "heterogeneous-sync", L_max=L_max)
            rs = emulate(s, sync, EmulatorConfig(rounds=rounds, seed=sd))
            rows.append({"K": K, "seed": sd, "model B": ev.goodput_tokens_per_s,
                         "model B, capacity-limited": ev.capacity_limited_goodput,
                         "testbed: async, one batching server": r.goodput_tokens_per_s,
                         "testbed: heterogeneous-sync": rs.goodput_tokens_per_s,
                         "utilisation (model B)": ev.server_utilisation, "queue share": r.phase_shares["queue"]})
    return rows


def fading_gains(policies: Sequence[str], n_scenarios: int, rounds: int, seed: int, num_users: int = 10,
                 L_max: int = 12) -> list[dict]:
    """Policies planned on the average channel, emulated under static, Rayleigh and Markov fading
    (``n_scenarios`` cells of ``num_users``; seeds from ``SeedSequence(seed)``)."""

    rows = []
    for i, sd in enumerate(study_seeds(seed, n_scenarios)):
        s = random_scenario(num_users, sd)
        allocs = {p: solve(s, p, **declared_subset(p, {"L_max": L_max})) for p in policies}
        for fading in ("static", "rayleigh", "markov"):
            for p, a in allocs.items():
                r = emulate(s, a, EmulatorConfig(rounds=rounds, seed=i, fading=Fading(fading)))
                rows.append({"scenario": i, "fading": fading, "policy": p, "predicted": r.predicted_tokens_per_s,
                             "emulated": r.goodput_tokens_per_s})
    return rows


def measured_preset_gain_intervals(name: str = "qwen-coder-measured", *, num_users: int = 10, n_cells: int = 20,
                                   n_boot: int = 200, seed: int = 0, confidence: float = 0.95,
                                   temperature: float = 1.0) -> dict:
    """The measured preset's gain with an interval carried from its measurements (issue 25, item 4).

    One replicate rebuilds the preset (:func:`spinlib.presets.measured_preset`) from the pair's task
    summaries resampled with replacement: each resampled task's alpha moved by a normal draw with the
    standard deviation of its 95 % bootstrap interval (``alpha_ci95``, width / 3.92), its median draft
    step by a normal draw with the median's standard error from its quartiles; the server's
    ``t0, t1`` the median of the resampled tasks' fits. On ``n_cells`` random cells of ``num_users``
    users (the same cells in every replicate: ``SeedSequence(seed)``, first child for the cells,
    second for the replicates) it solves ``heterogeneous-sync`` and server-only decoding.

    Returns the point estimate on the committed preset and the percentile interval over replicates of:
    ``gain`` (mean over cells of ``G_het / G_server - 1``), ``drafting`` (share of users with
    ``L > 0``) and ``L_max`` (the largest length chosen), each as ``{"value", "lo", "hi"}``; and
    ``replicates`` (the gains).
    """

    base = measured_preset(temperature=temperature, name=name)
    tasks = []
    for t in measured_tasks(name, temperature):
        lo, hi = t["alpha_ci95"]
        sp = t["draft_spread"]
        tasks.append({"alpha": t["alpha"], "alpha_sd": (hi - lo) / 3.92, "draft": sp["median_s"],
                      "draft_se": float(median_standard_error(sp["q25_s"], sp["q75_s"], sp["n"])),
                      "t0": t["t0_s"], "t1": t["t1_s"]})
    cells_ss, boot_ss = np.random.SeedSequence(seed).spawn(2)
    cell_seeds = [int(x) for x in cells_ss.generate_state(n_cells)]
    rng = np.random.default_rng(boot_ss)

    def on_cells(preset):
        gains, drafting, users, L_top = [], 0, 0, 0
        for cs in cell_seeds:
            s = random_scenario(num_users, cs, preset)
            a = solve(s, "heterogeneous-sync")
            g0 = solve(s, "server-only").goodput_tokens_per_s
            gains.append(a.goodput_tokens_per_s / g0 - 1)
            drafting += int((np.asarray(a.L) > 0).sum())
            users += len(a.L)
            L_top = max(L_top, int(np.max(a.L)))
        return float(np.mean(gains)), drafting / users, L_top

    point = on_cells(base)
    reps = []
    for _ in range(n_boot):
        pick = [tasks[i] for i in rng.integers(0, len(tasks), len(tasks))]
        alphas = tuple(float(np.clip(t["alpha"] + rng.normal(0, t["alpha_sd"]), 0.0, 0.995)) for t in pick)
        draft = float(np.median([max(t["draft"] + rng.normal(0, t["draft_se"]), 1e-6) for t in pick]))
        p = dataclasses.replace(base, alpha_choices=alphas, alpha_range=(min(alphas), max(alphas)), draft_time_s=draft,
                                server_t0_s=float(max(np.median([t["t0"] for t in pick]), 0.0)),
                                server_t1_s=float(max(np.median([t["t1"] for t in pick]), 0.0)))
        reps.append(on_cells(p))
    reps = np.asarray(reps, float)
    q = [(1 - confidence) / 2, (1 + confidence) / 2]
    out = {"name": name, "num_users": num_users, "n_cells": n_cells, "n_boot": n_boot, "confidence": confidence,
           "tasks": len(tasks), "replicates": reps[:, 0].tolist()}
    for j, key in enumerate(("gain", "drafting", "L_max")):
        lo, hi = np.quantile(reps[:, j], q)
        out[key] = {"value": float(point[j]), "lo": float(lo), "hi": float(hi)}
    return out


__all__ = ["exhaustive_gaps", "uldl_structure_check", "uldl_length_check", "mc_vs_closed_form",
           "speculation_boundary", "testbed_agreement", "queueing_gap", "fading_gains",
           "measured_preset_gain_intervals"]
