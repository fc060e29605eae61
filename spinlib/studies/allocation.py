"""Studies of the static allocation policies (notebooks 01, 03, 06 and 07): checks of the certified
searches against exhaustive references, the closed form against simulated rounds, where speculation
starts to pay, the testbed against the analysis and a measured preset's gains with intervals.

Each returns JSON-able records for :func:`spinlib.cache.cached_call`. Every randomised one is a
:class:`spinlib.study.Study` (records first, one master seed, common seeds across its points) whose point
function is defined here; :func:`speculation_boundary` (a deterministic table) and
:func:`measured_preset_gain_intervals` (one bootstrap over the measurements) are single computations. The
sweep pipeline they share with the notebooks (specs, factories, long records) is :mod:`spinlib.experiments`.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..control import declared_subset, solve
from ..control import uldl as U
from ..control.homogeneous import critical_access_latency
from ..emulator import FADING_MODELS, EmulatorConfig, Fading, emulate
from ..experiments import heterogeneity_kwargs
from ..study import Study
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
def exhaustive_gap_point(params: dict, seed: int) -> dict:
    """One instance of :func:`exhaustive_gaps`: K in 2..4 users of ``params["preset"]`` with heterogeneity
    uniform in [0, 1], all drawn from ``default_rng(seed)``; ``params["L_max"]`` bounds the lengths."""
    rng = np.random.default_rng(seed)
    K = int(rng.integers(2, 5))
    L_max = int(params["L_max"])
    s = random_scenario(K, seed=int(rng.integers(1 << 31)), preset=params["preset"],
                        **heterogeneity_kwargs(float(rng.uniform(0, 1))))
    row = {"K": K}
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
    return row


def exhaustive_gaps(n: int, seed: int, L_max: int = 6, n_jobs: int | None = 1) -> list[dict]:
    """Paper 1: ``1 - G(policy) / G(exhaustive)`` of heterogeneous-sync / -async (told to branch, not to
    enumerate: ``exhaustive_max=0``) on ``n`` random instances per preset (``llama2-7b-l4`` and
    ``qwen-7b-l4``; :func:`exhaustive_gap_point`), with each solver's certified gap and whether its upper
    bound covers the exhaustive optimum. A :class:`~spinlib.study.Study` (one record per instance, with its
    ``preset``, ``L_max`` and ``seed``); wall-clock times are in the ``*_ms`` fields (timings, not results:
    one worker by default, so that the solvers are timed alone)."""
    points = [{"preset": p, "L_max": int(L_max)} for p in ("llama2-7b-l4", "qwen-7b-l4")]
    return Study("exhaustive-gaps", exhaustive_gap_point, points, n, seed).run(n_jobs=n_jobs)


def uldl_structure_point(params: dict, seed: int) -> dict:
    """One cell of :func:`uldl_structure_check` (K in 2..10, random lengths up to ``params["L_max"]``,
    from ``default_rng(seed)``)."""
    rng = np.random.default_rng(seed)
    L_max = int(params["L_max"])
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
    return row


def uldl_structure_check(n: int, seed: int, L_max: int = 8, n_jobs: int | None = None) -> list[dict]:
    """Paper 2, fixed lengths: the top-m mode structure (marginal and knapsack indices) against
    all ``2^K`` assignments on ``n`` random cells (:func:`uldl_structure_point`, a
    :class:`~spinlib.study.Study`); gap per index."""
    return Study("uldl-structure", uldl_structure_point, [{"L_max": int(L_max)}], n, seed).run(n_jobs=n_jobs)


def uldl_length_point(params: dict, seed: int) -> dict:
    """One pair of cells of :func:`uldl_length_check`, K = 3 (L_max = 5) then K = 4 (L_max = 8), drawn
    from ``default_rng(seed)``."""
    rng = np.random.default_rng(seed)
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
    return row


def uldl_length_check(n: int, seed: int, n_jobs: int | None = 1) -> list[dict]:
    """Paper 2: ``uldl-optimal`` (default parameters but L_max, and told to search rather than enumerate:
    ``exhaustive_max=0``) against the joint optimum over every
    (mode assignment, length vector) -- the ``uldl-exhaustive`` reference -- on ``n`` pairs of random
    cells, K = 3 (L_max = 5) and K = 4 (L_max = 8) (:func:`uldl_length_point`, a
    :class:`~spinlib.study.Study`; one worker by default, so that the solvers are timed alone).

    One row per pair of cells: ``gap_vs_joint_exhaustive`` (K = 3) and
    ``gap_vs_joint_exhaustive_K4`` = ``1 - G_optimal / G_joint`` (0 when uldl-optimal finds the
    optimum), the goodputs, wall-clock times in ``t_*_s`` (``t_optimal_s`` / ``t_exhaustive_s``:
    K = 4; ``t_optimal_K3_s`` / ``t_exhaustive_K3_s``: K = 3), and per K (suffix ``_K3`` / ``_K4``) the
    heuristic part's gap ``heuristic_gap`` (steps 1-3 before the branch-and-bound), the certified
    ``certified_gap`` and ``status`` the policy reports, and ``bound_valid`` (its upper bound >= the
    joint optimum, 1e-9 relative).
    """
    return Study("uldl-lengths", uldl_length_point, [{"K_pair": "3,4"}], n, seed).run(n_jobs=n_jobs)


# ----------------------------------------------------------------------------------------------
# Notebook 01: the closed form against simulated rounds; where speculation starts to pay
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MonteCarloPoint:
    """One length of :func:`mc_vs_closed_form`: ``params["L"]`` on every user of ``scenario`` with the
    homogeneous optimal split, ``n_rounds`` simulated rounds from ``default_rng(seed)``."""

    scenario: Scenario
    n_rounds: int
    confidence: float

    def __call__(self, params: dict, seed: int) -> dict:
        K, L = self.scenario.num_users, int(params["L"])
        hom = solve(self.scenario, "homogeneous")
        a = Allocation(tuple([L] * K), tuple(hom.bandwidth_hz) if L > 0 else (0.0,) * K)
        sim = simulate_rounds(self.scenario, a, self.n_rounds, np.random.default_rng(seed), self.confidence)
        return {"closed_form": evaluate(self.scenario, a).goodput_tokens_per_s, "simulated": sim.goodput_tokens_per_s,
                "ci_low": sim.ci_low, "ci_high": sim.ci_high}


def mc_vs_closed_form(scenario: Scenario, L_values: Sequence[int], n_rounds: int, seed: int,
                      confidence: float = 0.99, n_jobs: int | None = None) -> list[dict]:
    """Closed-form goodput of a common length L (homogeneous optimal split) against ``n_rounds``
    simulated rounds (:func:`spinlib.emulator.montecarlo.simulate_rounds`), with the simulation's
    ``confidence`` interval, for every L in ``L_values``: a :class:`~spinlib.study.Study`
    (:class:`MonteCarloPoint`, one seed common to every L)."""
    points = [{"L": int(L)} for L in L_values]
    return Study("mc-vs-closed-form", MonteCarloPoint(scenario, int(n_rounds), float(confidence)), points, 1,
                 seed).run(n_jobs=n_jobs)


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
@dataclass(frozen=True)
class AgreementPoint:
    """One cell of :func:`testbed_agreement`: K in 2..15 users (``default_rng(seed)``), an FDMA cell
    (:func:`~spinlib.presets.random_scenario`) or, with ``params["uplink"] == "ul/dl"``, a UL/DL cell
    (:func:`~spinlib.presets.random_uldl_scenario`); every policy emulated with ``EmulatorConfig(rounds,
    seed)``, asynchronous policies on both server models."""

    policies: tuple
    rounds: int
    L_max: int

    def __call__(self, params: dict, seed: int) -> list[dict]:
        rng = np.random.default_rng(seed)
        K = int(rng.integers(2, 16))
        s = random_uldl_scenario(K, rng) if params["uplink"] == "ul/dl" else random_scenario(K, seed)
        rows = []
        for pol in self.policies:
            a = solve(s, pol, **declared_subset(pol, {"L_max": self.L_max}))
            servers = ["ideal", "batch"] if a.round_model == "async" else ["batch"]
            for server in servers:
                r = emulate(s, a, EmulatorConfig(rounds=self.rounds, seed=seed, server=server))
                rows.append({"K": K, "policy": pol + ("/" + server if a.round_model == "async" else ""),
                             "predicted": r.predicted_tokens_per_s, "emulated": r.goodput_tokens_per_s,
                             "ci_low": r.ci_low, "ci_high": r.ci_high,
                             "dl_devices": sum(m == "DL" and L > 0 for m, L in zip(a.modes or (), a.draft_lengths))})
        return rows


def testbed_agreement(policies: Sequence[str], n_scenarios: int, rounds: int, seed: int, L_max: int = 10,
                      n_jobs: int | None = None) -> list[dict]:
    """Emulated vs predicted goodput (static channel, i.i.d. acceptances) of every policy on
    ``n_scenarios`` random FDMA cells and ``n_scenarios`` random UL/DL cells (:class:`AgreementPoint`, a
    :class:`~spinlib.study.Study`: points ``uplink`` = ``"fdma"`` and ``"ul/dl"``, common seeds);
    asynchronous policies on both server models. ``L_max`` is passed to the policies that declare it."""
    point = AgreementPoint(tuple(policies), int(rounds), int(L_max))
    return Study("testbed-agreement", point, [{"uplink": "fdma"}, {"uplink": "ul/dl"}], n_scenarios, seed).run(
        n_jobs=n_jobs)


@dataclass(frozen=True)
class QueueingPoint:
    """One cell of :func:`queueing_gap`: ``random_scenario(params["K"], seed)``, model B against the
    testbed with one batching server (and the synchronous policy on the testbed), emulator seed ``seed``."""

    rounds: int
    L_max: int

    def __call__(self, params: dict, seed: int) -> dict:
        s = random_scenario(int(params["K"]), seed)
        a = solve(s, "heterogeneous-async", L_max=self.L_max)
        ev = evaluate(s, a)
        r = emulate(s, a, EmulatorConfig(rounds=self.rounds, seed=seed, server="batch"))
        sync = solve(s, "heterogeneous-sync", L_max=self.L_max)
        rs = emulate(s, sync, EmulatorConfig(rounds=self.rounds, seed=seed))
        return {"model B": ev.goodput_tokens_per_s, "model B, capacity-limited": ev.capacity_limited_goodput,
                "testbed: async, one batching server": r.goodput_tokens_per_s,
                "testbed: heterogeneous-sync": rs.goodput_tokens_per_s,
                "utilisation (model B)": ev.server_utilisation, "queue share": r.phase_shares["queue"]}


def queueing_gap(Ks: Sequence[int], seeds_per_K: int, rounds: int, L_max: int = 12, seed: int = 0,
                 n_jobs: int | None = None) -> list[dict]:
    """Model B's goodput against the testbed with one batching server (and the synchronous
    policy on the testbed), for K in ``Ks`` and ``seeds_per_K`` cells each (:class:`QueueingPoint`, a
    :class:`~spinlib.study.Study`: the same seeds at every K)."""
    return Study("queueing-gap", QueueingPoint(int(rounds), int(L_max)), [{"K": int(K)} for K in Ks], seeds_per_K,
                 seed).run(n_jobs=n_jobs)


@dataclass(frozen=True)
class FadingPoint:
    """One cell of :func:`fading_gains` under ``params["fading"]``: ``random_scenario(num_users, seed)``,
    every policy planned on the average channel and emulated with ``EmulatorConfig(rounds, seed, fading)``."""

    policies: tuple
    rounds: int
    num_users: int
    L_max: int

    def __call__(self, params: dict, seed: int) -> list[dict]:
        s = random_scenario(self.num_users, seed)
        rows = []
        for p in self.policies:
            a = solve(s, p, **declared_subset(p, {"L_max": self.L_max}))
            r = emulate(s, a, EmulatorConfig(rounds=self.rounds, seed=seed, fading=Fading(params["fading"])))
            rows.append({"policy": p, "predicted": r.predicted_tokens_per_s, "emulated": r.goodput_tokens_per_s})
        return rows


def fading_gains(policies: Sequence[str], n_scenarios: int, rounds: int, seed: int, num_users: int = 10,
                 L_max: int = 12, n_jobs: int | None = None) -> list[dict]:
    """Policies planned on the average channel, emulated under static, Rayleigh and Markov fading
    (``n_scenarios`` cells of ``num_users``; :class:`FadingPoint`, a :class:`~spinlib.study.Study` whose
    points are the fading models: the same cells and emulator seeds under each)."""
    point = FadingPoint(tuple(policies), int(rounds), int(num_users), int(L_max))
    points = [{"fading": f} for f in FADING_MODELS]
    return Study("fading-gains", point, points, n_scenarios, seed).run(n_jobs=n_jobs)


def measured_preset_gain_intervals(name: str = "qwen-coder-measured", *, num_users: int = 10, n_cells: int = 20,
                                   n_boot: int = 200, seed: int = 0, confidence: float = 0.95,
                                   temperature: float = 1.0) -> dict:
    """The measured preset's gain with an interval carried from its measurements.

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


__all__ = ["exhaustive_gaps", "exhaustive_gap_point", "uldl_structure_check", "uldl_structure_point",
           "uldl_length_check", "uldl_length_point", "mc_vs_closed_form", "MonteCarloPoint", "speculation_boundary",
           "testbed_agreement", "AgreementPoint", "queueing_gap", "QueueingPoint", "fading_gains", "FadingPoint",
           "measured_preset_gain_intervals"]
