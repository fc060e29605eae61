"""Sweeps and gain tables shared by the notebooks (pure functions returning JSON-able records).

A sweep varies one knob of the scenario generator, draws ``n_seeds`` random scenarios per value
(seeds derived from one master seed with :class:`numpy.random.SeedSequence`), runs every policy
on each and records the goodput. Records are plain dicts so that they cache as JSON and load
into a pandas DataFrame.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from .control import BASELINES, solve
from .presets import MEASURED_PRESET, get_preset, random_scenario
from .rounds import evaluate
from .scenario import Payload, ValidationError

OPTIMISED = {"homogeneous": "sync", "heterogeneous-sync": "sync", "heterogeneous-async": "async"}
RECORD_VERSION = 2  # bump when run_policies records change: cache keys include it
KNOBS = ("bandwidth_mhz", "num_users", "heterogeneity", "payload", "access_latency_ms")


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


def make_scenario(knob: str, value, seed: int, preset: str, num_users: int, heterogeneity: float):
    """The scenario of one sweep point (other knobs at their defaults)."""
    if knob not in KNOBS:
        raise ValidationError(f"knob must be one of {KNOBS}, got {knob!r}")
    K = int(value) if knob == "num_users" else num_users
    h = float(value) if knob == "heterogeneity" else heterogeneity
    # the measured preset brings its own acceptance and draft-time spread; keep only the shadowing
    kw = heterogeneity_kwargs(h) if preset != MEASURED_PRESET else {"shadowing_db": 8.0 * h}
    if knob == "bandwidth_mhz":
        kw["bandwidth_hz"] = float(value) * 1e6
    if knob == "access_latency_ms":
        kw["access_latency_s"] = float(value) * 1e-3
    if knob == "payload":
        kw["payload"] = payload_of(str(value), get_preset(preset).vocab_size)
    return random_scenario(K, seed=seed, preset=preset, **kw)


def run_policies(scenario, L_max: int = 16, draft_length: int = 4) -> dict:
    """Goodput [token/s] of every optimised policy and every baseline in both round models."""
    out = {}
    for name, model in OPTIMISED.items():
        a = solve(scenario, name, L_max=L_max)
        out[name] = a.goodput_tokens_per_s
        if model == "async":
            ev = evaluate(scenario, a)
            out[f"{name}/capacity-limited"] = ev.capacity_limited_goodput
            out[f"{name}/server-utilisation"] = ev.server_utilisation
    for name in BASELINES:
        for model in ("sync", "async"):
            a = solve(scenario, name, L_max=L_max, draft_length=draft_length, round_model=model)
            out[f"{name}/{model}"] = a.goodput_tokens_per_s
    return out


def sweep(knob: str, values: Iterable, *, n_seeds: int, seed: int, preset: str = "llama2-7b-l4",
          num_users: int = 10, heterogeneity: float = 0.5, L_max: int = 16, progress: bool = True) -> list[dict]:
    """Records ``{knob, value, seed, policy: goodput...}`` for every value and scenario seed."""
    from tqdm import tqdm

    values = list(values)
    seeds = np.random.SeedSequence(seed).generate_state(n_seeds).tolist()
    records = []
    it = [(v, s) for v in values for s in seeds]
    for v, s in tqdm(it, desc=f"sweep {knob}", disable=not progress, leave=False):
        scen = make_scenario(knob, v, int(s), preset, num_users, heterogeneity)
        rec = {"knob": knob, "value": v, "seed": int(s), "preset": preset}
        rec.update(run_policies(scen, L_max))
        records.append(rec)
    return records


def gain_table(records: list[dict]):
    """Gain of each optimised policy over each baseline of the same round model.

    Returns a DataFrame with one row per (policy, baseline): mean and max relative gain over all
    records, and the sweep point (knob, value, seed) where the gain peaks.
    """
    import pandas as pd

    df = pd.DataFrame(records)
    rows = []
    for opt, model in OPTIMISED.items():
        for base in BASELINES:
            col = f"{base}/{model}"
            gain = df[opt] / df[col] - 1.0
            i = int(np.argmax(gain.to_numpy()))
            rows.append({"policy": opt, "baseline": col, "mean_gain": float(gain.mean()),
                         "max_gain": float(gain.iloc[i]), "peak_knob": df["knob"].iloc[i],
                         "peak_value": df["value"].iloc[i], "peak_seed": int(df["seed"].iloc[i])})
    return pd.DataFrame(rows)


def records_frame(records: list[dict], relative_to: str | None = None):
    """Long-format DataFrame (knob, value, seed, policy, goodput) for plotting (utilisation dropped).

    With ``relative_to`` (a policy column, e.g. ``"server-only/sync"``) the goodput of every
    policy is divided by that policy's goodput on the same scenario: a paired comparison that
    removes the scenario-to-scenario spread from the confidence bands.
    """
    import pandas as pd

    df = pd.DataFrame(records)
    df = df[[c for c in df.columns if not c.endswith("/server-utilisation")]]
    id_cols = ["knob", "value", "seed", "preset"]
    if relative_to is not None:
        ref = df[relative_to].to_numpy()
        pol = [c for c in df.columns if c not in id_cols]
        df[pol] = df[pol].div(ref, axis=0)
    return df.melt(id_vars=id_cols, var_name="policy", value_name="goodput")




# ----------------------------------------------------------------------------------------------
# Uplink or downlink (paper 2, notebook 06)
# ----------------------------------------------------------------------------------------------
ULDL_KNOBS = ("dl_power_dbm", "num_users", "vocab_size", "bits_per_prob", "cell_radius_m", "top_k")
ULDL_RECORD_VERSION = 3  # 2: uldl-optimal starts from paper 1's lengths; 3: L_init is an extra start


def make_uldl_scenario(knob: str, value, seed: int, *, num_users: int = 8, dl_power_dbm: float = 30.0,
                       preset: str = "llama2-7b-l4", payload_mode: str = "topk", top_k: int = 128,
                       bits_per_prob: int = 16, heterogeneity: float = 0.5):
    """The scenario of one UL/DL sweep point (other knobs at the defaults given here)."""
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


ULDL_POLICIES_RUN = ("uldl-optimal", "all-ul", "all-dl", "uldl-fixed-length", "heterogeneous-sync")


def run_uldl_policies(scenario, L_max: int = 12, draft_length: int = 4) -> dict:
    """Goodput of the UL/DL policies (and paper 1's heterogeneous-sync, i.e. all devices in UL
    with its own lengths) plus the share of devices that the adaptive policy puts in UL."""
    out = {}
    for name in ULDL_POLICIES_RUN:
        a = solve(scenario, name, L_max=L_max, draft_length=draft_length)
        out[name] = a.goodput_tokens_per_s
        if name == "uldl-optimal":
            drafting = [m for m, L in zip(a.modes, a.draft_lengths) if L > 0]
            out["ul_share"] = (sum(m == "UL" for m in drafting) / len(drafting)) if drafting else float("nan")
            out["modes"] = "".join("U" if m == "UL" else "D" for m in a.modes)
            out["structure_held"] = a.info.get("structure_held")
    return out


def uldl_sweep(knob: str, values: Iterable, *, n_seeds: int, seed: int, L_max: int = 12,
               progress: bool = True, **scenario_kw) -> list[dict]:
    """Records ``{knob, value, seed, policy: goodput..., ul_share}`` for every value and seed."""
    from tqdm import tqdm

    values = list(values)
    seeds = np.random.SeedSequence(seed).generate_state(n_seeds).tolist()
    records = []
    for v, s in tqdm([(v, s) for v in values for s in seeds], desc=f"UL/DL sweep {knob}",
                     disable=not progress, leave=False):
        scen = make_uldl_scenario(knob, v, int(s), **scenario_kw)
        records.append({"knob": knob, "value": v, "seed": int(s), **run_uldl_policies(scen, L_max)})
    return records


def uldl_gain_table(records: list[dict]):
    """Gain of ``uldl-optimal`` over all-UL, all-DL, the fixed-length policy and paper 1's
    heterogeneous-sync: mean, max and the sweep point of the max."""
    import pandas as pd

    df = pd.DataFrame(records)
    rows = []
    for base in ("all-ul", "all-dl", "uldl-fixed-length", "heterogeneous-sync"):
        gain = df["uldl-optimal"] / df[base] - 1.0
        i = int(np.argmax(gain.to_numpy()))
        rows.append({"baseline": base, "mean_gain": float(gain.mean()), "max_gain": float(gain.iloc[i]),
                     "min_gain": float(gain.min()), "peak_knob": df["knob"].iloc[i],
                     "peak_value": df["value"].iloc[i], "peak_seed": int(df["seed"].iloc[i])})
    return pd.DataFrame(rows)


__all__ = ["sweep", "gain_table", "records_frame", "heterogeneity_kwargs", "make_scenario", "run_policies",
           "payload_of", "OPTIMISED", "KNOBS", "uldl_sweep", "uldl_gain_table", "make_uldl_scenario",
           "run_uldl_policies", "ULDL_KNOBS"]
