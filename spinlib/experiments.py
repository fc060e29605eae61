"""One experiment pipeline: sweeps of (scenario factory x knob values x seeds x policies) -> long records.

A **sweep** varies one knob of a scenario factory, draws ``n_seeds`` random scenarios per value
(seeds from one :class:`numpy.random.SeedSequence`), runs every policy spec on each and records
what :func:`spinlib.rounds.evaluate` says of the allocation. Records are *long*, one per
(point, policy, metric)::

    {"knob": "num_users", "x": 10, "seed": 123, "policy": "equal/async", "round_model": "async",
     "metric": "goodput", "value": 41.2}

so they cache as JSON, load into pandas (:func:`frame`, :func:`wide`) and feed one
:func:`gain_table`. Metrics: ``goodput`` (the policy's reported goodput, asserted equal to
``evaluate``), ``server_utilisation``, ``capacity_limited_goodput`` and, for UL/DL allocations,
``ul_share`` (share of drafting devices in UL mode) and ``structure_held`` where the solver reports it.

Points run through :mod:`joblib` (``n_jobs``, default all cores) or, when a Dask scheduler address
is given (``scheduler=`` or ``$SPINLIB_DASK_SCHEDULER``), on that :mod:`dask.distributed` cluster.
Every point is a pure function of its inputs and results are put back in point order, so the
records do not depend on the number of workers, their order, or a worker lost mid-sweep (Dask
re-runs its tasks elsewhere). Policies are resolved in the calling process and shipped with the
points, so a policy registered in a notebook or a test runs on the workers too.

Scenario factories: :func:`make_scenario` (paper 1 knobs) and :func:`make_uldl_scenario`
(paper 2 knobs); any ``factory(knob, value, seed, **kwargs) -> Scenario`` works.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np

from .control import get_policy, register_policy, solve
from .control.registry import Policy, check_params
from .presets import MEASURED_PRESET, MEASURED_PRESETS, get_preset, random_scenario, random_uldl_scenario
from .rounds import evaluate
from .scenario import Payload, Scenario
from .validation import ValidationError

RECORD_VERSION = 7  # bump when records or the solvers behind them change: cached_call keys include it
KNOBS = ("bandwidth_mhz", "num_users", "heterogeneity", "payload", "access_latency_ms")
ULDL_KNOBS = ("dl_power_dbm", "num_users", "vocab_size", "bits_per_prob", "cell_radius_m", "top_k")
METRICS = ("goodput", "server_utilisation", "capacity_limited_goodput", "ul_share", "structure_held")
SCHEDULER_ENV = "SPINLIB_DASK_SCHEDULER"


# ----------------------------------------------------------------------------------------------
# Policy specs
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PolicySpec:
    """A policy with its parameters and the label its records carry.

    Parameters
    ----------
    policy : str
        Registered policy name.
    params : tuple of (name, value)
        Declared parameters (checked against the registry at construction).
    label : str
        Column/series name; default ``policy`` or ``policy/round_model`` when a round model is given.
    """

    policy: str
    params: tuple = ()
    label: str = ""

    def __post_init__(self) -> None:
        check_params(self.policy, dict(self.params))
        object.__setattr__(self, "params", tuple(sorted(dict(self.params).items())))
        if not self.label:
            rm = dict(self.params).get("round_model")
            object.__setattr__(self, "label", f"{self.policy}/{rm}" if rm else self.policy)

    def to_dict(self) -> dict:
        return {"policy": self.policy, "params": dict(self.params), "label": self.label}


def spec(policy: str, label: str = "", **params) -> PolicySpec:
    """``spec("equal", draft_length=4, round_model="async")`` -> label ``"equal/async"``."""
    return PolicySpec(policy, tuple(params.items()), label)


def paper1_specs(L_max: int = 16, draft_length: int = 4) -> list[PolicySpec]:
    """Paper 1's optimised policies and every baseline in both round models."""
    from .control import BASELINES

    out = [spec(p, L_max=L_max) for p in ("homogeneous", "heterogeneous-sync", "heterogeneous-async")]
    for base in BASELINES:
        for model in ("sync", "async"):
            kw = {"L_max": L_max, "draft_length": draft_length, "round_model": model}
            out.append(spec(base, **{k: v for k, v in kw.items() if k in get_policy(base).params}))
    return out


