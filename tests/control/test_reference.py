"""The CVXPY references (spinlib.control.reference): DPP, re-use, errors, agreement, reproducibility.

Tolerances: the references must agree with the fast solvers within 1e-6 relative (measured: the
makespan within 1e-7, the asynchronous goodput within 6e-8, the DL phase time within 3e-8); a
solver status other than "optimal" must raise, never return ``inf``; the DL reference must give
identical answers in separate processes (different hash seeds, different call orders).
"""
import json
import os
import subprocess
import sys

import cvxpy as cp
import numpy as np
import pytest

from spinlib import random_scenario, tokens_table
from spinlib.acceptance import accept_all_table
from spinlib.channel import downlink_rate
from spinlib.control import reference as ref
from spinlib.control.bandwidth import async_optimal_bandwidth, min_makespan_bandwidth
from spinlib.control.power import min_max_downlink_power
from spinlib.control.reference import (AsyncSplitReference, DownlinkPowerReference, ReferenceSolverError,
                                       SyncSplitReference, async_bandwidth_cvxpy, downlink_power_cvxpy,
                                       min_makespan_cvxpy, min_total_bandwidth)
from spinlib.modes import mode_payload
from spinlib.presets import random_uldl_scenario

REL = 1e-6


def random_cell(rng, K):
    """A random paper-1 cell (random preset, heterogeneity, access latency and rate model)."""
    lo = rng.uniform(0.05, 0.8)
    kw = dict(alpha_range=(lo, rng.uniform(lo, 0.97)),
              access_latency_s=float(rng.choice([0.0, 0.005, 0.02, 0.06])),
              rate_model=str(rng.choice(["shannon", "shannon", "linear"])))
    if rng.random() < 0.5:
        a = rng.uniform(0.0005, 0.02)
        kw["draft_time_range"] = (a, a * rng.uniform(1, 20))
    return random_scenario(K, seed=int(rng.integers(1 << 31)), preset=str(rng.choice(["llama2-7b-l4", "qwen-7b-l4"])),
                           **kw)


def dl_instance(rng, K_max=30, L_max=8):
    """A random UL/DL cell with every device in DL mode and random draft lengths: ``(s, d, c)``."""
    K = int(rng.integers(1, K_max))
    s = random_uldl_scenario(K, rng)
    L = rng.integers(0, L_max + 1, K)
    _, d, c = mode_payload(s, L, np.zeros(K, bool), accept_all_table(tokens_table(s, L_max)))
    return s, d, c


# ------------------------------------------------------------------------------------------
# structure: DPP, compiled once, re-solved
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["shannon", "linear"])
def test_programs_are_dpp(kind):
    for build in (ref._build_sync_margin, ref._build_sync_bandwidth, ref._build_async):
        prog = build(kind, 4)
        assert prog.is_dpp(), prog.name
        assert prog.problem.parameters(), prog.name
    assert ref._build_dl(4).is_dpp()


def test_problem_is_compiled_once_and_resolved():
    rng = np.random.default_rng(71)
    s = random_uldl_scenario(6, rng)
    dl = DownlinkPowerReference(s)
    d = rng.uniform(1e3, 1e6, 6)
    ref._PROGRAMS.pop(("dl", 6), None)
    dl.solve(d, np.zeros(6))
    first = dl.info
    prog = ref._PROGRAMS[("dl", 6)]
    problem = prog._by_solver["CLARABEL"]
    dl.solve(d * 2, np.full(6, 1e-3))
    assert ref._PROGRAMS[("dl", 6)] is prog and prog._by_solver["CLARABEL"] is problem  # same object, re-solved
    assert first.compile_s > 0 and dl.info.compile_s == 0.0
    assert dl.info.solve_s > 0 and dl.info.num_solves == 1 and dl.info.status == "optimal"
    assert np.all(prog.params["cs"].value > 0)  # the parameters hold the last call's values
    # the bisection re-solves one problem: ~log2(range / rel_tol) solves, one compile at most
    s = random_scenario(5, seed=3)
    sync = SyncSplitReference(s, np.full(5, 3))
    sync.min_makespan(1e-9)
    assert sync.info.num_solves >= 20 and sync.info.status == "optimal"


