"""Studies of notebook 09 (BALANCE): sweeps, the ratio campaign and the solve-time ladder.

The randomised studies are :class:`spinlib.study.Study` instances (one master seed, common seeds across
points, records first) whose point functions are defined here; each returns plain records (lists of
dicts) so that :func:`spinlib.cache.cached_call` can store them.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..timing import measure
from ..balance.instances import random_instance
from ..balance.model import feasible
from ..balance.registry import solve_balance
from ..balance.rounds import PolicyDecider, play_balance
from ..balance.solvers import greedy_counterexample
from ..balance.wireless import wireless_instance
from ..study import Study
from ..validation import ValidationError

#: the key of these studies in the results cache (:func:`spinlib.cache.cache_name`): the module they were
#: first cached under, kept when they moved here
CACHE_NAMESPACE = "spinlib.balance.experiments"

SWEEP_POLICIES = ("balance", "ad-only", "sd-only", "greedy", "milp")
_GRID_POLICIES = ("balance", "greedy", "milp", "exhaustive")


def _kwargs(policy: str, phi_steps: int) -> dict:
    return {"phi_steps": phi_steps} if policy in _GRID_POLICIES else {}


SERVED_KNOBS = ("num_users", "memory_gb", "deadline_scale", "bandwidth_mhz")


def _check_knob(knob: str) -> None:
    if knob not in SERVED_KNOBS:
        raise ValidationError(f"knob must be one of {', '.join(SERVED_KNOBS)}; got {knob!r}")


def _instance(knob: str, value, K: int, rng, base_kwargs: dict):
    _check_knob(knob)
    kw = dict(base_kwargs)
    if knob == "num_users":
        K = int(value)
    elif knob == "memory_gb":
        kw["memory_gb"] = float(value)
    elif knob == "deadline_scale":  # every per-token budget scaled by `value`
        lo, hi = kw.pop("token_budget_ms", (8.0, 40.0))
        kw["token_budget_ms"] = (lo * value, hi * value)
    elif knob == "bandwidth_mhz":
        return wireless_instance(K, int(rng.integers(1 << 31)), bandwidth_hz=float(value) * 1e6, **kw)
    return random_instance(K, rng, **kw)


@dataclass(frozen=True)
class ServedPoint:
    """One instance of :func:`served_sweep` at knob value ``params["x"]``: drawn from ``default_rng(seed)``,
    every policy's served users, AD/SD split and phi (each schedule re-checked with
    :func:`~spinlib.balance.model.feasible`; the MILP only where K <= ``milp_max_users``)."""

    knob: str
    num_users: int
    milp_max_users: int
    phi_steps: int
    policies: tuple
    instance_kwargs: tuple  # sorted (key, value) pairs

    def __call__(self, params: dict, seed: int) -> dict:
        inst = _instance(self.knob, params["x"], self.num_users, np.random.default_rng(seed), dict(self.instance_kwargs))
        rec = {"K": inst.num_users}
        for p in self.policies:
            if p == "milp" and inst.num_users > self.milp_max_users:
                continue
            s = solve_balance(inst, p, **_kwargs(p, self.phi_steps))
            if not feasible(inst, s).ok:
                raise AssertionError(f"{p} returned an infeasible schedule")
            rec[p] = s.served
            rec[f"{p}_ad"], rec[f"{p}_sd"], rec[f"{p}_phi"] = s.num_ad, s.num_sd, s.phi
            if p == "milp":
                rec["milp_certified"] = bool(s.info["certified"])
        return rec


def served_sweep(knob: str, values, n_seeds: int, seed: int, num_users: int = 100, milp_max_users: int = 60,
                 phi_steps: int = 20, policies=SWEEP_POLICIES, n_jobs: int | None = None,
                 **instance_kwargs) -> list[dict]:
    """Users served by each policy on ``n_seeds`` random instances per ``knob`` value: a
    :class:`~spinlib.study.Study` (:class:`ServedPoint`, points ``x`` = the values).

    Knobs: ``num_users`` (K), ``memory_gb``, ``deadline_scale`` (per-token budgets x value) and
    ``bandwidth_mhz`` (uplink band of :func:`~spinlib.balance.wireless.wireless_instance`; the
    ``instance_kwargs`` then go there). Common random numbers: the study's seeds are the same at every
    value, so that the memory, deadline and bandwidth sweeps change only their knob on the same users.
    The MILP runs where K <= ``milp_max_users``. Each record: knob value ``x``, ``seed``, K, and per
    policy the count served, AD/SD split and phi.
    """
    _check_knob(knob)  # before any work
    point = ServedPoint(knob, int(num_users), int(milp_max_users), int(phi_steps), tuple(policies),
                        tuple(sorted(instance_kwargs.items())))
    return Study(f"served-{knob}", point, [{"x": float(v)} for v in values], n_seeds, seed).run(n_jobs=n_jobs)


def who_is_served(num_users: int, seed: int, phi_steps: int = 20, **instance_kwargs) -> list[dict]:
    """One instance's users (alpha, per-token budget, memory, mode under ``balance``)."""
    inst = random_instance(num_users, seed, **instance_kwargs)
    s = solve_balance(inst, "balance", phi_steps=phi_steps)
    budget = (inst.deadline - inst.comm) / inst.n
    return [{"alpha": float(inst.alpha[k]), "budget_s_per_token": float(budget[k]), "kv_ad_gb": inst.kv_ad[k] / 1e9,
             "output_tokens": int(inst.n[k]), "mode": s.modes[k], "phi": s.phi} for k in range(num_users)]


