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

A sweep is a :class:`spinlib.study.Study` (records first: its finished points are appended to a
resumable store while it runs, and an interrupted sweep resumes where it stopped). Points run through
:mod:`joblib` (``n_jobs``, default all cores) or, when a Dask scheduler address is given (``scheduler=``
or ``$SPINLIB_DASK_SCHEDULER``), on that :mod:`dask.distributed` cluster. Every point is a pure function
of its inputs and results are put back in point order, so the records do not depend on the number of
workers, their order, or a worker lost mid-sweep (Dask re-runs its tasks elsewhere). Policies are
resolved in the calling process and shipped with the points, so a policy registered in a notebook or a
test runs on the workers too.

Scenario factories: :func:`make_scenario` (paper 1 knobs) and :func:`make_uldl_scenario`
(paper 2 knobs); any ``factory(knob, value, seed, **kwargs) -> Scenario`` works. The notebooks' other
studies (reference checks, the testbed's agreement, ...) are in :mod:`spinlib.studies`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np

from .control import get_policy, register_policy, solve
from .control.registry import Policy, check_params
from .online.deciders import Spec
from .presets import MEASURED_PRESETS, get_preset, random_scenario
from .rounds import evaluate
from .scenario import Payload, Scenario
from .study import Study
from .validation import ValidationError

RECORD_VERSION = 7  # bump when records or the solvers behind them change: cached_call keys include it
KNOBS = ("bandwidth_mhz", "num_users", "heterogeneity", "payload", "access_latency_ms")
ULDL_KNOBS = ("dl_power_dbm", "num_users", "vocab_size", "bits_per_prob", "cell_radius_m", "top_k")
METRICS = ("goodput", "server_utilisation", "capacity_limited_goodput", "ul_share", "structure_held")


# ----------------------------------------------------------------------------------------------
# Policy specs
# ----------------------------------------------------------------------------------------------
def PolicySpec(policy: str, params: tuple = (), label: str = "") -> Spec:  # noqa: N802 (the old class's name)
    """The policy :class:`~spinlib.online.deciders.Spec` (kind ``"policy"``) of the old ``PolicySpec(policy,
    params, label)`` call: :func:`spec` with ``params`` as ``(key, value)`` pairs."""
    return spec(policy, label, **dict(params))


def spec(policy: str, label: str = "", **params) -> Spec:
    """A checked policy :class:`~spinlib.online.deciders.Spec` (unknown policies and parameters: one line); its label
    defaults to ``policy`` or ``policy/round_model`` when a round model is given:
    ``spec("equal", draft_length=4, round_model="async")`` -> label ``"equal/async"``."""
    check_params(policy, params)
    rm = params.get("round_model")
    return Spec(policy, tuple(params.items()), label or (f"{policy}/{rm}" if rm else policy), kind="policy")


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
class SweepPoint:
    """A sweep's point function (:class:`spinlib.study.Study`): ``params`` holds the knob, its value ``x``
    and the factory's settings; the scenario is ``factory(knob, x, seed, **settings)``, and every spec runs
    on it (:func:`run_point`). ``policies``: the registered policies the specs name, shipped to workers."""

    factory: Callable
    specs: tuple
    policies: dict = field(compare=False)

    def __call__(self, params: dict, seed: int) -> list[dict]:
        settings = {k: v for k, v in params.items() if k not in ("knob", "x")}
        return run_point(self.factory(params["knob"], params["x"], seed, **settings), self.specs, self.policies)


def sweep(factory: Callable, knob: str, values: Iterable, *, n_seeds: int, seed: int,
          specs: Sequence[PolicySpec], n_jobs: int | None = None, scheduler: str | None = None,
          progress: bool = True, store_dir=None, **factory_kwargs) -> list[dict]:
    """Long records of every (value, seed, spec, metric); see the module docstring.

    Parameters
    ----------
    factory : callable
        ``factory(knob, value, seed, **factory_kwargs) -> Scenario``.
    knob, values :
        The varied knob and its values.
    n_seeds, seed :
        Scenarios per value, and the master seed of :func:`spinlib.study.study_seeds`.
    specs : sequence of PolicySpec
        The policies to run (:func:`spec`, :func:`paper1_specs`, :func:`uldl_specs`).
    n_jobs, scheduler :
        Where the points run (:func:`spinlib.study.iter_points`); the records do not depend on it.
    progress : bool
        A tqdm bar (off when ``$SPINLIB_NO_PROGRESS`` is set, as ``run_all.sh`` does under papermill).
    store_dir : path, optional
        Where an unfinished sweep keeps its records (default :data:`spinlib.study.STORES`).
    """
    from .control import POLICIES

    specs = tuple(sp if isinstance(sp, Spec) and sp.kind == "policy" else spec(sp) for sp in specs)
    labels = [sp.label for sp in specs]
    if len(set(labels)) != len(labels):
        raise ValidationError(f"policy labels must be unique, got {labels}")
    used = {sp.policy: POLICIES[sp.policy] for sp in specs}
    # the point's identity in its records: the knob, its value, the seed and every factory setting, so that
    # records of sweeps that differ only in a setting (e.g. the preset) never merge in a table
    points = tuple({"knob": knob, "x": v, **dict(sorted(factory_kwargs.items()))} for v in values)
    study = Study(f"sweep-{knob}", SweepPoint(factory, specs, used), points, n_seeds, seed)
    return study.run(n_jobs=n_jobs, scheduler=scheduler, progress=progress, store_dir=store_dir)


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


__all__ = ["PolicySpec", "spec", "paper1_specs", "uldl_specs", "allocation_metrics", "run_point", "SweepPoint",
           "sweep", "wide", "frame", "gain_table", "heterogeneity_kwargs", "payload_of",
           "make_scenario", "make_uldl_scenario", "KNOBS", "ULDL_KNOBS", "METRICS", "RECORD_VERSION", "Policy", "paper1_gains"]
