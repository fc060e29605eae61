"""UCB-SpecStop and its anchors among learners (arXiv 2606.20591 and BanditSpec; our reconstruction).

Arms are the draft lengths ``L = 1..L_max``; a round of arm ``L`` yields ``N`` tokens in ``T``
seconds. The long-run throughput of an arm is a renewal-reward ratio ``E[N] / E[T]``, so

* **ucb-specstop** estimates it by the *ratio of sums* ``theta_L = sum N / sum T`` and plays
  ``argmax_L theta_L + c (sqrt(2 ln t v_L / n_L) + 3 b_L ln t / n_L)``, with ``v_L`` the
  delta-method variance of the ratio (``Var(N - theta T) / mean(T)^2``) and ``b_L = L / mean(T)``
  the range of the tokens of a round in throughput units (an empirical-Bernstein / UCB-V bonus:
  our choice; the paper's exact index is not public);
* **naive-ucb** (BanditSpec-style) estimates the *mean of per-round ratios* ``mean(N / T)`` with
  the same bonus on its own variance: under a random delay ``E[N/T] != E[N]/E[T]`` (Jensen), and
  the mean of ratios favours lengths whose rounds are short when the delay is short;
* **ucb-specstop-token** is a per-token-aware variant (our construction; the paper's abstract does
  not say whether or how its index reads per-token signals): its arms are the thresholds ``h`` of
  SpecDec++'s stopping rule (stop after draft token ``i`` once ``1 - prod_{j<=i} q_j > h``, ``q_j`` the
  draft's top-token probability), not lengths; the round's length follows the draft's confidence
  token by token, and the same ratio-of-sums index with the same bonus (range ``b = L_max / mean(T)``)
  learns which threshold gives the most tokens per second under this user's delay;
* **specstop-known** is the optimal stopping rule with known statistics
  (:func:`spinlib.online.stopping.optimal_stopping` on the stream's true survival, or its i.i.d.
  fit, and the mean delay and upload time): an oracle.

Every arm is played once first (round robin); ties go to the shorter length.
"""
from __future__ import annotations

import numpy as np

from ..validation import ValidationError
from .anchors import first_true
from .registry import Controller, Env, register_controller
from .stopping import RoundCosts, iid_survival, optimal_stopping, rule_length


class _ArmStats:
    """Per context, user and arm (``[C, K, L_max]``): pulls and sums of N, T, N^2, T^2, N T, N/T, (N/T)^2.

    With a discount ``gamma < 1`` every sum of a user is multiplied by ``gamma`` before the round's
    outcome is added (discounted UCB: the statistics forget at rate ``1 - gamma`` per round, so the
    index follows a delay that drifts); ``gamma = 1`` keeps plain sums.
    """

    FIELDS = ("n", "sN", "sT", "sNN", "sTT", "sNT", "sr", "srr")

    def __init__(self, K: int, L_max: int, contexts: int = 1, gamma: float = 1.0):
        for f in self.FIELDS:
            setattr(self, f, np.zeros((contexts, K, L_max)))
        self.gamma = float(gamma)
        self.rows = np.arange(K)

    def add(self, L, N, T, c=0) -> None:
        i, j, c = self.rows, np.asarray(L) - 1, np.broadcast_to(np.asarray(c), self.rows.shape)
        N, T = np.asarray(N, float), np.asarray(T, float)
        if self.gamma < 1:
            for f in self.FIELDS:
                getattr(self, f)[:, i, :] *= self.gamma
        r = N / T
        for f, v in zip(self.FIELDS, (1.0, N, T, N * N, T * T, N * T, r, r * r)):
            getattr(self, f)[c, i, j] += v

    def at(self, c=0) -> dict:
        """Each field as ``[K, L_max]`` for the context ``c`` of each user (an int or ``[K]``)."""
        c = np.broadcast_to(np.asarray(c), self.rows.shape)
        return {f: getattr(self, f)[c, self.rows, :] for f in self.FIELDS}


