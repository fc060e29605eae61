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
    ``data/measurements``), in file-name order; an empty list when there is none."""
    from .paths import DATA

    _check_name("pair", pair)
    if task is not None:
        _check_name("task", task)
    files = sorted((Path(root or DATA / "measurements") / pair).glob(f"{task or '*'}-*{SUFFIX}"))
    out = [MeasurementSummary(pair, summary_task(f), f, read_measured_summary(f)) for f in files]
    return [m for m in out if task is None or m.task == task]


def measured_pairs(root=None) -> list[str]:
    """The pairs with at least one summary under ``root`` (default ``data/measurements``), sorted."""
    from .paths import DATA

    root = Path(root or DATA / "measurements")
    return sorted(d.name for d in root.iterdir() if d.is_dir() and any(d.glob(f"*{SUFFIX}"))) if root.is_dir() else []


def read_measured_summary(path) -> dict:
    """A measurement summary (``*.summary.json``) read strictly
    (:func:`spinlib.jsonio.read_json`) and checked: ``by_temperature`` maps temperatures to objects
    with a number ``alpha`` and a list ``prefix_profile``, and ``timing`` holds the numbers the
    presets use. A truncated or edited summary is one :class:`ValidationError` line naming the file."""
    d = loads_json(read_text_checked(path, "measurement summary"), f"measurement summary {Path(path).name}",
                   allow_nonfinite=True)  # undefined profile entries are NaN; alpha is checked finite below

    def bad(what):
        return ValidationError(f"measurement summary {path}: {what} (re-measure it: python -m spinlib measure)")

    if not isinstance(d, dict) or not isinstance(d.get("by_temperature"), dict) or not isinstance(d.get("timing"), dict):
        raise bad("must be an object with 'by_temperature' and 'timing' objects")
    for T, bt in d["by_temperature"].items():
        if not isinstance(bt, dict) or isinstance(bt.get("alpha"), bool) or not isinstance(bt.get("alpha"), (int, float)) \
                or not 0.0 <= bt["alpha"] <= 1.0 or not isinstance(bt.get("prefix_profile"), list) \
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in bt["prefix_profile"]):
            raise bad(f"by_temperature[{T!r}] must hold 'alpha' in [0, 1] and a 'prefix_profile' list of numbers")
    tm = d["timing"]
    keys = ["draft_s_per_token"] + (["verify_t0_s", "verify_t1_s"] if "verify_grid" not in tm else [])
    for k in keys:
        if isinstance(tm.get(k), bool) or not isinstance(tm.get(k), (int, float)):
            raise bad(f"timing.{k} must be a number")
    if "verify_grid" in tm:
        fit = tm["verify_grid"].get("fit") if isinstance(tm["verify_grid"], dict) else None
        if not isinstance(fit, dict) or not all(isinstance(fit.get(k), (int, float)) for k in ("t0_s", "t1_s")):
            raise bad("timing.verify_grid.fit must hold numbers t0_s and t1_s")
    return d


__all__ = ["MeasurementSummary", "read_summaries", "read_measured_summary", "measured_pairs", "summary_task"]
