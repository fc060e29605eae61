"""BALANCE's schedules played round by round: the testbed of :func:`~spinlib.balance.model.feasible`'s
expected completion times, and BALANCE policies as deciders (:mod:`spinlib.decision`).

Our construction (BALANCE's text is not public; the model is :mod:`.model`'s). The analysis prices an SD
user's generation at its *expected* tokens per round, ``c_k + n_k R_SD / N_k``; here every round is drawn.
One player round (:func:`spinlib.online.player.play_rounds`) is one step of the server under the decider's
plan, a :class:`~spinlib.balance.model.Schedule` (a mode per user and the AD share ``phi``):

* when an SD user is still generating, one SD round of ``R = (L' t_S(s) + t_L(sum_k (L_k + 1))) / (1 - phi)`` [s], with
  ``L_k`` the drafted lengths (the server's ``L`` unless the decider stops earlier), ``L' = max_k L_k``
  and ``s`` the SD batch; each SD user commits ``1 + A_k`` tokens (capped at what it has left), ``A_k``
  its accepted drafts, drawn with ``P(A_k >= i) = pi_i`` (:meth:`~spinlib.balance.model.BalanceUser.
  prefix_probabilities`); at ``L_k = L`` for all, ``R`` is :meth:`~spinlib.balance.model.BalanceServer.
  sd_round_time` ``/ (1 - phi)``, the analysis's round;
* otherwise one stretch of AD steps up to the next AD user's last token (when nobody served is left, the
  run ends: a schedule that serves nobody plays no round);
* in both, the AD batch makes one token per user every ``tau_AD = t_L(a) / phi`` [s] of the round.

A user completes at ``c_k`` plus the time its last token is committed; it meets its deadline when that is
``<= T_k`` (relative tolerance :data:`~spinlib.balance.model.TOL`). The batch sizes ``a`` and ``s`` are the
plan's throughout (``shrink=False``, the analysis's pricing: a finished user keeps its slot, and its
drafts count at ``L``), or only the users still generating at the round's start (``shrink=True``: steps
get cheaper as users finish; the analysis is then conservative). So under ``shrink=False`` an AD user completes exactly at the
analysis's time, and an SD user drafting the plan's full length completes in expectation at
``c_k + R E[rho_k]``, ``rho_k`` its rounds, with ``E[rho_m] = 1 + sum_a P(A = a) E[rho_{m-1-a}]``
(:func:`expected_rounds`); by Wald's identity that lies between the analysis's ``c_k + n_k R / N_k`` and
``c_k + (n_k + L) R / N_k`` (before its last round it has at most ``n_k - 1`` tokens, and a round adds
at most ``L + 1``). The tests check all three.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..decision import Outcome, RoundContext, never_stops
from ..online.player import play_rounds
from ..roundcost import sync_round_time
from ..validation import ValidationError
from .model import TOL, BalanceInstance, Schedule
from .registry import solve_balance

AD_TOL = 1e-9  # [token] an AD user's fractional progress this close to a whole token has made it


class PolicyDecider:
    """A BALANCE policy as a decider: its schedule for ``instance`` (solved once, by :func:`solve_balance`
    with ``params``) every round, the SD users drafting the server's full length (no early stop)."""

    def __init__(self, instance: BalanceInstance, policy: str, **params):
        self.schedule = solve_balance(instance, policy, **params)

    def choose(self, ctx) -> Schedule:
        return self.schedule

    @never_stops
    def stop(self, ctx, L_ref: np.ndarray) -> np.ndarray:
        return L_ref

    def update(self, out: Outcome) -> None:
        pass