# ------------------------------------------------------------------------------------------
# errors: never a silent inf
# ------------------------------------------------------------------------------------------
def _fake_status(status, only_first=False):
    """A ``cp.Problem.solve`` that sets ``status`` without solving: on every call, or only on the
    first one (the first stage of the chain) when ``only_first``."""
    real = cp.Problem.solve
    calls = []

    def solve(self, *args, **kwargs):
        calls.append(kwargs.get("solver"))
        if only_first and len(calls) > 1:
            return real(self, *args, **kwargs)
        self._status = status
        return None

    return solve


@pytest.mark.parametrize("status", ["optimal_inaccurate", "infeasible", "solver_error"])
def test_non_optimal_status_raises(monkeypatch, status):
    s = random_scenario(4, seed=11)
    L = np.array([2, 3, 0, 4])
    N = tokens_table(s, 4)[np.arange(4), L]
    if status == "solver_error":
        def boom(self, *a, **k):
            raise cp.error.SolverError("boom")
        monkeypatch.setattr(cp.Problem, "solve", boom)
    else:
        monkeypatch.setattr(cp.Problem, "solve", _fake_status(status))
    D = float(min_makespan_bandwidth(s, L)[0])
    calls = [lambda: min_makespan_cvxpy(s, L), lambda: min_total_bandwidth(s, L, 1.5 * D),
             lambda: async_bandwidth_cvxpy(s, L, N),
             lambda: downlink_power_cvxpy(s, np.array([1e5, 2e4, 0.0, 3e5]), np.zeros(4))]
    installed = set(cp.installed_solvers())
    for call in calls:
        with pytest.raises(ReferenceSolverError) as err:
            call()
        tried = err.value.attempts
        assert [t[0] for t in tried] == [lab for lab, solver, *_ in ref.SOLVER_CHAIN if solver in installed]
        assert all(st == status for _, st in tried)
        assert "CLARABEL" in str(err.value) and status in str(err.value)


def test_inaccurate_first_solve_falls_back(monkeypatch):
    """Clarabel's "optimal_inaccurate" is not accepted: the next solver answers, and says so."""
    monkeypatch.setattr(cp.Problem, "solve", _fake_status("optimal_inaccurate", only_first=True))
    rng = np.random.default_rng(5)
    s, d, c = dl_instance(rng)
    while not np.any(d > 0):
        s, d, c = dl_instance(rng)
    E, _ = min_max_downlink_power(s, d, c)
    E_ref, _, info = downlink_power_cvxpy(s, d, c, return_info=True)
    assert info.attempts[0] == ("CLARABEL", "optimal_inaccurate")
    assert info.status == "optimal" and info.solver != "CLARABEL" and info.fallbacks == 1
    assert info.attempts[-1] == (info.solver, "optimal")
    assert E_ref == pytest.approx(E, rel=REL)


def test_infeasible_trial_point_is_decided_without_solver(monkeypatch):
    def no_solve(self, *a, **k):
        raise AssertionError("the solver must not be called")

    monkeypatch.setattr(cp.Problem, "solve", no_solve)
    s = random_scenario(3, seed=2)
    L = np.array([4, 1, 2])
    below = float(np.min(L * s.tau)) * 0.5  # D <= L_k tau_k for every user
    value, info = min_total_bandwidth(s, L, below, return_info=True)
    assert value == np.inf and info.status == "infeasible" and info.num_solves == 0
    sync = SyncSplitReference(s, L)
    assert sync.margin(float(np.max(L * s.tau))) == 0.0 and sync.info.status == "infeasible"
    assert min_makespan_cvxpy(s, np.array([0, 3, 0])) > 0  # one drafting user: closed form, no solve
    assert min_total_bandwidth(s, np.zeros(3, int), 1.0) == 0.0