@dataclass(frozen=True)
class RatioPoint:
    """One instance of :func:`ratio_campaign`: K ~ U{1..k_max} and the instance from ``default_rng(seed)``;
    ``served`` of the MILP and of every policy."""

    k_max: int
    phi_steps: int

    def __call__(self, params: dict, seed: int) -> dict:
        rng = np.random.default_rng(seed)
        inst = random_instance(int(rng.integers(1, self.k_max + 1)), rng)
        rec = {"K": inst.num_users}
        for p in ("milp", "balance", "greedy", "ad-only", "sd-only"):
            s = solve_balance(inst, p, **_kwargs(p, self.phi_steps))
            rec[p] = s.served
            if p == "milp":
                rec["milp_certified"] = bool(s.info["certified"])
        return rec


def ratio_campaign(n_instances: int, seed: int, k_max: int = 30, phi_steps: int = 20,
                   n_jobs: int | None = None) -> list[dict]:
    """``served`` of every policy and of the MILP on ``n_instances`` default random instances
    (K ~ U{1..k_max}): a :class:`~spinlib.study.Study` (:class:`RatioPoint`, one point)."""
    return Study("balance-ratio", RatioPoint(int(k_max), int(phi_steps)), [{"k_max": int(k_max)}], n_instances,
                 seed).run(n_jobs=n_jobs)


#: the region of generator settings the hybrid-regime study explores (log-uniform where the range spans decades)
REGIME_REGION = {
    "num_users": (10, 400),  # K, log-uniform integer
    "memory_gb": (16.0, 80.0),  # GPU memory, log-uniform
    "budget_ms_low": (1.0, 40.0),  # lowest per-token budget, log-uniform
    "budget_spread": (1.0, 20.0),  # highest / lowest per-token budget, log-uniform
    "output_low": (8, 512),  # shortest output [tokens], log-uniform
    "output_spread": (1.0, 16.0),  # longest / shortest output, log-uniform
    "prompt_low": (16, 4096),  # shortest prompt [tokens], log-uniform
    "prompt_spread": (1.0, 8.0),  # longest / shortest prompt, log-uniform
    "alpha_low": (0.05, 0.9),  # lowest acceptance rate, uniform
    "alpha_high": (0.05, 0.98),  # highest acceptance rate, uniform above alpha_low
    "draft_length": (2, 8),  # L, uniform integer
}