def uldl_specs(L_max: int = 12, draft_length: int = 4) -> list[PolicySpec]:
    """Paper 2's adaptive policy, its single-mode baselines, the fixed-length policy and paper 1."""
    return [spec("uldl-optimal", L_max=L_max), spec("all-ul", L_max=L_max), spec("all-dl", L_max=L_max),
            spec("uldl-fixed-length", draft_length=draft_length), spec("heterogeneous-sync", L_max=L_max)]


# ----------------------------------------------------------------------------------------------
# One point
# ----------------------------------------------------------------------------------------------
def allocation_metrics(scenario: Scenario, alloc) -> dict:
    """The recorded metrics of one allocation (see the module docstring)."""
    ev = evaluate(scenario, alloc)
    G = alloc.goodput_tokens_per_s
    if G is None or not np.isclose(G, ev.goodput_tokens_per_s, rtol=1e-9, atol=0.0):
        raise AssertionError(f"policy {alloc.policy!r} reports goodput {G}, evaluate gives {ev.goodput_tokens_per_s}")
    out = {"goodput": float(G), "server_utilisation": float(ev.server_utilisation),
           "capacity_limited_goodput": float(ev.capacity_limited_goodput)}
    if alloc.modes is not None:
        drafting = [m for m, L in zip(alloc.modes, alloc.draft_lengths) if L > 0]
        if drafting:
            out["ul_share"] = sum(m == "UL" for m in drafting) / len(drafting)
    if "structure_held" in alloc.info:
        out["structure_held"] = float(bool(alloc.info["structure_held"]))
    return out


def run_point(scenario: Scenario, specs: Sequence[PolicySpec], policies: dict | None = None) -> list[dict]:
    """Records ``{policy, round_model, metric, value}`` of every spec on one scenario."""
    _ensure_registered(policies)
    out = []
    for sp in specs:
        a = solve(scenario, sp.policy, **dict(sp.params))
        for metric, value in allocation_metrics(scenario, a).items():
            out.append({"policy": sp.label, "round_model": a.round_model, "metric": metric, "value": value})
    return out


def _ensure_registered(policies: dict | None) -> None:
    """On a worker process: register the caller's policies that this process does not know."""
    from .control import POLICIES

    for name, pol in (policies or {}).items():
        if name not in POLICIES:
            register_policy(name, pol.description, family=pol.family)(pol.fn)


@dataclass(frozen=True)
class _Point:
    factory: Callable
    knob: str
    x: object
    seed: int
    factory_kwargs: tuple
    specs: tuple
    policies: dict = field(compare=False)

    def __call__(self) -> list[dict]:
        s = self.factory(self.knob, self.x, self.seed, **dict(self.factory_kwargs))
        # the point's identity: the knob, its value, the seed and every factory setting, so that
        # records of sweeps that differ only in a setting (e.g. the preset) never merge in a table
        head = {"knob": self.knob, "x": self.x, "seed": self.seed,
                **{k: _scalar(v) for k, v in self.factory_kwargs}}
        return [{**head, **r} for r in run_point(s, self.specs, self.policies)]


def _scalar(v):
    """A factory setting as a record field: scalars as they are, anything else as canonical JSON."""
    if v is None or isinstance(v, (str, bool, int, float)):
        return v
    from .cache import canonical_json

    return canonical_json(v)


def _call(point: _Point) -> list[dict]:
    return point()


