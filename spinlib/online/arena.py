"""The arena: online controllers run on identical inputs with the testbed's round clock.

Every controller sees the same users, token streams, delays and channel realisations (common
random numbers drawn once per seed from one :class:`numpy.random.Generator`); only its decisions
differ. User ``k`` works through a token stream (:class:`Stream`: the per-position greedy
outcomes of real prompts, :mod:`spinlib.online.traces`, concatenated and read cyclically from a
random offset). A round of user ``k`` that starts at stream position ``p`` and drafts ``L``
tokens::

    A = min(run[p], L),   N = A + 1,   p <- p + N                        (exact under greedy decoding)
    T = L t_d + L S / R_t + t0 + t1 (L + 1) + D_t                        [s]
    E = L e_d + p_tx L S / R_t + p_idle (t0 + t1 (L + 1) + D_t)          [J]

with ``run[p]`` the consecutive accepted positions from ``p``, ``S`` uplink bits per drafted
token, ``R_t = W log2(1 + snr h_t)`` the uplink rate under block fading ``h_t``
(:class:`spinlib.emulator.Fading`), ``D_t`` the delay of the round (:class:`Delay`). Users are
independent device-edge links (each with its own server slot: the asynchronous clock with
``server="ideal"`` of :mod:`spinlib.emulator.clock`).

Token counts are exact for any sequence of lengths. Rules that stop on the draft's observables
(confidence, entropy) read them at the stream's positions: exact up to the first rejected draft
of a round; after it the real draft would see its own (rejected) prefix, which no trace records,
so the number of *wasted* drafts of such rules is approximate (their tokens are not).

Reported per controller (and seed): the mean user goodput ``user_goodput_tokens_per_s`` (each user's
``sum N / sum T``, averaged over users: the users are independent links, so it is the cell's goodput
over ``K``; the testbed's and the re-planner's ``goodput_tokens_per_s`` is the cell's ``sum N / sum T``),
per-token latency percentiles (``T / N`` of every round, weighted by ``N``), energy per token,
energy debt (the virtual queue ``Z`` of the budget ``E_bar`` after the last round, mean over
users) and regret against two oracles, as extra time [s] per user::

    regret(t) = sum_{s<=t} T_s - J_ref sum_{s<=t} N_s

``J_ref`` the per-token latency of the best fixed length in hindsight (per user, on the same
inputs) or of the per-round clairvoyant (which knows ``run[p]``, ``D_t`` and ``R_t``: it drafts
``clip(run[p], 1, L_max)`` when ``c_t > s_t`` and 1 otherwise, the per-round best).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..decision import Outcome, check_lengths, never_stops
from ..emulator.fading import Fading
from ..roundcost import user_round_time
from ..validation import ValidationError, check_bool, check_int_range, check_nonnegative, check_positive
from ..emulator.testbed import MAX_ROUND_USER_CELLS
from .energy import EnergyModel, energy_preset
from .player import play_rounds
from .deciders import check_playable
from .registry import ControllerSpec, Env, as_spec, make_controller
from .stopping import survival_from_accept
from .traces import PromptTrace, run_lengths

#: Work budget of one :func:`run_arena` call, in user-rounds (rounds x users x seeds x controllers): the
#: projection is checked before any work, and a call past it is refused unless ``allow_long=True``
#: (``arena --allow-long``).
ARENA_WORK_LIMIT = 50_000_000

IID_DELAY_KINDS = ("constant", "exponential", "uniform")
LEVEL_DELAY_KINDS = ("piecewise", "sinusoidal", "markov")
DELAY_KINDS = IID_DELAY_KINDS + LEVEL_DELAY_KINDS


@dataclass(frozen=True)
class Delay:
    """Communication delay per round [s], drawn per round and user.

    I.i.d. kinds (``mean_s``, default 0.05 s): ``"constant"``, ``"exponential"`` (mean ``mean_s``) or
    ``"uniform"`` on ``[0, 2 mean_s]``.

    Kinds whose mean moves (UCB-SpecStop's delay drift and Markov-modulated channels; the delay of a
    round is exponential around the current mean ``m_t``, ``D_t = m_t X``, ``X ~ Exp(1)``):

    * ``"piecewise"``: ``m_t = levels_s[(t // period) mod n]``, the same for every user (the
      network's delay steps between levels every ``period`` rounds);
    * ``"sinusoidal"``: ``m_t = lo + (hi - lo) (1 - cos(2 pi t / period)) / 2`` between the two
      levels (a slowly varying mean);
    * ``"markov"``: one chain per user over the levels: each round it stays with probability
      ``stay``, else moves to another level chosen uniformly; it starts from the uniform
      (stationary) law.

    For these kinds ``mean_s`` is the time average of the levels (derived; another value is refused),
    and the *channel state* of a round (the index of the current level; for ``"sinusoidal"`` the
    nearer of the two) is known to a controller before it drafts (``ctx.state``, ``ctx.delay_mean``).
    """

    kind: str = "constant"
    mean_s: float | None = None
    levels_s: tuple = ()
    period: int | None = None
    stay: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in DELAY_KINDS:
            raise ValidationError(f"delay kind must be one of {DELAY_KINDS}, got {self.kind!r}")
        if self.kind in IID_DELAY_KINDS:
            for name in ("levels_s", "period", "stay"):
                if getattr(self, name) not in ((), None):
                    raise ValidationError(f"delay {name} applies to the kinds {', '.join(LEVEL_DELAY_KINDS)}, "
                                          f"not {self.kind!r}")
            object.__setattr__(self, "mean_s", 0.05 if self.mean_s is None else self.mean_s)
            check_nonnegative("mean_s", self.mean_s)
            return
        levels = tuple(self.levels_s) if isinstance(self.levels_s, (tuple, list)) else None
        if levels is None or len(levels) < 2 or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                        and math.isfinite(v) and v >= 0 for v in levels):
            raise ValidationError(f"delay levels_s must be 2 or more finite delays >= 0 [s], got {self.levels_s!r}")
        if self.kind == "sinusoidal" and len(levels) != 2:
            raise ValidationError(f"delay levels_s of a sinusoidal delay must be (low, high), got {levels!r}")
        object.__setattr__(self, "levels_s", tuple(float(v) for v in levels))
        mean = float(np.mean(levels))
        if self.mean_s is not None and not math.isclose(self.mean_s, mean, rel_tol=1e-12, abs_tol=1e-15):
            raise ValidationError(f"delay mean_s of a {self.kind} delay is the average of levels_s ({mean:g} s), "
                                  f"got {self.mean_s!r}")
        object.__setattr__(self, "mean_s", mean)
        if self.kind == "markov":
            if self.period is not None:
                raise ValidationError("delay period applies to the kinds piecewise and sinusoidal, not 'markov'")
            stay = 0.98 if self.stay is None else self.stay
            if isinstance(stay, bool) or not isinstance(stay, (int, float)) or not 0 <= stay < 1:
                raise ValidationError(f"delay stay must be a probability in [0, 1), got {stay!r}")
            object.__setattr__(self, "stay", float(stay))
        else:
            if self.stay is not None:
                raise ValidationError(f"delay stay applies to the kind markov, not {self.kind!r}")
            object.__setattr__(self, "period", check_int_range("period", 500 if self.period is None else self.period,
                                                               1, 10_000_000))

    @property
    def levels(self) -> tuple:
        """The delay means a controller can be told apart by (``(mean_s,)`` for the i.i.d. kinds) [s]."""
        return self.levels_s if self.kind in LEVEL_DELAY_KINDS else (float(self.mean_s),)

    def draw(self, rounds: int, K: int, rng: np.random.Generator) -> np.ndarray:
        """Delays ``[rounds, K]`` [s]."""
        return self.draw_with_state(rounds, K, rng)[0]

    def draw_with_state(self, rounds: int, K: int, rng: np.random.Generator):
        """``(D, m, state)``, each ``[rounds, K]``: the delays [s], their current means [s] and the
        channel state (index into :attr:`levels`)."""
        zeros = np.zeros((rounds, K), dtype=np.int64)
        if self.kind in IID_DELAY_KINDS:
            m = np.full((rounds, K), float(self.mean_s))
            if self.kind == "constant" or self.mean_s == 0:
                return m.copy(), m, zeros
            if self.kind == "exponential":
                return rng.exponential(self.mean_s, (rounds, K)), m, zeros
            return rng.uniform(0.0, 2 * self.mean_s, (rounds, K)), m, zeros
        lv = np.array(self.levels_s)
        t = np.arange(rounds)[:, None]
        if self.kind == "piecewise":
            state = np.broadcast_to((t // self.period) % lv.size, (rounds, K)).astype(np.int64)
            m = lv[state]
        elif self.kind == "sinusoidal":
            lo, hi = lv
            m = np.broadcast_to(lo + (hi - lo) * (1 - np.cos(2 * np.pi * t / self.period)) / 2, (rounds, K)).copy()
            state = (np.abs(m - hi) < np.abs(m - lo)).astype(np.int64)
        else:  # markov: a jump to one of the other levels, uniformly
            n = lv.size
            state = np.empty((rounds, K), dtype=np.int64)
            state[0] = rng.integers(0, n, K)
            move = rng.random((rounds, K)) >= self.stay
            step = rng.integers(1, n, (rounds, K))
            for r in range(1, rounds):
                state[r] = np.where(move[r], (state[r - 1] + step[r]) % n, state[r - 1])
            m = lv[state]
        return m * rng.exponential(1.0, (rounds, K)), m, state


@dataclass(frozen=True)
class Stream:
    """One user's token stream: per-position arrays ``[n]`` read cyclically (module docstring)."""

    name: str
    accept: np.ndarray
    top_prob: np.ndarray
    entropy: np.ndarray

    def __post_init__(self) -> None:
        n = np.asarray(self.accept).size
        if n == 0:
            raise ValidationError(f"stream {self.name!r} is empty (an empty trace cannot be replayed)")
        if np.asarray(self.top_prob).size != n or np.asarray(self.entropy).size != n:
            raise ValidationError(f"stream {self.name!r}: accept, top_prob and entropy must have the same length")

    @property
    def n(self) -> int:
        return int(np.asarray(self.accept).size)

    @classmethod
    def from_traces(cls, traces: list[PromptTrace], name: str = "trace") -> "Stream":
        """Prompts back to back (in the given order)."""
        if not traces:
            raise ValidationError(f"stream {name!r} is empty (an empty trace cannot be replayed)")
        return cls(name, np.concatenate([t.accept for t in traces]).astype(np.int8),
                   np.concatenate([t.top_prob for t in traces]), np.concatenate([t.entropy for t in traces]))

    @classmethod
    def synthetic(cls, alpha: float, n: int, rng: np.random.Generator, name: str | None = None) -> "Stream":
        """I.i.d. Bernoulli(alpha) outcomes; the draft is more confident (and less uncertain) where the
        outcome is an acceptance (top probability ~ Beta(6, 2) vs Beta(2, 3)): a stationary test input."""
        if not 0 <= alpha <= 1:
            raise ValidationError(f"alpha must be in [0, 1], got {alpha!r}")
        acc = (rng.random(n) < alpha).astype(np.int8)
        top = np.where(acc == 1, rng.beta(6, 2, n), rng.beta(2, 3, n)).clip(1e-6, 1.0)
        ent = -np.log(top) * 2.0 + rng.exponential(0.2, n)
        return cls(name or f"iid-{alpha:g}", acc, top, ent)

    def cyclic_runs(self, cap: int) -> np.ndarray:
        """``min(run[p], cap)`` on the cyclic stream."""
        reps = 2 + cap // self.n
        return np.minimum(run_lengths(np.tile(np.asarray(self.accept), reps))[: self.n], cap)

    def survival(self, L_max: int) -> np.ndarray:
        """``S(i) = P(run[p] >= i)`` over all start positions, i = 0..L_max."""
        return survival_from_accept(self.cyclic_runs(L_max + 1), L_max)


@dataclass(frozen=True)
class ArenaConfig:
    """Inputs of an arena run (the testbed's round, module docstring). Times in s, rates in bit/s.

    Parameters
    ----------
    rounds : int
        Rounds per user and controller.
    users : int
        ``K``; user ``k`` reads stream ``k mod len(streams)``.
    L_max : int
        Largest draft length (arms ``1..L_max``).
    t_d, t0, t1 : float
        Draft time per token, verification ``t0 + t1 (L + 1)``.
    delay : Delay
        Communication delay per round.
    bits_per_token : float
        Uplink bits per drafted token (greedy: the token id).
    bandwidth_hz, snr_db : float
        Uplink band ``W`` and mean SNR: ``R = W log2(1 + snr h)``.
    fading : Fading
        Block fading of ``h`` per round and user.
    energy : EnergyModel or None
        Device energy model (default: the ``"phone-soc"`` preset with this ``t_d``).
    energy_budget_j : float
        ``E_bar``, average energy per round [J], >= 0 (``inf``: no budget).
    """

    rounds: int = 1000
    users: int = 1
    L_max: int = 8
    t_d: float = 0.02
    t0: float = 0.03
    t1: float = 0.002
    delay: Delay = field(default_factory=Delay)
    bits_per_token: float = 16.0
    bandwidth_hz: float = 1e6
    snr_db: float = 10.0
    fading: Fading = field(default_factory=Fading)
    energy: EnergyModel | None = None
    energy_budget_j: float = math.inf

    def __post_init__(self) -> None:
        check_int_range("rounds", self.rounds, 1, 10_000_000)
        check_int_range("users", self.users, 1, 1_000_000)
        check_int_range("L_max", self.L_max, 1, 64)
        if self.rounds * self.users > MAX_ROUND_USER_CELLS:
            raise ValidationError(f"rounds x users = {self.rounds * self.users:,} exceeds the arena's limit of "
                                  f"{MAX_ROUND_USER_CELLS:,} per seed (memory grows with rounds x users)")
        check_positive("t_d", self.t_d)
        check_nonnegative("t0", self.t0)
        check_nonnegative("t1", self.t1)
        check_nonnegative("bits_per_token", self.bits_per_token)
        check_positive("bandwidth_hz", self.bandwidth_hz)
        if not (isinstance(self.snr_db, (int, float)) and math.isfinite(self.snr_db)):
            raise ValidationError(f"snr_db must be a finite number, got {self.snr_db!r}")
        if not isinstance(self.delay, Delay):
            raise ValidationError("delay must be a spinlib.online.Delay")
        if not isinstance(self.fading, Fading):
            raise ValidationError("fading must be a spinlib.emulator.Fading")
        b = self.energy_budget_j
        if isinstance(b, bool) or not isinstance(b, (int, float)) or math.isnan(b) or b < 0:
            raise ValidationError(f"energy_budget_j must be a number >= 0 [J per round] (inf: no budget), got {b!r}")

    @property
    def energy_model(self) -> EnergyModel:
        return self.energy if self.energy is not None else energy_preset("phone-soc", self.t_d)

    def rate(self, h) -> np.ndarray:
        return self.bandwidth_hz * np.log2(1.0 + 10 ** (self.snr_db / 10) * np.asarray(h, float))


class _Ctx:
    """What a controller sees in round ``t`` (lazy observables of the next ``L_max`` positions)."""

    __slots__ = ("t", "rate", "rate_mean", "state", "delay_mean", "_idx", "_top", "_ent", "_src")

    def __init__(self, t, rate, rate_mean, idx, src, state=None, delay_mean=None):
        self.t, self.rate, self.rate_mean, self._idx, self._src = t, rate, rate_mean, idx, src
        self.state, self.delay_mean = state, delay_mean  # the channel state at round start [K] (CSI)
        self._top = self._ent = None

    @property
    def top_prob(self) -> np.ndarray:
        if self._top is None:
            self._top = self._src[0][self._idx]
        return self._top

    @property
    def entropy(self) -> np.ndarray:
        if self._ent is None:
            self._ent = self._src[1][self._idx]
        return self._ent


@dataclass
class _Inputs:
    cfg: ArenaConfig
    top: np.ndarray  # concatenated streams
    ent: np.ndarray
    run: np.ndarray  # capped cyclic runs, concatenated
    base: np.ndarray  # [K] offset of user k's stream in the concatenation
    n: np.ndarray  # [K] its length
    offset: np.ndarray  # [K] start position
    D: np.ndarray  # [R, K]
    D_mean: np.ndarray  # [R, K] the delay's current mean
    state: np.ndarray  # [R, K] the channel state (index into cfg.delay.levels)
    rate: np.ndarray  # [R, K]
    rate_mean: np.ndarray  # [K]
    survival: np.ndarray  # [K, L_max + 1]


def _inputs(streams: list[Stream], cfg: ArenaConfig, rng: np.random.Generator) -> _Inputs:
    K, R, L_max = cfg.users, cfg.rounds, cfg.L_max
    which = np.arange(K) % len(streams)
    lens = np.array([s.n for s in streams])
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    top = np.concatenate([np.asarray(s.top_prob, float) for s in streams])
    ent = np.concatenate([np.asarray(s.entropy, float) for s in streams])
    run = np.concatenate([s.cyclic_runs(L_max + 1) for s in streams])
    surv = np.array([s.survival(L_max) for s in streams])[which]
    offset = rng.integers(0, lens[which])
    h = cfg.fading.draw(R, K, rng)
    D, D_mean, state = cfg.delay.draw_with_state(R, K, rng)
    return _Inputs(cfg, top, ent, run, starts[which], lens[which], offset, D, D_mean, state, cfg.rate(h),
                   np.full(K, float(cfg.rate(1.0))), surv)


def _env(inp: _Inputs, rng: np.random.Generator) -> Env:
    c = inp.cfg
    return Env(K=c.users, L_max=c.L_max, t_d=c.t_d, t0=c.t0, t1=c.t1, mean_delay_s=c.delay.mean_s,
               bits_per_token=c.bits_per_token, energy=c.energy_model, energy_budget_j=float(c.energy_budget_j),
               rng=rng, survival=inp.survival, delay_levels_s=tuple(c.delay.levels))


class TraceLinks:
    """The arena's round model (:class:`spinlib.online.player.RoundModel`): ``K`` independent links
    replaying token streams (module docstring). The round of user ``k`` drafting ``L`` tokens from
    stream position ``p``: ``A = min(run[p], L)``, ``N = A + 1``, ``p <- p + N``,
    ``T = L t_d + L S / R_t + t0 + t1 (L + 1) + D_t`` [s], ``E`` by the energy model [J].
    ``history`` holds ``L``, ``N``, ``T``, ``E`` ``[R, K]`` of the rounds played."""

    def __init__(self, inp: _Inputs):
        c = inp.cfg
        self.inp, self.cfg, self.K = inp, c, c.users
        self.energy = c.energy_model
        self.pos = inp.offset.copy()
        self.ahead = np.arange(c.L_max)[None, :]
        self.history = {k: np.empty((c.rounds, c.users)) for k in ("L", "N", "T", "E")}
        self.run = None

    @classmethod
    def draw(cls, streams: list[Stream], config: ArenaConfig, rng: np.random.Generator) -> "TraceLinks":
        """Links with the inputs drawn from ``rng`` as :func:`run_arena` draws one seed's: start offsets,
        fading, then delays."""
        return cls(_inputs(streams, config, rng))

    def done(self, t: int) -> bool:
        return t >= self.cfg.rounds

    def context(self, t: int) -> _Ctx:
        inp = self.inp
        cur = inp.base + self.pos % inp.n
        self.run = inp.run[cur]  # the round's capped run at each user's position
        idx = inp.base[:, None] + (self.pos[:, None] + self.ahead) % inp.n[:, None]
        return _Ctx(t, inp.rate[t], inp.rate_mean, idx, (inp.top, inp.ent), inp.state[t], inp.D_mean[t])

    def reference(self, choice, t: int, who: str) -> np.ndarray:
        return check_lengths(choice, self.K, self.cfg.L_max, who)

    def realise(self, t: int, L: np.ndarray) -> Outcome:
        c, inp = self.cfg, self.inp
        rate = inp.rate[t]
        A = np.minimum(self.run, L)
        N = A + 1
        up = L * (c.bits_per_token / rate)
        wait = c.t0 + c.t1 * (L + 1) + inp.D[t]
        T = user_round_time(L * c.t_d, up, wait)
        E = self.energy.round_energy(L, up, wait)
        self.pos = self.pos + N
        h = self.history
        h["L"][t], h["N"][t], h["T"][t], h["E"][t] = L, N, T, E
        return Outcome(L, A, N, T, E, inp.D[t], rate)


class _Clairvoyant:
    """The per-round clairvoyant of the regret (module docstring): it reads the links' run, delay and
    rate of the round and drafts ``clip(run[p], 1, L_max)`` when ``c_t > s_t``, else 1."""

    def __init__(self, links: TraceLinks):
        self.links = links

    def choose(self, ctx) -> np.ndarray:
        c, t = self.links.cfg, ctx.t
        fixed_cost = c.t0 + c.t1 + self.links.inp.D[t]
        slope = c.t_d + c.bits_per_token / ctx.rate + c.t1
        return np.where(fixed_cost > slope, np.clip(self.links.run, 1, c.L_max), 1)

    @never_stops
    def stop(self, ctx, L_ref: np.ndarray) -> np.ndarray:
        return L_ref

    def update(self, out: Outcome) -> None:
        pass


def _simulate(inp: _Inputs, policy) -> dict:
    """Run one controller (or the clairvoyant when ``policy == "clairvoyant"``) on the arena's links
    (:func:`spinlib.online.player.play_rounds`); arrays ``[R, K]``."""
    links = TraceLinks(inp)
    decider = _Clairvoyant(links) if isinstance(policy, str) and policy == "clairvoyant" else policy
    play_rounds(decider, links, f"controller {type(decider).__name__}")
    return links.history


def _weighted_quantiles(x: np.ndarray, w: np.ndarray, qs) -> list[float]:
    order = np.argsort(x, kind="stable")
    xs, cw = x[order], np.cumsum(w[order])
    return [float(xs[min(np.searchsorted(cw, q * cw[-1]), xs.size - 1)]) for q in qs]


def energy_queue(E: np.ndarray, budget: float) -> np.ndarray:
    """``Z_t`` [J] after each round (``[R, K]``) of ``Z(t+1) = max(Z(t) + E(t) - budget, 0)``, ``Z(0) = 0``
    (Lindley's recursion in closed form: ``Z_t = S_t - min_{s<=t} S_s``, ``S`` the partial sums)."""
    if math.isinf(budget):
        return np.zeros_like(E)
    S = np.vstack([np.zeros((1, E.shape[1])), np.cumsum(E - budget, axis=0)])
    return (S - np.minimum.accumulate(S, axis=0))[1:]


def _metrics(sim: dict, cfg: ArenaConfig) -> dict:
    N, T, E, L = sim["N"], sim["T"], sim["E"], sim["L"]
    p50, p95, p99 = _weighted_quantiles((T / N).ravel(), N.ravel(), (0.5, 0.95, 0.99))
    Z = energy_queue(E, cfg.energy_budget_j)
    return {"user_goodput_tokens_per_s": float(np.mean(N.sum(0) / T.sum(0))),
            "latency_p50_ms": 1e3 * p50, "latency_p95_ms": 1e3 * p95, "latency_p99_ms": 1e3 * p99,
            "energy_per_token_j": float(E.sum() / N.sum()), "energy_per_round_j": float(E.mean()),
            "energy_debt_j": float(Z[-1].mean()), "mean_L": float(L.mean()), "tokens_per_round": float(N.mean()),
            "round_time_s": float(T.mean())}


@dataclass
class ArenaResult:
    """Per seed and controller: ``rows`` (dicts of metrics); regret curves ``[seeds, R]`` (mean over
    users) against the best fixed length in hindsight (``regret_fixed``) and the clairvoyant."""

    config: ArenaConfig
    labels: list
    rows: list
    regret_fixed: dict
    regret_clairvoyant: dict
    best_fixed_L: list  # per seed: [K] best fixed length in hindsight
    lengths: dict = field(default_factory=dict)  # label -> [seeds, R, K] drafted lengths (keep_lengths=True)

    def frame(self):
        import pandas as pd

        return pd.DataFrame(self.rows)

    def summary(self, confidence: float = 0.95):
        """Mean over seeds and a bootstrap interval (``scipy.stats.bootstrap``, percentile) per metric."""
        import pandas as pd

        df = self.frame()
        metrics = [c for c in df.columns if c not in ("seed", "controller")]
        out = []
        for lab in self.labels:
            d = df[df["controller"] == lab]
            row = {"controller": lab}
            for m in metrics:
                mean, lo, hi = mean_ci(d[m].to_numpy(), confidence)
                row[m], row[m + "_lo"], row[m + "_hi"] = mean, lo, hi
            out.append(row)
        return pd.DataFrame(out).set_index("controller")


def mean_ci(x, confidence: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
    """Mean and bootstrap percentile interval over seeds (``nan`` bounds for fewer than 3 values)."""
    x = np.asarray(x, float)
    m = float(x.mean())
    if x.size < 3 or np.ptp(x) == 0:
        return (m, m, m) if x.size >= 3 else (m, float("nan"), float("nan"))
    from scipy.stats import bootstrap

    r = bootstrap((x,), np.mean, n_resamples=999, confidence_level=confidence, method="percentile",
                  random_state=np.random.default_rng(seed))
    return m, float(r.confidence_interval.low), float(r.confidence_interval.high)


def run_arena(controllers, streams: list[Stream], config: ArenaConfig, *, seed: int = 0, n_seeds: int = 1,
              oracles: bool = True, keep_lengths: bool = False, allow_long: bool = False) -> ArenaResult:
    """Run every controller on identical inputs, ``n_seeds`` times (module docstring).

    Parameters
    ----------
    controllers : list of str or ControllerSpec
        Registered names (``"name:key=value,..."``) or :func:`spinlib.online.registry.cspec` specs.
    streams : list of Stream
        Token streams; user ``k`` reads ``streams[k % len(streams)]``.
    config : ArenaConfig
    seed : int
        Seed of the one generator every draw comes from (offsets, delays, fading; one child per seed
        replicate, one grandchild per controller).
    oracles : bool
        Compute the regret against the best fixed length in hindsight and the clairvoyant.
    keep_lengths : bool
        Keep every round's drafted lengths (``result.lengths[label]``, ``[seeds, R, K]``).
    allow_long : bool
        Run past :data:`ARENA_WORK_LIMIT` user-rounds (refused otherwise, before any work).
    """
    if not isinstance(config, ArenaConfig):
        raise ValidationError("config must be a spinlib.online.ArenaConfig")
    specs: list[ControllerSpec] = [as_spec(c) for c in controllers]
    if not specs:
        raise ValidationError("controllers must name at least one registered controller")
    for s in specs:  # by capability, before any work (spinlib.online.deciders)
        check_playable(s.name, "arena")
    labels = [s.title for s in specs]
    if len(set(labels)) != len(labels):
        raise ValidationError(f"controller labels must be distinct, got {labels}")
    if not streams or not all(isinstance(s, Stream) for s in streams):
        raise ValidationError("streams must be a non-empty list of spinlib.online.Stream (an empty trace cannot be "
                              "replayed)")
    check_int_range("n_seeds", n_seeds, 1, 100_000)
    check_int_range("seed", seed, 0)
    check_bool("allow_long", allow_long)
    work = config.rounds * config.users * n_seeds * len(specs)
    if work > ARENA_WORK_LIMIT and not allow_long:
        raise ValidationError(f"the arena would play {work:,} user-rounds (rounds x users x seeds x controllers), past "
                              f"its budget of {ARENA_WORK_LIMIT:,}; pass allow_long=True (arena --allow-long) to run it")
    root = np.random.default_rng(seed)
    rows, reg_f, reg_c, best_L = [], {lab: [] for lab in labels}, {lab: [] for lab in labels}, []
    lengths = {lab: [] for lab in labels}
    for i, child in enumerate(root.spawn(n_seeds)):
        inp = _inputs(streams, config, child)
        rngs = child.spawn(len(specs))
        # build every controller before running any: a bad parameter fails before the work
        ctrls = [make_controller(s.name, _env(inp, r), **s.kwargs) for s, r in zip(specs, rngs)]
        sims = [_simulate(inp, c) for c in ctrls]
        if oracles:
            fixed = []
            for L in range(1, config.L_max + 1):
                f = make_controller("fixed", _env(inp, None), L=L)
                s = _simulate(inp, f)
                fixed.append(s["T"].sum(0) / s["N"].sum(0))
            fixed = np.array(fixed)  # [L_max, K]
            J_fixed = fixed.min(axis=0)
            best_L.append((fixed.argmin(axis=0) + 1).tolist())
            clair = _simulate(inp, "clairvoyant")
            J_clair = clair["T"].sum(0) / clair["N"].sum(0)
        for lab, sim in zip(labels, sims):
            m = _metrics(sim, config)
            if keep_lengths:
                lengths[lab].append(sim["L"].astype(np.int16))
            if oracles:
                cT, cN = np.cumsum(sim["T"], 0), np.cumsum(sim["N"], 0)
                rf = (cT - J_fixed * cN).mean(axis=1)
                rc = (cT - J_clair * cN).mean(axis=1)
                reg_f[lab].append(rf)
                reg_c[lab].append(rc)
                m["regret_fixed_s"] = float(rf[-1])
                m["regret_clairvoyant_s"] = float(rc[-1])
                m["best_fixed_tokens_per_s"] = float(np.mean(1.0 / J_fixed))
                m["clairvoyant_tokens_per_s"] = float(np.mean(1.0 / J_clair))
            rows.append({"seed": i, "controller": lab, **m})
    return ArenaResult(config, labels, rows, {k: np.array(v) for k, v in reg_f.items()},
                       {k: np.array(v) for k, v in reg_c.items()}, best_L,
                       {k: np.array(v) for k, v in lengths.items()} if keep_lengths else {})


__all__ = ["DELAY_KINDS", "IID_DELAY_KINDS", "LEVEL_DELAY_KINDS", "Delay", "Stream", "ArenaConfig", "Outcome", "TraceLinks",
           "ArenaResult", "run_arena", "energy_queue",
           "mean_ci"]