def _draw_setting(rng: np.random.Generator) -> dict:
    R = REGIME_REGION

    def logu(lo, hi):
        return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))

    K = int(round(logu(*R["num_users"])))
    a_lo = float(rng.uniform(*R["alpha_low"]))
    a_hi = float(rng.uniform(max(a_lo, R["alpha_high"][0]), R["alpha_high"][1]))
    b_lo = logu(*R["budget_ms_low"])
    o_lo = int(round(logu(*R["output_low"])))
    p_lo = int(round(logu(*R["prompt_low"])))
    return {"num_users": K, "memory_gb": logu(*R["memory_gb"]),
            "token_budget_ms": (b_lo, b_lo * logu(*R["budget_spread"])),
            "output_tokens": (o_lo, max(o_lo, int(round(o_lo * logu(*R["output_spread"]))))),
            "prompt_tokens": (p_lo, max(p_lo, int(round(p_lo * logu(*R["prompt_spread"]))))),
            "alpha_range": (a_lo, a_hi), "draft_length": int(rng.integers(R["draft_length"][0], R["draft_length"][1] + 1))}


def hybrid_regime_point(setting: dict, seed: np.random.SeedSequence, phi_steps: int = 20) -> dict:
    """One point of :func:`hybrid_regime_study`: one instance of ``setting``, served users of BALANCE
    and of the two single-mode schedules (each schedule re-checked with :func:`feasible`)."""
    kw = {k: v for k, v in setting.items() if k != "num_users"}
    inst = random_instance(setting["num_users"], np.random.default_rng(seed), **kw)
    rec = {"K": inst.num_users, "memory_gb": setting["memory_gb"], "budget_ms_low": setting["token_budget_ms"][0],
           "budget_ms_high": setting["token_budget_ms"][1], "output_low": setting["output_tokens"][0],
           "output_high": setting["output_tokens"][1], "prompt_low": setting["prompt_tokens"][0],
           "prompt_high": setting["prompt_tokens"][1], "alpha_low": setting["alpha_range"][0],
           "alpha_high": setting["alpha_range"][1], "draft_length": setting["draft_length"]}
    for p in ("balance", "ad-only", "sd-only"):
        s = solve_balance(inst, p, **_kwargs(p, phi_steps))
        if not feasible(inst, s).ok:
            raise AssertionError(f"{p} returned an infeasible schedule")
        rec[p] = s.served
        if p == "balance":
            rec["balance_ad"], rec["balance_sd"], rec["balance_phi"] = s.num_ad, s.num_sd, s.phi
    return rec


#: the generator's defaults (:func:`spinlib.balance.instances.random_instance`) as the map axes name them
HYBRID_MAP_DEFAULTS = {"memory_gb": 80.0, "budget_ms_low": 8.0, "budget_spread": 5.0, "output_low": 32,
                       "output_spread": 16.0, "prompt_low": 64, "prompt_spread": 32.0, "alpha_low": 0.3,
                       "alpha_high": 0.9, "draft_length": 4}


