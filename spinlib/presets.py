"""Named scenario presets and the random scenario generator.

Hardware figures are public spec-sheet numbers (memory bandwidth, dense FP16 throughput), not
measurements made here; timings derived from them are a roofline model:

* verification on the edge GPU: ``t0 = weight bytes / (memory bandwidth * eta_mem)`` (a decode
  pass of a 7B model is memory-bound: the weights stream once per pass), and
  ``t1 = 2 * parameters / (FP16 FLOP/s * eta_flop)`` per verified position;
* drafting on the device: ``tau = draft weight bytes / (device memory bandwidth * eta_dev)``.

Efficiencies ``eta`` are our assumptions (stated per preset). Acceptance-rate ranges are our
assumptions too, chosen around published figures for such pairs (Spec-Bench reports 2.28 mean
accepted tokens per step for SpS with a 68M draft of Vicuna-7B, greedy, i.e. alpha ~ 0.6); the
measured preset (``smollm2-measured``) replaces them with values measured here.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from dataclasses import dataclass

import numpy as np

from .channel import db_to_linear, dbm_to_w, path_loss_db
from .scenario import Downlink, Payload, Radio, Scenario, Server, User
from .measurements import read_measured_summary, read_summaries  # noqa: F401 (read_measured_summary: public here too)
from .registry import Registry
from .validation import ValidationError, check_int_range

# --------------------------------------------------------------------------------------------
# Hardware tables (spec sheets)
# --------------------------------------------------------------------------------------------
EDGE_GPUS = {
    # name: (memory bandwidth [B/s], dense FP16 tensor throughput [FLOP/s], source)
    "nvidia-l4": (300e9, 121e12, "NVIDIA L4 datasheet: 300 GB/s GDDR6, 121 TFLOPS FP16 dense"),
    "nvidia-a100-80gb": (2039e9, 312e12, "NVIDIA A100 80GB SXM datasheet: 2,039 GB/s, 312 TFLOPS FP16"),
}

DEVICE_CHIPS = {
    # name: (memory bandwidth [B/s], source)
    "snapdragon-8-gen-3": (76.8e9, "LPDDR5X-4800, 64-bit bus"),
    "dimensity-9300": (76.8e9, "LPDDR5T-9600 spec: 76.8 GB/s"),
    "apple-a17-pro": (51.2e9, "LPDDR5-6400, 64-bit bus"),
    "apple-m2": (100e9, "Apple M2: 100 GB/s unified memory"),
    "jetson-orin-nano-8gb": (68e9, "NVIDIA Jetson Orin Nano 8GB: 68 GB/s"),
    "raspberry-pi-5": (17.1e9, "LPDDR4X-4267, 32-bit bus"),
}

MODELS = {
    # name: (parameters, bytes per parameter as deployed)
    "llama-2-7b-fp16": (6.74e9, 2.0),
    "llama-68m-fp16": (68e6, 2.0),
    "qwen2.5-7b-fp16": (7.62e9, 2.0),
    "qwen2.5-0.5b-int4": (0.49e9, 0.5625),  # 4-bit weights + group scales
}


def roofline_server(target: str, gpu: str, eta_mem: float = 0.8, eta_flop: float = 0.5) -> Server:
    """``T_ver(N) = t0 + t1 N`` of ``target`` on ``gpu`` from the roofline (see module docstring)."""
    params, bpp = MODELS[target]
    bw, flops, _ = EDGE_GPUS[gpu]
    return Server(
        t0_s=params * bpp / (bw * eta_mem),
        t1_s_per_token=2.0 * params / (flops * eta_flop),
        name=f"{target} on {gpu}",
    )


def roofline_draft_time(draft: str, chip: str, eta_dev: float = 0.5) -> float:
    """Memory-bound draft time per token [s] of ``draft`` on ``chip``."""
    params, bpp = MODELS[draft]
    return params * bpp / (DEVICE_CHIPS[chip][0] * eta_dev)


# --------------------------------------------------------------------------------------------
# Presets
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Preset:
    """Everything the generator needs to draw a random scenario of a named setting."""

    name: str
    description: str
    sources: tuple[str, ...]
    target: str
    gpu: str
    draft: str
    chips: tuple[str, ...]  # device chips drawn uniformly per user
    vocab_size: int
    alpha_range: tuple[float, float]
    bandwidth_hz: float
    payload_mode: str = "topk"
    top_k: int = 128
    bits_per_prob: int = 16
    access_latency_s: float = 0.02
    downlink_rate_bps: float = 50e6
    tx_power_dbm: float = 23.0
    noise_figure_db: float = 9.0
    cell_radius_m: float = 1000.0
    min_distance_m: float = 35.0
    shadowing_db: float = 8.0
    rate_model: str = "shannon"
    eta_dev: float = 0.5
    # measured presets: timings and acceptance from data/measurements instead of rooflines
    server_t0_s: float | None = None
    server_t1_s: float | None = None
    draft_time_s: float | None = None  # measured draft time per token on the reference device
    device_slowdown: tuple[float, float] = (1.0, 1.0)  # tau = draft_time_s * U(slowdown range)
    alpha_choices: tuple[float, ...] | None = None  # measured alphas (pair x task); drawn per user

    def server(self) -> Server:
        if self.server_t0_s is not None:
            return Server(self.server_t0_s, self.server_t1_s or 0.0, name=f"{self.target} (measured)")
        return roofline_server(self.target, self.gpu)

    def draft_times(self) -> np.ndarray:
        return np.array([roofline_draft_time(self.draft, c, self.eta_dev) for c in self.chips])

    @property
    def family(self) -> str:
        """``"measured"`` (timings from data/measurements) or ``"roofline"`` (timings from rooflines)."""
        return "measured" if self.server_t0_s is not None else "roofline"

    @property
    def params(self) -> dict:
        return {}


_CELL_SOURCES = (
    "Path loss 128.1 + 37.6 log10(d/km) dB, 8 dB log-normal shadowing: 3GPP TR 36.814 (macro, 2 GHz)",
    "Noise -174 dBm/Hz + 9 dB noise figure; UE power 23 dBm (3GPP power class 3)",
)

# measured preset -> (the pairs whose summaries it pools, base preset for radio and payload)
MEASURED_PRESETS = {"qwen-coder-measured": (("qwen-coder",), "qwen-7b-l4"),
                    "smollm2-measured": (("smollm2-rtn3g16", "smollm2-rtn4g16", "smollm2-rtn6"), "llama2-7b-l4")}
PRESET_FAMILIES = ("roofline", "measured")
PRESETS: Registry[Preset] = Registry("preset", PRESET_FAMILIES, forbidden=":,=")


def register_preset(preset: Preset, replace: bool = False) -> Preset:
    """Add a scenario preset (a :class:`Preset`): one entry, no edit inside the library; an equal preset may
    register again, another one under a registered name only with ``replace``."""
    if preset.name in MEASURED_PRESETS:
        raise ValidationError(f"preset name {preset.name!r} is a measured preset's (built from data/measurements)")
    return PRESETS.register(preset, replace=replace)


for _p in [
        Preset(
            name="llama2-7b-l4",
            description="Llama-2-7B (fp16) verifying on an NVIDIA L4; Llama-68M drafts on phone/laptop chips; "
            "Llama-2 tokenizer (V = 32,000); 10 MHz uplink; top-128 draft distribution (16-bit).",
            sources=_CELL_SOURCES
            + (
                EDGE_GPUS["nvidia-l4"][2],
                "Llama-2 vocabulary 32,000 (Touvron et al. 2023)",
                "Llama-68M draft (Miao et al., SpecInfer 2023); alpha range: our assumption",
            ),
            target="llama-2-7b-fp16",
            gpu="nvidia-l4",
            draft="llama-68m-fp16",
            chips=("snapdragon-8-gen-3", "apple-a17-pro", "apple-m2", "jetson-orin-nano-8gb", "raspberry-pi-5"),
            vocab_size=32_000,
            alpha_range=(0.5, 0.85),
            bandwidth_hz=10e6,
        ),
        Preset(
            name="qwen-7b-l4",
            description="Qwen2.5-7B (fp16) verifying on an NVIDIA L4; Qwen2.5-0.5B (4-bit) drafts on phone/laptop "
            "chips; Qwen tokenizer (V = 151,936); 20 MHz uplink; top-128 draft distribution (16-bit).",
            sources=_CELL_SOURCES
            + (
                EDGE_GPUS["nvidia-l4"][2],
                "Qwen2.5 vocabulary 151,936 (Qwen2.5 technical report)",
                "alpha range: our assumption (same-family 0.5B draft)",
            ),
            target="qwen2.5-7b-fp16",
            gpu="nvidia-l4",
            draft="qwen2.5-0.5b-int4",
            chips=("snapdragon-8-gen-3", "dimensity-9300", "apple-a17-pro", "apple-m2", "jetson-orin-nano-8gb"),
            vocab_size=151_936,
            alpha_range=(0.6, 0.9),
            bandwidth_hz=20e6,
        ),
]:
    register_preset(_p)

DEFAULT_PRESET = "llama2-7b-l4"
MEASURED_PRESET = "qwen-coder-measured"  # the real pair a reader meets first (notebook 05)


def measured_tasks(name: str = MEASURED_PRESET, temperature: float = 1.0, measurements_dir=None) -> list[dict]:
    """The task summaries a measured preset is built from (one typed reader for both of its users:
    :func:`measured_preset` and :func:`spinlib.studies.allocation.measured_preset_gain_intervals`).

    One record per summary under ``measurements_dir`` (default ``data/measurements``) that has the
    temperature: ``file`` (name), ``alpha`` and ``alpha_ci95`` (its 95 % bootstrap interval, or
    ``(alpha, alpha)`` when not recorded), ``draft_s_per_token`` [s], ``draft_spread`` (the draft step's
    ``median_s``, ``q25_s``, ``q75_s``, ``n``; ``None`` when not recorded), the verification fit
    ``t0_s``, ``t1_s`` [s] (the batched grid's fit when recorded, else the single-user one),
    ``reliable`` and ``kernel``. In the preset's pair order, each pair's summaries by file name.
    """
    if name not in MEASURED_PRESETS:
        raise ValidationError(f"measured preset must be one of {sorted(MEASURED_PRESETS)}, got {name!r}")
    tasks = []
    for pair in MEASURED_PRESETS[name][0]:
        for m in read_summaries(pair, root=measurements_dir):
            bt = m.at(temperature)
            if bt is None:
                continue
            tm, fit = m.timing, m.verify_fit
            tasks.append({"file": m.path.name, "alpha": bt["alpha"],
                          "alpha_ci95": tuple(bt.get("alpha_ci95", (bt["alpha"],) * 2)),
                          "draft_s_per_token": tm["draft_s_per_token"], "draft_spread": tm.get("draft_spread"),
                          "t0_s": fit["t0_s"], "t1_s": fit["t1_s"], "reliable": bool(tm.get("reliable", False)),
                          "kernel": m.kernel})
    return tasks


def measured_preset(temperature: float = 1.0, measurements_dir=None, name: str = MEASURED_PRESET) -> Preset:
    """A preset built from committed measurements of a real pair (notebook 05).

    ``qwen-coder-measured``: Qwen2.5-Coder-0.5B drafting for Qwen2.5-Coder-1.5B on this CPU (the
    edge server), on the kernel recorded in each summary. Acceptance: each user draws one measured
    alpha (task group at ``temperature``). Server: the median over task groups of the batched
    verification fit ``T_ver = t0 + t1 * sum_k N_k`` (N positions for each of K users in one pass,
    :func:`spinlib.sd.measure.time_verification_grid`). Devices: the median measured draft step
    on this CPU times a slowdown drawn per user from U(1, 4) (devices up to 4x slower than this
    machine's 2 cores). Radio and payload of the ``qwen-7b-l4`` preset (20 MHz, V = 151,936, top-128).

    ``smollm2-measured``: the SmolLM2-135M low-bit self-drafts (pair x task alphas; the single-user
    fit ``t0 + t1 N``); radio and payload of ``llama2-7b-l4`` with SmolLM2's vocabulary (49,152).
    """
    from .paths import DATA

    if name not in MEASURED_PRESETS:
        raise ValidationError(f"measured preset must be one of {sorted(MEASURED_PRESETS)}, got {name!r}")
    base_name = MEASURED_PRESETS[name][1]
    root = Path(measurements_dir or DATA / "measurements")
    tasks = measured_tasks(name, temperature, root)
    alphas = [round(t["alpha"], 4) for t in tasks]
    draft = [t["draft_s_per_token"] for t in tasks]
    t0 = [t["t0_s"] for t in tasks]
    t1 = [t["t1_s"] for t in tasks]
    kernels = {t["kernel"] for t in tasks}
    unreliable = [t["file"] for t in tasks if not t["reliable"]]
    if not alphas:
        raise ValidationError(f"no measurements for {name} under {root}: run notebook 05 (or python -m spinlib measure)")
    if unreliable:  # said, never used without a word
        import warnings

        warnings.warn(f"preset {name}: the timings of {len(unreliable)} of {len(alphas)} summaries are marked "
                      f"reliable: false (recorded on a busy machine or with a noisy fit: {', '.join(unreliable[:3])})",
                      UnreliableTimingWarning, stacklevel=2)
    base = PRESETS[base_name]
    if name == "qwen-coder-measured":
        desc = (f"Qwen2.5-Coder-0.5B drafting for Qwen2.5-Coder-1.5B, measured here ({len(alphas)} task groups, "
                f"T = {temperature:g}, kernel {'/'.join(sorted(kernels))}); this CPU as the edge server (batched "
                "verification fit); devices 1-4x slower than this CPU's draft step; 20 MHz uplink; top-128 (16-bit).")
        extra = dict(target="qwen2.5-coder-1.5b-instruct", draft="qwen2.5-coder-0.5b-instruct", vocab_size=151_936)
    else:
        desc = (f"SmolLM2-135M-Instruct target with its low-bit drafts, measured here ({len(alphas)} pair x task "
                f"summaries, T = {temperature:g}); timings of this CPU; 10 MHz uplink; top-128 (16-bit).")
        extra = dict(target="smollm2-135m-instruct", draft="smollm2-135m-instruct@rtn", vocab_size=49_152)
    return dataclasses.replace(
        base, name=name, description=desc,
        sources=_CELL_SOURCES + ("acceptance and timings: data/measurements (our measurement, notebook 05)",),
        alpha_range=(min(alphas), max(alphas)), server_t0_s=float(np.median(t0)),
        server_t1_s=float(max(np.median(t1), 0.0)), draft_time_s=float(np.median(draft)),
        device_slowdown=(1.0, 4.0), alpha_choices=tuple(alphas), chips=("measured",), **extra)


def get_preset(name: str) -> Preset:
    if name in MEASURED_PRESETS:
        return measured_preset(name=name)
    if name not in PRESETS:
        raise ValidationError(f"preset must be one of {sorted(PRESETS) + sorted(MEASURED_PRESETS)}, got {name!r}")
    return PRESETS[name]


def random_scenario(
    num_users: int,
    seed: int | np.random.Generator = 0,
    preset: str | Preset = DEFAULT_PRESET,
    *,
    alpha_range: tuple[float, float] | None = None,
    draft_time_range: tuple[float, float] | None = None,
    bandwidth_hz: float | None = None,
    cell_radius_m: float | None = None,
    shadowing_db: float | None = None,
    payload: Payload | None = None,
    access_latency_s: float | None = None,
    rate_model: str | None = None,
    downlink: Downlink | None = None,
) -> Scenario:
    """Drop ``num_users`` users uniformly in the cell of ``preset`` and draw their devices.

    Distances are uniform over the annulus area ``[min_distance, cell_radius]``; gains are
    ``10^(-(PL(d) + X)/10)`` with ``X ~ N(0, shadowing^2)`` dB; each device chip is drawn
    uniformly from the preset's list (draft time by roofline) unless ``draft_time_range`` asks for
    ``tau ~ U(range)``; ``alpha ~ U(alpha_range)``. Keyword overrides replace preset fields.

    Parameters
    ----------
    num_users : int
        K >= 1.
    seed : int or numpy.random.Generator
        All randomness flows from it.
    """
    K = check_int_range("num_users", num_users, 1)
    p = get_preset(preset) if isinstance(preset, str) else preset
    changes = {
        k: v
        for k, v in dict(
            alpha_range=alpha_range,
            bandwidth_hz=bandwidth_hz,
            cell_radius_m=cell_radius_m,
            shadowing_db=shadowing_db,
            access_latency_s=access_latency_s,
            rate_model=rate_model,
        ).items()
        if v is not None
    }
    for name in ("bandwidth_hz", "cell_radius_m", "access_latency_s", "shadowing_db"):
        if name in changes:
            v = changes[name]
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not np.isfinite(v) \
                    or v < 0 or (v == 0 and name in ("bandwidth_hz", "cell_radius_m")):
                bound = "> 0" if name in ("bandwidth_hz", "cell_radius_m") else ">= 0"
                raise ValidationError(f"{name} must be a finite number {bound}, got {v!r}")
    p = dataclasses.replace(p, **changes)
    lo, hi = p.alpha_range
    if not (0 <= lo <= hi < 1):
        raise ValidationError(f"alpha_range must satisfy 0 <= low <= high < 1, got {p.alpha_range}")
    if not (0 < p.min_distance_m < p.cell_radius_m):
        raise ValidationError(f"cell_radius_m must be > min_distance_m = {p.min_distance_m}, got {p.cell_radius_m}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    r2 = rng.uniform(p.min_distance_m**2, p.cell_radius_m**2, K)
    dist = np.sqrt(r2)
    shadow = rng.normal(0.0, p.shadowing_db, K) if p.shadowing_db > 0 else np.zeros(K)
    gain = db_to_linear(-(path_loss_db(dist) + shadow))
    chip_idx = rng.integers(0, len(p.chips), K)
    if draft_time_range is None and p.draft_time_s is not None:
        slow = rng.uniform(*p.device_slowdown, K)
        tau = p.draft_time_s * slow
        names = [f"measured x{f:.2f}" for f in slow]
    elif draft_time_range is None:
        tau = p.draft_times()[chip_idx]
        names = [p.chips[i] for i in chip_idx]
    else:
        a, b = draft_time_range
        if not (0 < a <= b):
            raise ValidationError(f"draft_time_range must satisfy 0 < low <= high, got {draft_time_range}")
        tau = rng.uniform(a, b, K)
        names = ["" for _ in range(K)]
    if p.alpha_choices is not None and alpha_range is None:
        alpha = rng.choice(np.asarray(p.alpha_choices), K)
    else:
        alpha = rng.uniform(lo, hi, K)
    power = float(dbm_to_w(p.tx_power_dbm))
    users = tuple(
        User(draft_time_s=float(tau[k]), alpha=float(alpha[k]), channel_gain=float(gain[k]),
             tx_power_w=power, name=names[k])
        for k in range(K)
    )
    radio = Radio(
        bandwidth_hz=p.bandwidth_hz,
        noise_psd_w_per_hz=float(dbm_to_w(-174.0 + p.noise_figure_db)),
        rate_model=p.rate_model,
        access_latency_s=p.access_latency_s,
        downlink_rate_bps=p.downlink_rate_bps,
    )
    payload = payload or Payload(p.vocab_size, p.payload_mode, p.bits_per_prob, min(p.top_k, p.vocab_size))
    return Scenario(
        users=users,
        radio=radio,
        server=p.server(),
        payload=payload,
        name=p.name,
        meta={"preset": p.name, "seed": seed if isinstance(seed, int) else None,
              "distance_m": dist.round(3).tolist()},
        downlink=downlink or Downlink(),
    )


class UnreliableTimingWarning(UserWarning):
    """A measured preset uses timings recorded as unreliable (``timing.reliable`` is false)."""


def measured_acceptance(pair: str, task: str, temperature: float = 0.0, measurements_dir=None):
    """``(alpha, prefix_profile)`` measured for ``pair`` on ``task`` (notebook 05's summaries).

    Raises :class:`ValidationError` naming the pair and task when no summary holds them.
    """
    from .paths import DATA

    for m in read_summaries(pair, task, root=measurements_dir):
        acc = m.acceptance(temperature)
        if acc is not None:
            return acc
    root = Path(measurements_dir or DATA / "measurements")
    raise ValidationError(f"no measurement of pair {pair!r} on task {task!r} at T = {temperature:g} under {root}")


def random_uldl_scenario(num_users: int, rng: np.random.Generator, preset: str | None = None,
                         **overrides) -> Scenario:
    """A random scenario for UL/DL studies: random preset, DL power 20-46 dBm, DL band 5-50 MHz,
    full or top-k payload (k in {32, 128, 512}), Q in {8, 16, 32}, variant "reject" (3/4) or "all".

    All randomness flows from ``rng``; ``overrides`` go to :func:`spinlib.presets.random_scenario`.
    """
    from .channel import dbm_to_w
    from .scenario import Downlink, Payload

    name = preset or str(rng.choice(["llama2-7b-l4", "qwen-7b-l4"]))
    V = PRESETS[name].vocab_size
    dl = Downlink(power_w=float(dbm_to_w(rng.uniform(20.0, 46.0))),
                  bandwidth_hz=float(rng.choice([5e6, 10e6, 20e6, 50e6])),
                  variant="all" if rng.random() < 0.25 else "reject")
    payload = Payload(V, str(rng.choice(["topk", "full"])), int(rng.choice([8, 16, 32])),
                      int(rng.choice([32, 128, 512])))
    return random_scenario(num_users, int(rng.integers(1 << 31)), name, payload=payload, downlink=dl,
                           **overrides)