def map_points(fn: Callable, items: Sequence, *, n_jobs: int | None = None, scheduler: str | None = None,
               progress: bool = False, desc: str = "points") -> list:
    """``[fn(item) for item in items]``, in item order, on joblib workers or a Dask cluster.

    Parameters
    ----------
    n_jobs : int, optional
        joblib workers (``None``: all cores, ``1``: in this process).
    scheduler : str, optional
        A ``dask.distributed`` scheduler address (``tcp://host:8786``); default ``$SPINLIB_DASK_SCHEDULER``.
    """
    items = list(items)
    progress = progress and not os.environ.get("SPINLIB_NO_PROGRESS")  # run_all.sh: quiet under papermill
    scheduler = scheduler or os.environ.get(SCHEDULER_ENV) or None
    if scheduler:
        from distributed import Client

        with Client(scheduler) as client:
            futures = client.map(fn, items, pure=False)
            if progress:
                from distributed import as_completed
                from tqdm.auto import tqdm

                for _ in tqdm(as_completed(futures), total=len(futures), desc=desc, leave=False):
                    pass
            return client.gather(futures)
    if n_jobs is None:
        n_jobs = os.cpu_count() or 1
    if n_jobs == 1 or len(items) <= 1:
        from tqdm.auto import tqdm

        return [fn(it) for it in tqdm(items, desc=desc, disable=not progress, leave=False)]
    from joblib import Parallel, delayed

    return Parallel(n_jobs=n_jobs, return_as="list", verbose=0)(delayed(fn)(it) for it in items)


def sweep_seeds(seed: int, n_seeds: int) -> list[int]:
    """The scenario seeds of a sweep: ``SeedSequence(seed).generate_state(n_seeds)``."""
    return [int(s) for s in np.random.SeedSequence(seed).generate_state(n_seeds)]


def sweep(factory: Callable, knob: str, values: Iterable, *, n_seeds: int, seed: int,
          specs: Sequence[PolicySpec], n_jobs: int | None = None, scheduler: str | None = None,
          progress: bool = True, **factory_kwargs) -> list[dict]:
    """Long records of every (value, seed, spec, metric); see the module docstring.

    Parameters
    ----------
    factory : callable
        ``factory(knob, value, seed, **factory_kwargs) -> Scenario``.
    knob, values :
        The varied knob and its values.
    n_seeds, seed :
        Scenarios per value, and the master seed of :func:`sweep_seeds`.
    specs : sequence of PolicySpec
        The policies to run (:func:`spec`, :func:`paper1_specs`, :func:`uldl_specs`).
    n_jobs, scheduler :
        Where the points run (:func:`map_points`); the records do not depend on it.
    progress : bool
        A tqdm bar (off when ``$SPINLIB_NO_PROGRESS`` is set, as ``run_all.sh`` does under papermill).
    """
    from .control import POLICIES

    specs = tuple(sp if isinstance(sp, PolicySpec) else spec(sp) for sp in specs)
    labels = [sp.label for sp in specs]
    if len(set(labels)) != len(labels):
        raise ValidationError(f"policy labels must be unique, got {labels}")
    used = {sp.policy: POLICIES[sp.policy] for sp in specs}
    points = [_Point(factory, knob, v, s, tuple(sorted(factory_kwargs.items())), specs, used)
              for v in values for s in sweep_seeds(seed, n_seeds)]
    chunks = map_points(_call, points, n_jobs=n_jobs, scheduler=scheduler, progress=progress, desc=f"sweep {knob}")
    return [r for chunk in chunks for r in chunk]


# ----------------------------------------------------------------------------------------------
# Tables
# ----------------------------------------------------------------------------------------------
RESULT_FIELDS = ("policy", "round_model", "metric", "value")


def point_fields(records: list[dict]) -> list[str]:
    """The fields that identify a sweep point (knob, x, seed and the factory settings), in order."""
    seen: dict = {}
    for r in records:
        for k in r:
            if k not in RESULT_FIELDS:
                seen.setdefault(k, None)
    return list(seen)


def wide(records: list[dict], metric: str = "goodput"):
    """DataFrame with one row per sweep point (:func:`point_fields`) and one column per policy
    label, for ``metric``. Points of different sweeps stay apart even when knob, x and seed agree."""
    import pandas as pd

    df = pd.DataFrame(records)
    ids = point_fields(records)
    df = df[df["metric"] == metric]
    out = df.pivot_table(index=ids, columns="policy", values="value", aggfunc="first", sort=False, dropna=False)
    out.columns.name = None
    out = out.reset_index()
    return out.dropna(axis=0, how="all", subset=[c for c in out.columns if c not in ids])