def balance_hybrid_point(cell: dict, seed: int, phi_steps: int = 20) -> dict:
    """BALANCE's served users against the better single mode at one point, for a claim map
    (:mod:`spinlib.maps`): one instance of the setting ``cell`` names (``num_users`` and any key of
    :data:`HYBRID_MAP_DEFAULTS`; the rest at the generator's defaults), solved by
    :func:`hybrid_regime_point`. ``hybrid_gain`` = (BALANCE - max(AD-only, SD-only)) / K, >= 0 by
    construction; ``best_single_share`` = the better single mode's served share."""
    from ..maps import check_axes

    check_axes("balance_hybrid_point", cell, {"num_users", *HYBRID_MAP_DEFAULTS})
    c = {**HYBRID_MAP_DEFAULTS, **cell}
    K = int(c.get("num_users", 30))
    setting = {"num_users": K, "memory_gb": float(c["memory_gb"]),
               "token_budget_ms": (float(c["budget_ms_low"]), float(c["budget_ms_low"]) * float(c["budget_spread"])),
               "output_tokens": (int(c["output_low"]), int(round(int(c["output_low"]) * float(c["output_spread"])))),
               "prompt_tokens": (int(c["prompt_low"]), int(round(int(c["prompt_low"]) * float(c["prompt_spread"])))),
               "alpha_range": (float(c["alpha_low"]), float(c["alpha_high"])), "draft_length": int(c["draft_length"])}
    r = hybrid_regime_point(setting, np.random.SeedSequence(int(seed)), phi_steps)
    best = max(r["ad-only"], r["sd-only"])
    return {"hybrid_gain": (r["balance"] - best) / K, "hybrid_gain_users": r["balance"] - best,
            "best_single_share": best / K, "balance_share": r["balance"] / K}


@dataclass(frozen=True)
class RegimePoint:
    """One point of :func:`hybrid_regime_study`: ``SeedSequence(seed).spawn(2)``, the first child draws the
    setting from :data:`REGIME_REGION`, the second the instance (:func:`hybrid_regime_point`)."""

    phi_steps: int

    def __call__(self, params: dict, seed: int) -> dict:
        draw, inst_seed = np.random.SeedSequence(seed).spawn(2)
        return hybrid_regime_point(_draw_setting(np.random.default_rng(draw)), inst_seed, self.phi_steps)


def hybrid_regime_study(n_points: int, seed: int, phi_steps: int = 20, n_jobs: int | None = None) -> list[dict]:
    """Where does the hybrid serve more users than both single modes? ``n_points`` generator settings
    drawn from :data:`REGIME_REGION`, one instance each: a :class:`~spinlib.study.Study` (:class:`RegimePoint`;
    a point's setting and instance depend only on its seed); one record per point, with its setting."""
    return Study("hybrid-regime", RegimePoint(int(phi_steps)), [{"region": "REGIME_REGION"}], n_points, seed).run(
        n_jobs=n_jobs)


def counterexample_counts(K: int) -> dict:
    """``served`` by ``greedy``, ``balance`` and ``milp`` on :func:`greedy_counterexample` ``(K)``."""
    inst = greedy_counterexample(K)
    return {p: solve_balance(inst, p).served for p in ("greedy", "balance", "milp")}


def solve_time_ladder(algo_sizes, milp_sizes, phi_steps: int = 20, repeats: int = 3, milp_stop_s: float = 20.0):
    """Median solve times [s] (:func:`spinlib.timing.measure`) of ``balance`` and ``milp`` on
    ``random_instance(K, seed=K)``; the MILP ladder stops after a median above ``milp_stop_s``."""
    rows = []
    for K in algo_sizes:
        inst = random_instance(K, seed=K)
        t = measure(lambda: solve_balance(inst, "balance", phi_steps=phi_steps), repeats=repeats, warmup=1)
        s = solve_balance(inst, "balance", phi_steps=phi_steps)
        rows.append({"K": K, "solver": "balance", "wall_median_s": t.median_s, "wall_q25_s": t.q25_s,
                     "wall_q75_s": t.q75_s, "served": s.served, "membership_tests": s.info["membership_tests"]})
    for K in milp_sizes:
        inst = random_instance(K, seed=K)
        t0 = time.perf_counter()
        s = solve_balance(inst, "milp", phi_steps=phi_steps)
        probe = time.perf_counter() - t0
        t = measure(lambda: solve_balance(inst, "milp", phi_steps=phi_steps), repeats=repeats if probe < 2 else 1,
                    warmup=0)
        rows.append({"K": K, "solver": "milp", "wall_median_s": t.median_s, "wall_q25_s": t.q25_s,
                     "wall_q75_s": t.q75_s, "served": s.served, "membership_tests": None})
        if t.median_s > milp_stop_s:
            break
    return rows


