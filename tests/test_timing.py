"""The timing helper (issue 16): interleaved ratios with bootstrap intervals, medians not bests, a
load check that notices other busy processes, and a verification fit that refuses noise."""
import subprocess
import sys
import time

import numpy as np
import pytest

from spinlib.validation import ValidationError
from spinlib.sd.measure import fit_verification
from spinlib.timing import compare, load_check, measure, ratio_interval, require_quiet


def test_ratio_interval_covers_a_known_ratio_and_calls_wins_only_outside_one():
    rng = np.random.default_rng(0)
    ta = 1.0 + 0.05 * rng.standard_normal(25)
    tb = 3.0 + 0.15 * rng.standard_normal(25)
    r, lo, hi = ratio_interval(ta, tb)
    assert lo < 3.0 < hi and lo > 1
    same = ratio_interval(ta, ta[::-1] * (1 + 0.01 * rng.standard_normal(25)))
    assert same[1] < 1 < same[2]


def test_compare_interleaves_and_reports_medians():
    calls = []
    r = compare(lambda: calls.append("a") or time.sleep(0.002), lambda: calls.append("b") or time.sleep(0.006),
                repeats=6, warmup=1)
    assert calls[:2] == ["a", "b"] and calls[2:4] == ["a", "b"] and calls[4:6] == ["b", "a"]  # alternating order
    assert r.a.n == r.b.n == 6 and r.ratio > 1.5 and r.win and r.verdict() == "faster"
    assert r.a.q25_s <= r.a.median_s <= r.a.q75_s
    with pytest.raises(ValidationError, match="repeats"):
        compare(lambda: None, lambda: None, repeats=1)
    t = measure(lambda: time.sleep(0.001), repeats=5)
    assert t.n == 5 and t.median_s >= 0.001


def test_load_check_notices_a_busy_process():
    """A busy process that is not ours (double fork: re-parented, as another user's job would be)."""
    import os
    import signal

    code = "import time; t = time.time()\nwhile time.time() - t < 8: pass"
    out = subprocess.run(["bash", "-c", f"{sys.executable} -c '{code}' >/dev/null 2>&1 & echo $!"],
                         capture_output=True, text=True, check=True)
    pid = int(out.stdout.strip())

    class P:
        def kill(self):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    p = P()
    try:
        time.sleep(0.5)
        lc = load_check(threads=1, window_s=1.0)
        assert not lc.reliable and any(b.startswith(f"{pid} ") for b in lc.busy_processes), lc
        with pytest.raises(ValidationError, match="machine is busy") as e:
            require_quiet(1, what="x")
        assert "\n" not in str(e.value) and "--allow-busy" in str(e.value)
        assert not require_quiet(1, allow_busy=True).reliable
    finally:
        p.kill()


def test_verification_fit_refuses_noise():
    sizes = [1, 2, 4, 8, 16]
    clean = [0.05 + 0.002 * n for n in sizes]
    t0, t1, rms, effect, ok = fit_verification(sizes, clean)
    assert ok and t0 == pytest.approx(0.05) and t1 == pytest.approx(0.002) and rms < 1e-12
    noisy = [0.26, 3.6, 0.3, 1.2, 0.4]  # the busy-machine numbers (2 positions "took" 3.6 s)
    assert not fit_verification(sizes, noisy)[4]


def test_a_thread_count_beyond_the_cores_is_one_line():
    """set_threads is the one setter (measure, kernel choice, benchmarks): 0, negatives, booleans and
    counts beyond the cores are refused before torch sees them; the CLI says so in one line, exit 2."""
    import os

    import torch

    from helpers import spinlib_cli
    from spinlib.timing import set_threads

    before = torch.get_num_threads()
    cores = os.cpu_count() or 1
    for bad in (0, -1, cores + 1, 100_000, True, 2.0):
        with pytest.raises(ValidationError) as e:
            set_threads(bad)
        assert "threads must be an int in 1.." in str(e.value) and "\n" not in str(e.value)
    assert torch.get_num_threads() == before  # nothing was set
    assert set_threads(1) == 1 and set_threads(None) == cores
    r = spinlib_cli("measure", "--pair", "smollm2-rtn6", "--task", "qa", "--threads", "100000")
    assert r.returncode == 2 and "threads" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    torch.set_num_threads(before)