def frame(records: list[dict], metric: str = "goodput", relative_to: str | None = None):
    """Long DataFrame (knob, x, seed, policy, ``metric``) for :func:`spinlib.plotting.plot_policies`.

    With ``relative_to`` (a policy label, e.g. ``"server-only/sync"``) every policy's value is
    divided by that policy's value on the same scenario: a paired comparison.
    """
    w = wide(records, metric)
    ids = point_fields(records)
    pol = [c for c in w.columns if c not in ids]
    if relative_to is not None:
        w[pol] = w[pol].div(w[relative_to], axis=0)
    return w.melt(id_vars=ids, value_vars=pol, var_name="policy", value_name=metric)


def gain_table(records: list[dict], policies: Sequence[str], baselines: Sequence[str], metric: str = "goodput"):
    """Relative gain ``policy / baseline - 1`` of each (policy, baseline) pair over all records:
    mean, min, max and the sweep point (knob, x, seed) of the max."""
    import pandas as pd

    w = wide(records, metric)
    rows = []
    for pol in policies:
        for base in baselines:
            gain = w[pol] / w[base] - 1.0
            i = int(np.argmax(gain.to_numpy()))
            rows.append({"policy": pol, "baseline": base, "mean_gain": float(gain.mean()),
                         "min_gain": float(gain.min()), "max_gain": float(gain.iloc[i]),
                         "peak_knob": w["knob"].iloc[i], "peak_x": w["x"].iloc[i], "peak_seed": int(w["seed"].iloc[i])})
    return pd.DataFrame(rows)


def paper1_gains(records: list[dict]):
    """:func:`gain_table` of paper 1's optimised policies over every baseline of the same round
    model (homogeneous and heterogeneous-sync vs ``<baseline>/sync``, heterogeneous-async vs ``/async``)."""
    import pandas as pd

    from .control import BASELINES

    return pd.concat([gain_table(records, ["homogeneous", "heterogeneous-sync"], [f"{b}/sync" for b in BASELINES]),
                      gain_table(records, ["heterogeneous-async"], [f"{b}/async" for b in BASELINES])],
                     ignore_index=True)


# ----------------------------------------------------------------------------------------------
# Scenario factories
# ----------------------------------------------------------------------------------------------
def heterogeneity_kwargs(h: float, alpha_mean: float = 0.65, tau_mean_s: float = 0.005) -> dict:
    """Generator overrides for a degree of heterogeneity ``h`` in [0, 1].

    ``alpha ~ U(alpha_mean -+ 0.3 h)``, ``tau`` uniform on ``[tau_mean/(1+9h), tau_mean (1+9h)]``
    (a 1:100 spread at h = 1), shadowing ``8 h`` dB. At h = 0 users differ only by distance.
    """
    if not 0 <= h <= 1:
        raise ValidationError(f"heterogeneity must be in [0, 1], got {h}")
    lo, hi = max(alpha_mean - 0.3 * h, 0.0), min(alpha_mean + 0.3 * h, 0.98)
    spread = 1 + 9 * h
    return dict(alpha_range=(lo, hi), draft_time_range=(tau_mean_s / spread, tau_mean_s * spread),
                shadowing_db=8.0 * h)


def payload_of(name: str, vocab_size: int) -> Payload:
    """``"ids"``, ``"full"`` or ``"topk-<k>"`` (16-bit probabilities)."""
    if name in ("ids", "full"):
        return Payload(vocab_size, name, 16, 1)
    if name.startswith("topk-"):
        return Payload(vocab_size, "topk", 16, int(name.split("-", 1)[1]))
    raise ValidationError(f"payload must be 'ids', 'full' or 'topk-<k>', got {name!r}")


def make_scenario(knob: str, value, seed: int, *, preset: str = "llama2-7b-l4", num_users: int = 10,
                  heterogeneity: float = 0.5) -> Scenario:
    """Paper-1 sweep point: ``knob`` in :data:`KNOBS` set to ``value``, the others at the defaults."""
    if knob not in KNOBS:
        raise ValidationError(f"knob must be one of {KNOBS}, got {knob!r}")
    K = int(value) if knob == "num_users" else num_users
    h = float(value) if knob == "heterogeneity" else heterogeneity
    # the measured preset brings its own acceptance and draft-time spread; keep only the shadowing
    kw = heterogeneity_kwargs(h) if preset not in MEASURED_PRESETS else {"shadowing_db": 8.0 * h}
    if knob == "bandwidth_mhz":
        kw["bandwidth_hz"] = float(value) * 1e6
    if knob == "access_latency_ms":
        kw["access_latency_s"] = float(value) * 1e-3
    if knob == "payload":
        kw["payload"] = payload_of(str(value), get_preset(preset).vocab_size)
    return random_scenario(K, seed=seed, preset=preset, **kw)


