"""Timings that survive a busy machine: interleaved ratios with intervals, medians, a load check.

Every speed figure of the companion (``measure``, the notebooks' timing tables, ``benchmarks/``)
comes from here:

* :func:`measure` -- ``repeats`` runs of one callable after ``warmup``; reported as the median with
  the quartiles (never the best: the best of a few runs hides the spread).
* :func:`compare` -- a thing ``a`` and its reference ``b`` run *interleaved* (a, b, a, b, ...) in the
  same process, so that a load change hits both; reported as the speed-up ``median(t_b) /
  median(t_a)`` with a bootstrap ``confidence`` interval over the pairs. :attr:`Ratio.win` is true
  only when the interval lies above 1 (and :attr:`Ratio.loss` when below).
* :func:`load_check` -- the 1-minute load average against the cores and the other processes that
  used more than ``busy_share`` of a core over a short window (from ``/proc``). A result taken
  under load is marked ``reliable = False``; :func:`require_quiet` refuses to start (one
  :class:`~spinlib.scenario.ValidationError` line naming the busy processes) unless overridden.
* :func:`set_threads` -- torch's thread count set explicitly (recorded with every result).
"""
from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .validation import ValidationError


@dataclass(frozen=True)
class LoadCheck:
    """State of the machine around a measurement."""

    cores: int
    loadavg_1min: float
    busy_processes: tuple  # "pid name (share of a core)" of other processes above busy_share
    reliable: bool
    reason: str

    def to_dict(self) -> dict:
        return asdict(self)


