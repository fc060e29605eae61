"""The multi-user simulator: every re-planner played on common random numbers (the notebook's study is
:func:`spinlib.studies.replanning.replan_under_fading`).

The simulator (:func:`run_replan`) plays every controller on common random numbers: acceptance
uniforms and fading from ``numpy.random.default_rng(seed)`` in the testbed's order (all
acceptance uniforms, then the fading), so a controller that returns a fixed allocation gets
exactly :func:`spinlib.emulator.emulate`'s trace, clock and goodput (tested bit for bit).
The delta-method interval of the clock assumes independent rounds: it holds (asymptotically) for
a fixed plan on static or Rayleigh fading and is approximate for adaptive controllers (``lambda_r``
and ``Q`` carry state from round to round) and Markov fading. ``expected_goodput_tokens_per_s``
(expected tokens of the played lengths over the realised times) removes the acceptance noise
from comparisons between controllers on the same channel draws.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import numpy as np

from ..acceptance import prefix_table, sample_accepted, tokens_table
from ..control.heterogeneous import BNB_FULL_USERS, solve_heterogeneous_sync
from ..emulator.clock import sync_clock
from ..emulator.config import ACCEPTANCE_MODELS
from ..emulator.fading import Fading
from ..emulator.testbed import MAX_ROUND_USER_CELLS
from ..emulator.traces import Trace, trace_bits
from ..goodput import GoodputEstimate
from ..control.bandwidth import min_makespan_bandwidth
from ..decision import BandContext, BandOutcome, check_decider, check_plan, never_stops, reads_confidence
from ..rounds import Allocation, fixed_round_overhead, sync_round_time, uplink_time
from ..scenario import Scenario
from ..validation import ValidationError, check_bool, check_int_range
from .energy import ENERGY_PRESETS, DeviceEnergies, device_energy, round_energy
from .registry import ControllerSpec, Env
from .multiuser import MultiUserEnv, get_multiuser_controller, parse_mspec
from .player import play_rounds
from .round_problem import faded_rates

MAX_USERS = BNB_FULL_USERS  # per-round solvers: heterogeneous-sync certifies to its tolerance up to this K
MAX_ROUNDS = 100_000  # rounds per run: every round is a solve (about 10-100 ms each at K = 4-8)
#: nodes of certified per-round search (replan-dinkelbach, energy-queue) one controller may use in a run unless
#: allow_long: about 10,000 nodes/s on this 2-core machine, so about 10 minutes (at K = 20 one round takes
#: about 130,000 nodes to the default tolerance; at K = 8 about 200)
REPLAN_NODE_BUDGET = 6_000_000
ACCEPTANCE = ACCEPTANCE_MODELS  # the testbed's acceptance models
#: controller-rounds (rounds x controllers) of a run unless allow_long: every one is a per-round solve (about
#: 10-100 ms each at K = 4-8 here), so about 10-80 minutes; past it a run is refused before any work
REPLAN_ROUND_BUDGET = 50_000


# ----------------------------------------------------------------------------------------------
# the simulator
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReplanConfig:
    """One run of multi-user controllers.

    Parameters
    ----------
    rounds : int
        Synchronous rounds, in [2, :data:`MAX_ROUNDS`] (two for an interval; every round is a solve).
    seed : int
        >= 0. Acceptance uniforms, then fading, from ``numpy.random.default_rng(seed)`` in the
        testbed's order (:func:`spinlib.emulator.emulate`); every controller sees the same draws.
    fading : Fading
        Block fading (:class:`spinlib.emulator.Fading`).
    L_max : int
        Largest draft length, in [1, 64].
    acceptance : {"iid", "profile"}
        Acceptance model of the sampler (:func:`spinlib.acceptance.prefix_table`).
    energy_preset : str
        Device energy (:func:`device_energy`).
    confidence : float
        Level of the goodput interval, in (0, 1).
    allow_long : bool
        Let a controller's certified per-round search run past :data:`REPLAN_NODE_BUDGET` nodes (refused
        otherwise, one line, as soon as its node count projects past the budget).
    """

    rounds: int = 500
    seed: int = 0
    fading: Fading = field(default_factory=Fading)
    L_max: int = 8
    acceptance: str = "iid"
    energy_preset: str = "phone-soc"
    confidence: float = 0.99
    allow_long: bool = False

    def __post_init__(self) -> None:
        check_int_range("rounds", self.rounds, 2, MAX_ROUNDS)
        check_bool("allow_long", self.allow_long)
        check_int_range("seed", self.seed, 0)
        check_int_range("L_max", self.L_max, 1, 64)
        if not isinstance(self.fading, Fading):
            raise ValidationError("fading must be a spinlib.emulator.Fading")
        if self.acceptance not in ACCEPTANCE:
            raise ValidationError(f"acceptance must be one of {ACCEPTANCE}, got {self.acceptance!r}")
        if self.energy_preset not in ENERGY_PRESETS:
            raise ValidationError(f"energy_preset must be one of {sorted(ENERGY_PRESETS)}, got {self.energy_preset!r}")
        c = self.confidence
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0 < c < 1:
            raise ValidationError(f"confidence must be in (0, 1), got {c!r}")


@dataclass(frozen=True)
class ReplanResult(GoodputEstimate):
    """What one controller realised (``R`` rounds, ``K`` users).

    Parameters
    ----------
    controller : str
        Its label.
    goodput_tokens_per_s, ci_low, ci_high : float
        ``sum N / sum T`` [token/s] and the clock's delta-method interval.
    round_tokens : float
        Mean over rounds of all users' tokens, ``sum_k N_rk`` (the testbed's ``tokens_per_round`` is
        per user, ``[K]``).
    mean_round_time_s : float
        Mean ``T_r`` [s] (every round's: ``round_times_s``).
    expected_goodput_tokens_per_s : float
        ``sum_r sum_k E[N_k](L_rk) / sum_r T_r`` [token/s]: the acceptance noise averaged out (the
        channel's stays), for comparing controllers on the same draws.
    mean_L : float
        Mean draft length over rounds and users.
    energy_per_token_j : float
        All devices' energy over all tokens [J/token].
    energy_per_round_j : float array [K]
        Mean energy per round of each device [J].
    draft_lengths : int array [R, K]
    bandwidth_hz : float array [R, K]
    tokens : int array [R, K]
        ``N_rk``.
    round_times_s : float array [R]
    energy_j : float array [R, K]
    info : dict
        The controller's :meth:`~MultiUserController.info` (solver statuses; energy controllers:
        ``budget_j``, ``debt_j`` (final ``Q``), ``max_debt_j``).
    outputs : tuple of list of int
        With real models (:func:`play_real`): each user's generated tokens; empty otherwise.
    """

    controller: str
    round_tokens: float
    mean_round_time_s: float
    expected_goodput_tokens_per_s: float
    mean_L: float
    energy_per_token_j: float
    energy_per_round_j: np.ndarray
    draft_lengths: np.ndarray
    bandwidth_hz: np.ndarray
    tokens: np.ndarray
    round_times_s: np.ndarray
    energy_j: np.ndarray
    info: dict = field(default_factory=dict)
    outputs: tuple = ()

    def record(self) -> dict:
        """The scalars (and ``[K]`` lists) of a long record; ``info``'s arrays as lists."""
        out = {"controller": self.controller, "goodput_tokens_per_s": self.goodput_tokens_per_s,
               "ci_low": self.ci_low, "ci_high": self.ci_high, "round_tokens": self.round_tokens,
               "mean_round_time_s": self.mean_round_time_s, "expected_goodput_tokens_per_s": self.expected_goodput_tokens_per_s,
               "mean_L": self.mean_L,
               "energy_per_token_j": self.energy_per_token_j,
               "energy_per_round_j": float(self.energy_per_round_j.mean())}
        for k, v in self.info.items():
            out[k] = v.tolist() if isinstance(v, np.ndarray) else v
        if "budget_j" in self.info:
            budget = self.info["budget_j"]
            with np.errstate(divide="ignore", invalid="ignore"):
                out["energy_over_budget"] = float(np.max(self.energy_per_round_j / budget))
        return out


def multiuser_env(scenario: Scenario, config: ReplanConfig, average_plan: Allocation | None = None) -> MultiUserEnv:
    """The controllers' environment: solves heterogeneous-sync on the average channel (unless given)."""
    if not isinstance(scenario, Scenario):
        raise ValidationError(f"scenario must be a spinlib Scenario, got {type(scenario).__name__}")
    K = scenario.num_users
    if K > MAX_USERS:
        raise ValidationError(f"num_users must be <= {MAX_USERS} for per-round re-planning (the per-round solvers "
                              f"certify their optimum up to {MAX_USERS} users), got {K}")
    if average_plan is None:  # once per cell: the solver's default node budget (certified to 1e-9)
        average_plan = solve_heterogeneous_sync(scenario, config.L_max)
    return MultiUserEnv(scenario, config.L_max, tokens_table(scenario, config.L_max), average_plan,
                        device_energy(scenario, config.energy_preset), config.rounds,
                        None if config.allow_long else REPLAN_NODE_BUDGET)


def cell_user_env(scenario: Scenario, config: ReplanConfig, energy: tuple, rng: np.random.Generator) -> Env:
    """The per-user :class:`~spinlib.online.Env` of a cell, for a per-user controller (UCB-SpecStop, GELATO,
    SpecDec++'s rule without its observables) that plays all ``K`` devices in re-planning.

    What such a controller is told (our mapping; it learns the rest from the realised rounds): the
    draft time ``t_d`` is the cell's mean ``tau_k`` (it knows one draft time); verification ``t0 + t1
    (L + 1)`` as if it were alone in the batch (the shared batch costs ``t0 + t1 sum_k (L_k + 1)``,
    which its outcomes show); the mean delay is the fixed feedback-plus-access time ``T_fb + T_acc``;
    bits per token the scenario's payload; the uplink rate it sees (``ctx.rate``) is the rate at
    the equal share ``B / K``; every device's own energy model (:class:`~spinlib.online.energy.DeviceEnergies`);
    no energy budget; the acceptance law's prefix survival ``P(A_k >= i)`` (the sampler's, as the
    arena gives an oracle its streams' survival). Its lengths get paper 1's bandwidth split.
    """
    return Env(K=scenario.num_users, L_max=config.L_max, t_d=float(np.mean(scenario.tau)),
               t0=scenario.server.t0_s, t1=scenario.server.t1_s_per_token,
               mean_delay_s=fixed_round_overhead(scenario), bits_per_token=float(scenario.payload.bits_per_token),
               energy=DeviceEnergies(tuple(energy)), energy_budget_j=float("inf"), rng=rng,
               survival=prefix_table(scenario, config.L_max, config.acceptance),
               delay_levels_s=(fixed_round_overhead(scenario),))


def fading_draws(scenario: Scenario, config: ReplanConfig) -> np.ndarray:
    """The fading ``h [R, K]`` every controller of a run sees (:func:`play`'s ``h``): drawn from
    ``numpy.random.default_rng(config.seed)`` after the ``R x K`` acceptance uniforms (the
    testbed's order), those drawn in chunks to bound memory."""
    R, K = config.rounds, scenario.num_users
    rng = np.random.default_rng(config.seed)
    step = max(1, 1_000_000 // K)
    for r0 in range(0, R, step):
        rng.random((min(step, R - r0), K))
    return config.fading.draw(R, K, rng)


class SharedBand:
    """The multi-user round model (:class:`spinlib.online.player.RoundModel`): ``K`` users in
    synchronous rounds on one FDMA band under the fading ``h [R, K]`` (module docstring of
    :mod:`spinlib.online.multiuser`). Round ``r`` with plan ``(L, b)`` (``b = None``: paper 1's split
    for ``L`` on the round's channel): ``A`` from the acceptance sampler (the generator of
    ``config.seed``, whose acceptance uniforms come first in the testbed's stream), the upload times on
    the faded rates, ``T`` the synchronous round time and ``E`` each device's energy. The played
    ``L``, ``b``, ``A`` and ``E`` are kept ``[R, K]``."""

    def __init__(self, scenario: Scenario, h: np.ndarray, config: ReplanConfig, energy: tuple):
        R, K = h.shape
        self.scenario, self.h, self.config, self.energy, self.K = scenario, h, config, energy, K
        self.B = scenario.radio.bandwidth_hz
        self.pi = prefix_table(scenario, config.L_max, config.acceptance)
        self.acc_rng = np.random.default_rng(config.seed)  # the acceptance uniforms come first in the testbed's stream
        self.L = np.zeros((R, K), dtype=int)
        self.b = np.zeros((R, K))
        self.A = np.zeros((R, K), dtype=int)
        self.E = np.zeros((R, K))
        self.equal = np.full(K, self.B / K)
        self.rate_mean = faded_rates(scenario, np.ones(K)).rate(self.equal)
        self.no_state, self.no_delay = np.zeros(K, dtype=int), np.zeros(K)
        self.over = np.full(K, fixed_round_overhead(scenario))
        self.rates, self.plan = None, None

    def done(self, t: int) -> bool:
        return t >= self.h.shape[0]

    def context(self, t: int) -> BandContext:
        self.rates = rates = faded_rates(self.scenario, self.h[t])
        return BandContext(t, rates.rate(self.equal), self.rate_mean, self.no_state, self.no_delay, None, None,
                           self.h[t], rates)

    def reference(self, choice, t: int, who: str) -> np.ndarray:
        self.plan = check_plan(choice, self.K, self.config.L_max, self.B, f"{who}, round {t}")
        return self.plan.L

    def realise(self, t: int, L: np.ndarray) -> BandOutcome:
        return self.settle(t, L, sample_accepted(L, self.pi, 1, self.acc_rng)[0])

    def settle(self, t: int, L: np.ndarray, A: np.ndarray) -> BandOutcome:
        """Round ``t`` with drafted ``L`` and accepted ``A`` (the sampler's, or a real engine's) on the plan's
        bandwidth, else paper 1's split for ``L``: times, energy, the outcome."""
        s, rates, K = self.scenario, self.rates, self.K
        b = self.plan.b if self.plan.b is not None else min_makespan_bandwidth(s, L, rates)[1]
        up = uplink_time(s, L, b, rates=rates)
        tau = s.tau
        T = float(sync_round_time(s, np.max(L * tau + up), L.sum()))
        E = round_energy(self.energy, L, up, T - L * tau - up)
        self.L[t], self.b[t], self.A[t], self.E[t] = L, b, A, E
        return BandOutcome(L, A, A + 1, np.full(K, T), E, self.over, rates.rate(b), b, up)


def play(scenario: Scenario, controller, h: np.ndarray, config: ReplanConfig, label: str = "",
         energy: tuple | None = None) -> ReplanResult:
    """Play one decider over the channel ``h [R, K]`` (module docstring) and clock it with
    :func:`spinlib.emulator.sync_clock` on the realised per-round lengths and bandwidths.

    ``controller`` is any decider of :mod:`spinlib.decision` whose ``stop`` does not read the
    draft's observables (this player has none): a :class:`~spinlib.online.multiuser.MultiUserController`,
    or e.g. :class:`spinlib.decision.FixedLength`. Its ``choose`` returns a
    :class:`~spinlib.decision.Plan` or lengths; a plan without bandwidth gets paper 1's split
    for its lengths (the least makespan on the round's channel,
    :func:`spinlib.control.bandwidth.min_makespan_bandwidth`). Each round it sees a
    :class:`~spinlib.decision.BandContext` (``t = r``, ``h = h[r]``) and learns from a
    :class:`~spinlib.decision.BandOutcome`: :func:`spinlib.online.player.play_rounds` on a
    :class:`SharedBand`.

    ``energy``: the devices' energy models (default: the controller's ``env.energy`` when it holds every
    device's, else ``config.energy_preset``'s).
    """
    name, band = _band_for(scenario, controller, h, config, label, energy)
    play_rounds(controller, band, f"controller {name!r}")
    return _result(scenario, controller, band, h, config, name)


def _band_for(scenario: Scenario, controller, h: np.ndarray, config: ReplanConfig, label: str, energy):
    """``(name, SharedBand)`` for a decider of the band (:func:`play`, :func:`play_real`): one line for a decider
    that stops on the draft's confidence; the energy models given, else the controller's ``env.energy`` when it
    holds every device's, else ``config.energy_preset``'s."""
    check_decider(controller, "controller")
    name = label or type(controller).__name__
    if reads_confidence(controller):
        raise ValidationError(f"controller {name!r} stops on the draft's confidence, which the multi-user player does "
                              f"not observe: mark its stop with spinlib.decision.never_stops, or play it in the arena")
    if energy is None:
        known = getattr(getattr(controller, "env", None), "energy", None)
        energy = known.models if isinstance(known, DeviceEnergies) else known if isinstance(known, tuple) \
            else device_energy(scenario, config.energy_preset)
    return name, SharedBand(scenario, h, config, energy)


class _RealBandDriver:
    """A decider of the shared band driving the batched real engine (:func:`play_real`): each round the
    engine asks ``choose``, which asks the controller on the band's context of that round (its fading
    and rates); the engine drafts and verifies for real, and ``update`` settles the round on the band
    with the engine's drafted and accepted counts before the controller learns from it."""

    def __init__(self, controller, band: "SharedBand", who: str):
        self.controller, self.band, self.who, self.L_max, self.t = controller, band, who, band.config.L_max, 0

    def choose(self, ctx):
        self.t = int(ctx.t)
        return self.band.reference(self.controller.choose(self.band.context(self.t)), self.t, self.who)

    @never_stops
    def stop(self, ctx, L_ref):
        return L_ref

    def update(self, out):
        self.controller.update(self.band.settle(self.t, np.asarray(out.L), np.asarray(out.A)))


def play_real(scenario: Scenario, controller, h: np.ndarray, config: ReplanConfig, models, label: str = "",
              energy: tuple | None = None, temperature: float = 0.0) -> ReplanResult:
    """:func:`play` with real models: every round each user drafts with the draft model on its own prompt
    and the target verifies every user's draft in one batched pass
    (:func:`spinlib.sd.batched.batched_sync_generate`), the lengths and bandwidth planned by
    ``controller`` on the round's channel ``h[r]``. The drafted and accepted counts are the engine's; the
    round's time, energy and goodput are the band's model on them (the testbed's clock, as in :func:`play`),
    so a plan is judged on real acceptance under the modelled radio. ``expected_goodput_tokens_per_s``
    stays the acceptance model's expectation of the played lengths.

    ``models``: ``(target, draft, prompts, pad_id)``, the prompts as token ids (one per user; the pair's
    are :func:`spinlib.emulator.real_traces.real_prompts`, as :func:`run_replan` with ``real_models``
    encodes them). ``temperature`` 0: greedy.
    """
    from ..sd.batched import batched_sync_generate

    target, draft, prompts, pad_id = models
    R, K = h.shape
    if len(prompts) != K:
        raise ValidationError(f"real re-planning needs one prompt per user: {len(prompts)} prompts for {K} users")
    name, band = _band_for(scenario, controller, h, config, label, energy)
    driver = _RealBandDriver(controller, band, f"controller {name!r}")
    outputs, _, _ = batched_sync_generate(target, draft, prompts, driver, R, temperature=temperature, seed=config.seed,
                                          pad_id=pad_id, energy=DeviceEnergies(tuple(band.energy)), L_max=config.L_max)
    return dataclasses.replace(_result(scenario, controller, band, h, config, name),
                               outputs=tuple(list(o) for o in outputs))


def _result(scenario: Scenario, controller, band: "SharedBand", h: np.ndarray, config: ReplanConfig,
            name: str) -> ReplanResult:
    """The played rounds of ``band``, clocked by :func:`spinlib.emulator.sync_clock`."""
    R, K = h.shape
    Ls, bs, As, Es, pi, tau = band.L, band.b, band.A, band.E, band.pi, scenario.tau
    template = Allocation((0,) * K, (0.0,) * K, "sync", name)
    up_bits, down_bits = trace_bits(scenario, template, Ls, As)
    trace = Trace(drafted=Ls, accepted=As, bits_up=up_bits, bits_down=down_bits, draft_s=Ls * tau)
    # a fixed bandwidth is passed as [K]: the very arrays the testbed computes with (bit-identical results)
    b_clock = bs[0] if np.all(bs == bs[0]) else bs
    m = sync_clock(scenario, template, trace, h, confidence=config.confidence, timeline_rounds=0, bandwidth_hz=b_clock)
    N = As + 1
    expected = np.cumsum(pi, axis=1)[np.arange(K), Ls]  # E[N_k](L) = sum_{i <= L} P(A_k >= i) under the sampler's law
    return ReplanResult(controller=name, goodput_tokens_per_s=m.goodput_tokens_per_s, ci_low=m.ci_low,
                        ci_high=m.ci_high, round_tokens=float(N.sum(axis=1).mean()),
                        mean_round_time_s=float(m.round_time_s.mean()),
                        expected_goodput_tokens_per_s=float(expected.sum() / m.round_time_s.sum()),
                        mean_L=float(Ls.mean()),
                        energy_per_token_j=float(Es.sum() / N.sum()), energy_per_round_j=Es.mean(axis=0),
                        draft_lengths=Ls, bandwidth_hz=bs, tokens=N, round_times_s=m.round_time_s, energy_j=Es,
                        info=controller.info() if hasattr(controller, "info") else {})


def run_replan(scenario: Scenario, controllers, config: ReplanConfig | None = None, *,
               average_plan: Allocation | None = None, timings: bool = False,
               real_models: str | None = None) -> list[ReplanResult]:
    """Every controller on the same cell, channel and acceptance draws.

    Parameters
    ----------
    controllers : sequence of str or ControllerSpec
        Registered names (``"name:key=value,..."``, :func:`multiuser_controller_names`: the cell's
        controllers and the per-user ones, which play on :func:`cell_user_env`; one line for a
        controller that stops on draft observables) or :func:`mspec` specs.
    config : ReplanConfig
    average_plan : Allocation, optional
        heterogeneous-sync on the average channel, if already solved.
    timings : bool
        Add the wall time of each controller's run (``info["wall_s"]``; not reproducible).
    real_models : str, optional
        A same-tokenizer pair (``python -m spinlib pairs``): the rounds run real speculative decoding,
        user ``k`` on :func:`spinlib.emulator.real_traces.real_prompts`'s ``k``-th prompt, greedy
        (:func:`play_real`); every controller starts from the same prompts.
    """
    config = config or ReplanConfig()
    if isinstance(controllers, (str, ControllerSpec)):
        controllers = [controllers]
    specs = [parse_mspec(c) for c in controllers]
    if not specs:
        raise ValidationError("controllers must name at least one controller")
    if config.rounds * scenario.num_users > MAX_ROUND_USER_CELLS:
        raise ValidationError(f"rounds x users = {config.rounds * scenario.num_users:,} exceeds the limit of "
                              f"{MAX_ROUND_USER_CELLS:,} (memory grows with rounds x users)")
    check_replan_work(scenario.num_users, len(specs), config, real_models)
    models = _real_models(real_models, scenario.num_users) if real_models is not None else None
    env = multiuser_env(scenario, config, average_plan)
    h = fading_draws(scenario, config)
    # a per-user controller's own generator: child i of the run's seed (one per spec, in order)
    rngs = [np.random.default_rng(c) for c in np.random.SeedSequence(config.seed).spawn(len(specs))]
    out = []
    for spec, rng in zip(specs, rngs):
        t = time.perf_counter()
        entry = get_multiuser_controller(spec.name)
        on = env if "cell-env" in entry.needs else cell_user_env(scenario, config, env.energy, rng)
        ctrl = entry.cls(on, **spec.kwargs)
        res = play(scenario, ctrl, h, config, spec.title, energy=env.energy) if models is None else \
            play_real(scenario, ctrl, h, config, models, spec.title, energy=env.energy)
        if timings:
            res.info["wall_s"] = time.perf_counter() - t
        out.append(res)
    return out


def check_replan_work(num_users: int, num_controllers: int, config: ReplanConfig, real_models: str | None) -> None:
    """Refuse, in one line and before any work, a run whose projected work is past its budget (``allow_long``
    lifts both): ``rounds x controllers`` per-round solves past :data:`REPLAN_ROUND_BUDGET`, and with real models
    ``rounds x controllers x (1 + K L_max)`` model steps (one batched target pass and at most ``L_max`` drafted
    tokens per user and round) past :data:`spinlib.emulator.testbed.REAL_STEP_BUDGET`. The certified controllers'
    own search has its node budget besides (:data:`REPLAN_NODE_BUDGET`)."""
    from ..emulator.testbed import REAL_STEP_BUDGET

    if config.allow_long:
        return
    solves = config.rounds * num_controllers
    if solves > REPLAN_ROUND_BUDGET:
        raise ValidationError(f"replan: {config.rounds:,} rounds x {num_controllers} controllers = {solves:,} "
                              f"per-round solves, past the budget of {REPLAN_ROUND_BUDGET:,} (about 10-80 minutes "
                              "here); fewer rounds or controllers, or allow_long=True (replan --allow-long)")
    if real_models is not None:
        steps = solves * (1 + num_users * config.L_max)
        if steps > REAL_STEP_BUDGET:
            raise ValidationError(f"replan --real-models: up to {steps:,} model steps ({config.rounds:,} rounds x "
                                  f"{num_controllers} controllers x (1 + {num_users} users x L_max {config.L_max})), "
                                  f"past the budget of {REAL_STEP_BUDGET:,}; fewer rounds, users or controllers, a "
                                  "smaller --L-max, or allow_long=True (replan --allow-long)")


def _real_models(pair_name: str, K: int):
    """``(target, draft, prompts, pad_id)`` of an installed same-tokenizer pair, with the testbed's real prompts."""
    from ..emulator.real_traces import real_prompts
    from ..sd.models import PACKAGED, get_pair, load_pair
    from ..sd.prompts import encode_for_pair

    pair = get_pair(pair_name)  # one line listing the pairs otherwise
    if not pair.installed():
        raise ValidationError(f"pair {pair_name!r} needs {PACKAGED[pair.target].install}")
    if not pair.tokenizer_shared:
        raise ValidationError(f"pair {pair_name!r} has two tokenizers: the batched engine needs a same-tokenizer pair")
    target, draft, tok = load_pair(pair.name)
    prompts = [encode_for_pair(pair, tok, p) for p in real_prompts(K)]
    return target, draft, prompts, tok.pad_token_id if tok.pad_token_id is not None else 0


#: the controllers the replan command and the notebook's study play by default
DEFAULT_CONTROLLERS = ("plan-on-average", "server-only", "replan-ratio", "replan-dinkelbach", "replan-bandwidth",
                       "replan-drop", "replan-coordinate", "energy-queue")


__all__ = ["MAX_USERS", "MAX_ROUNDS", "REPLAN_NODE_BUDGET", "REPLAN_ROUND_BUDGET", "check_replan_work", "ACCEPTANCE", "ReplanConfig", "ReplanResult", "multiuser_env", "cell_user_env",
           "fading_draws",
           "SharedBand", "play", "play_real",
           "run_replan", "DEFAULT_CONTROLLERS"]
