"""The committed measurements of real pairs (notebook 05): one typed reader.

A measured pair keeps its measurements under ``data/measurements/<pair>/``, one configuration per
task: ``<task>-<key>.jsonl`` (the raw records, one line per prompt and temperature, resumable:
:func:`spinlib.sd.measure.read_records`) and ``<task>-<key>.summary.json`` (the metrics computed from
them: acceptance per temperature, timings, the kernel they were measured on). Every reader of a
summary -- the measured presets, the measured acceptance of a task, the online controllers' timings,
the notebooks -- goes through :func:`read_summaries`, which checks each file
(:func:`read_measured_summary`: a truncated or edited summary is one line naming the file) and returns
:class:`MeasurementSummary` objects in file-name order; the measuring code's own cache check
(:func:`spinlib.sd.measure.read_summary`) applies the same check to the one file it names.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from .jsonio import loads_json, read_text_checked
from .validation import ValidationError

SUFFIX = ".summary.json"


@dataclass(frozen=True)
class MeasurementSummary:
    """One checked summary of ``pair`` measured on ``task`` (``data`` is the whole JSON object).

    ``by_temperature`` entries hold ``alpha`` (mean per-token acceptance), ``prefix_profile``
    (``pi_L = P(the first L drafts all accepted)``, L = 1, 2, ...) and optionally ``alpha_ci95``;
    ``timing`` holds ``draft_s_per_token`` [s] and the verification fit ``T_ver = t0 + t1 N`` [s].
    """

    pair: str
    task: str
    path: Path
    data: dict

    def at(self, temperature: float) -> dict | None:
        """The ``by_temperature`` entry of ``temperature`` (``None`` when not measured)."""
        return self.data["by_temperature"].get(str(float(temperature)))

    def acceptance(self, temperature: float) -> tuple[float, tuple[float, ...]] | None:
        """``(alpha, prefix_profile)`` at ``temperature`` (``None`` when not measured)."""
        bt = self.at(temperature)
        return None if bt is None else (float(bt["alpha"]), tuple(float(x) for x in bt["prefix_profile"]))

    @property
    def timing(self) -> dict:
        return self.data["timing"]

    @property
    def verify_fit(self) -> dict:
        """``{"t0_s", "t1_s"}`` [s]: the batched grid's fit (``T_ver = t0 + t1 sum_k N_k``) when recorded,
        else the single-user fit (``t0 + t1 N``)."""
        tm = self.timing
        return dict(tm["verify_grid"]["fit"]) if "verify_grid" in tm else {"t0_s": tm["verify_t0_s"],
                                                                          "t1_s": tm["verify_t1_s"]}

    @property
    def kernel(self) -> str:
        """The torch kernel the timings were measured on (``fp32`` when the summary predates the record)."""
        return self.data.get("kernel", {}).get("kernel", "fp32")


def _check_name(field: str, value) -> str:
    if not isinstance(value, str) or not value or any(c in value for c in "/\\*?[]") or value.startswith("."):
        raise ValidationError(f"{field} must be a plain name (no path or glob characters), got {value!r}")
    return value


def summary_task(path) -> str:
    """The task of a summary file: its name up to the configuration key (``qa-57f90f5a6342.summary.json``: qa)."""
    return Path(path).name[: -len(SUFFIX)].rsplit("-", 1)[0]


def read_summaries(pair: str, task: str | None = None, root=None) -> list[MeasurementSummary]:
    """Every checked summary of ``pair`` (of ``task`` only, when given) under ``root`` (default
    ``data/measurements``), in file-name order; an empty list when there is none. Two summaries of
    one task are one line (they would be pooled into one preset)."""
    from .paths import DATA

    _check_name("pair", pair)
    if task is not None:
        _check_name("task", task)
    files = sorted((Path(root or DATA / "measurements") / pair).glob(f"{task or '*'}-*{SUFFIX}"))
    out = [MeasurementSummary(pair, summary_task(f), f, read_measured_summary(f)) for f in files]
    seen: dict[str, Path] = {}
    for m in out:  # one configuration per task: a second summary would be pooled into the pair's preset
        if m.task in seen:
            raise ValidationError(f"pair {pair!r} has two measurement summaries for task {m.task!r}: "
                                  f"{seen[m.task].name} and {m.path.name}; keep one (a measurement is one "
                                  "configuration per task)")
        seen[m.task] = m.path
    return [m for m in out if task is None or m.task == task]


def measured_pairs(root=None) -> list[str]:
    """The pairs with at least one summary under ``root`` (default ``data/measurements``), sorted."""
    from .paths import DATA

    root = Path(root or DATA / "measurements")
    return sorted(d.name for d in root.iterdir() if d.is_dir() and any(d.glob(f"*{SUFFIX}"))) if root.is_dir() else []


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _positive_time(x) -> bool:
    return _number(x) and math.isfinite(x) and x > 0


def read_measured_summary(path) -> dict:
    """A measurement summary (``*.summary.json``) read strictly (:func:`spinlib.jsonio.read_json`) and
    checked for meaning, not only shape: one line naming the file and the field otherwise.

    * ``by_temperature`` maps temperatures (numbers >= 0 as text) to objects with ``alpha`` in [0, 1]
      and a ``prefix_profile`` of probabilities in [0, 1], non-increasing (``pi_L = P(the first L
      drafts all accepted)`` cannot grow with L); an entry is NaN only where it is undefined (no
      position that far), and only after the defined ones;
    * ``alpha_ci95``, when given, is ``[low, high]`` in [0, 1] around ``alpha``;
    * ``timing.draft_s_per_token`` (and ``target_s_per_token`` when given) are times [s], finite
      and > 0; the verification fit's ``t0`` is finite and > 0 and its ``t1`` finite and >= 0
      (``verify_t0_s`` / ``verify_t1_s``, or ``verify_grid.fit``);
    * ``timing.reliable`` and ``verify_fit.ok``, when given, are booleans (``"false"`` is not).
    """
    d = loads_json(read_text_checked(path, "measurement summary"), f"measurement summary {Path(path).name}",
                   allow_nonfinite=True)  # undefined profile entries are NaN; every other number is checked finite

    def bad(what):
        return ValidationError(f"measurement summary {path}: {what} (re-measure it: python -m spinlib measure)")

    if not isinstance(d, dict) or not isinstance(d.get("by_temperature"), dict) or not isinstance(d.get("timing"), dict):
        raise bad("must be an object with 'by_temperature' and 'timing' objects")
    # content-addressed by its configuration: <pair>/<task>-<config_key(config)>.summary.json, the same pair and task
    # inside (a renamed, moved or hand-edited configuration is not the measurement its name says)
    from .cache import config_key

    cfg, path = d.get("config"), Path(path)
    if not isinstance(cfg, dict):
        raise bad("must hold its measurement's 'config' object")
    stem = path.name[: -len(SUFFIX)] if path.name.endswith(SUFFIX) else path.stem
    task, _, key = stem.rpartition("-")
    if cfg.get("pair") != path.parent.name or cfg.get("task") != task or d.get("pair", cfg.get("pair")) != cfg.get("pair") \
            or d.get("task", task) != task:
        raise bad(f"config names pair {cfg.get('pair')!r} and task {cfg.get('task')!r}, but the file is "
                  f"{path.parent.name}/{path.name}")
    if config_key(cfg, 12) != key:
        raise bad(f"its name's key {key!r} is not its config's ({config_key(cfg, 12)!r}): the config was edited or "
                  "the file renamed")
    if "kernel" in d and not (isinstance(d["kernel"], dict) and isinstance(d["kernel"].get("kernel"), str)):
        raise bad(f"kernel must be an object naming the kernel the timings ran on, got {d['kernel']!r:.60}")
    for T, bt in d["by_temperature"].items():
        try:
            t_ok = math.isfinite(float(T)) and float(T) >= 0
        except ValueError:
            t_ok = False
        if not t_ok:
            raise bad(f"by_temperature keys must be temperatures >= 0, got {T!r}")
        if not isinstance(bt, dict) or not _number(bt.get("alpha")) or not 0.0 <= bt["alpha"] <= 1.0 \
                or not isinstance(bt.get("prefix_profile"), list) or not all(_number(x) for x in bt["prefix_profile"]):
            raise bad(f"by_temperature[{T!r}] must hold 'alpha' in [0, 1] and a 'prefix_profile' list of numbers")
        prof = bt["prefix_profile"]
        n_def = next((i for i, x in enumerate(prof) if math.isnan(x)), len(prof))
        defined = prof[:n_def]
        if not defined:
            raise bad(f"by_temperature[{T!r}].prefix_profile has no defined entry (nothing was measured)")
        if any(not math.isnan(x) for x in prof[n_def:]) or any(not 0.0 <= x <= 1.0 for x in defined) \
                or any(b > a + 1e-12 for a, b in zip(defined, defined[1:])):
            raise bad(f"by_temperature[{T!r}].prefix_profile must be probabilities in [0, 1], non-increasing, "
                      "NaN only after the defined entries")
        ci = bt.get("alpha_ci95")
        if ci is not None and not (isinstance(ci, list) and len(ci) == 2 and all(_number(x) for x in ci)
                                   and 0.0 <= ci[0] <= bt["alpha"] + 1e-12 and bt["alpha"] - 1e-12 <= ci[1] <= 1.0):
            raise bad(f"by_temperature[{T!r}].alpha_ci95 must be [low, high] in [0, 1] around alpha")
    tm = d["timing"]
    for k in ("draft_s_per_token",) + (("target_s_per_token",) if "target_s_per_token" in tm else ()):
        if not _positive_time(tm.get(k)):
            raise bad(f"timing.{k} must be a time > 0 [s], finite, got {tm.get(k)!r}")
    if "verify_grid" in tm:
        fit = tm["verify_grid"].get("fit") if isinstance(tm["verify_grid"], dict) else None
        where, t0, t1 = "timing.verify_grid.fit", *((fit.get("t0_s"), fit.get("t1_s")) if isinstance(fit, dict)
                                                     else (None, None))
    else:
        where, t0, t1 = "timing.verify_t0_s / verify_t1_s", tm.get("verify_t0_s"), tm.get("verify_t1_s")
    if not (_positive_time(t0) and _number(t1) and math.isfinite(t1) and t1 >= 0):
        raise bad(f"{where} must hold t0 > 0 and t1 >= 0 [s], finite, got {t0!r} and {t1!r}")
    if "reliable" in tm and not isinstance(tm["reliable"], bool):
        raise bad(f"timing.reliable must be true or false, got {tm['reliable']!r}")
    vf = tm.get("verify_fit")
    if isinstance(vf, dict) and "ok" in vf and not isinstance(vf["ok"], bool):
        raise bad(f"timing.verify_fit.ok must be true or false, got {vf['ok']!r}")
    return d


__all__ = ["MeasurementSummary", "read_summaries", "read_measured_summary", "measured_pairs", "summary_task"]
