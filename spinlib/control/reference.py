"""Independent CVXPY references for the continuous sub-problems (tests, benchmarks, notebook 06).

Each problem is written once as a parametrised (DPP) CVXPY program, compiled once per structure
(problem, rate model, number of active users; shared by every call with that structure) and
re-solved with new parameter values. Bandwidth is in units of ``B``, power in units of ``P_BS``
(times a per-device unit), rates in bit/s/Hz and times in units of a bound of the answer, so that
the solver sees O(1) numbers. The Shannon rate on ``x B`` Hz is ``R_k(x B) / B =
-rel_entr(x, x + a_k/B) / ln 2`` (``a_k = P_k g_k / N0``), DPP with ``a_k/B`` a parameter.

* Synchronous split (:class:`SyncSplitReference`, :func:`min_makespan_cvxpy`,
  :func:`min_total_bandwidth`): bisection on the makespan ``D``. At a trial ``D`` the required
  rates are ``n_k = L_k S_k / (D - L_k tau_k)`` [bit/s]; the feasibility problem, with ``n_k / B``
  a parameter, ::

      g*(D) = max g   s.t.   R_k(x_k B) / B >= g n_k / B,   sum_k x_k <= 1,   x >= 0

  is re-solved at every step, and ``D`` is feasible iff ``g*(D) >= 1``. Trial points that are
  infeasible on their face (``D <= L_k tau_k``, ``n_k >= R_k(inf)``, or ``n_k > R_k(B)``: one user
  alone would need more than the band) are decided before calling any solver.
  :meth:`SyncSplitReference.min_total_bandwidth` solves ``min sum_k x_k s.t. R_k(x_k B)/B >= n_k/B``
  instead (the bandwidth itself; ill-conditioned for a user near its rate limit, whose bandwidth
  ``~ 1/(1 - n_k/R_k(inf))`` the solver resolves only to ~1e-5, while the margin ``g*`` stays
  accurate: the bisection uses the margin).
* Asynchronous split (:class:`AsyncSplitReference`, :func:`async_bandwidth_cvxpy`): the goodput
  ``sum_k N_k / (A_k + C_k/R_k)`` as the infinite-rate goodput minus a convex loss, each term
  scaled to O(1) (class docstring).
* Downlink power split (:class:`DownlinkPowerReference`, :func:`downlink_power_cvxpy`), the
  epigraph form of ``min_p max_k c_k + d_k / r_k(p_k)``::

      min e   s.t.   r_k phi_k <= log(1 + q_k x0_k z_k),   e >= c_k/E0 + 1/phi_k,   sum_k x0_k z_k <= 1

  with ``E = e E0`` [s], ``E0`` the time at which the slowest device would finish with the whole
  power (a lower bound on the answer), ``phi_k = E0 / (E - c_k)``, ``r_k = d_k ln 2 / (w E0)``
  [nat], ``q_k = P_BS g_k / (N0 w)`` the SNR at full power (``w = W / n_DL``) and the power
  ``p_k = P_BS x0_k z_k``; the unit ``x0_k`` is the geometric mean of 1 and the share device k
  would need to finish by ``E0`` (it balances the ranges of the cone and budget coefficients; of
  the scalings tried, it left Clarabel the fewest "optimal_inaccurate" statuses).

Solvers. Each solve runs :data:`SOLVER_CHAIN` (those in ``cvxpy.installed_solvers()``): Clarabel at
the problem's :data:`TOLERANCE` (1e-9), SCS and ECOS at a tenth of it, Clarabel without
equilibration, then Clarabel at 10x and 100x the tolerance, stopping at the first status
``"optimal"``. ``"optimal_inaccurate"`` is never accepted; when no stage reaches ``"optimal"`` a
:class:`ReferenceSolverError` names every solver and status tried. :class:`SolveInfo` reports the
solver, tolerance and attempts behind an answer, and the compile time apart from the solve time.
Exponential-cone solvers lose accuracy where a rate is nearly linear (low SNR) or saturated (a
weak user near ``R_k(inf)``): those are the cases that need the later stages.

Reproducibility: solves never warm-start. With CVXPY's default (``warm_start=True``) a re-solved
problem is handed to Clarabel's previous solver object, and the answer then depends on what was
solved before (measured: ~1e-9 relative between two call orders); without it a given input gives
bit-identical answers in any process, call order and hash seed (tested).

Measured against the fast solvers (:mod:`.bandwidth`, :mod:`.power`) on random instances: the
makespan within 1e-7 relative (160 cells), the asynchronous goodput within 6e-8 (400 cells), the
DL phase time within 3e-8 (2,395 cells, K up to 1,000; 24 of them needed SCS, none failed). All of
this is far slower than the closed-form/1-D-root solvers it checks.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np

from ..channel import LN2, RateModel
from ..scenario import Scenario


def _clarabel(tol, **extra):
    return dict(tol_gap_abs=tol, tol_gap_rel=tol, tol_feas=tol, max_iter=400, **extra)


#: ``(label, cvxpy solver name, tolerance factor, options(tolerance))``, tried in order (those
#: installed) until one returns status "optimal". The tolerance is the factor times the problem's
#: :data:`TOLERANCE`: first the base tolerance (Clarabel; SCS and ECOS at a tenth of it; Clarabel
#: without equilibration), then Clarabel at 10x and 100x the base tolerance, the loosest
#: accepted (the tolerance of the answer is reported in :attr:`SolveInfo.tolerance`). Every stage
#: is deterministic (iteration caps, no time limits).
SOLVER_CHAIN = (
    ("CLARABEL", "CLARABEL", 1.0, lambda tol: _clarabel(tol)),
    ("SCS", "SCS", 0.1, lambda tol: dict(eps_abs=tol, eps_rel=tol, max_iters=20_000)),
    ("ECOS", "ECOS", 0.1, lambda tol: dict(abstol=tol, reltol=tol, feastol=tol, max_iters=500)),
    ("CLARABEL-noequil", "CLARABEL", 1.0, lambda tol: _clarabel(tol, equilibrate_enable=False)),
    ("CLARABEL-10tol", "CLARABEL", 10.0, lambda tol: _clarabel(tol)),
    ("CLARABEL-100tol", "CLARABEL", 100.0, lambda tol: _clarabel(tol)),
)
SOLVER = SOLVER_CHAIN[0][1]  # the first solver tried
#: base solver tolerance (feasibility and relative gap) of each reference problem
TOLERANCE = {"sync-split": 1e-9, "sync-bandwidth": 1e-8, "async-split": 1e-9, "dl-power": 1e-9}


class ReferenceSolverError(RuntimeError):
    """No solver of the chain reached status ``"optimal"`` on a reference problem.

    Attributes
    ----------
    problem : str
        Which reference problem: ``"sync-split"`` (the bisection's feasibility problem),
        ``"sync-bandwidth"``, ``"async-split"`` or ``"dl-power"``.
    attempts : tuple of (str, str)
        ``(solver, status)`` of every solver tried, in order (``"solver_error"`` where it raised).
    """

    def __init__(self, problem: str, attempts):
        self.problem = problem
        self.attempts = tuple(attempts)
        tried = ", ".join(f"{s}: {st}" for s, st in self.attempts) or "no installed solver"
        super().__init__(f"{problem}: no solver reached status 'optimal' ({tried})")


@dataclass(frozen=True)
class SolveInfo:
    """How a reference answer was obtained.

    Attributes
    ----------
    solver : str
        Label in :data:`SOLVER_CHAIN` of the solver whose answer is returned (of the last solve, for
        a bisection); ``"none"`` when no solve was needed.
    status : str
        ``"optimal"``; ``"trivial"`` (nothing to solve) or ``"infeasible"`` (decided analytically,
        :meth:`SyncSplitReference.min_total_bandwidth` only) when no solver ran.
    attempts : tuple of (str, str)
        ``(solver, status)`` of every solver tried in the last solve, in order.
    tolerance : float
        Solver tolerance of the accepted solves (the loosest, for a bisection); nan if none ran.
    num_solves : int
        Conic problems solved to produce the answer (the bisection steps, for the makespan).
    fallbacks : int
        How many of them needed a solver after the first one.
    compile_s : float
        CVXPY canonicalisation [s] spent in this call (0 when the structure was compiled before).
    solve_s : float
        Wall time of the solves [s]: parameter substitution, solver, unpacking.
    """

    solver: str
    status: str
    attempts: tuple
    tolerance: float
    num_solves: int
    fallbacks: int
    compile_s: float
    solve_s: float


_NO_SOLVE = SolveInfo("none", "trivial", (), float("nan"), 0, 0, 0.0, 0.0)


class _Tally:
    """Accumulates the solves behind one answer into a :class:`SolveInfo`."""

    def __init__(self):
        self.solver, self.attempts, self.tolerance = "none", (), 0.0
        self.num_solves = self.fallbacks = 0
        self.compile_s = self.solve_s = 0.0

    def add(self, solver, attempts, tolerance, compile_s, solve_s):
        self.solver, self.attempts = solver, attempts
        self.tolerance = max(self.tolerance, tolerance)
        self.num_solves += 1
        self.fallbacks += len(attempts) > 1
        self.compile_s += compile_s
        self.solve_s += solve_s

    def info(self, status: str = "trivial") -> SolveInfo:
        """The answer's info; ``status`` applies only when no solver ran."""
        if self.num_solves == 0:
            return SolveInfo("none", status, (), float("nan"), 0, 0, 0.0, 0.0)
        return SolveInfo(self.solver, "optimal", self.attempts, self.tolerance, self.num_solves,
                         self.fallbacks, self.compile_s, self.solve_s)


class _Program:
    """A parametrised CVXPY problem, compiled once per solver (a ``cp.Problem`` caches one solving
    chain, so each solver of the chain gets its own ``Problem`` over the same expressions)."""

    def __init__(self, name: str, objective, constraints, params: dict, variables: dict):
        import cvxpy as cp

        self.name = name
        self.params, self.vars = params, variables
        self._objective, self._constraints = objective, constraints
        self.problem = cp.Problem(objective, constraints)
        self._by_solver = {}

    def is_dpp(self) -> bool:
        return self.problem.is_dpp()

    def _problem_for(self, solver):
        """The ``Problem`` for ``solver`` and the compile time paid now (DPP canonicalisation)."""
        import cvxpy as cp

        prob = self._by_solver.get(solver)
        if prob is not None:
            return prob, 0.0
        prob = self.problem if not self._by_solver else cp.Problem(self._objective, self._constraints)
        t0 = time.perf_counter()
        prob.get_problem_data(solver, enforce_dpp=True)
        compile_s = time.perf_counter() - t0
        self._by_solver[solver] = prob
        return prob, compile_s

    def solve(self, values: dict, tally: _Tally):
        """Set the parameters, run :data:`SOLVER_CHAIN` until status "optimal"; returns the problem."""
        import cvxpy as cp

        for k, v in values.items():
            self.params[k].value = v
        installed = set(cp.installed_solvers())
        attempts, compile_s, solve_s = [], 0.0, 0.0
        for label, solver, factor, opts in SOLVER_CHAIN:
            if solver not in installed:
                continue
            prob, c_s = self._problem_for(solver)
            compile_s += c_s
            tol = float(f"{factor * TOLERANCE[self.name]:.3g}")
            t0 = time.perf_counter()
            try:
                with warnings.catch_warnings():
                    # "Solution may be inaccurate": handled here, by trying the next solver
                    warnings.filterwarnings("ignore", message="Solution may be inaccurate")
                    prob.solve(solver=solver, warm_start=False, enforce_dpp=True, **opts(tol))
                status = prob.status
            except cp.error.SolverError:
                status = "solver_error"
            solve_s += time.perf_counter() - t0
            attempts.append((label, status))
            if status == "optimal":
                tally.add(label, tuple(attempts), tol, compile_s, solve_s)
                return prob
        raise ReferenceSolverError(self.name, attempts)


_PROGRAMS: dict = {}


def _program(key, build) -> _Program:
    """The compiled program for a structure ``key`` (built on first use, then re-used)."""
    prog = _PROGRAMS.get(key)
    if prog is None:
        if len(_PROGRAMS) >= 64:  # bound the memory: drop the oldest structure
            _PROGRAMS.pop(next(iter(_PROGRAMS)))
        prog = _PROGRAMS[key] = build()
    return prog


def _rate_per_band(cp, kind: str, x, coef):
    """``R_k(x_k B) / B`` [bit/s/Hz] for ``x`` in units of B: ``-rel_entr(x, x + a/B) / ln 2``
    (``coef = a/B``) or ``c x`` (``coef = c``, linear model); DPP with ``coef`` a parameter."""
    if kind == "shannon":
        return -cp.rel_entr(x, x + coef) / LN2
    return cp.multiply(coef, x)


def _rate_coef(rates: RateModel, idx, B: float) -> np.ndarray:
    return rates.a[idx] / B if rates.kind == "shannon" else rates.c[idx]


# ------------------------------------------------------------------------------------------
# synchronous split: bisection on the makespan over one re-solved feasibility problem
# ------------------------------------------------------------------------------------------
def _build_sync_bandwidth(kind: str, n: int) -> _Program:
    """``min sum_k x_k s.t. R_k(x_k B)/B >= n_k`` (x in units of B, n_k a parameter in bit/s/Hz)."""
    import cvxpy as cp

    coef = cp.Parameter(n, nonneg=True, name="rate_coef")
    need = cp.Parameter(n, nonneg=True, name="need")  # required rate [bit/s/Hz]
    x = cp.Variable(n, nonneg=True, name="x")  # bandwidth [units of B]
    cons = [_rate_per_band(cp, kind, x, coef) >= need]
    return _Program("sync-bandwidth", cp.Minimize(cp.sum(x)), cons, {"coef": coef, "need": need}, {"x": x})


def _build_sync_margin(kind: str, n: int) -> _Program:
    """``max g s.t. R_k(x_k B)/B >= g n_k, sum_k x_k <= 1``: D is feasible iff ``g* >= 1``."""
    import cvxpy as cp

    coef = cp.Parameter(n, nonneg=True, name="rate_coef")
    need = cp.Parameter(n, nonneg=True, name="need")  # required rate [bit/s/Hz]
    x = cp.Variable(n, nonneg=True, name="x")  # bandwidth [units of B]
    g = cp.Variable(name="g")  # common rate margin
    cons = [_rate_per_band(cp, kind, x, coef) >= g * need, cp.sum(x) <= 1]
    return _Program("sync-split", cp.Maximize(g), cons, {"coef": coef, "need": need}, {"x": x, "g": g})


class SyncSplitReference:
    """Synchronous FDMA split for fixed draft lengths, by bisection over one re-solved CVXPY problem.

    For a trial makespan ``D`` the required rates are ``n_k = L_k S_k / (D - L_k tau_k)``
    [bit/s]. The bisection re-solves the feasibility problem (the required rates, in bit/s/Hz,
    are a ``cp.Parameter``; bandwidth in units of B)::

        g*(D) = max g   s.t.  R_k(x_k B) / B >= g n_k / B,   sum_k x_k <= 1,   x >= 0

    and ``D`` is feasible iff ``g*(D) >= 1`` (the band carries the required rates, with margin
    ``g* - 1``). This is the same test as ``min sum_k x_k <= 1`` for the minimal-bandwidth problem
    (:meth:`min_total_bandwidth`) but well conditioned where a weak user works near its rate limit
    ``R_k(inf)``: there its bandwidth is ill-determined (``x ~ 1/(1 - n_k/R_k(inf))``), its rate
    margin is not. Both problems are compiled once per (rate model, number of drafting users).

    Parameters
    ----------
    scenario : Scenario
    L : int array, shape [K]
        Draft lengths (users with ``L_k = 0`` take no bandwidth).
    rates : RateModel, optional
        Defaults to ``RateModel.of(scenario)``.
    bits_per_token : array broadcasting to [K], optional
        Per-user payload ``S_k`` [bit/token] (UL/DL modes); defaults to the scenario's ``S``.

    Attributes
    ----------
    info : SolveInfo
        How the last answer was obtained.
    """

    def __init__(self, scenario: Scenario, L, rates: RateModel | None = None, bits_per_token=None):
        rates = rates or RateModel.of(scenario)
        L = np.asarray(L)
        K = L.shape[-1]
        S = scenario.payload.bits_per_token if bits_per_token is None else bits_per_token
        S = np.broadcast_to(np.asarray(S, dtype=float), (K,))
        self.B = float(scenario.radio.bandwidth_hz)
        self._idx = idx = np.flatnonzero(L > 0)
        self.n = idx.size
        self._L, self._tau, self._S = L[idx].astype(float), scenario.tau[idx], S[idx]
        self._coef = _rate_coef(rates, idx, self.B)
        self._rmax = rates.max_rate(idx)  # R_k(inf) [bit/s]
        self._r_band = rates.rate(np.full(self.n, self.B), idx)  # R_k(B) [bit/s]
        self._r_equal = rates.rate(np.full(self.n, self.B / max(self.n, 1)), idx)  # R_k(B/n)
        self._kind = rates.kind
        self.info = _NO_SOLVE

    def _need(self, D: float):
        """Required rates [bit/s] at makespan ``D`` and whether they are reachable at all."""
        slack = D - self._L * self._tau
        with np.errstate(divide="ignore"):
            need = np.where(slack > 0, self._L * self._S / np.where(slack > 0, slack, 1.0), np.inf)
        return need, bool(np.all(need < self._rmax))

    def min_total_bandwidth(self, D: float) -> float:
        """Smallest total bandwidth [Hz] with which every drafting user finishes by ``D`` [s].

        ``0`` when nobody drafts, ``inf`` when some user cannot finish by ``D`` at any bandwidth
        (``D <= L_k tau_k`` or the required rate ``>= R_k(inf)``: decided without a solver, and
        then ``info.status == "infeasible"``). Raises :class:`ReferenceSolverError` when no solver
        reaches "optimal". Where a user works near its rate limit its bandwidth is ill-conditioned
        and this value is accurate to ~1e-5 relative only (:meth:`min_makespan` uses :meth:`margin`).
        """
        tally = _Tally()
        if self.n == 0:
            self.info = _NO_SOLVE
            return 0.0
        need, reachable = self._need(D)
        if not reachable:
            self.info = tally.info("infeasible")
            return np.inf
        prog = _program(("sync-bandwidth", self._kind, self.n), lambda: _build_sync_bandwidth(self._kind, self.n))
        prog.solve({"coef": self._coef, "need": need / self.B}, tally)
        self.info = tally.info()
        return float(np.sum(prog.vars["x"].value)) * self.B

    def _margin(self, need, tally) -> float:
        prog = _program(("sync-split", self._kind, self.n), lambda: _build_sync_margin(self._kind, self.n))
        prog.solve({"coef": self._coef, "need": need / self.B}, tally)
        return float(prog.vars["g"].value)

    def margin(self, D: float) -> float:
        """``g*(D)``: the largest common factor by which the band can scale the required rates at
        makespan ``D`` [s] (``>= 1`` iff ``D`` is feasible); ``0`` where some user cannot finish by
        ``D`` at any bandwidth (decided without a solver)."""
        tally = _Tally()
        need, reachable = self._need(D)
        if self.n == 0 or not reachable:
            self.info = tally.info("trivial" if self.n == 0 else "infeasible")
            return np.inf if self.n == 0 else 0.0
        g = self._margin(need, tally)
        self.info = tally.info()
        return g

    def _fits(self, D: float, tally) -> bool:
        """``g*(D) >= 1``; the analytic checks come first (then no solver runs)."""
        need, reachable = self._need(D)
        if not reachable or np.any(need > self._r_band):  # one user alone would need more than B
            return False
        return self._margin(need, tally) >= 1.0

    def min_makespan(self, rel_tol: float = 1e-9) -> float:
        """Makespan ``D*`` [s] of the optimal split, to ``rel_tol`` relative (the upper end).

        Bisection between ``max_k (L_k tau_k + L_k S_k / R_k(B))`` (a user alone with the whole
        band: a lower bound) and the makespan of the equal split (feasible), one re-solve of the
        feasibility problem per step.
        """
        tally = _Tally()
        if self.n == 0:
            self.info = _NO_SOLVE
            return 0.0
        lo = float(np.max(self._L * self._tau + self._L * self._S / self._r_band))
        hi = float(np.max(self._L * self._tau + self._L * self._S / self._r_equal))
        hi = max(hi, lo)
        while hi - lo > rel_tol * hi:
            mid = 0.5 * (lo + hi)
            if self._fits(mid, tally):
                hi = mid
            else:
                lo = mid
        self.info = tally.info()
        return hi


def min_total_bandwidth(scenario: Scenario, L, D: float, rates: RateModel | None = None, *,
                        return_info: bool = False):
    """Smallest total bandwidth [Hz] that lets every drafting user finish by ``D`` [s].

    ``inf`` only where infeasible by the analytic test (:meth:`SyncSplitReference.min_total_bandwidth`);
    a solver failure raises :class:`ReferenceSolverError`. With ``return_info``: ``(value, SolveInfo)``.
    """
    ref = SyncSplitReference(scenario, L, rates)
    value = ref.min_total_bandwidth(D)
    return (value, ref.info) if return_info else value


def min_makespan_cvxpy(scenario: Scenario, L, rel_tol: float = 1e-9, rates: RateModel | None = None, *,
                       return_info: bool = False):
    """Makespan ``D*`` [s] of the synchronous split for draft lengths ``L`` [K], by bisection over
    one re-solved CVXPY feasibility problem (:class:`SyncSplitReference`).

    With ``return_info``: ``(D, SolveInfo)``.
    """
    ref = SyncSplitReference(scenario, L, rates)
    D = ref.min_makespan(rel_tol)
    return (D, ref.info) if return_info else D


# ------------------------------------------------------------------------------------------
# asynchronous split
# ------------------------------------------------------------------------------------------
def _build_async(kind: str, n: int) -> _Program:
    """``min sum_k omega_k / s_k  s.t.  s_k <= 1/mu_k + v_k,  rho_k v_k <= R_k(x_k B)/B,  sum_k x_k <= 1``."""
    import cvxpy as cp

    coef = cp.Parameter(n, nonneg=True, name="rate_coef")
    omega = cp.Parameter(n, nonneg=True, name="omega")  # loss weights, sum 1
    inv_mu = cp.Parameter(n, nonneg=True, name="inv_mu")  # 1 / mu_k
    rho = cp.Parameter(n, nonneg=True, name="rho")  # mu_k C_k / (A_k B) [bit/s/Hz]
    x = cp.Variable(n, nonneg=True, name="x")  # bandwidth [units of B]
    v = cp.Variable(n, nonneg=True, name="v")  # u_k / mu_k
    sv = cp.Variable(n, name="s")  # (1 + u_k) / mu_k
    cons = [sv <= inv_mu + v, cp.multiply(rho, v) <= _rate_per_band(cp, kind, x, coef), cp.sum(x) <= 1]
    return _Program("async-split", cp.Minimize(omega @ cp.inv_pos(sv)), cons,
                    {"coef": coef, "omega": omega, "inv_mu": inv_mu, "rho": rho}, {"x": x, "v": v})


class AsyncSplitReference:
    """Optimal asynchronous split for fixed draft lengths, from one re-solved CVXPY problem.

    ``max_b sum_k N_k / (A_k + C_k / R_k(b_k)) s.t. sum_k b_k <= B``. With ``u_k = A_k R_k / C_k``
    (round time without upload over upload time) each term is ``(N_k/A_k) u_k/(1 + u_k)``, concave
    in the rate; the program minimises the goodput lost to the uploads::

        sum_k (N_k/A_k) / (1 + u_k)  =  Lambda sum_k omega_k / s_k,      s_k = (1 + u_k) / mu_k,

    with ``mu_k = max(1, u_k at the equal split)`` so that ``v_k = u_k / mu_k`` and ``s_k`` are
    O(1) even for users whose upload is negligible (``u_k`` up to ~1e6), ``omega_k`` the weights
    ``N_k / (A_k mu_k)`` normalised by their sum ``Lambda``, bandwidth ``x`` in units of B and the
    rates in bit/s/Hz (module docstring). Compiled once per (rate model, number of drafting users)
    and re-solved for new ``N``.

    Parameters
    ----------
    scenario : Scenario
    L : int array, shape [K]
        Draft lengths; ``A_k``, ``C_k`` from :func:`spinlib.rounds.async_terms`.
    rates : RateModel, optional
    bits_per_token : array broadcasting to [K], optional
        Per-user payload ``S_k`` [bit/token]; defaults to the scenario's ``S``.
    """

    def __init__(self, scenario: Scenario, L, rates: RateModel | None = None, bits_per_token=None):
        from ..rounds import async_terms

        rates = rates or RateModel.of(scenario)
        self.L = np.asarray(L)
        self.A, C = async_terms(scenario, self.L, bits_per_token)
        self.B = float(scenario.radio.bandwidth_hz)
        self._idx = idx = np.flatnonzero(self.L > 0)
        self.n = idx.size
        self._coef = _rate_coef(rates, idx, self.B)
        h = C[idx] / (self.A[idx] * self.B)  # rate [bit/s/Hz] at which the upload takes A_k
        r_equal = rates.rate(np.full(self.n, self.B / max(self.n, 1)), idx) / self.B
        self._mu = np.maximum(1.0, r_equal / h)
        self._rho = self._mu * h
        self._kind = rates.kind
        self.info = _NO_SOLVE

    def solve(self, tokens):
        """Optimal split for expected tokens ``tokens`` [K] (``E[N_k](L_k)``).

        Returns
        -------
        b : ndarray, shape [K]
            Bandwidth [Hz] (0 for non-drafting users).
        G : float
            Asynchronous goodput [token/s], the non-drafting users' ``N_k / A_k`` included.
        """
        N = np.asarray(tokens, dtype=float)
        off = self.L == 0
        fixed = float(np.sum(N[off] / self.A[off]))
        b = np.zeros(self.L.size)
        wk = N[self._idx] / self.A[self._idx]  # goodput of user k at infinite rate
        lam = float(np.sum(wk / self._mu))
        if self.n == 0 or lam <= 0:
            self.info = _NO_SOLVE
            return b, fixed + float(np.sum(wk))
        tally = _Tally()
        prog = _program(("async", self._kind, self.n), lambda: _build_async(self._kind, self.n))
        prob = prog.solve({"coef": self._coef, "omega": wk / self._mu / lam, "inv_mu": 1.0 / self._mu,
                           "rho": self._rho}, tally)
        self.info = tally.info()
        b[self._idx] = np.asarray(prog.vars["x"].value) * self.B
        return b, fixed + float(np.sum(wk)) - lam * float(prob.value)


def async_bandwidth_cvxpy(scenario: Scenario, L, tokens, rates: RateModel | None = None, *,
                          return_info: bool = False):
    """Optimal asynchronous split for fixed ``L`` [K]: ``(b [K] in Hz, goodput in token/s)``
    (:class:`AsyncSplitReference`); with ``return_info``: ``(b, G, SolveInfo)``."""
    ref = AsyncSplitReference(scenario, L, rates)
    b, G = ref.solve(tokens)
    return (b, G, ref.info) if return_info else (b, G)


# ------------------------------------------------------------------------------------------
# downlink power split
# ------------------------------------------------------------------------------------------
def _build_dl(n: int) -> _Program:
    """``min e s.t. r_k phi_k <= log(1 + snr_k z_k), e >= cs_k + 1/phi_k, sum_k x0_k z_k <= 1``."""
    import cvxpy as cp

    snr = cp.Parameter(n, nonneg=True, name="snr")  # q_k x0_k: SNR at the power unit x0_k P_BS
    r = cp.Parameter(n, nonneg=True, name="r")  # d_k ln2 / (w E0) [nat]
    cs = cp.Parameter(n, nonneg=True, name="cs")  # c_k / E0
    x0 = cp.Parameter(n, nonneg=True, name="x0")  # power unit of device k [P_BS]
    z = cp.Variable(n, nonneg=True, name="z")  # power [units of x0_k P_BS]
    phi = cp.Variable(n, nonneg=True, name="phi")  # 1 / (download time) [1/E0]
    e = cp.Variable(name="e")  # DL phase time [E0]
    cons = [cp.multiply(r, phi) <= cp.log(1 + cp.multiply(snr, z)), e >= cs + cp.inv_pos(phi), x0 @ z <= 1]
    return _Program("dl-power", cp.Minimize(e), cons, {"snr": snr, "r": r, "cs": cs, "x0": x0},
                    {"z": z, "e": e})


class DownlinkPowerReference:
    """Optimal DL power split of one scenario, from one re-solved CVXPY problem per number of DL devices.

    ``min_p max_k c_k + d_k / r_k(p_k)``, ``r_k(p) = w log2(1 + p g_k/(N0 w))``, ``w = W / n_DL``,
    ``sum_k p_k <= P_BS`` (:mod:`spinlib.control.power`), in the scaled epigraph form of the
    module docstring; the program depends only on ``n_DL`` (all data are parameters).

    Parameters
    ----------
    scenario : Scenario
        Uses ``downlink.power_w`` (``P_BS``), ``downlink.bandwidth_hz`` (``W``), the gains ``g_k``
        and the noise PSD ``N0``.

    Attributes
    ----------
    info : SolveInfo
        How the last answer was obtained.
    """

    def __init__(self, scenario: Scenario):
        self.P = float(scenario.downlink.power_w)
        self.W = float(scenario.downlink.bandwidth_hz)
        self._a_w = scenario.gain / scenario.radio.noise_psd_w_per_hz  # SNR per watt times w [Hz/W]
        self.info = _NO_SOLVE

    def solve(self, dl_bits, correction_s):
        """Optimal split for DL bits ``d`` [bit] and correction times ``c`` [s], both shape [K].

        Returns
        -------
        E : float
            DL phase time [s] (0 where no device downloads).
        p : ndarray, shape [K]
            Power [W]; 0 where ``d_k = 0``.
        """
        d = np.asarray(dl_bits, dtype=float)
        c = np.broadcast_to(np.asarray(correction_s, dtype=float), d.shape)
        idx = np.flatnonzero(d > 0)
        n = idx.size
        p_out = np.zeros(d.size)
        if n == 0:
            self.info = _NO_SOLVE
            return 0.0, p_out
        w = self.W / n
        q = self.P * self._a_w[idx] / w  # SNR at full power
        dk, ck = d[idx], c[idx]
        E0 = float(np.max(ck + dk * LN2 / (w * np.log1p(q))))  # slowest device alone, full power
        need = np.expm1(dk * LN2 / (w * (E0 - ck))) / q  # share needed to finish by E0 (<= 1)
        x0 = np.sqrt(np.clip(need, 1e-18, 1.0))  # power unit: balances the cone and budget ranges
        tally = _Tally()
        prog = _program(("dl", n), lambda: _build_dl(n))
        prog.solve({"snr": q * x0, "r": dk * LN2 / (w * E0), "cs": ck / E0, "x0": x0}, tally)
        self.info = tally.info()
        p_out[idx] = np.asarray(prog.vars["z"].value) * x0 * self.P
        return float(prog.vars["e"].value) * E0, p_out


def downlink_power_cvxpy(scenario: Scenario, dl_bits, correction_s, *, return_info: bool = False):
    """Optimal DL power split from CVXPY (:class:`DownlinkPowerReference`).

    Parameters
    ----------
    dl_bits : array, shape [K]
        ``d_k`` [bit] (0: the device takes no part in the DL phase).
    correction_s : array, shape [K]
        ``c_k`` [s].
    return_info : bool
        Also return the :class:`SolveInfo`.

    Returns
    -------
    ``(E, p)`` -- DL phase time [s] and power [W], shape [K] -- or ``(E, p, SolveInfo)``.
    """
    ref = DownlinkPowerReference(scenario)
    E, p = ref.solve(dl_bits, correction_s)
    return (E, p, ref.info) if return_info else (E, p)