def make_uldl_scenario(knob: str, value, seed: int, *, num_users: int = 8, dl_power_dbm: float = 30.0,
                       preset: str = "llama2-7b-l4", payload_mode: str = "topk", top_k: int = 128,
                       bits_per_prob: int = 16, heterogeneity: float = 0.5) -> Scenario:
    """Paper-2 sweep point: ``knob`` in :data:`ULDL_KNOBS` set to ``value``, the others as given."""
    from .channel import dbm_to_w
    from .scenario import Downlink

    if knob not in ULDL_KNOBS:
        raise ValidationError(f"knob must be one of {ULDL_KNOBS}, got {knob!r}")
    K = int(value) if knob == "num_users" else num_users
    P = float(value) if knob == "dl_power_dbm" else dl_power_dbm
    V = int(value) if knob == "vocab_size" else get_preset(preset).vocab_size
    Q = int(value) if knob == "bits_per_prob" else bits_per_prob
    k = int(value) if knob == "top_k" else top_k
    kw = heterogeneity_kwargs(heterogeneity)
    if knob == "cell_radius_m":
        kw["cell_radius_m"] = float(value)
    payload = Payload(V, payload_mode, Q, min(k, V))
    return random_scenario(K, seed=seed, preset=preset, payload=payload,
                           downlink=Downlink(power_w=float(dbm_to_w(P))), **kw)


# ----------------------------------------------------------------------------------------------
# Checks against references (the notebooks' optimality tables)
# ----------------------------------------------------------------------------------------------
def exhaustive_gaps(n: int, seed: int, L_max: int = 6) -> list[dict]:
    """Paper 1: ``1 - G(policy) / G(exhaustive)`` of heterogeneous-sync / -async (told to branch, not to
    enumerate: ``exhaustive_max=0``) on ``n`` random
    instances (K in 2..4, both presets, heterogeneity uniform in [0, 1]), with each solver's
    certified gap and whether its upper bound covers the exhaustive optimum. Wall-clock times are
    in the ``*_ms`` fields (timings, not results)."""
    import time

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
    from .control import uldl as U

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
    import time

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
    simulated rounds (:func:`spinlib.rounds.simulate_rounds`, generator ``default_rng([seed, L])``),
    with the simulation's ``confidence`` interval, for every L in ``L_values``."""
    from .rounds import Allocation, simulate_rounds

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
    import dataclasses

    from .control.homogeneous import critical_access_latency

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
    from .control import declared_subset
    from .emulator import EmulatorConfig, emulate

    rows = []
    for i, sd in enumerate(sweep_seeds(seed, n_scenarios)):
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
    from .emulator import EmulatorConfig, emulate

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
    from .control import declared_subset
    from .emulator import EmulatorConfig, Fading, emulate

    rows = []
    for i, sd in enumerate(sweep_seeds(seed, n_scenarios)):
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
    from .presets import measured_preset, measured_tasks
    from .timing import median_standard_error

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


__all__ = ["PolicySpec", "spec", "paper1_specs", "uldl_specs", "allocation_metrics", "run_point", "map_points",
           "sweep_seeds", "sweep", "wide", "frame", "gain_table", "heterogeneity_kwargs", "payload_of",
           "make_scenario", "make_uldl_scenario", "KNOBS", "ULDL_KNOBS", "METRICS", "RECORD_VERSION", "Policy", "exhaustive_gaps", "uldl_structure_check", "uldl_length_check", "paper1_gains",
           "mc_vs_closed_form", "speculation_boundary",
           "testbed_agreement", "queueing_gap", "fading_gains", "measured_preset_gain_intervals"]