class ServerRounds:
    """The BALANCE server as a :class:`spinlib.online.player.RoundModel` (module docstring).

    Parameters
    ----------
    instance : BalanceInstance
    rng : numpy.random.Generator
        The acceptance draws.
    shrink : bool
        Batch sizes of the users still generating (``True``) or of the plan (``False``, the analysis's).
    """

    def __init__(self, instance: BalanceInstance, rng: np.random.Generator, *, shrink: bool = False):
        if not isinstance(instance, BalanceInstance):
            raise ValidationError(f"instance must be a BalanceInstance, got {type(instance).__name__}")
        self.instance, self.rng, self.shrink = instance, rng, bool(shrink)
        self.K = instance.num_users
        self.L_max = instance.server.draft_length
        self.pi = np.array([u.prefix_probabilities(self.L_max) for u in instance.users]).reshape(self.K, self.L_max)
        self.left = instance.n.copy()  # tokens still to generate [K]
        self.ad_progress = np.zeros(self.K)  # fractional AD tokens of the current stretch
        self.clock = 0.0  # server time [s]
        self.finish = np.full(self.K, np.nan)  # server time of each user's last token
        self.plan: Schedule | None = None
        self.modes = np.full(self.K, "off")  # the latest plan's modes [K]
        self.rounds = 0

    # ----- the four methods of a round model ----------------------------------------------------------
    def done(self, t: int) -> bool:
        return self.plan is not None and not np.any((self.modes != "off") & (self.left > 0))

    def context(self, t: int) -> RoundContext:
        z = np.zeros(self.K)
        return RoundContext(t, z, z, np.zeros(self.K, dtype=int), z, np.ones((self.K, self.L_max)),
                            np.zeros((self.K, self.L_max)))

    def reference(self, choice, t: int, who: str) -> np.ndarray:
        if not isinstance(choice, Schedule):
            raise ValidationError(f"{who} must plan a BALANCE Schedule (modes and phi), got {type(choice).__name__}")
        if len(choice.modes) != self.K:
            raise ValidationError(f"{who} must plan one mode per user ({self.K}), got {len(choice.modes)}")
        modes = np.array(choice.modes)
        if np.any(modes == "AD") and choice.phi <= 0.0:
            raise ValidationError(f"{who}: AD users need phi > 0, got phi = {choice.phi!r}")
        if np.any(modes == "SD") and choice.phi >= 1.0:
            raise ValidationError(f"{who}: SD users need phi < 1, got phi = {choice.phi!r}")
        self.plan, self.modes = choice, modes  # (a decider may re-plan between rounds; the batches follow it)
        return np.where((modes == "SD") & (self.left > 0), self.L_max, 0).astype(np.int64)

    def realise(self, t: int, L: np.ndarray) -> Outcome:
        srv, modes, phi = self.instance.server, self.modes, self.plan.phi
        active = self.left > 0
        ad, sd = (modes == "AD") & active, (modes == "SD") & active
        if not np.any(ad | sd):  # nobody served is left (a schedule that serves nobody): an empty round
            z = np.zeros(self.K)
            zi = np.zeros(self.K, dtype=np.int64)
            self.rounds += 1
            return Outcome(np.asarray(L, dtype=np.int64), zi, zi, z, z, z, z)
        in_ad = ad if self.shrink else (modes == "AD")
        in_sd = sd if self.shrink else (modes == "SD")
        a, s = int(in_ad.sum()), int(in_sd.sum())
        tau = float(srv.ad_step_time(a)) / phi if a else np.inf
        A = np.zeros(self.K, dtype=np.int64)
        N = np.zeros(self.K, dtype=np.int64)
        if np.any(sd):
            Ls = np.where(sd, L, np.where(in_sd, self.L_max, 0))  # finished slots draft at L (shrink=False)
            # the SD batch's round on its share: drafting makespan, then the target's pass (its fixed and
            # per-position parts, added in this order)
            R = sync_round_time(Ls.max() * (srv.small_t0_s + srv.small_t1_s_per_token * s), srv.large_t0_s,
                                srv.large_t1_s_per_token * float(np.sum(Ls[in_sd] + 1))) / (1.0 - phi)
            u = self.rng.random(self.K)
            acc = (self.pi >= u[:, None]) & (np.arange(self.L_max)[None, :] < L[:, None])
            A = np.where(sd, np.cumprod(acc, axis=1).sum(axis=1), 0)  # the accepted prefix
            N = np.where(sd, np.minimum(1 + A, self.left), 0).astype(np.int64)
            done_sd = sd & (N == self.left)
            self.finish[done_sd] = self.clock + R
        else:
            R = float(np.min(self.left[ad] - self.ad_progress[ad])) * tau  # up to the next AD user's last token
        if np.any(ad):
            n_ad = self.instance.n[ad]
            before = self.ad_progress[ad] + (n_ad - self.left[ad])  # tokens made so far (fractional)
            made = before + R / tau
            last = made >= n_ad - AD_TOL  # (one tolerance for the last token and for whole tokens)
            idx = np.flatnonzero(ad)
            self.finish[idx[last]] = self.clock + (n_ad[last] - before[last]) * tau
            whole = np.where(last, n_ad, np.minimum(np.floor(made + AD_TOL), n_ad - 1))
            N[idx] = (whole - (n_ad - self.left[ad])).astype(np.int64)
            self.ad_progress[idx] = np.where(last, 0.0, made - whole)
        self.left = self.left - N
        self.clock += R
        self.rounds += 1
        T = np.where(active & (modes != "off"), R, 0.0)
        z = np.zeros(self.K)
        return Outcome(np.asarray(L, dtype=np.int64), A.astype(np.int64), N, T, z, z, z)

    # ----- what the run realised ---------------------------------------------------------------------
    def result(self) -> "ServerRun":
        inst = self.instance
        served = self.modes != "off"
        completion = np.where(served, inst.comm + self.finish, np.nan)
        met = served & (completion <= inst.deadline * (1 + TOL))
        return ServerRun(self.plan, tuple(completion.tolist()), tuple(met.tolist()), int(met.sum()), self.rounds)


@dataclass(frozen=True)
class ServerRun:
    """One played generation: the plan, each user's completion [s] (``nan``: not served) and whether it met
    its deadline, the users who did, and the rounds played."""

    schedule: Schedule
    completion_s: tuple
    met: tuple
    served_in_time: int
    rounds: int


def play_balance(instance: BalanceInstance, decider, *, seed=0, shrink: bool = False) -> ServerRun:
    """Play ``decider`` (a :class:`PolicyDecider`, or any decider that plans a :class:`Schedule`) on the
    BALANCE server until every served user has its tokens (module docstring); ``seed`` feeds the
    acceptance draws (an int, a sequence of ints or a Generator)."""
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    model = ServerRounds(instance, rng, shrink=shrink)
    play_rounds(decider, model, who=type(decider).__name__)
    return model.result()


def expected_rounds(pi, n: int) -> float:
    """``E[rho_n]``: the expected SD rounds to commit ``n`` tokens when each round commits ``1 + A`` (capped at
    what is left), ``P(A >= i) = pi_i`` for ``i = 1..L`` (``pi`` [L], non-increasing):
    ``E[rho_m] = 1 + sum_a P(A = a) E[rho_{m-1-a}]``, ``E[rho_m] = 0`` for ``m <= 0`` (exact, O(n L))."""
    p = np.concatenate([[1.0], np.asarray(pi, dtype=float), [0.0]])
    pa = p[:-1] - p[1:]  # P(A = a), a = 0..L
    E = np.zeros(int(n) + 1)
    for m in range(1, int(n) + 1):
        prev = np.array([E[max(m - 1 - a, 0)] for a in range(len(pa))])
        E[m] = 1.0 + float(pa @ prev)
    return float(E[int(n)])


__all__ = ["PolicyDecider", "ServerRounds", "ServerRun", "play_balance", "expected_rounds", "AD_TOL"]