def _pick(index: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Arm per user: an unplayed arm first (the shortest), else the highest index (ties: shortest)."""
    unplayed = n == 0
    first = np.argmax(unplayed, axis=1)
    best = np.argmax(index, axis=1)
    return np.where(unplayed.any(axis=1), first, best) + 1


def _check_c_gamma(c, gamma) -> None:
    if isinstance(c, bool) or not (isinstance(c, (int, float)) and c >= 0 and np.isfinite(c)):
        raise ValidationError(f"c must be a finite number >= 0, got {c!r}")
    if isinstance(gamma, bool) or not (isinstance(gamma, (int, float)) and 0 < gamma <= 1):
        raise ValidationError(f"gamma must be in (0, 1] (1: no discount), got {gamma!r}")


@register_controller("ucb-specstop", "UCB on the ratio of sums (tokens / time) over lengths 1..L_max; gamma < 1 "
                     "discounts the past (for a drifting delay)", family="specstop")
class UCBSpecStop(Controller):
    contexts = 1

    def __init__(self, env: Env, c: float = 1.0, gamma: float = 1.0):
        super().__init__(env)
        _check_c_gamma(c, gamma)
        self.c, self.gamma = float(c), float(gamma)
        self.st = _ArmStats(env.K, env.L_max, self.contexts, self.gamma)

    def context(self, ctx):
        return 0

    def index(self, c=0) -> np.ndarray:
        st = self.st.at(c)
        n = np.where(st["n"] > 0, st["n"], 1.0)  # unplayed arms are played first (_pick): any finite value
        theta = st["sN"] / np.maximum(st["sT"], 1e-300)
        mT = st["sT"] / n
        # Var(N - theta T) per round, over the arm's pulls
        var = (st["sNN"] - 2 * theta * st["sNT"] + theta**2 * st["sTT"]) / n
        v = np.maximum(var, 0.0) / np.maximum(mT * mT, 1e-300)
        return theta + self.c * self.bonus(v, st["n"], mT)

    def bonus(self, v, n, mT):
        # ln of the (discounted) number of rounds this user has played in this context
        lt = np.log(np.maximum(n.sum(axis=1, keepdims=True), 2))
        n = np.where(n > 0, n, 1.0)
        b = np.arange(1, self.env.L_max + 1)[None, :] / np.maximum(mT, 1e-300)
        return np.sqrt(2 * lt * v / n) + 3 * b * lt / n

    def choose(self, ctx):
        c = self.context(ctx)
        self._c = c
        return _pick(self.index(c), self.st.at(c)["n"])

    def update(self, out):
        self.st.add(out.L, out.N, out.T, self._c)


@register_controller("ucb-specstop-csi", "contextual UCB-SpecStop: one ratio-of-sums index per channel state "
                     "(delay level x uplink good/bad, known before each round)", family="specstop")
class UCBSpecStopCSI(UCBSpecStop):
    """The contextual variant: the channel state of a round is ``2 d + b``, ``d`` the delay's level
    (``ctx.state``) and ``b = 1`` when the uplink rate is below its no-fading value (``ctx.rate <
    ctx.rate_mean``: a fade); one set of arm statistics per state."""

    def __init__(self, env: Env, c: float = 1.0, gamma: float = 1.0):
        self.contexts = 2 * max(len(env.delay_levels_s), 1)
        super().__init__(env, c=c, gamma=gamma)

    def context(self, ctx):
        state = getattr(ctx, "state", None)
        d = np.zeros(self.env.K, dtype=np.int64) if state is None else np.asarray(state, dtype=np.int64)
        fade = np.asarray(ctx.rate) < np.asarray(ctx.rate_mean) * (1 - 1e-9)
        return 2 * d + fade.astype(np.int64)


@register_controller("naive-ucb", "BanditSpec-style UCB on the mean of per-round throughput N/T", family="specstop")
class NaiveUCB(UCBSpecStop):
    def index(self, c=0) -> np.ndarray:
        st = self.st.at(c)
        n = np.where(st["n"] > 0, st["n"], 1.0)
        m = st["sr"] / n
        v = np.maximum(st["srr"] / n - m**2, 0.0)
        return m + self.c * self.bonus(v, st["n"], st["sT"] / n)


@register_controller("ucb-specstop-token", "per-token-aware UCB-SpecStop (our variant): UCB on the ratio of sums "
                     "over the thresholds h of SpecDec++'s per-token stopping rule, arms = evenly spaced h in "
                     "[h_min, h_max]", family="specstop")
class UCBSpecStopToken(UCBSpecStop):
    """Per-token-aware UCB-SpecStop (module docstring): ``arms`` thresholds ``h = linspace(h_min, h_max,
    arms)``; each round a user plays the threshold of highest index and drafts until SpecDec++'s rule
    (:class:`spinlib.online.anchors.SpecDecPP`) or ``L_max`` stops it. With one arm it is SpecDec++ at
    ``h_min``. ``c`` and ``gamma`` as in :class:`UCBSpecStop`."""

    def __init__(self, env: Env, c: float = 1.0, gamma: float = 1.0, h_min: float = 0.1, h_max: float = 0.9,
                 arms: int = 9):
        super().__init__(env, c, gamma)  # c and gamma checked and kept as UCB-SpecStop's; the arms differ
        for name, v in (("h_min", h_min), ("h_max", h_max)):
            if isinstance(v, bool) or not (isinstance(v, (int, float)) and 0 < v < 1):
                raise ValidationError(f"{name} must be in (0, 1), got {v!r}")
        if h_max < h_min:
            raise ValidationError(f"h_max must be >= h_min ({h_min!r}), got {h_max!r}")
        if isinstance(arms, bool) or not (isinstance(arms, int) and 1 <= arms <= 64):
            raise ValidationError(f"arms must be an integer in [1, 64], got {arms!r}")
        if arms > 1 and h_max == h_min:
            raise ValidationError(f"arms > 1 needs h_max > h_min, got h_min = h_max = {h_min!r}")
        self.h = self.thresholds(h_min, h_max, arms)
        self.st = _ArmStats(env.K, arms, self.contexts, self.gamma)

    @staticmethod
    def thresholds(h_min: float, h_max: float, arms: int) -> np.ndarray:
        """The arms: ``arms`` thresholds evenly spaced over ``[h_min, h_max]``, shape ``[arms]``."""
        return np.linspace(float(h_min), float(h_max), int(arms))

    def bonus(self, v, n, mT):
        lt = np.log(np.maximum(n.sum(axis=1, keepdims=True), 2))
        n = np.where(n > 0, n, 1.0)
        return np.sqrt(2 * lt * v / n) + 3 * (self.env.L_max / np.maximum(mT, 1e-300)) * lt / n

    def choose(self, ctx):
        self._c = self.context(ctx)
        self._arm = _pick(self.index(self._c), self.st.at(self._c)["n"]) - 1
        return np.full(self.env.K, self.env.L_max)

    def stop(self, ctx, L_ref):
        reject = 1.0 - np.cumprod(ctx.top_prob, axis=1) > self.h[self._arm][:, None]
        return np.minimum(first_true(reject, self.env.L_max), L_ref)

    def update(self, out):
        self.st.add(self._arm + 1, out.N, out.T, self._c)


@register_controller("specstop-known", "optimal stopping rule with known statistics (oracle: the stream's survival "
                     "or its i.i.d. fit; csi=state: the state-dependent threshold of each round's uplink cost)",
                     family="oracle", needs=("true-survival",))
class SpecStopKnown(Controller):
    """The optimal stopping rule with the streams' statistics known (an oracle, not a learner).

    ``csi="none"``: one length per user, the optimum of the mean costs (mean delay, no-fading upload
    time). ``csi="state"``: the state-dependent threshold. The long-run per-token latency
    ``sum T / sum N`` of a policy that reacts to the channel is minimised by minimising
    ``E[C_t(L)] - lambda* E[N(L)]`` in every round (Dinkelbach over rounds, ``lambda*`` the optimal
    latency), i.e. drafting token ``i + 1`` while ``lambda* S(i+1) > s_t`` with ``s_t = t_d + t1 +
    bits / R_t`` this round's cost per drafted token. The fixed cost ``t0 + t1 + D_t`` does not
    enter the rule: a delay state changes the threshold only through ``lambda*``. ``lambda`` is the
    controller's running ``sum T / sum N`` (from the mean-cost optimum before the first round).
    """

    def __init__(self, env: Env, variant: str = "profile", csi: str = "none"):
        super().__init__(env)
        if variant not in ("profile", "iid"):
            raise ValidationError(f"variant must be 'profile' or 'iid', got {variant!r}")
        if csi not in ("none", "state"):
            raise ValidationError(f"csi must be 'none' (mean costs) or 'state' (each round's uplink cost), got {csi!r}")
        if env.survival is None:
            raise ValidationError("specstop-known needs the streams' survival (the arena provides it)")
        self.variant, self.csi = variant, csi
        self.S = []
        for k in range(env.K):
            S = env.survival[k]
            if variant == "iid":
                S = iid_survival(min(float(S[1]), 1 - 1e-9), env.L_max)  # i.i.d. fit: P(first draft accepted)
            self.S.append(S)
        self.cache: dict = {}
        self.sT, self.sN = np.zeros(env.K), np.zeros(env.K)

    def _mean_optimum(self, k: int, t_up: float) -> tuple[int, float]:
        key = (k, round(t_up, 12))
        if key not in self.cache:
            costs = RoundCosts(self.env.t_d, self.env.t0, self.env.t1, self.env.mean_delay_s, t_up)
            self.cache[key] = optimal_stopping(self.S[k], costs)
        return self.cache[key]

    def choose(self, ctx):
        out = np.empty(self.env.K, dtype=int)
        for k in range(self.env.K):
            L, lam = self._mean_optimum(k, self.env.bits_per_token / ctx.rate_mean[k])
            if self.csi == "state":
                lam = self.sT[k] / self.sN[k] if self.sN[k] > 0 else lam
                s_t = self.env.t_d + self.env.t1 + self.env.bits_per_token / ctx.rate[k]
                L = rule_length(self.S[k], lam, s_t, 1)
            out[k] = L
        return out

    def update(self, out):
        self.sT += out.T
        self.sN += out.N


__all__ = ["UCBSpecStop", "UCBSpecStopCSI", "UCBSpecStopToken", "NaiveUCB", "SpecStopKnown"]