ROUND_POLICIES = ("balance", "ad-only", "sd-only", "greedy")
WALD_SE = 5.0  # standard errors of slack of the Wald-bound check (per SD user, over the plays)


def balance_rounds_point(params: dict, seed: int) -> dict:
    """One policy on one random instance (``random_instance(num_users, seed)``), played ``plays`` times with
    drawn rounds (:func:`spinlib.balance.rounds.play_balance`, acceptance draws seeded ``[seed, r]``), against
    the analysis (:func:`~spinlib.balance.model.feasible`): counts of served, AD and SD users, deadlines met
    over all plays, plays with a late user, the largest relative gap between an AD user's played and
    analysed completion, the SD users whose mean completion falls outside Wald's bounds by more than
    :data:`WALD_SE` standard errors, and the sum over SD users of (mean played / analysed completion)."""
    inst = random_instance(int(params["num_users"]), seed)
    d = PolicyDecider(inst, params["policy"], **_kwargs(params["policy"], int(params["phi_steps"])))
    plays = int(params["plays"])
    runs = [play_balance(inst, d, seed=[seed, r]) for r in range(plays)]
    comp = np.array([r.completion_s for r in runs]).reshape(plays, inst.num_users)
    met = np.array([r.met for r in runs], dtype=bool).reshape(plays, inst.num_users)
    ana = np.array(feasible(inst, d.schedule).completion_s)
    modes = np.array(d.schedule.modes)
    ad, sd = modes == "AD", modes == "SD"
    served = ad | sd
    out = {"served": int(served.sum()), "ad_users": int(ad.sum()), "sd_users": int(sd.sum()),
           "met": int(met[:, served].sum()), "user_plays": int(plays * served.sum()),
           "late_plays": int(np.sum(~met[:, served].all(axis=1))) if served.any() else 0,
           "ad_max_rel_gap": float(np.max(np.abs(comp[:, ad] - ana[ad]) / ana[ad], initial=0.0)),
           "wald_outside": 0, "sd_ratio_sum": 0.0}
    if sd.any():
        srv = inst.server
        R = float(srv.sd_round_time(int(sd.sum()))) / (1.0 - d.schedule.phi)
        high = inst.comm + (inst.n + srv.draft_length) * R / inst.tokens_per_round
        mean = comp[:, sd].mean(axis=0)
        se = comp[:, sd].std(axis=0, ddof=1) / np.sqrt(plays) if plays > 1 else np.zeros(int(sd.sum()))
        out["wald_outside"] = int(np.sum((mean < ana[sd] - WALD_SE * se) | (mean > high[sd] + WALD_SE * se)))
        out["sd_ratio_sum"] = float(np.sum(mean / ana[sd]))
    return out


def balance_rounds_check(policies, num_users: int, n_instances: int, plays: int, seed: int, phi_steps: int = 20,
                         n_jobs: int | None = None, progress: bool = True, store_dir=None) -> list[dict]:
    """:func:`balance_rounds_point` for every policy on ``n_instances`` random instances (a
    :class:`spinlib.study.Study`: instance seeds ``study_seeds(seed, n_instances)``, common to the policies;
    ``store_dir``: where an unfinished run keeps its records)."""
    points = tuple({"policy": p, "num_users": int(num_users), "plays": int(plays), "phi_steps": int(phi_steps)}
                   for p in policies)
    return Study("balance-rounds", balance_rounds_point, points, n_instances, seed).run(
        n_jobs=n_jobs, progress=progress, store_dir=store_dir)


__all__ = ["balance_rounds_point", "balance_rounds_check", "ROUND_POLICIES", "HYBRID_MAP_DEFAULTS",
           "balance_hybrid_point", "SWEEP_POLICIES", "served_sweep", "ServedPoint", "who_is_served", "ratio_campaign",
           "RatioPoint", "hybrid_regime_study", "hybrid_regime_point", "RegimePoint", "REGIME_REGION",
           "counterexample_counts", "solve_time_ladder"]
