"""What every speed benchmark shares: threads, load checks, medians and interleaved ratios.

A benchmark script does::

    ap = argparse.ArgumentParser(); add_arguments(ap); args = ap.parse_args()
    run = Run("solver_scaling", args, what="the solver benchmark")  # threads set, refuses a busy machine
    ... timed(fn, budget_s) / ratio(fn_a, fn_b, budget_s) ...
    run.finish({...})  # load after, CPU used by others during the run, reliable; writes the JSON

Conventions (:mod:`spinlib.timing`): absolute times are medians with quartiles of repeated runs
(never the best); a comparison runs the thing ``a`` and its reference ``b`` interleaved in one
process and reports ``ratio = median(t_b) / median(t_a)`` (the speed-up of ``a`` over ``b``) with a
95 % bootstrap interval over the pairs; it is a win only when the interval lies above 1.

Repeats are chosen per item from a time budget: one untimed call (the warm-up) is timed as a
probe, then ``clip(budget / probe, lo, hi)`` runs are measured (at least 3 pairs for an interval),
so slow references get few repeats and fast ones many; the count is recorded with each result.

Reliability: :func:`spinlib.timing.require_quiet` before the run (refusal unless ``--allow-busy``);
during the run the CPU time used by everything else on the machine (``/proc/stat`` minus this
process and its children) in cores; after the run :func:`spinlib.timing.load_check` again. The run
is ``reliable`` when the machine was quiet before, others used at most ``OTHER_CORES_MAX`` cores on
average during the run and no other process was busy after it. (The after-check's load-average
criterion is recorded but not used: the 1-minute load average then counts this run's own threads.)
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from spinlib.cache import atomic_write_text
from spinlib.paths import RESULTS
from spinlib.validation import ValidationError
from spinlib.timing import Ratio, Timing, compare, load_check, measure, ratio_interval, require_quiet, set_threads

SCHEMA = "spinlib-speed/1"
CONFIDENCE = 0.95
OTHER_CORES_MAX = 0.3  # CPU used by other processes during the run [cores], averaged over the run


def source_state() -> dict:
    """``commit``, ``uncommitted_changes`` (in spinlib/, benchmarks/, tests/) and the UTC ``date`` of a run:
    every benchmark or campaign JSON records which code produced it."""
    def git(*a):
        return subprocess.run(["git", *a], capture_output=True, text=True,
                              cwd=Path(__file__).resolve().parents[1]).stdout.strip()

    return {"commit": git("rev-parse", "HEAD") or None,
            "uncommitted_changes": bool(git("status", "--porcelain", "--", "spinlib", "benchmarks", "tests")),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")}


def add_arguments(ap) -> None:
    ap.add_argument("--quick", action="store_true",
                    help="small sizes, few repeats (a check that the script runs; writes under results/smoke/)")
    ap.add_argument("--allow-busy", action="store_true",
                    help="run on a busy machine anyway (the JSON says reliable: false) instead of refusing")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: all cores)")
    ap.add_argument("--wait-quiet", type=float, default=0.0, metavar="S",
                    help="wait up to S seconds for the machine to become quiet before refusing (default 0)")
    ap.add_argument("--out", type=Path, default=None,
                    help="JSON to write (default results/benchmarks/<name>.json; "
                         "results/smoke/benchmarks/ with --quick)")


def default_out(name: str, quick: bool) -> Path:
    return (RESULTS / "smoke" / "benchmarks" if quick else RESULTS / "benchmarks") / f"{name}.json"


def _busy_ticks() -> int | None:
    """System-wide non-idle CPU ticks (all cores) from ``/proc/stat``; None elsewhere."""
    try:
        f = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in f[1:8])
    steal = int(f[8]) if len(f) > 8 else 0
    return user + nice + system + irq + softirq + steal


def _own_cpu_s() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def repeats_for(probe_s: float, budget_s: float, lo: int = 3, hi: int = 21) -> int:
    """``clip(budget / probe, lo, hi)`` runs (a probe of 0 gets ``hi``)."""
    if probe_s <= 0:
        return hi
    return int(np.clip(round(budget_s / probe_s), lo, hi))


def _probe(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def timed(fn, budget_s: float, lo: int = 3, hi: int = 21) -> Timing:
    """Median and quartiles of ``fn()``: one timed warm-up as probe, then repeats from the budget."""
    return measure(fn, repeats_for(_probe(fn), budget_s, lo, hi), warmup=0)


def ratio(fn_a, fn_b, budget_s: float, lo: int = 3, hi: int = 21, probe_b: float | None = None) -> Ratio:
    """``fn_a`` vs its reference ``fn_b`` interleaved (:func:`spinlib.timing.compare`); one warm-up
    of each is the probe that sets the number of pairs (``probe_b``: ``fn_b`` was warmed up and
    timed by the caller already)."""
    pb = _probe(fn_b) if probe_b is None else probe_b
    n = repeats_for(_probe(fn_a) + pb, budget_s, max(lo, 3), hi)
    return compare(fn_a, fn_b, repeats=n, warmup=0, confidence=CONFIDENCE)


def timing_of(samples) -> Timing:
    x = np.asarray(samples, float)
    return Timing(float(np.median(x)), float(np.quantile(x, 0.25)), float(np.quantile(x, 0.75)), len(x),
                  tuple(float(v) for v in x))


def ratio_from_samples(ta, tb) -> Ratio:
    """The :class:`~spinlib.timing.Ratio` of paired samples taken interleaved elsewhere (``ta[i]``
    and ``tb[i]`` measured side by side)."""
    if len(ta) != len(tb) or len(ta) < 3:
        raise ValidationError(f"need >= 3 pairs of samples for an interval, got {len(ta)} and {len(tb)}")
    r, lo, hi = ratio_interval(ta, tb, CONFIDENCE)
    return Ratio(r, lo, hi, CONFIDENCE, timing_of(ta), timing_of(tb))


def ratio_record(r: Ratio, a: str, b: str, **conditions) -> dict:
    """A comparison as stored in the JSON: ``ratio``, ``ci_low``, ``ci_high``, ``confidence``,
    ``verdict``, ``pairs`` and the medians/quartiles of ``a`` and ``b`` (each with its ``name``)."""
    d = r.to_dict()
    d["a"] = {"name": a, **d["a"]}
    d["b"] = {"name": b, **d["b"]}
    d["pairs"] = r.a.n
    return {**conditions, **d}


def timing_record(t: Timing, **extra) -> dict:
    return {**t.to_dict(), **extra}


class Run:
    """Conditions of one benchmark run: threads, load before / during / after, output path."""

    def __init__(self, name: str, args, what: str):
        self.name, self.args = name, args
        self.out = Path(args.out) if args.out else default_out(name, args.quick)
        self.threads = set_threads(args.threads)
        deadline = time.monotonic() + max(0.0, args.wait_quiet)
        while not args.allow_busy and time.monotonic() < deadline:
            lc = load_check(self.threads)
            if lc.reliable:
                break
            print(f"waiting for a quiet machine: {lc.reason}", file=sys.stderr, flush=True)
            time.sleep(min(10.0, max(0.0, deadline - time.monotonic())))
        self.before = require_quiet(self.threads, args.allow_busy, what)  # refuses (one line) when busy
        if not self.before.reliable:
            print(f"warning: busy machine, results will be marked reliable: false ({self.before.reason})",
                  file=sys.stderr, flush=True)
        self._t0, self._ticks0, self._own0 = time.perf_counter(), _busy_ticks(), _own_cpu_s()

    def finish(self, results: dict) -> dict:
        """Add the conditions to ``results``, write the JSON (atomically) and return it."""
        wall = time.perf_counter() - self._t0
        ticks1, own = _busy_ticks(), _own_cpu_s() - self._own0
        if ticks1 is not None and self._ticks0 is not None:
            total = (ticks1 - self._ticks0) / os.sysconf("SC_CLK_TCK")
            others = max(0.0, total - own) / wall
        else:
            others = float("nan")
        during = {"wall_s": round(wall, 2), "own_cores": round(own / wall, 3),
                  "other_cores": round(others, 3), "other_cores_max": OTHER_CORES_MAX}
        after = load_check(self.threads)
        reasons = []
        if not self.before.reliable:
            reasons.append(f"before: {self.before.reason}")
        if not others <= OTHER_CORES_MAX:
            reasons.append(f"during: other processes used {others:.2f} cores on average (> {OTHER_CORES_MAX})")
        if after.busy_processes:
            reasons.append(f"after: {len(after.busy_processes)} other busy process(es): "
                           f"{', '.join(after.busy_processes[:4])}")
        doc = {
            "benchmark": self.name, "schema": SCHEMA, "quick": bool(self.args.quick), **source_state(),
            "machine": platform.platform(), "processor": platform.processor() or platform.machine(),
            "cores": os.cpu_count(), "python": platform.python_version(), "threads": self.threads,
            "confidence": CONFIDENCE, "allow_busy": bool(self.args.allow_busy),
            "load_before": self.before.to_dict(), "load_during": during, "load_after": after.to_dict(),
            "reliable": not reasons, "reliability": "; ".join(reasons) or "quiet before, during and after",
            **results,
        }
        atomic_write_text(self.out, json.dumps(doc, indent=2) + "\n")
        if reasons:
            print(f"warning: marked reliable: false ({doc['reliability']})", file=sys.stderr, flush=True)
        print("wrote", self.out, flush=True)
        return doc


def plot_scaling(series, name: str, xlabel: str, directory=None, legend_size: int = 8) -> None:
    """Solve time vs K on log-log axes, one errorbar series per ``(label, points)`` with ``points`` a
    list of ``(K, timing record)`` (median with its quartiles); saved as ``name`` (PDF and PNG) in the
    project's shared figure style. Series without points are skipped."""
    import matplotlib

    matplotlib.use("agg")
    import matplotlib.pyplot as plt

    from spinlib.plotting import save_figure, series_styles, set_style

    set_style()
    fig, ax = plt.subplots()
    for (label, pts), st in zip(series, series_styles()):
        if not pts:
            continue
        K = np.array([k for k, _ in pts], float)
        med = np.array([t["median_s"] for _, t in pts])
        err = np.array([[t["median_s"] - t["q25_s"], t["q75_s"] - t["median_s"]] for _, t in pts]).T
        ax.errorbar(K, med, yerr=err, label=label, capsize=2, **st)
    ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel="solve time [s] (median, quartiles)")
    ax.legend(fontsize=legend_size)
    save_figure(fig, name, directory)


def main_guard(fn) -> None:
    """Run ``fn()``; a :class:`ValidationError` (the busy-machine refusal) is one line, exit 2."""
    try:
        fn()
    except ValidationError as e:
        print(f"{Path(sys.argv[0]).name}: error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
