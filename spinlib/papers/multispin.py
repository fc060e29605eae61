"""Paper 1 as written: Multi-SPIN (Zheng et al., arXiv 2606.04581), its round model, algorithms and baselines.

**The paper's model** (Sec. II-III; every symbol is the paper's), one round of ``K`` devices::

    T^dr_k  = L_k T^S_k                                       drafting (2)                 [s]
    T^tx_k  = Q^tok L_k / (B_k r_k),  r_k = log2(1 + p_k H_k / N0)   upload (8)-(9)         [s]
    T^ver   = T^fix + K T^lin                                 batched verification (7)     [s]
    T^e2e   = max_k L_k (T^S_k + Q^tok / (B_k r_k)) + T^ver   round (26), zero-padded batch [s]
    tau     = sum_k E[N_k | L_k] / T^e2e,  E[N | L] = (1 - alpha^(L+1)) / (1 - alpha)   (12), (27)

with ``L_k`` in ``1..L_max`` (``L_max = 25``, Sec. VI-A), ``sum_k B_k <= B`` and no access, feedback,
downlink or energy term. The rate is linear in the bandwidth (``N0`` is a noise *power*). The round is
:func:`spinlib.roundcost.sync_round_time` with no downlink and no overhead.

**The paper's algorithms.**

* Lemma 1 (20)-(21): for a common length the split equalises ``T^S_k + Q^tok / (B_k r_k) = theta*``;
  Lemma 3 (31)-(32): for lengths ``L`` it equalises ``L_k (T^S_k + Q^tok / (B_k r_k)) = phi``, the root of
  ``sum_k Q^tok L_k / (r_k (phi - L_k T^S_k)) = B`` (:func:`makespan_split`; exact: every finish time
  falls in ``B_k``, so at the optimum they are equal).
* Theorem 1 (24): the homogeneous length in closed form through the Lambert W function's lower branch
  (:func:`homogeneous_length`), interior iff ``T^ver / theta* > (1 - alpha) / (alpha |ln alpha|)``.
* Proposition 1 (36)-(37), App. E-F: the relaxed length of each device for multipliers ``(phi, lambda)``,
  ``L~_k = phi / T^S_k - (2 / beta_k) W_0(e^(c_k) sqrt(lambda Q^tok phi beta_k (e^beta_k - 1) / r_k) / (2 T^S_k))``,
  ``beta_k = -ln alpha_k``, ``c_k = beta_k phi / (2 T^S_k)`` (:func:`relaxed_lengths`), rounded (36).
* Algorithm 1: the 2-D grid over ``(phi, lambda)`` (:func:`algorithm1`), ranges from App. G.

**Baselines** (Sec. VI-A4): Fixed BW&L (``L = 8``, ``B_k = B / K``), Uni-BW (heterogeneous lengths with
``B_k = B / K``), Homo-Multi-SPIN (one length by exhaustive search, Lemma 1's split), P2P-SPIN (one device,
the whole band). :func:`exhaustive_optimum` is the independent reference: every length vector in
``1..L_max`` with Lemma 3's exact split (small ``K``).

**Ours, stated as such:** the grid sizes and spacing of Algorithm 1 (the paper does not give them), the
reading of App. G's ``lambda`` bound at ``phi_hi`` (garbled in the text), and Uni-BW given its *exact*
optimum under the equal split (every makespan candidate ``L theta_k``), which can only help that baseline.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.special import lambertw

from ..roots import newton_decreasing
from ..roundcost import iid_expected_tokens, makespan, sync_round_time
from ..validation import ValidationError, check_int_range

#: the paper's largest draft length (Sec. VI-A: every exhaustive search is over 1..25)
L_MAX = 25
#: Fixed BW&L's length (Sec. VI-A4)
FIXED_LENGTH = 8


def _vector(name: str, x, K: int | None = None, lo: float = 0.0, hi: float = np.inf, open_lo: bool = True):
    a = np.asarray(x, dtype=float)
    if a.ndim != 1 or a.size == 0 or (K is not None and a.size != K):
        raise ValidationError(f"{name} must be a 1-D array of {K or 'one or more'} values, got shape {a.shape}")
    bad = ~np.isfinite(a) | (a <= lo if open_lo else a < lo) | (a >= hi)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise ValidationError(f"{name}[{k}] must be in {'(' if open_lo else '['}{lo:g}, {hi:g}), got {a[k]!r}")
    a = a.copy()
    a.flags.writeable = False
    return a


def _positive(name: str, x, zero_ok: bool = False) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)) or not np.isfinite(x) \
            or x < 0 or (x == 0 and not zero_ok):
        raise ValidationError(f"{name} must be a finite number {'>= 0' if zero_ok else '> 0'}, got {x!r}")
    return float(x)


@dataclass(frozen=True, eq=False)
class MultiSpinCell:
    """One round of paper 1's model (arrays ``[K]``).

    Parameters
    ----------
    draft_s : array [K]
        ``T^S_k`` [s/token] > 0.
    alpha : array [K]
        ``alpha_k`` in (0, 1), the i.i.d. acceptance rate (10).
    spectral_eff : array [K]
        ``r_k = log2(1 + p_k H_k / N0)`` [bit/s/Hz] > 0 on this round's channel (8).
    bandwidth_hz : float
        ``B`` [Hz] > 0.
    bits_per_token : float
        ``Q^tok = |V^| (Q_B + ceil(log2 V))`` [bit] > 0 (9).
    t_fix_s, t_lin_s : float
        ``T^fix`` [s] and ``T^lin`` [s per device] of (7), >= 0.
    L_max : int
        Largest draft length (1..64; the paper's 25).
    """

    draft_s: np.ndarray
    alpha: np.ndarray
    spectral_eff: np.ndarray
    bandwidth_hz: float
    bits_per_token: float
    t_fix_s: float
    t_lin_s: float
    L_max: int = L_MAX

    def __post_init__(self) -> None:
        T = _vector("draft_s", self.draft_s)
        object.__setattr__(self, "draft_s", T)
        object.__setattr__(self, "alpha", _vector("alpha", self.alpha, T.size, 0.0, 1.0))
        object.__setattr__(self, "spectral_eff", _vector("spectral_eff", self.spectral_eff, T.size))
        object.__setattr__(self, "bandwidth_hz", _positive("bandwidth_hz", self.bandwidth_hz))
        object.__setattr__(self, "bits_per_token", _positive("bits_per_token", self.bits_per_token))
        object.__setattr__(self, "t_fix_s", _positive("t_fix_s", self.t_fix_s, zero_ok=True))
        object.__setattr__(self, "t_lin_s", _positive("t_lin_s", self.t_lin_s, zero_ok=True))
        check_int_range("L_max", self.L_max, 1, 64)

    @property
    def K(self) -> int:
        return int(self.draft_s.size)

    @property
    def t_ver(self) -> float:
        """``T^ver = T^fix + K T^lin`` [s] (7): per device in the batch, whatever the lengths."""
        return self.t_fix_s + self.K * self.t_lin_s

    @property
    def beta(self) -> np.ndarray:
        return -np.log(self.alpha)


def check_lengths(cell: MultiSpinCell, L) -> np.ndarray:
    """``L [..., K]`` as ints in ``1..L_max`` (the paper's ``L_k in Z+``), else one line."""
    a = np.asarray(L)
    if a.shape[-1:] != (cell.K,) or not np.issubdtype(a.dtype, np.integer):
        raise ValidationError(f"draft lengths must be integers of shape [..., {cell.K}], got {a.dtype} {a.shape}")
    if a.size and (a.min() < 1 or a.max() > cell.L_max):
        raise ValidationError(f"draft lengths must be in 1..{cell.L_max} (paper 1: L_k in Z+), "
                              f"got {int(a.min())}..{int(a.max())}")
    return a.astype(np.int64)


def expected_tokens(cell: MultiSpinCell, L) -> np.ndarray:
    """``E[N_k | L_k]`` (12) [token], ``[..., K]``."""
    return iid_expected_tokens(cell.alpha, L)


def round_time(cell: MultiSpinCell, L, b) -> np.ndarray:
    """``T^e2e = max_k L_k (T^S_k + Q^tok / (B_k r_k)) + T^ver`` (26) [s], ``[...]`` (the round-cost kernel)."""
    L = np.asarray(L, dtype=float)
    with np.errstate(divide="ignore"):
        upload = L * cell.bits_per_token / (np.asarray(b, dtype=float) * cell.spectral_eff)
    return sync_round_time(makespan(L * cell.draft_s, upload), cell.t_ver)


def goodput(cell: MultiSpinCell, L, b) -> np.ndarray:
    """``tau(B, L) = sum_k E[N_k | L_k] / T^e2e`` (27) [token/s], ``[...]``."""
    return expected_tokens(cell, L).sum(axis=-1) / round_time(cell, L, b)


def equal_split(cell: MultiSpinCell) -> np.ndarray:
    """``B_k = B / K`` [Hz] (the Fixed BW&L and Uni-BW baselines)."""
    return np.full(cell.K, cell.bandwidth_hz / cell.K)


def makespan_split(cell: MultiSpinCell, L):
    """Lemma 3 (31)-(32): the least makespan ``phi`` [s] for lengths ``L [..., K]`` and its split ``B [..., K]`` [Hz].

    ``phi`` is the root of ``sum_k Q^tok L_k / (r_k (phi - L_k T^S_k)) = B`` on ``(max_k L_k T^S_k, inf)``,
    bracketed above by ``max_k L_k T^S_k + sum_k Q^tok L_k / (r_k B)`` and found by safeguarded Newton in
    ``u = log(phi - max_k L_k T^S_k)`` (:func:`spinlib.roots.newton_decreasing`). With ``L = 1`` it is
    Lemma 1's ``theta*`` (20). Every ``L_k (T^S_k + Q^tok / (B_k r_k))`` equals ``phi``.
    """
    L = np.asarray(L, dtype=float)
    a = L * cell.draft_s  # [..., K]
    w = cell.bits_per_token * L / cell.spectral_eff  # [..., K] bit / (bit/s/Hz)
    lo = a.max(axis=-1)
    span = w.sum(axis=-1) / cell.bandwidth_hz  # phi_hi - lo
    B = cell.bandwidth_hz

    def fdf(u):
        phi = lo + np.exp(u)
        slack = phi[..., None] - a
        terms = w / slack
        s = terms.sum(axis=-1)
        ds = -(terms / slack).sum(axis=-1) * np.exp(u)
        return np.log(s / B), ds / s

    u_hi = np.log(span)
    u, _, _ = newton_decreasing(fdf, u_hi - 40.0, u_hi, u_hi, tol=1e-15)
    phi = lo + np.exp(u)
    b = w / (phi[..., None] - a)
    return phi, b * (B / b.sum(axis=-1, keepdims=True))  # the Newton stop's residual (<= 1e-10) back to sum = B


def theta_star(cell: MultiSpinCell) -> float:
    """Lemma 1's ``theta*`` [s]: the per-token time every device reaches under the optimal common split (20)-(21)."""
    return float(makespan_split(cell, np.ones(cell.K))[0])


def homogeneous_length(alpha: float, t_ver: float, theta: float, L_max: int = L_MAX) -> int:
    """Theorem 1 (24): the best common length for a common ``alpha`` in (0, 1), ``T^ver`` and ``theta*`` [s].

    The continuous optimum is ``L~* = -ln(-W_{-1}(-alpha^(t - 1) / e)) / ln(alpha) - 1`` with ``t = T^ver / theta*``
    when ``t > (1 - alpha) / (alpha |ln alpha|)`` (interior), else ``L = 1``; the integer optimum is the better
    of its floor and ceiling (23) (goodput (19) is strictly unimodal), clipped to ``1..L_max``.
    """
    a, t = float(alpha), float(t_ver) / float(theta)
    beta = -np.log(a)

    def tau(L):
        return (1.0 - a ** (L + 1.0)) / ((L * theta + t_ver) * (1.0 - a))

    if not t > (1.0 - a) / (a * beta):
        return 1
    w = lambertw(-(a ** (t - 1.0)) / np.e, k=-1).real
    L_c = -np.log(-w) / np.log(a) - 1.0
    cands = np.clip([np.floor(L_c), np.ceil(L_c)], 1, L_max)
    return int(cands[np.argmax([tau(c) for c in cands])])


def _lambertw0_exp(y):
    """``W_0(exp(y))`` for real ``y`` (elementwise), without overflow: scipy's ``lambertw`` up to ``y = 700``,
    above it Newton on ``w + ln w = y`` from ``w = y - ln y`` (``exp(y)`` overflows a double beyond 709;
    tests compare both sides of the switch with scipy)."""
    y = np.asarray(y, dtype=float)
    small = y <= 700.0
    out = np.empty_like(y)
    out[small] = lambertw(np.exp(y[small])).real
    if (~small).any():
        yb = y[~small]
        w = yb - np.log(yb)
        for _ in range(8):
            w = w - (w + np.log(w) - yb) / (1.0 + 1.0 / w)
        out[~small] = w
    return out


def relaxed_lengths(cell: MultiSpinCell, phi, lam):
    """Proposition 1 (37) in App. F's form: ``L~_k(phi, lambda)`` [token], broadcasting ``phi``, ``lambda`` [...] to
    ``[..., K]``; the root of App. E's stationarity ``-alpha^(L+1) ln(alpha) / (1 - alpha) = lambda Q phi /
    (r (phi - L T^S)^2)`` with ``L < phi / T^S`` (tests check the residual)."""
    phi = np.asarray(phi, dtype=float)[..., None]
    lam = np.asarray(lam, dtype=float)[..., None]
    T, beta, r, Q = cell.draft_s, cell.beta, cell.spectral_eff, cell.bits_per_token
    c = beta * phi / (2.0 * T)
    log_arg = c + 0.5 * np.log(lam * Q * phi * beta * np.expm1(beta) / r) - np.log(2.0 * T)
    return phi / T - (2.0 / beta) * _lambertw0_exp(log_arg)


def grid_ranges(cell: MultiSpinCell):
    """App. G's search ranges: ``phi`` in ``[max_k (T^S_k + Q / (B r_k)), max_k L_max (T^S_k + K Q / (B r_k))]`` and
    ``lambda`` up to ``max_k r_k (phi_hi - T^S_k)^2 / (Q phi_hi) beta_k alpha_k^2 / (1 - alpha_k)``, the multiplier at
    which every device's relaxed length is 1 (App. G's bound read at ``phi_hi``; the text is garbled there)."""
    T, r, Q, B, K = cell.draft_s, cell.spectral_eff, cell.bits_per_token, cell.bandwidth_hz, cell.K
    phi_lo = float(np.max(T + Q / (B * r)))
    phi_hi = float(np.max(cell.L_max * (T + K * Q / (B * r))))
    a = cell.alpha
    lam_hi = float(np.max(r * (phi_hi - T) ** 2 / (Q * phi_hi) * cell.beta * a ** 2 / (1.0 - a)))
    return phi_lo, phi_hi, lam_hi


@dataclass(frozen=True)
class Solution:
    """Lengths ``L [K]``, split ``b [K]`` [Hz], the goodput [token/s] and the policy that chose them."""

    L: np.ndarray
    b: np.ndarray
    goodput: float
    policy: str
    evaluated: int = 0  # length vectors evaluated (certified_optimum: intervals split)
    info: dict = field(default_factory=dict, compare=False)  # certified_optimum: upper_bound, gap, status, nodes


def _best(cell: MultiSpinCell, L: np.ndarray, policy: str) -> Solution:
    """The best of the length vectors ``L [n, K]`` under Lemma 3's split."""
    phi, b = makespan_split(cell, L)
    G = expected_tokens(cell, L).sum(axis=-1) / (phi + cell.t_ver)
    i = int(np.argmax(G))
    return Solution(L[i].astype(np.int64), b[i], float(goodput(cell, L[i], b[i])), policy, len(L))


def algorithm1(cell: MultiSpinCell, n_phi: int = 64, n_lambda: int = 64) -> Solution:
    """Hete-Multi-SPIN, paper 1's Algorithm 1: the 2-D grid over ``(phi, lambda)``.

    For each grid pair: ``L_k = round(L~_k(phi, lambda))`` (36)-(37), kept in ``1..min(L_max, ceil(phi / T^S_k) - 1)``
    (``0 < L_k < phi / T^S_k``; a pair where some device cannot draft one token is skipped); then Lemma 3's root
    ``phi^`` for these lengths and ``tau = sum_k E[N_k] / (phi^ + T^ver)`` (33); the best pair wins, with its split
    (39). ``phi`` on an even grid of ``n_phi`` points and ``lambda`` on a geometric grid of ``n_lambda`` points over
    ``[lambda_hi 1e-8, lambda_hi]`` (:func:`grid_ranges`; our choice, the paper does not give its grids).
    """
    check_int_range("n_phi", n_phi, 1, 10_000)
    check_int_range("n_lambda", n_lambda, 1, 10_000)
    phi_lo, phi_hi, lam_hi = grid_ranges(cell)
    P, Lam = np.meshgrid(np.linspace(phi_lo, phi_hi, n_phi), np.geomspace(lam_hi * 1e-8, lam_hi, n_lambda),
                         indexing="ij")
    P, Lam = P.ravel(), Lam.ravel()
    Lt = relaxed_lengths(cell, P, Lam)
    cap = np.minimum(cell.L_max, np.ceil(P[:, None] / cell.draft_s) - 1)
    ok = (cap >= 1).all(axis=1)
    L = np.clip(np.rint(Lt), 1, cap)[ok].astype(np.int64)
    L = np.unique(L, axis=0)
    return _best(cell, L, "hete-multi-spin")


def fixed_bw_l(cell: MultiSpinCell, L: int = FIXED_LENGTH) -> Solution:
    """Fixed BW&L: ``L_k = 8`` and ``B_k = B / K`` (Sec. VI-A4)."""
    Lv = np.full(cell.K, min(L, cell.L_max), dtype=np.int64)
    b = equal_split(cell)
    return Solution(Lv, b, float(goodput(cell, Lv, b)), "fixed-bw-l", 1)


def uni_bw(cell: MultiSpinCell) -> Solution:
    """Uni-BW Multi-SPIN: heterogeneous lengths with ``B_k = B / K``; the exact optimum under that split.

    Each device's per-token time ``theta_k = T^S_k + Q / (B_k r_k)`` is fixed, so for a makespan ``phi`` every device
    drafts ``min(L_max, floor(phi / theta_k))`` (tokens grow with the length); the optimum's makespan is one of the
    ``L theta_k``, and every such candidate is evaluated.
    """
    b = equal_split(cell)
    theta = cell.draft_s + cell.bits_per_token / (b * cell.spectral_eff)
    cand = (np.arange(1, cell.L_max + 1)[:, None] * theta[None, :]).ravel()
    cand = cand[cand >= theta.max() * (1 - 1e-12)]
    L = np.clip(np.floor(cand[:, None] / theta[None, :] * (1 + 1e-12)), 1, cell.L_max).astype(np.int64)
    G = goodput(cell, L, b)
    i = int(np.argmax(G))
    return Solution(L[i], b, float(G[i]), "uni-bw", len(L))


def homo_multi_spin(cell: MultiSpinCell) -> Solution:
    """Homo-Multi-SPIN: one common length by exhaustive search over ``1..L_max`` with Lemma 1's split (Sec. VI-A4)."""
    L = np.repeat(np.arange(1, cell.L_max + 1)[:, None], cell.K, axis=1)
    return _best(cell, L, "homo-multi-spin")


def p2p_spin(cell: MultiSpinCell, k: int) -> Solution:
    """P2P-SPIN: device ``k`` alone with the whole band ``B`` and ``T^ver = T^fix + T^lin``, ``L`` by exhaustive search."""
    one = MultiSpinCell(cell.draft_s[[k]], cell.alpha[[k]], cell.spectral_eff[[k]], cell.bandwidth_hz,
                        cell.bits_per_token, cell.t_fix_s, cell.t_lin_s, cell.L_max)
    L = np.arange(1, cell.L_max + 1)[:, None]
    b = np.full((cell.L_max, 1), cell.bandwidth_hz)
    G = goodput(one, L, b)
    i = int(np.argmax(G))
    return Solution(L[i], b[i], float(G[i]), "p2p-spin", cell.L_max)


def exhaustive_optimum(cell: MultiSpinCell, chunk: int = 200_000, max_vectors: int = 10_000_000) -> Solution:
    """The exact optimum of (P2): every length vector in ``1..L_max`` with Lemma 3's exact split (the reference)."""
    n = cell.L_max ** cell.K
    if n > max_vectors:
        raise ValidationError(f"exhaustive search over {cell.L_max}^{cell.K} length vectors exceeds max_vectors = "
                              f"{max_vectors:,}: use K <= {int(np.log(max_vectors) / np.log(cell.L_max))}")
    best, done = None, 0
    for start in range(0, n, chunk):
        idx = np.arange(start, min(n, start + chunk))
        L = 1 + np.stack(np.unravel_index(idx, (cell.L_max,) * cell.K), axis=-1)
        s = _best(cell, L, "exhaustive")
        done += len(L)
        if best is None or s.goodput > best.goodput:
            best = s
    return Solution(best.L, best.b, best.goodput, "exhaustive", done)


POLICIES = {"hete-multi-spin": algorithm1, "uni-bw": uni_bw, "homo-multi-spin": homo_multi_spin,
            "fixed-bw-l": fixed_bw_l}

__all__ = ["L_MAX", "FIXED_LENGTH", "MultiSpinCell", "Solution", "POLICIES", "check_lengths", "expected_tokens",
           "round_time", "goodput", "equal_split", "makespan_split", "theta_star", "homogeneous_length",
           "relaxed_lengths", "grid_ranges", "algorithm1", "fixed_bw_l", "uni_bw", "homo_multi_spin", "p2p_spin",
           "exhaustive_optimum", "max_tokens_within", "certified_optimum"]


# ------------------------------------------------------------------------------------------------------------------
# Beyond the paper: a certified optimum of (P2) for any K (ours)
# ------------------------------------------------------------------------------------------------------------------
FIT_TOL = 1e-12  # max_tokens_within: the budget row checked in floating point to this fraction of B


def max_tokens_within(cell: MultiSpinCell, phi: float, *, bound: bool = False):
    """``M(phi) = max sum_k E[N_k | L_k]`` over ``L in 1..L_max`` with makespan at most ``phi`` [s], and its lengths.

    Lemma 3's split finishes by ``phi`` iff ``sum_k Q^tok L_k / (r_k (phi - L_k T^S_k)) <= B``: a multiple-choice
    knapsack (one length per device, costs convex and tokens concave in ``L``), solved as a MILP by HiGHS
    (``scipy.optimize.milp``, ``mip_rel_gap = 0``). HiGHS meets the budget row to its feasibility tolerance (we
    measured lengths 1.8e-7 of ``B`` over it), so the lengths are checked against the budget in floating point (to
    :data:`FIT_TOL` of ``B``, the rounding of a sum of ``K`` terms) and, if over, cut off by a no-good row (that vector
    alone) and solved again: the returned lengths always finish by ``phi``, and ``M`` is their expected tokens,
    the exact ``M(phi)`` to HiGHS's optimality tolerance. With ``bound=True`` the last solve's dual bound is returned
    too, an upper bound of ``M(phi)`` (to HiGHS's LP tolerances; only over-budget vectors were cut): ``(M, L, U)``,
    ``U >= M``.
    Returns ``(M, L)``, or ``(-inf, None)`` when no length vector fits (some device cannot draft one token by ``phi``).
    """
    from scipy.optimize import Bounds, LinearConstraint, milp

    K, Lm = cell.K, cell.L_max
    none = (-np.inf, None, -np.inf) if bound else (-np.inf, None)
    Ls = np.arange(1, Lm + 1, dtype=float)
    slack = phi - Ls[None, :] * cell.draft_s[:, None]  # [K, L_max]
    with np.errstate(divide="ignore"):
        cost = np.where(slack > 0, cell.bits_per_token * Ls[None, :] / (cell.spectral_eff[:, None] * slack), np.inf)
    cost = cost / cell.bandwidth_hz
    ok = cost <= 1.0
    if not ok[:, 0].all():
        return none
    value = expected_tokens(cell, np.broadcast_to(Ls, (K, Lm)).T).T  # [K, L_max]
    idx = np.argwhere(ok)  # the variables: (device, length - 1) pairs that fit alone
    n = len(idx)
    one_each = np.zeros((K, n))
    one_each[idx[:, 0], np.arange(n)] = 1.0
    row = cost[idx[:, 0], idx[:, 1]]
    cons = [LinearConstraint(one_each, 1.0, 1.0), LinearConstraint(row[None, :], -np.inf, 1.0)]
    for _ in range(50):
        res = milp(-value[idx[:, 0], idx[:, 1]], integrality=np.ones(n), bounds=Bounds(0, 1), constraints=cons,
                   options={"mip_rel_gap": 0.0, "presolve": True})
        if res.x is None:
            return none
        pick = res.x > 0.5
        chosen = idx[pick]
        M = float(value[chosen[:, 0], chosen[:, 1]].sum())
        if float(row[pick].sum()) <= 1.0 + FIT_TOL:
            L = np.zeros(K, dtype=np.int64)
            L[chosen[:, 0]] = chosen[:, 1] + 1
            upper = float(-res.mip_dual_bound) if np.isfinite(res.mip_dual_bound) else M
            return (M, L, max(upper, M)) if bound else (M, L)
        # over the budget by HiGHS's tolerance: cut this vector off (no other vector is lost) and solve again
        cons.append(LinearConstraint(pick[None, :].astype(float), -np.inf, K - 1.0))
    raise RuntimeError(f"max_tokens_within: 50 vectors in a row over the budget by HiGHS's tolerance at phi = {phi!r}")


def certified_optimum(cell: MultiSpinCell, gap: float = 1e-6, max_nodes: int = 5000) -> Solution:
    """The optimum of (P2) with a certified bound (ours; the paper solves it by Algorithm 1's grid).

    ``max_L sum_k E[N_k] / (phi(L) + T^ver)`` is ``max_phi M(phi) / (phi + T^ver)`` (:func:`max_tokens_within`), with
    ``M`` non-decreasing. On a makespan interval ``[phi_a, phi_b]`` no solution beats ``U(phi_b) / (phi_a + T^ver)``,
    ``U >= M`` the MILP's dual bound (:func:`max_tokens_within` with ``bound=True``); the lengths it returns are
    feasible and scored exactly (Lemma 3). Best-first over intervals, split at
    the midpoint, from ``[theta*, phi(L_max, ..., L_max)]``, until the best open bound is within ``gap`` (relative) of
    the incumbent or ``max_nodes`` intervals were split. The solution's ``info``: ``upper_bound`` [token/s], ``gap``,
    ``status`` ("optimal" when ``gap`` was reached, else "node_limit"), ``nodes``.
    """
    import heapq

    if not (isinstance(gap, (int, float)) and 0 <= gap < 1):
        raise ValidationError(f"gap must be in [0, 1), got {gap!r}")
    check_int_range("max_nodes", max_nodes, 1, 10**7)
    tv = cell.t_ver
    lo = float(makespan_split(cell, np.ones(cell.K))[0])
    hi = float(makespan_split(cell, np.full(cell.K, cell.L_max))[0]) * (1 + 1e-12)
    best = {"G": -np.inf, "L": None}

    def offer(L):
        if L is not None:
            phi, _ = makespan_split(cell, L)
            G = float(expected_tokens(cell, L).sum() / (phi + tv))
            if G > best["G"]:
                best.update(G=G, L=L)

    _, L_hi, M_hi = max_tokens_within(cell, hi, bound=True)  # M_hi: an upper bound of M(hi)
    offer(L_hi)
    offer(np.ones(cell.K, dtype=np.int64))
    heap = [(-M_hi / (lo + tv), lo, hi, M_hi)]
    nodes = 0
    while heap:
        ub = -heap[0][0]
        if ub <= best["G"] * (1 + gap) or nodes >= max_nodes:
            break
        _, a, b, Mb = heapq.heappop(heap)
        m = 0.5 * (a + b)
        _, Lm_, Mm = max_tokens_within(cell, m, bound=True)
        offer(Lm_)
        nodes += 1
        for (x, y, My) in ((a, m, Mm), (m, b, Mb)):
            if My > -np.inf and My / (x + tv) > best["G"] * (1 + gap):
                heapq.heappush(heap, (-My / (x + tv), x, y, My))
    upper = max(best["G"], -heap[0][0]) if heap else best["G"]
    rel = (upper - best["G"]) / upper
    L = best["L"]
    _, b = makespan_split(cell, L)
    return Solution(L, b, float(goodput(cell, L, b)), "certified", nodes,
                    {"upper_bound": float(upper), "gap": float(rel), "nodes": nodes,
                     "status": "optimal" if rel <= gap else "node_limit"})
