"""Multi-user controllers that re-plan every synchronous round on the current channel.

Paper 1's solver (:func:`spinlib.control.heterogeneous.solve_heterogeneous_sync`) plans draft
lengths ``L_k`` and uplink bandwidth ``b_k`` once, on the *average* channel. Under block fading
(:class:`spinlib.emulator.Fading`) the testbed finds that such a plan can lose to server-only
decoding. Here a controller sees the current power-gain factors ``h_r = h[r, :]`` at the start of
round ``r`` (CSI at round start) and returns that round's plan.

Every controller is a decider of the one decision seam (:mod:`spinlib.decision`): ``choose(ctx)``
returns the round's :class:`~spinlib.decision.Plan` (lengths and bandwidth; lengths alone get paper 1's
split) from a :class:`~spinlib.decision.BandContext` (the seam's :class:`~spinlib.decision.RoundContext` plus ``ctx.h``, the
round's fading, and ``ctx.rates``, the rate model on it), ``stop`` keeps the planned lengths (this
player has no draft observables) and ``update(out)`` learns from a :class:`~spinlib.decision.BandOutcome` (the
seam's :class:`~spinlib.decision.Outcome` plus each user's bandwidth and upload time). Any decider
that does not stop on the draft's observables plays here, e.g. :class:`spinlib.decision.FixedLength`
(:func:`spinlib.online.replan.play`).

The round (the testbed's synchronous round, :func:`spinlib.emulator.sync_clock`)::

    R_k(b; h) = b log2(1 + a_k h / b)     (a_k = P_k g_k / N0 [Hz]; or the linear model at a_k h)
    D_r = max_k ( L_rk tau_k + L_rk S / R_k(b_rk; h_rk) )                     makespan [s]
    T_r = D_r + t0 + t1 sum_k (L_rk + 1) + T_fb + T_acc                        round time [s]
    N_rk = 1 + A_rk,  P(A_rk >= i) = pi_k(i) for i <= L_rk                     tokens
    G = sum_r sum_k N_rk / sum_r T_r                                          goodput [token/s]

with ``A`` drawn by :func:`spinlib.acceptance.sample_accepted` (i.i.d. ``pi_k(i) = alpha_k^i``
by default) and the round's times by the emulator's kernels (:func:`spinlib.emulator.sync_clock`
on the realised per-round lengths and bandwidths). Device ``k``'s energy in round ``r``
(:class:`spinlib.online.energy.EnergyModel`, one per device)::

    E_rk = L_rk e_k + P_k up_rk + p_idle (T_r - L_rk tau_k - up_rk)      [J],   up_rk = L_rk S / R_k(b_rk; h_rk)

with ``e_k = P_device tau_k`` from an :data:`~spinlib.online.energy.ENERGY_PRESETS` entry and
``P_k`` the scenario's transmit power (the one the rate model uses).

Controllers (registry :func:`register_multiuser_controller`; add your own in one file)
------------------------------------------------------------------------------------
* ``plan-on-average``: heterogeneous-sync on the average channel, kept every round.
* ``server-only``: paper 1's ``server-only`` policy (``L = 0``).
* ``replan-ratio``: heterogeneous-sync re-solved each round on the current channel (gains
  ``g_k h_rk``). It maximises the *per-round ratio* ``E[N_r] / T_r``, which is not the long-run
  goodput ``sum N / sum T``: a round on a bad channel is short-changed in the ratio of sums.
* ``replan-dinkelbach``: renewal-reward-correct. The long-run goodput of a stationary policy
  ``h -> a(h)`` is ``E[N(a(h))] / E[T(a(h); h)]``; by Dinkelbach's theorem its maximiser solves,
  *per channel state*, ``max_a E[N(a)] - lambda* T(a; h)`` with ``lambda*`` the optimal goodput.
  Each round: ``max_{L, b} sum_k E[N_k](L_k) - lambda_r T_r(L, b; h_r)`` with ``lambda_r`` the
  running goodput estimate (accumulated tokens / accumulated time, started with one virtual
  round of the average plan at its predicted goodput).
* ``replan-bandwidth``: the average plan's lengths, bandwidth re-split each round on the current
  channel by paper 1's optimal split for fixed lengths
  (:func:`spinlib.control.bandwidth.min_makespan_bandwidth`, equal finish times). Cheap, and
  shows that the loss of the average plan is in its lengths: it recovers almost nothing.
* ``replan-drop``: the average plan's lengths with a subset of users silenced, chosen among
  ``2 n + 1`` nested / single drops by the Dinkelbach objective (one batched evaluation).
* ``replan-coordinate``: local search on the Dinkelbach objective from the previous round's
  lengths (a cheap rule; notebook 10 measures how far each cheap rule stays below
  ``replan-dinkelbach``).
* ``energy-queue`` (GELATO-style, one virtual queue per device)::

      Q_k(r+1) = max(Q_k(r) + E_rk - Ebar_k, 0)
      max_L  V (sum_k E[N_k](L_k) - lambda_r T_r(L; h_r)) - sum_k Q_k(r) E_rk(L; h_r)

  with the bandwidth of every candidate ``L`` from paper 1's split for fixed lengths (an extension
  none of the papers has: GELATO's energy queue on paper 1's multi-user round).

The per-round problem of ``replan-dinkelbach`` and ``energy-queue`` and its exact maximiser are in
:mod:`spinlib.online.round_problem`; the simulator in :mod:`spinlib.online.replan` (:func:`~spinlib.online.replan.run_replan`),
the notebook's study in :mod:`spinlib.studies.replanning` (:func:`~spinlib.studies.replanning.replan_under_fading`);
the devices' energy (:func:`spinlib.online.energy.device_energy`) in :mod:`spinlib.online.energy`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..channel import RateModel
# the seam's band types live in spinlib.decision; imported here for this module and re-exported
from ..decision import BandContext, BandOutcome, Outcome, Plan, check_plan, never_stops  # noqa: F401
from ..control.heterogeneous import solve_heterogeneous_sync
from ..rounds import Allocation, evaluate
from .deciders import DECIDERS, DeciderEntry, Spec, check_playable, decider_spec, playable, register_decider
from ..registry import Registry
from ..scenario import Scenario
from ..validation import ValidationError, check_int_range, check_nonnegative, check_positive
from .energy import _energy_arrays, round_energy
from .registry import parse_params
from .round_problem import maximise_round, round_objective

MAX_SPARSE_CACHE = 4096  # replan-ratio: solutions kept per exact channel state (static / Markov fading repeat)


# ----------------------------------------------------------------------------------------------
# the registry of multi-user controllers
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MultiUserEnv:
    """What a multi-user controller knows before the first round.

    Parameters
    ----------
    scenario : Scenario
        The cell (average channel ``g_k``).
    L_max : int
        Largest draft length.
    table : float array [K, L_max + 1]
        ``E[N_k](L)`` (:func:`spinlib.acceptance.tokens_table`, the solvers' model).
    average_plan : Allocation
        heterogeneous-sync on the average channel (solved once per scenario).
    energy : tuple of EnergyModel, length K
        The devices' energy models (:func:`device_energy`).
    rounds : int
        Rounds of the run (0: not known).
    node_budget : int or None
        Nodes of certified per-round search one controller may use over the run
        (:data:`spinlib.online.replan.REPLAN_NODE_BUDGET`; ``None``: no budget, ``allow_long``).
    """

    scenario: Scenario
    L_max: int
    table: np.ndarray
    average_plan: Allocation
    energy: tuple
    rounds: int = 0
    node_budget: int | None = None

    @property
    def K(self) -> int:
        return self.scenario.num_users


class MultiUserController:
    """Base class: a decider (:mod:`spinlib.decision`) built on a :class:`MultiUserEnv`.

    ``choose(ctx) -> Plan(L [K] int, b [K] Hz)`` every round (``b = None``: paper 1's split for
    the chosen lengths); ``update(out)`` after it; ``info()`` adds diagnostics to the result
    (solver statuses, energy debt).
    """

    def __init__(self, env: MultiUserEnv):
        self.env = env

    def choose(self, ctx: BandContext) -> Plan:
        raise NotImplementedError

    @never_stops
    def stop(self, ctx: BandContext, L_ref: np.ndarray) -> np.ndarray:
        """The planned lengths: the multi-user player has no draft observables."""
        return L_ref

    def update(self, out: BandOutcome) -> None:
        """Learn from the realised round."""

    def info(self) -> dict:
        return {}


MULTIUSER_FAMILIES = ("multi-user", "user")
REGISTRY: Registry[DeciderEntry] = DECIDERS  # the one registry of deciders (spinlib.online.deciders)
MULTIUSER_CONTROLLERS: dict[str, DeciderEntry] = REGISTRY.entries


def register_multiuser_controller(name: str, description: str, *, family: str = "user", replace: bool = False):
    """Class decorator: register a :class:`MultiUserController` subclass as ``name`` in the one decider
    registry (:data:`spinlib.online.deciders.DECIDERS`), needing the cell (``cell-env``).

    Parameters are the keyword arguments (with defaults) of ``__init__(self, env, ...)``, as in
    :func:`spinlib.online.registry.register_controller` (the same rules: :class:`spinlib.registry.Registry`).
    From your own file::

        from spinlib.online.multiuser import MultiUserController, Plan, register_multiuser_controller

        @register_multiuser_controller("equal-split", "L for everyone, equal bandwidth")
        class EqualSplit(MultiUserController):
            def __init__(self, env, L: int = 4):
                super().__init__(env)
                self.L = L

            def choose(self, ctx):
                K, B = self.env.K, self.env.scenario.radio.bandwidth_hz
                return Plan(np.full(K, self.L), np.full(K, B / K))

    then ``python -m spinlib replan cell.json --plugin my_controllers.py --controllers equal-split:L=3``.
    """
    if family not in MULTIUSER_FAMILIES:
        raise ValidationError(f"family must be one of {MULTIUSER_FAMILIES}, got {family!r}")
    return register_decider(name, description, env="cell-env", family=family, base=MultiUserController,
                            replace=replace)


def get_multiuser_controller(name: str) -> DeciderEntry:
    """The registered decider ``name`` (any that re-planning plays), or one line listing the registered names."""
    return check_playable(name, "replan")


def multiuser_controller_names(family: str | None = None) -> list[str]:
    """The registered deciders re-planning plays: the cell's controllers and the per-user ones."""
    return playable("replan", family)


def mspec(name: str, label: str = "", **params) -> Spec:
    """A checked :class:`~spinlib.online.deciders.Spec` of a decider re-planning plays."""
    check_playable(name, "replan")
    return decider_spec(name, label, **params)


def parse_mspec(text) -> Spec:
    """``"name"`` or ``"name:key=value,key=value"`` (:func:`spinlib.online.registry.parse_params`), or a spec."""
    if isinstance(text, Spec):
        return mspec(text.name, text.label, **text.kwargs)
    name, params = parse_params(text)
    return mspec(name, **params)


class SearchBudget:
    """The run's budget of certified per-round search (``replan-dinkelbach``, ``energy-queue``), in nodes.

    Every round's :func:`maximise_round` gets at most the nodes left. The run is refused (one line) when
    it spends the budget before its last round is solved in full, or earlier, from the third round on,
    when even its cheapest round so far repeated for every round left would need more than twice what
    is left (``used + min_round x (R - r) > 2 x budget``): the first rounds of these controllers are
    their most expensive (energy-queue's early rounds measured at 2.5-7x its mean), so a projection from
    the mean so far would refuse runs that fit. Node counts, not wall time: the same on every machine
    (about 10,000 nodes/s on this 2-core machine)."""

    def __init__(self, env: MultiUserEnv, name: str):
        self.budget, self.rounds, self.name = env.node_budget, env.rounds, name
        self.used, self.done, self.cheapest, self.left = 0, 0, None, None

    def max_nodes(self, own: int | None) -> int | None:
        """The node budget of this round's search: ``own`` (the controller's ``max_nodes``) or what is left."""
        if self.budget is None:
            return own
        self.left = self.budget - self.used
        if self.left <= 0:
            self._refuse()
        return self.left if own is None or own > self.left else own

    def spent(self, nodes: int) -> None:
        """Count a round's nodes; refuse the run (module docstring) when it cannot fit."""
        nodes = int(nodes)
        self.used += nodes
        self.done += 1
        self.cheapest = nodes if self.cheapest is None else min(self.cheapest, nodes)
        if self.budget is None:
            return
        if nodes >= self.left:  # the round stopped on what was left of the budget: it was not solved in full
            self._refuse()
        if self.done >= 3 and self.used + self.cheapest * (self.rounds - self.done) > 2 * self.budget:
            self._refuse()

    def _refuse(self):
        need = self.used + (self.cheapest or 0) * max(self.rounds - self.done, 0)
        raise ValidationError(f"{self.name}: the certified per-round search used {self.used:,} nodes in {self.done} of "
                              f"{self.rounds:,} rounds (at least {need:,} for the run at its cheapest round so far), "
                              f"past its budget of {self.budget:,} nodes; give it fewer rounds or max_nodes=N with N x "
                              f"rounds <= {self.budget:,} (each round's gap is reported), or allow_long=True "
                              f"(replan --allow-long) to run it")


# ----------------------------------------------------------------------------------------------
# the library's controllers
# ----------------------------------------------------------------------------------------------
def _check_nodes(max_nodes):
    return None if max_nodes is None else check_int_range("max_nodes", max_nodes, 1, 10**9)


def _check_gap(gap) -> float:
    gap = check_nonnegative("gap", gap)
    if gap >= 1:
        raise ValidationError(f"gap must be in [0, 1), got {gap!r}")
    return gap


@register_multiuser_controller("plan-on-average", "heterogeneous-sync solved once on the average channel, kept "
                               "every round (the testbed's baseline)", family="multi-user")
class PlanOnAverage(MultiUserController):
    def choose(self, ctx):
        return Plan(self.env.average_plan.L, self.env.average_plan.b)


class StaticPolicy(MultiUserController):
    """Any static policy of :func:`spinlib.control.solve` as a decider: its allocation ``(L, b)`` on the
    average channel, played every round. ``plan-on-average`` is ``static-policy`` of
    ``heterogeneous-sync`` and ``server-only`` that of ``server-only`` (the tests check both, bit for
    bit). The policy gets the env's ``L_max`` where it declares one, and ``draft_length`` when given
    (else its own default). A policy that chooses UL/DL modes (paper 2) is refused with one line:
    this player uploads every draft; an async policy's plan is played in the synchronous round.
    """

    def __init__(self, env: MultiUserEnv, policy: str = "heterogeneous-sync", draft_length: int | None = None):
        super().__init__(env)
        from ..control import get_policy, solve

        entry = get_policy(policy)  # one line listing the registered policies otherwise
        if entry.family == "paper2":
            raise ValidationError(f"static-policy: {policy!r} chooses UL/DL modes, which the shared band does not "
                                  f"play (every draft is uploaded); use a paper-1 policy or a baseline")
        params = {"L_max": env.L_max} if "L_max" in entry.params else {}
        if draft_length is not None:
            if "draft_length" not in entry.params:
                raise ValidationError(f"static-policy: {policy!r} takes no draft_length (its parameters: "
                                      f"{', '.join(entry.params) or 'none'})")
            params["draft_length"] = check_int_range("draft_length", draft_length, 0, env.L_max)
        a = solve(env.scenario, policy, **params)
        if a.modes is not None and any(m != "UL" for m in a.modes):
            raise ValidationError(f"static-policy: {policy!r} puts users in DL mode, which the shared band "
                                  f"does not play")
        self.policy = policy
        self.L, self.b = np.asarray(a.draft_lengths, dtype=np.int64), np.asarray(a.bandwidth_hz, dtype=float)

    def choose(self, ctx):
        return Plan(self.L, self.b)

    def info(self):
        return {"policy": self.policy}


@register_multiuser_controller("server-only", "paper 1's server-only policy: no drafting (L = 0)", family="multi-user")
class ServerOnly(StaticPolicy):
    """``static-policy`` of ``server-only`` under its own name (kept: specs and cached keys name it)."""

    def __init__(self, env: MultiUserEnv):
        super().__init__(env, "server-only")

    def info(self):
        return MultiUserController.info(self)


# (registered after server-only: the registry lists the controllers in this order)
register_multiuser_controller("static-policy", "a registered static policy (spinlib.control.solve: paper 1's "
                               "solvers, the baselines, a plugin's) solved once on the average channel and kept every "
                               "round", family="multi-user")(StaticPolicy)


@register_multiuser_controller("replan-ratio", "heterogeneous-sync re-solved every round on the current channel "
                               "(maximises the per-round ratio E[N]/T)", family="multi-user")
class ReplanRatio(MultiUserController):
    """Paper 1's solver on the round's channel (``rates`` with ``a_k h_rk``). Solutions are kept per
    exact channel state (``h`` bytes; static and Markov fading repeat states, nothing is rounded).

    ``max_nodes``: node budget of the solver's branch-and-bound per round (after its local search),
    ``None`` for its default (to the tolerance 1e-9). The default 32 trades a little optimality
    for speed; the rounds it stopped on the budget are counted in ``info()["solver_status"]``.
    """

    def __init__(self, env: MultiUserEnv, max_nodes: int | None = 32):
        super().__init__(env)
        self.max_nodes = _check_nodes(max_nodes)
        self._cache: dict = {}
        self.status: dict = {}

    def choose(self, ctx):
        key = ctx.h.tobytes()
        hit = self._cache.get(key)
        if hit is None:
            a = solve_heterogeneous_sync(self.env.scenario, self.env.L_max, rates=ctx.rates, max_nodes=self.max_nodes)
            hit = (a.L, np.asarray(a.b), a.info["status"])
            if len(self._cache) < MAX_SPARSE_CACHE:
                self._cache[key] = hit
        self.status[hit[2]] = self.status.get(hit[2], 0) + 1
        return Plan(hit[0], hit[1])

    def info(self):
        return {"solver_status": dict(self.status)}


LAMBDA_TOKENS = ("expected", "realised")


class _RunningGoodput:
    """``lambda_r = (G_0 T_0 + sum_{s<r} N_s) / (T_0 + sum_{s<r} T_s)``: accumulated tokens over
    accumulated time, started by one virtual round of the average plan (its predicted goodput
    ``G_0`` over its round time ``T_0``). ``tokens="expected"`` accumulates ``sum_k E[N_k](L_sk)``
    of the played lengths (the same limit as the realised tokens, without their acceptance noise),
    ``"realised"`` the tokens the rounds produced."""

    def __init__(self, env: MultiUserEnv, tokens: str = "expected"):
        if tokens not in LAMBDA_TOKENS:
            raise ValidationError(f"lambda_tokens must be one of {LAMBDA_TOKENS}, got {tokens!r}")
        ev = evaluate(env.scenario, env.average_plan)
        T0 = float(ev.round_time_s[0])
        self.N_sum, self.T_sum = ev.goodput_tokens_per_s * T0, T0
        self.table, self.expected = env.table, tokens == "expected"

    @property
    def value(self) -> float:
        return self.N_sum / self.T_sum

    def add(self, out: Outcome) -> None:
        if self.expected:
            self.N_sum += float(self.table[np.arange(self.table.shape[0]), out.L].sum())
        else:
            self.N_sum += float(out.N.sum())
        self.T_sum += float(np.max(out.T))  # the synchronous round's time (every user's)


@register_multiuser_controller("replan-dinkelbach", "every round max E[N] - lambda T on the current channel, "
                               "lambda the running goodput (long-run goodput, renewal-reward)", family="multi-user")
class ReplanDinkelbach(MultiUserController):
    """``max_L sum_k E[N_k](L_k) - lambda_r T(L; h_r)`` with paper 1's split (module docstring),
    solved by :func:`maximise_round` to the relative tolerance ``gap`` (``max_nodes``: its node
    budget per round, ``None``: none)."""

    def __init__(self, env: MultiUserEnv, gap: float = 1e-9, max_nodes: int | None = None,
                 lambda_tokens: str = "expected"):
        super().__init__(env)
        self.gap = _check_gap(gap)
        self.max_nodes = _check_nodes(max_nodes)
        self.lam = _RunningGoodput(env, lambda_tokens)
        self.prev = env.average_plan.L
        self.t1L = env.scenario.server.t1_s_per_token * np.arange(env.L_max + 1)[None, :]
        self.status: dict = {}
        self.search = SearchBudget(env, "replan-dinkelbach")

    def choose(self, ctx):
        lam = self.lam.value
        sol = maximise_round(self.env.scenario, ctx.rates, self.env.table - lam * self.t1L, np.zeros(self.env.K), lam,
                             seeds=(self.prev, self.env.average_plan.L), gap=self.gap,
                             max_nodes=self.search.max_nodes(self.max_nodes))
        self.search.spent(sol.nodes)
        self.status[sol.status] = self.status.get(sol.status, 0) + 1
        self.prev = sol.L
        return Plan(sol.L, sol.b)

    def update(self, out):
        self.lam.add(out)

    def info(self):
        return {"solver_status": dict(self.status), "final_lambda": self.lam.value, "search_nodes": self.search.used}


@register_multiuser_controller("replan-bandwidth", "bandwidth only: the average plan's lengths, bandwidth re-split "
                               "every round on the current channel (paper 1's split for fixed lengths)",
                               family="multi-user")
class ReplanBandwidth(MultiUserController):
    def choose(self, ctx):
        return Plan(self.env.average_plan.L)  # no bandwidth: the player's split, paper 1's for fixed lengths


@register_multiuser_controller("replan-drop", "a cheap rule: the average plan's lengths with the users whose channel "
                               "is worst silenced, the subset chosen every round by E[N] - lambda T",
                               family="multi-user")
class ReplanDrop(MultiUserController):
    """The average plan's lengths ``Lbar``; each round the candidates silence the ``j`` drafting users
    that are slowest on the current channel (per-token time ``tau_k + S / R_k(B / n; h_rk)`` at the
    equal share, ``j = 0..n``) or any one drafting user; the one maximising
    ``sum_k E[N_k](L_k) - lambda_r T(L; h_r)`` (paper 1's split, ``lambda_r`` the running goodput)
    is played. One batched evaluation of ``2 n + 1`` vectors per round, no search."""

    def __init__(self, env: MultiUserEnv, lambda_tokens: str = "expected"):
        super().__init__(env)
        self.lam = _RunningGoodput(env, lambda_tokens)
        self.t1 = env.scenario.server.t1_s_per_token

    def choose(self, ctx):
        s, Lbar = self.env.scenario, self.env.average_plan.L
        act = np.flatnonzero(Lbar > 0)
        if act.size == 0:
            return Plan(Lbar, self.env.average_plan.b)
        B, S = s.radio.bandwidth_hz, s.payload.bits_per_token
        per_token = s.tau[act] + S / ctx.rates.rate(np.full(s.num_users, B / act.size))[act]
        order = act[np.argsort(-per_token, kind="stable")]
        cand = np.tile(Lbar, (2 * act.size + 1, 1))
        for j in range(1, act.size + 1):
            cand[j, order[:j]] = 0
        cand[act.size + 1 + np.arange(act.size), act] = 0
        lam = self.lam.value
        u = self.env.table - lam * self.t1 * np.arange(self.env.L_max + 1)[None, :]
        J, _, b = round_objective(s, ctx.rates, u, np.zeros(s.num_users), lam, cand)
        i = int(np.argmax(J))
        return Plan(cand[i], b[i])

    def update(self, out):
        self.lam.add(out)


@register_multiuser_controller("replan-coordinate", "a cheap rule: local search on E[N] - lambda T from the previous "
                               "round's lengths (one user's length, +-1 on all, +-1 on pairs)", family="multi-user")
class ReplanCoordinate(MultiUserController):
    """The per-round objective of ``replan-dinkelbach`` improved by local search instead of solved.

    Start: the best of the previous round's lengths, the average plan's and ``L = 0`` on the current
    channel. Each sweep evaluates, in one batch, every length of every single user with the others
    fixed, ``+-1`` on every drafting user at once, and (``K <= 8``) ``+-1`` on any two users, and
    moves to the best, until no move improves or ``max_sweeps``. A local optimum, not certified.
    """

    def __init__(self, env: MultiUserEnv, max_sweeps: int = 8, lambda_tokens: str = "expected"):
        super().__init__(env)
        self.max_sweeps = check_int_range("max_sweeps", max_sweeps, 1, 1000)
        self.lam = _RunningGoodput(env, lambda_tokens)
        self.prev = env.average_plan.L
        self.t1 = env.scenario.server.t1_s_per_token

    def _moves(self, L):
        K, P = self.env.K, self.env.L_max + 1
        single = np.tile(L, (K * P, 1))
        single[np.arange(K * P), np.repeat(np.arange(K), P)] = np.tile(np.arange(P), K)
        moves = [single, (L + (L > 0))[None], np.maximum(L - 1, 0)[None]]
        if K <= 8:
            i, j = np.triu_indices(K, 1)
            for si in (1, -1):
                for sj in (1, -1):
                    m = np.tile(L, (i.size, 1))
                    m[np.arange(i.size), i] += si
                    m[np.arange(i.size), j] += sj
                    moves.append(m)
        cand = np.vstack(moves)
        return cand[np.all((cand >= 0) & (cand < P), axis=1)]

    def choose(self, ctx):
        s, K, P = self.env.scenario, self.env.K, self.env.L_max + 1
        lam = self.lam.value
        u = self.env.table - lam * self.t1 * np.arange(P)[None, :]
        w = np.zeros(K)
        start = np.vstack([self.prev, self.env.average_plan.L, np.zeros(K, dtype=int)])
        J, _, bs = round_objective(s, ctx.rates, u, w, lam, start)
        i = int(np.argmax(J))
        L, J0, b = start[i], float(J[i]), bs[i]
        for _ in range(self.max_sweeps):
            cand = self._moves(L)
            J, _, bs = round_objective(s, ctx.rates, u, w, lam, cand)
            i = int(np.argmax(J))
            if J[i] <= J0 + 1e-12 * max(abs(J0), 1.0):
                break
            L, J0, b = cand[i], float(J[i]), bs[i]
        self.prev = L
        return Plan(L, b)

    def update(self, out):
        self.lam.add(out)


def _check_V(V) -> float:
    """``float(V)``, or one line for bools, strings, NaN, infinities, integers beyond floats and V <= 0."""
    try:
        return check_positive("V", V)
    except ValidationError as e:
        raise ValidationError(f"V must be a finite number > 0 [J^2/token] ({e})") from None


@register_multiuser_controller("energy-queue", "drift-plus-penalty per device: every round max V (E[N] - lambda T) "
                               "- sum_k Q_k E_k, Q_k the energy debt against the budget Ebar_k", family="multi-user")
class EnergyQueue(MultiUserController):
    """GELATO's outer loop for K devices sharing the band (module docstring).

    Parameters
    ----------
    V : float
        Weight of goodput against energy [J^2/token], > 0: time-average goodput within O(1/V) of
        the best budget-feasible policy, debt O(V) (drift-plus-penalty).
    budget_j : float, sequence of K floats, or None
        ``Ebar_k``, average energy per round [J] of each device, >= 0 (a scalar applies to all).
        ``None``: ``budget_scale`` times each device's energy per round under the average plan
        on the average channel.
    budget_scale : float
        >= 0, used when ``budget_j`` is None.
    gap, max_nodes :
        Relative tolerance and node budget (``None``: none) of the per-round :func:`maximise_round`.
    """

    def __init__(self, env: MultiUserEnv, V: float = 0.05, budget_j=None, budget_scale: float = 0.8,
                 gap: float = 1e-9, max_nodes: int | None = None, lambda_tokens: str = "expected"):
        super().__init__(env)
        self.V = _check_V(V)
        self.gap = _check_gap(gap)
        self.max_nodes = _check_nodes(max_nodes)
        s = env.scenario
        K = env.K
        if budget_j is None:
            scale = check_nonnegative("budget_scale", budget_scale)
            ev = evaluate(s, env.average_plan)
            L = env.average_plan.L
            wait = ev.round_time_s - ev.draft_time_s - ev.uplink_time_s
            self.budget = scale * round_energy(env.energy, L, ev.uplink_time_s, wait)
        else:
            vals = np.atleast_1d(np.asarray(budget_j, dtype=object))
            if vals.size == 1:
                vals = np.repeat(vals, K)
            if vals.size != K:
                raise ValidationError(f"budget_j must be one number or {K} numbers [J per round], got {vals.size}")
            named = np.ndim(budget_j) > 0
            self.budget = np.array([check_nonnegative(f"budget_j[{k}]" if named else "budget_j", v)
                                    for k, v in enumerate(vals)])
        self.Q = np.zeros(K)
        self.lam = _RunningGoodput(env, lambda_tokens)
        self.prev = env.average_plan.L
        self.e, self.p_tx, self.p_idle = _energy_arrays(env.energy)
        self.Ls = np.arange(env.L_max + 1)[None, :]
        self.status: dict = {}
        self.search = SearchBudget(env, "energy-queue")
        self.Q_max = np.zeros(K)

    def choose(self, ctx):
        s, Q = self.env.scenario, self.Q
        t1 = s.server.t1_s_per_token
        price = self.V * self.lam.value + float(np.dot(self.p_idle, Q))
        u = self.V * self.env.table - (Q * (self.e - self.p_tx * s.tau))[:, None] * self.Ls - price * t1 * self.Ls
        w = Q * (self.p_tx - self.p_idle)
        sol = maximise_round(s, ctx.rates, u, w, price, seeds=(self.prev, self.env.average_plan.L), gap=self.gap,
                             max_nodes=self.search.max_nodes(self.max_nodes))
        self.search.spent(sol.nodes)
        self.status[sol.status] = self.status.get(sol.status, 0) + 1
        self.prev = sol.L
        return Plan(sol.L, sol.b)

    def update(self, out):
        self.Q = np.maximum(self.Q + out.E - self.budget, 0.0)
        self.Q_max = np.maximum(self.Q_max, self.Q)
        self.lam.add(out)

    def info(self):
        return {"solver_status": dict(self.status), "budget_j": self.budget.copy(), "debt_j": self.Q.copy(),
                "max_debt_j": self.Q_max.copy(), "final_lambda": self.lam.value, "search_nodes": self.search.used}


__all__ = ["MultiUserEnv", "Plan", "check_plan", "BandContext", "BandOutcome", "MultiUserController", "MULTIUSER_CONTROLLERS",
           "register_multiuser_controller", "get_multiuser_controller", "multiuser_controller_names", "mspec",
           "parse_mspec", "SearchBudget", "PlanOnAverage", "ServerOnly", "StaticPolicy", "ReplanRatio",
           "ReplanDinkelbach", "ReplanBandwidth", "ReplanDrop", "ReplanCoordinate", "EnergyQueue", "LAMBDA_TOKENS",
           "REGISTRY"]