# ------------------------------------------------------------------------------------------
# agreement with the fast solvers (fresh random instances)
# ------------------------------------------------------------------------------------------
def test_sync_reference_matches_fast_solver():
    """22 random cells, K in 2..7: the makespan within 1e-6; the bandwidth problem is consistent."""
    rng = np.random.default_rng(20250711)
    errs, n = [], 0
    while n < 22:
        K = int(rng.integers(2, 8))
        s = random_cell(rng, K)
        L = rng.integers(0, 9, K)
        L[:2] = np.maximum(L[:2], 1)
        D, _ = min_makespan_bandwidth(s, L)
        sync = SyncSplitReference(s, L)
        D_ref = sync.min_makespan()
        assert sync.info.status == "optimal" and sync.info.tolerance <= 1e-7
        errs.append(abs(D_ref - D) / D)
        n += 1
        if n % 4 == 0:  # the minimal-bandwidth problem brackets the same D*
            assert sync.min_total_bandwidth(1.01 * D) < s.radio.bandwidth_hz
            assert sync.min_total_bandwidth(0.99 * D) > s.radio.bandwidth_hz
    assert max(errs) <= REL, max(errs)


def test_async_reference_matches_fast_solver():
    """30 random cells, K in 1..8: goodput within 1e-6 both ways, budget respected."""
    rng = np.random.default_rng(20250712)
    errs = []
    for _ in range(30):
        K = int(rng.integers(1, 9))
        s = random_cell(rng, K)
        L = rng.integers(0, 9, K)
        N = tokens_table(s, 8)[np.arange(K), L]
        b, G = async_optimal_bandwidth(s, L, N)
        asy = AsyncSplitReference(s, L)
        b_ref, G_ref = asy.solve(N)
        assert asy.info.status in ("optimal", "trivial")
        assert np.sum(b_ref) <= s.radio.bandwidth_hz * (1 + 1e-6) and np.all(b_ref[L == 0] == 0)
        errs.append(abs(G_ref - G) / G)
    assert max(errs) <= REL, max(errs)


def test_dl_reference_matches_fast_solver():
    """30 random UL/DL cells (all DL, random draft lengths): E within 1e-6, p feasible and
    consistent with E (every device finishes by E)."""
    rng = np.random.default_rng(20250713)
    errs, n = [], 0
    while n < 30:
        s, d, c = dl_instance(rng)
        if not np.any(d > 0):
            continue
        n += 1
        E, _ = min_max_downlink_power(s, d, c)
        E_ref, p_ref, info = downlink_power_cvxpy(s, d, c, return_info=True)
        assert info.status == "optimal" and info.tolerance <= 1e-7
        on = d > 0
        assert np.sum(p_ref) <= s.downlink.power_w * (1 + 1e-6) and np.all(p_ref[~on] == 0)
        finish = c[on] + d[on] / downlink_rate(s, p_ref, np.count_nonzero(on))[on]
        assert np.max(finish) == pytest.approx(E_ref, rel=1e-5)
        errs.append(abs(E_ref - E) / E)
    assert max(errs) <= REL, max(errs)


# ------------------------------------------------------------------------------------------
# reproducibility of the DL reference across processes
# ------------------------------------------------------------------------------------------
_SCRIPT = """
import json, sys
import numpy as np
from spinlib.acceptance import accept_all_table
from spinlib import tokens_table
from spinlib.control.reference import downlink_power_cvxpy
from spinlib.modes import mode_payload
from spinlib.presets import random_uldl_scenario
rng = np.random.default_rng(909)
cells = []
while len(cells) < 12:
    K = int(rng.integers(1, 30)); s = random_uldl_scenario(K, rng); L = rng.integers(0, 9, K)
    _, d, c = mode_payload(s, L, np.zeros(K, bool), accept_all_table(tokens_table(s, 8)))
    if np.any(d > 0):
        cells.append((len(cells), s, d, c))
out = {}
for i, s, d, c in (cells[::-1] if sys.argv[1] == "reverse" else cells):
    E, p, info = downlink_power_cvxpy(s, d, c, return_info=True)
    out[i] = [E.hex(), [x.hex() for x in p], info.solver]
print(json.dumps(out, sort_keys=True))
"""


@pytest.mark.campaign
def test_dl_reference_identical_in_separate_processes():
    runs = []
    for seed, order in (("1", "forward"), ("4242", "reverse")):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        res = subprocess.run([sys.executable, "-c", _SCRIPT, order], capture_output=True, text=True, env=env,
                             timeout=300, check=True)
        runs.append(json.loads(res.stdout.strip().splitlines()[-1]))
    assert runs[0] == runs[1]  # bit-identical E and p, same solver
    E = [float.fromhex(v[0]) for v in runs[0].values()]
    assert len(E) == 12 and all(e > 0 for e in E)