def _proc_times() -> dict:
    """``{pid: (name, utime + stime [ticks])}`` of every readable process."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            raw = (d / "stat").read_text()
        except OSError:
            continue
        name = raw[raw.index("(") + 1:raw.rindex(")")]
        fields = raw[raw.rindex(")") + 2:].split()
        out[int(d.name)] = (name, int(fields[11]) + int(fields[12]))
    return out


def _own_family() -> set:
    """This process, its ancestors and descendants (a notebook kernel's papermill parent is not 'other load')."""
    fam = {os.getpid()}
    pid = os.getpid()
    for _ in range(64):  # ancestors
        try:
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
        if ppid <= 1:
            break
        fam.add(ppid)
        pid = ppid
    children = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                children.setdefault(int(Path(d, "stat").read_text().rsplit(")", 1)[1].split()[1]), []).append(int(d.name))
            except (OSError, IndexError, ValueError):
                pass
    stack = [os.getpid()]
    while stack:
        for c in children.get(stack.pop(), []):
            if c not in fam:
                fam.add(c)
                stack.append(c)
    return fam


def load_check(threads: int | None = None, window_s: float = 0.5, busy_share: float = 0.3) -> LoadCheck:
    """Is the machine quiet enough for a timing that uses ``threads`` cores (default: all)?

    Unreliable when another process (not this one, its parents or children) used more than
    ``busy_share`` of a core during ``window_s`` (Linux ``/proc``). Without ``/proc``, when the
    1-minute load average exceeds ``cores - threads + 1``; the load average is recorded either way
    (it also counts this process's own recent work, so it cannot decide where /proc can).
    """
    cores = os.cpu_count() or 1
    threads = cores if threads is None else threads
    try:
        load1 = os.getloadavg()[0]
    except OSError:
        load1 = 0.0
    busy = []
    if Path("/proc/stat").exists():
        tick = os.sysconf("SC_CLK_TCK")
        a = _proc_times()
        time.sleep(window_s)
        b = _proc_times()
        mine = _own_family()
        for pid, (name, t) in b.items():
            if pid in mine or pid not in a:
                continue
            share = (t - a[pid][1]) / tick / window_s
            if share > busy_share:
                busy.append(f"{pid} {name} ({share:.0%} of a core)")
    reasons = []
    if busy:
        reasons.append(f"{len(busy)} other busy process(es): {', '.join(busy[:4])}")
    # the load average also counts this process's own recent work (a measurement that just ran):
    # it decides only where /proc cannot name the other processes
    if not Path("/proc/stat").exists() and load1 > cores - threads + 1:
        reasons.append(f"load average {load1:.2f} > {cores - threads + 1} (cores {cores}, threads in use {threads})")
    return LoadCheck(cores, round(load1, 2), tuple(busy), not reasons, "; ".join(reasons) or "quiet")


def require_quiet(threads: int | None = None, allow_busy: bool = False, what: str = "this timing") -> LoadCheck:
    """:func:`load_check`, refusing (one line) when the machine is busy unless ``allow_busy``."""
    lc = load_check(threads)
    if not lc.reliable and not allow_busy:
        raise ValidationError(f"the machine is busy, {what} would be unreliable: {lc.reason} "
                              "(wait, or pass --allow-busy to record it marked unreliable)")
    return lc


def check_threads(n) -> int | None:
    """``n`` if it is ``None`` (all cores) or an int in ``1..cores``; one line otherwise (more threads
    than cores only slow a timing down, and a count in the thousands once ran the machine out of
    memory). What :func:`set_threads` and every command line's ``--threads`` check."""
    from .validation import ValidationError

    cores = os.cpu_count() or 1
    if n is not None and (isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= cores):
        raise ValidationError(f"threads must be an int in 1..{cores} (this machine's cores), got {n!r}")
    return None if n is None else int(n)


def set_threads(n: int | None = None) -> int:
    """Set torch's intra-op threads to ``n`` (default: all cores, :func:`check_threads`); returns the count in use.
    The one place a thread count is set: measurements, the kernel choice, the benchmarks."""
    import torch

    n = check_threads(n) or os.cpu_count() or 1
    torch.set_num_threads(int(n))
    return torch.get_num_threads()


@dataclass(frozen=True)
class Timing:
    """Repeated wall-clock runs of one callable [s]."""

    median_s: float
    q25_s: float
    q75_s: float
    n: int
    samples: tuple = field(repr=False)

    def to_dict(self) -> dict:
        return {"median_s": self.median_s, "q25_s": self.q25_s, "q75_s": self.q75_s, "n": self.n}


def timing_of(samples) -> Timing:
    """Median and quartiles of samples already taken [s]."""
    return _timing(samples)


def _timing(samples) -> Timing:
    x = np.asarray(samples, float)
    return Timing(float(np.median(x)), float(np.quantile(x, 0.25)), float(np.quantile(x, 0.75)), len(x),
                  tuple(float(v) for v in x))


def measure(fn, repeats: int = 7, warmup: int = 1) -> Timing:
    """Median and quartiles of ``repeats`` timed calls of ``fn()`` after ``warmup`` untimed ones."""
    if repeats < 1:
        raise ValidationError(f"repeats must be >= 1, got {repeats}")
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return _timing(out)


@dataclass(frozen=True)
class Ratio:
    """Speed-up of ``a`` over its reference ``b``: ``median(t_b) / median(t_a)`` with an interval."""

    ratio: float
    ci_low: float
    ci_high: float
    confidence: float
    a: Timing
    b: Timing

    @property
    def win(self) -> bool:
        return self.ci_low > 1.0

    @property
    def loss(self) -> bool:
        return self.ci_high < 1.0

    def verdict(self) -> str:
        return "faster" if self.win else "slower" if self.loss else "no difference shown"

    def text(self, digits: int = 2) -> str:
        """``"3.80x [3.40, 8.30]"``; ratios of 10 or more without decimals (``"191x [165, 220]"``)."""
        def f(x):
            return f"{x:.{digits}f}" if x < 10 else f"{x:,.0f}"
        return f"{f(self.ratio)}x [{f(self.ci_low)}, {f(self.ci_high)}]"

    def to_dict(self) -> dict:
        return {"ratio": self.ratio, "ci_low": self.ci_low, "ci_high": self.ci_high, "confidence": self.confidence,
                "verdict": self.verdict(), "a": self.a.to_dict(), "b": self.b.to_dict()}


def ratio_interval(ta, tb, confidence: float = 0.95, n_boot: int = 2000, seed: int = 0):
    """``median(tb) / median(ta)`` and its bootstrap interval, resampling the (a, b) pairs together."""
    ta, tb = np.asarray(ta, float), np.asarray(tb, float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(ta), (n_boot, len(ta)))
    boot = np.median(tb[idx], axis=1) / np.median(ta[idx], axis=1)
    a = (1 - confidence) / 2
    return float(np.median(tb) / np.median(ta)), float(np.quantile(boot, a)), float(np.quantile(boot, 1 - a))


def compare(fn_a, fn_b, repeats: int = 9, warmup: int = 1, confidence: float = 0.95, seed: int = 0) -> Ratio:
    """Run ``fn_a`` and ``fn_b`` interleaved ``repeats`` times each (after ``warmup`` of each);
    the speed-up of a over b with a bootstrap interval (module docstring)."""
    if repeats < 2:
        raise ValidationError(f"repeats must be >= 2 for an interval, got {repeats}")
    for _ in range(warmup):
        fn_a()
        fn_b()
    ta, tb = [], []
    for i in range(repeats):
        order = ((fn_a, ta), (fn_b, tb)) if i % 2 == 0 else ((fn_b, tb), (fn_a, ta))
        for fn, acc in order:
            t = time.perf_counter()
            fn()
            acc.append(time.perf_counter() - t)
    r, lo, hi = ratio_interval(ta, tb, confidence, seed=seed)
    return Ratio(r, lo, hi, confidence, _timing(ta), _timing(tb))


def median_standard_error(q25, q75, n):
    """Standard error [unit of the quartiles] of the median of ``n`` samples from its quartiles (normal
    approximation: ``sigma = IQR / 1.349``, ``se = 1.2533 sigma / sqrt(n)``); arrays broadcast."""
    return 1.2533 * (np.asarray(q75, float) - np.asarray(q25, float)) / 1.349 / np.sqrt(n)


__all__ = ["LoadCheck", "load_check", "require_quiet", "check_threads", "set_threads", "Timing", "timing_of", "measure", "Ratio",
           "compare", "ratio_interval", "median_standard_error"]
