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
* **specstop-known** is the optimal stopping rule with known statistics
  (:func:`spinlib.online.stopping.optimal_stopping` on the stream's true survival, or its i.i.d.
  fit, and the mean delay and upload time): an oracle.

Every arm is played once first (round robin); ties go to the shorter length.
"""
from __future__ import annotations

import numpy as np

from ..scenario import ValidationError
from .registry import Controller, Env, register_controller
from .stopping import RoundCosts, iid_survival, optimal_stopping


class _ArmStats:
    """Per user and arm (``[K, L_max]``): pulls, sums of N, T, N^2, T^2, N T, N/T, (N/T)^2."""

    def __init__(self, K: int, L_max: int):
        shape = (K, L_max)
        self.n = np.zeros(shape)
        self.sN, self.sT, self.sNN, self.sTT, self.sNT = (np.zeros(shape) for _ in range(5))
        self.sr, self.srr = np.zeros(shape), np.zeros(shape)
        self.t = 0
        self.rows = np.arange(K)

    def add(self, L, N, T) -> None:
        i, j = self.rows, np.asarray(L) - 1
        N, T = np.asarray(N, float), np.asarray(T, float)
        self.n[i, j] += 1
        self.sN[i, j] += N
        self.sT[i, j] += T
        self.sNN[i, j] += N * N
        self.sTT[i, j] += T * T
        self.sNT[i, j] += N * T
        r = N / T
        self.sr[i, j] += r
        self.srr[i, j] += r * r
        self.t += 1


def _pick(index: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Arm per user: an unplayed arm first (the shortest), else the highest index (ties: shortest)."""
    unplayed = n == 0
    first = np.argmax(unplayed, axis=1)
    best = np.argmax(index, axis=1)
    return np.where(unplayed.any(axis=1), first, best) + 1


@register_controller("ucb-specstop", "UCB on the ratio of sums (tokens / time) over lengths 1..L_max", family="specstop")
class UCBSpecStop(Controller):
    def __init__(self, env: Env, c: float = 1.0):
        super().__init__(env)
        if not (isinstance(c, (int, float)) and c >= 0):
            raise ValidationError(f"c must be a number >= 0, got {c!r}")
        self.c = float(c)
        self.st = _ArmStats(env.K, env.L_max)

    def index(self) -> np.ndarray:
        st = self.st
        n = np.maximum(st.n, 1)
        theta = st.sN / np.maximum(st.sT, 1e-300)
        mT = st.sT / n
        # Var(N - theta T) per round, over the arm's pulls
        var = (st.sNN - 2 * theta * st.sNT + theta**2 * st.sTT) / n
        v = np.maximum(var, 0.0) / np.maximum(mT * mT, 1e-300)
        return theta + self.c * self.bonus(v, n, mT)

    def bonus(self, v, n, mT):
        lt = np.log(max(self.st.t, 2))
        b = np.arange(1, self.env.L_max + 1)[None, :] / np.maximum(mT, 1e-300)
        return np.sqrt(2 * lt * v / n) + 3 * b * lt / n

    def choose(self, ctx):
        return _pick(self.index(), self.st.n)

    def update(self, out):
        self.st.add(out.L, out.N, out.T)


@register_controller("naive-ucb", "BanditSpec-style UCB on the mean of per-round throughput N/T", family="specstop")
class NaiveUCB(UCBSpecStop):
    def index(self) -> np.ndarray:
        st = self.st
        n = np.maximum(st.n, 1)
        m = st.sr / n
        v = np.maximum(st.srr / n - m**2, 0.0)
        return m + self.c * self.bonus(v, n, st.sT / n)


@register_controller("specstop-known", "optimal stopping rule with known statistics (oracle: the stream's survival "
                     "or its i.i.d. fit, the mean delay)", family="oracle")
class SpecStopKnown(Controller):
    def __init__(self, env: Env, variant: str = "profile"):
        super().__init__(env)
        if variant not in ("profile", "iid"):
            raise ValidationError(f"variant must be 'profile' or 'iid', got {variant!r}")
        if env.survival is None:
            raise ValidationError("specstop-known needs the streams' survival (the arena provides it)")
        self.variant = variant
        self.cache: dict = {}

    def choose(self, ctx):
        out = np.empty(self.env.K, dtype=int)
        for k in range(self.env.K):
            t_up = self.env.bits_per_token / ctx.rate_mean[k]
            key = (k, round(t_up, 12))
            if key not in self.cache:
                S = self.env.survival[k]
                if self.variant == "iid":
                    alpha = float(S[1])  # i.i.d. fit: P(first draft accepted)
                    S = iid_survival(min(alpha, 1 - 1e-9), self.env.L_max)
                costs = RoundCosts(self.env.t_d, self.env.t0, self.env.t1, self.env.mean_delay_s, t_up)
                self.cache[key] = optimal_stopping(S, costs)[0]
            out[k] = self.cache[key]
        return out


__all__ = ["UCBSpecStop", "NaiveUCB", "SpecStopKnown"]
