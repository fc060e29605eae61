"""Paper 2 as written: "Multi-Access Speculative Inference: Uplink or Downlink?" (Cai, Huang, arXiv 2608.29618).

**The paper's reactive protocol** (Sec. II-III, Figs. 3-5). Every device drafts ``gamma_k`` tokens and uploads
their ids and scalar probabilities (not counted); the server verifies every draft in one batch; only the
devices with a rejection (outcome ``o_k = 1``, probability ``1 - alpha_k^gamma_k``) then exchange *one*
distribution, at the rejection position, either up (UL: the device sends ``pi^S``, the server corrects) or
down (DL: the server sends ``pi^L``, the device corrects). Modes and DL powers are chosen *after* the
outcome, for the rejected devices only; the band is split equally among them. Per round::

    T^comp(gamma)  = max_k gamma_k T^dft_k + T^ver_0 + K T^ver_1                      (15)-(17)   [s]
    S              = V_eff (ceil(log2 V) + Q)       bits of one exchanged distribution (19)        [bit]
    UL, full power: tau^ul_k = S / (b log2(1 + P^ul_k |h_k|^2 / (N0^ser b))),   b = B / |R(o)|  (18), (33)
    DL, Lemma 1:    p_k(tau) = (N0^dev b / |h_k|^2)(2^(S / (b tau)) - 1),  sum_{k in D} p_k = P^dl   (35)-(36)
    T^comm_min(o)  = min over UL/DL assignments of max(tau^ul(U), tau^dl(D))          (30)
    G(gamma)       = L_bar(gamma) / (T^comp(gamma) + E_o[T^comm_min(o)]),  L_bar = sum_k (1 - alpha_k^(gamma_k+1)) / (1 - alpha_k)   (13), (22)-(23)

which is :func:`spinlib.roundcost.sync_round_time` with no upload before verification and the exchange as the
post-verification phase (:func:`round_time`).

**The paper's algorithms.** Lemma 2 (37)-(40): sorted by minimum UL delay, some optimal assignment sends a prefix
up; Proposition 1 (43)-(44): the prefix length by bisection on ``Delta tau(n) = tau^dl(n) - tau^ul(n)``
(:func:`prefix_bisection`); Algorithm 1: greedy lengths from ``gamma = 0`` (all up by one while it pays, then one
device at a time); the expectation by sample average over ``N_SAA = 1000`` outcomes (49) (:func:`saa_outcomes`),
or exactly over all ``2^K`` outcomes (48) where ``K`` is small (:func:`all_outcomes`).

**Closed form used here (our derivation, tested against Lemma 1's root).** With the equal split every DL device
has the same band ``b`` and payload ``S``, so (36) solves in closed form:
``tau^dl(D) = S / (b log2(1 + P^dl / (N0^dev b sum_{k in D} 1/|h_k|^2)))``; and the UL order does not depend on
``b`` (``tau^ul_k`` falls in ``P^ul_k |h_k|^2``). :func:`comm_time` therefore scans every prefix of one fixed
order for a whole batch of outcomes at once (exact under Lemma 2; :func:`brute_force_comm_time` enumerates every
assignment as the test reference).

**Baselines** (Sec. VI-A): all-UL (full power), all-DL (Lemma 1 power), random mode (each rejected device UL or
DL with probability 1/2), each with its lengths re-optimised by Algorithm 1 under its own policy; optimal uniform
length (``0..20``, exhaustive) and computation-only lengths, both with the optimal reactive policy.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq

from ..roundcost import iid_expected_tokens, makespan, sync_round_time
from ..validation import ValidationError, check_int_range
from .multispin import _positive, _vector

#: the paper's largest draft length (Sec. VI-A: the uniform baseline searches 0..20)
GAMMA_MAX = 20
#: sample-average size (49) of the paper
N_SAA = 1000
#: the reactive policies: the paper's optimum (Lemma 2 + Lemma 1) and its three mode baselines
MODE_POLICIES = ("optimal", "all-ul", "all-dl", "random")


def exchange_bits(vocab_size: int, retained: int = 1024, bits_per_prob: int = 16) -> float:
    """``S = V_eff (ceil(log2 V) + Q)`` [bit], one retained-vocabulary distribution (19)."""
    check_int_range("vocab_size", vocab_size, 2, 2**31 - 1)
    check_int_range("retained", retained, 1, vocab_size)
    check_int_range("bits_per_prob", bits_per_prob, 1, 64)
    return float(retained * (int(np.ceil(np.log2(vocab_size))) + bits_per_prob))


@dataclass(frozen=True, eq=False)
class ReactiveCell:
    """One round of paper 2's model (arrays ``[K]``).

    Parameters
    ----------
    draft_s : array [K]
        ``T^dft_k`` [s/token] > 0.
    alpha : array [K]
        ``alpha_k`` in (0, 1).
    gain : array [K]
        ``|h_k|^2`` > 0, this round's channel power gain (path loss and fading), the same up and down.
    bandwidth_hz : float
        ``B`` [Hz] > 0, split equally among the rejected devices.
    p_ul_w : array [K]
        ``P^ul_k`` [W] > 0, every UL device transmits at full power.
    p_dl_w : float
        ``P^dl`` [W] > 0, the server's power budget over the DL devices.
    n0_ser_w_per_hz, n0_dev_w_per_hz : float
        Noise PSDs [W/Hz] at the server (UL) and the device (DL).
    bits : float
        ``S`` [bit] of one exchanged distribution (:func:`exchange_bits`).
    t0_s, t1_s : float
        ``T^ver_0`` [s] and ``T^ver_1`` [s per device] (16).
    gamma_max : int
        Largest draft length (1..64; the paper's 20).
    """

    draft_s: np.ndarray
    alpha: np.ndarray
    gain: np.ndarray
    bandwidth_hz: float
    p_ul_w: np.ndarray
    p_dl_w: float
    n0_ser_w_per_hz: float
    n0_dev_w_per_hz: float
    bits: float
    t0_s: float
    t1_s: float
    gamma_max: int = GAMMA_MAX

    def __post_init__(self) -> None:
        T = _vector("draft_s", self.draft_s)
        K = T.size
        object.__setattr__(self, "draft_s", T)
        object.__setattr__(self, "alpha", _vector("alpha", self.alpha, K, 0.0, 1.0))
        object.__setattr__(self, "gain", _vector("gain", self.gain, K))
        p = np.broadcast_to(np.asarray(self.p_ul_w, dtype=float), (K,)) if np.ndim(self.p_ul_w) == 0 else self.p_ul_w
        object.__setattr__(self, "p_ul_w", _vector("p_ul_w", p, K))
        for name in ("bandwidth_hz", "p_dl_w", "n0_ser_w_per_hz", "n0_dev_w_per_hz", "bits"):
            object.__setattr__(self, name, _positive(name, getattr(self, name)))
        object.__setattr__(self, "t0_s", _positive("t0_s", self.t0_s, zero_ok=True))
        object.__setattr__(self, "t1_s", _positive("t1_s", self.t1_s, zero_ok=True))
        check_int_range("gamma_max", self.gamma_max, 1, 64)

    @property
    def K(self) -> int:
        return int(self.draft_s.size)

    @property
    def t_ver(self) -> float:
        """``T^ver = T^ver_0 + K T^ver_1`` [s] (16)."""
        return self.t0_s + self.K * self.t1_s


def check_lengths(cell: ReactiveCell, gamma) -> np.ndarray:
    """``gamma [..., K]`` as ints in ``0..gamma_max`` (24), else one line."""
    a = np.asarray(gamma)
    if a.shape[-1:] != (cell.K,) or not np.issubdtype(a.dtype, np.integer):
        raise ValidationError(f"draft lengths must be integers of shape [..., {cell.K}], got {a.dtype} {a.shape}")
    if a.size and (a.min() < 0 or a.max() > cell.gamma_max):
        raise ValidationError(f"draft lengths must be in 0..{cell.gamma_max}, got {int(a.min())}..{int(a.max())}")
    return a.astype(np.int64)


def expected_tokens(cell: ReactiveCell, gamma) -> np.ndarray:
    """``L_bar(gamma) = sum_k (1 - alpha_k^(gamma_k+1)) / (1 - alpha_k)`` (13)-(14) [token], ``[...]``."""
    return iid_expected_tokens(cell.alpha, gamma).sum(axis=-1)


def computation_time(cell: ReactiveCell, gamma) -> np.ndarray:
    """``T^comp = max_k gamma_k T^dft_k + T^ver`` (15)-(17) [s], ``[...]``."""
    return sync_round_time(makespan(np.asarray(gamma, dtype=float) * cell.draft_s, 0.0), cell.t_ver)


def round_time(cell: ReactiveCell, gamma, exchange_s) -> np.ndarray:
    """``T = T^comp + max_k exchange_k`` (21) [s]: the round-cost kernel with the exchange after verification."""
    return sync_round_time(makespan(np.asarray(gamma, dtype=float) * cell.draft_s, 0.0), cell.t_ver,
                           np.asarray(exchange_s, dtype=float).max(axis=-1))


def ul_time(cell: ReactiveCell, b) -> np.ndarray:
    """``tau^ul_k = S / (b_k log2(1 + P^ul_k |h_k|^2 / (N0^ser b_k)))`` [s] (33), ``b`` [..., K] or broadcasting."""
    b = np.asarray(b, dtype=float)
    return cell.bits / (b * np.log2(1.0 + cell.p_ul_w * cell.gain / (cell.n0_ser_w_per_hz * b)))


def dl_power(cell: ReactiveCell, b, tau, idx=slice(None)) -> np.ndarray:
    """Lemma 1 (35): ``p_k = (N0^dev b_k / |h_k|^2)(2^(S / (b_k tau)) - 1)`` [W], the least power that ends by ``tau``
    (the devices ``idx``, ``b`` of their shape)."""
    b = np.asarray(b, dtype=float)
    return cell.n0_dev_w_per_hz * b / cell.gain[idx] * np.expm1(np.log(2.0) * cell.bits / (b * np.asarray(tau, float)))


def dl_time(cell: ReactiveCell, in_dl, b) -> float:
    """Lemma 1 (36): the least common DL finish time [s] of the devices ``in_dl`` (bool [K]) with bands ``b [K]``,
    the root of ``sum_{k in D} p_k(tau) = P^dl`` (``scipy.optimize.brentq``; the sum falls in ``tau``); 0 for
    an empty set. The general form (any bands); :func:`comm_time` uses its closed form under the equal split."""
    D = np.flatnonzero(np.asarray(in_dl, dtype=bool))
    if not D.size:
        return 0.0
    b = np.broadcast_to(np.asarray(b, dtype=float), (cell.K,))

    def excess(log_tau):
        return float(np.log(dl_power(cell, b[D], np.exp(log_tau), D).sum() / cell.p_dl_w))

    # each device alone at the whole budget is a lower bound; at P^dl / |D| each, an upper bound
    single = cell.bits / (b[D] * np.log2(1.0 + cell.p_dl_w * cell.gain[D] / (cell.n0_dev_w_per_hz * b[D])))
    share = cell.bits / (b[D] * np.log2(1.0 + cell.p_dl_w / D.size * cell.gain[D] / (cell.n0_dev_w_per_hz * b[D])))
    lo, hi = np.log(single.max()), np.log(share.max())
    if hi - lo < 1e-14:
        return float(np.exp(hi))
    return float(np.exp(brentq(excess, lo, hi, xtol=1e-15, rtol=1e-14)))


def _dl_equal(cell: ReactiveCell, inv_sum, b):
    """``tau^dl = S / (b log2(1 + P^dl / (N0^dev b sum 1/|h|^2)))`` [s] (Lemma 1 under one band ``b``); 0 for an empty set."""
    inv_sum = np.asarray(inv_sum, dtype=float)
    with np.errstate(divide="ignore"):
        t = cell.bits / (b * np.log2(1.0 + cell.p_dl_w / (cell.n0_dev_w_per_hz * b * inv_sum)))
    return np.where(inv_sum > 0, t, 0.0)


def ul_order(cell: ReactiveCell) -> np.ndarray:
    """Lemma 2's order (37)-(38): ascending minimum UL delay, i.e. descending ``P^ul_k |h_k|^2`` (any band)."""
    return np.argsort(-(cell.p_ul_w * cell.gain), kind="stable")


def comm_time(cell: ReactiveCell, R, policy: str = "optimal", modes=None, return_ul: bool = False):
    """``T^comm(o)`` [s] of a batch of outcomes ``R [N, K]`` (True: rejected) under a reactive policy, ``[N]``.

    ``"optimal"``: the paper's min-max (30) through Lemma 2's prefixes, every prefix scanned; ``"all-ul"``,
    ``"all-dl"``; ``"random"``: ``modes [N, K]`` (True: UL) fixes each rejected device's mode. The band is split
    equally among the rejected devices; an outcome with no rejection costs 0 (20). ``return_ul``: also the number
    of rejected devices the policy sends up, ``[N]``.
    """
    if policy not in MODE_POLICIES:
        raise ValidationError(f"policy must be one of {MODE_POLICIES}, got {policy!r}")
    R = np.asarray(R, dtype=bool)
    m = R.sum(axis=-1)
    b = cell.bandwidth_hz / np.maximum(m, 1)
    inv = 1.0 / cell.gain
    ul = np.where(R, ul_time(cell, b[..., None]), 0.0)
    if policy == "all-ul":
        out, n_ul = ul.max(axis=-1), m
    elif policy == "all-dl":
        out, n_ul = _dl_equal(cell, (R * inv).sum(axis=-1), b), np.zeros_like(m)
    elif policy == "random":
        if modes is None or np.shape(modes) != R.shape:
            raise ValidationError(f"policy 'random' needs modes of shape {R.shape}")
        U = R & np.asarray(modes, dtype=bool)
        out = np.maximum(np.where(U, ul, 0.0).max(axis=-1), _dl_equal(cell, ((R & ~U) * inv).sum(axis=-1), b))
        n_ul = U.sum(axis=-1)
    else:
        o = ul_order(cell)
        Rs, uls = R[..., o], ul[..., o]
        w = Rs * inv[o]
        tot = w.sum(axis=-1)
        after = tot[..., None] - np.cumsum(w, axis=-1)  # DL set = rejected devices past the prefix
        cand = np.where(Rs, np.maximum(uls, _dl_equal(cell, np.maximum(after, 0.0), b[..., None])), np.inf)
        best = cand.min(axis=-1)
        all_dl = _dl_equal(cell, tot, b)
        out = np.minimum(best, all_dl)
        n_ul = np.where(best < all_dl, np.take_along_axis(np.cumsum(Rs, axis=-1), cand.argmin(axis=-1)[..., None],
                                                          axis=-1)[..., 0], 0)
    out = np.where(m > 0, out, 0.0)
    return (out, n_ul) if return_ul else out


def brute_force_comm_time(cell: ReactiveCell, rejected) -> tuple[float, np.ndarray]:
    """The reference for (30): every UL/DL assignment of the rejected devices (bool [K]), DL by Lemma 1's root
    (:func:`dl_time`), UL at full power; returns the least ``max(tau^ul(U), tau^dl(D))`` [s] and its UL set [K]."""
    Rk = np.flatnonzero(np.asarray(rejected, dtype=bool))
    if not Rk.size:
        return 0.0, np.zeros(cell.K, dtype=bool)
    if Rk.size > 16:
        raise ValidationError(f"brute force over 2^{Rk.size} assignments: at most 16 rejected devices")
    b = np.full(cell.K, cell.bandwidth_hz / Rk.size)
    ul = ul_time(cell, b)
    best, best_U = np.inf, None
    for mask in range(2 ** Rk.size):
        U = np.zeros(cell.K, dtype=bool)
        U[Rk[[(mask >> i) & 1 == 1 for i in range(Rk.size)]]] = True
        D = np.zeros(cell.K, dtype=bool)
        D[Rk] = True
        D &= ~U
        t = max(float(ul[U].max()) if U.any() else 0.0, dl_time(cell, D, b))
        if t < best:
            best, best_U = t, U
    return best, best_U


def prefix_bisection(cell: ReactiveCell, rejected) -> tuple[float, int]:
    """Proposition 1 (43)-(44) for one outcome: ``n_bar = min{n : tau^dl(n) <= tau^ul(n)}`` by bisection over the
    sorted rejected devices (each probe solves Lemma 1, :func:`dl_time`), then ``n* = argmin_{n_bar - 1, n_bar} tau(n)``.
    Returns ``(tau(n*), n*)``: the first ``n*`` devices of Lemma 2's order go up."""
    Rk = [k for k in ul_order(cell) if rejected[k]]
    m = len(Rk)
    if m == 0:
        return 0.0, 0
    b = np.full(cell.K, cell.bandwidth_hz / m)
    ul = ul_time(cell, b)

    def taus(n):
        t_ul = float(ul[Rk[n - 1]]) if n > 0 else 0.0
        D = np.zeros(cell.K, dtype=bool)
        D[Rk[n:]] = True
        return t_ul, dl_time(cell, D, b)

    lo, hi = 0, m  # Delta(m) = 0 - tau^ul_m <= 0 always
    while lo < hi:
        mid = (lo + hi) // 2
        t_ul, t_dl = taus(mid)
        if t_dl - t_ul <= 0:
            hi = mid
        else:
            lo = mid + 1
    cands = [n for n in (lo - 1, lo) if 0 <= n <= m]
    vals = [max(taus(n)) for n in cands]
    i = int(np.argmin(vals))
    return float(vals[i]), int(cands[i])


def rejection_prob(cell: ReactiveCell, gamma) -> np.ndarray:
    """``P(o_k = 1) = 1 - alpha_k^gamma_k`` (after (48)), ``[..., K]``."""
    return 1.0 - cell.alpha ** np.asarray(gamma, dtype=float)


def all_outcomes(K: int) -> np.ndarray:
    """Every outcome ``o in {0, 1}^K`` as bool ``[2^K, K]`` (the exact expectation (48)); ``K <= 16``."""
    check_int_range("K (exact expectation over 2^K outcomes)", K, 1, 16)
    return ((np.arange(2 ** K)[:, None] >> np.arange(K)[None, :]) & 1).astype(bool)


@dataclass(frozen=True, eq=False)
class Expectation:
    """How ``E_o[T^comm_min(o)]`` is taken for a cell: exactly over every outcome, or by SAA with common uniforms.

    ``exact``: outcomes ``[2^K, K]`` and their costs per policy (computed once; costs do not depend on
    ``gamma``). SAA: uniforms ``u [N, K]`` (``o_k = u_k < 1 - alpha_k^gamma_k``, the same draws for every
    ``gamma``: common random numbers, our choice) and the random baseline's mode bits ``modes [N, K]``.
    """

    cell: ReactiveCell
    policy: str
    outcomes: np.ndarray | None = None
    costs: np.ndarray | None = None
    u: np.ndarray | None = None
    modes: np.ndarray | None = None

    def __call__(self, gamma) -> np.ndarray:
        """``E_o[T^comm(o)]`` [s] for length vectors ``gamma [..., K]``, ``[...]``."""
        g = np.asarray(gamma)
        q = rejection_prob(self.cell, g)  # [..., K]
        if self.outcomes is not None:
            O = self.outcomes
            logp = np.where(O, np.log(np.maximum(q[..., None, :], 1e-300)),
                            np.log(np.maximum(1.0 - q[..., None, :], 1e-300)))
            p = np.exp(logp.sum(axis=-1)) * np.all(np.where(O, q[..., None, :] > 0, q[..., None, :] < 1), axis=-1)
            return p @ self.costs
        R = self.u < q[..., None, :]  # [..., N, K]
        modes = None if self.modes is None else np.broadcast_to(self.modes, R.shape)
        return comm_time(self.cell, R, self.policy, modes).mean(axis=-1)


def exact_expectation(cell: ReactiveCell, policy: str = "optimal", rng: np.random.Generator | None = None
                      ) -> Expectation:
    """The expectation (48) over all ``2^K`` outcomes (``K <= 16``); the random baseline draws one mode per device
    and outcome from ``rng``."""
    O = all_outcomes(cell.K)
    modes = None
    if policy == "random":
        if rng is None:
            raise ValidationError("policy 'random' needs rng for its modes")
        modes = rng.random(O.shape) < 0.5
    return Expectation(cell, policy, outcomes=O, costs=comm_time(cell, O, policy, modes))


def saa_expectation(cell: ReactiveCell, rng: np.random.Generator, policy: str = "optimal", n: int = N_SAA
                    ) -> Expectation:
    """The sample average (49) over ``n`` outcomes, with common uniforms for every ``gamma``."""
    check_int_range("n (SAA outcomes)", n, 1, 10**7)
    u = rng.random((n, cell.K))
    modes = rng.random((n, cell.K)) < 0.5 if policy == "random" else None
    return Expectation(cell, policy, u=u, modes=modes)


def goodput(cell: ReactiveCell, gamma, expectation: Expectation) -> np.ndarray:
    """``G(gamma) = L_bar(gamma) / (T^comp(gamma) + E_o[T^comm(o)])`` (23) [token/s], ``[...]``."""
    return expected_tokens(cell, gamma) / (computation_time(cell, gamma) + expectation(gamma))


@dataclass(frozen=True)
class Lengths:
    """Draft lengths ``gamma [K]``, the goodput the search saw [token/s] and the evaluations it took."""

    gamma: np.ndarray
    goodput: float
    policy: str
    evaluated: int


def algorithm1(cell: ReactiveCell, expectation: Expectation) -> Lengths:
    """Paper 2's Algorithm 1 (greedy): from ``gamma = 0``, add one to every device while the goodput rises; then
    add one to the single device that raises it most, while some device does (each ``gamma_k <= gamma_max``)."""
    K = cell.K
    g = np.zeros(K, dtype=np.int64)
    G = float(goodput(cell, g, expectation))
    n = 1
    while g.max() < cell.gamma_max:
        G1 = float(goodput(cell, g + 1, expectation))
        n += 1
        if G1 <= G:
            break
        g, G = g + 1, G1
    while True:
        room = np.flatnonzero(g < cell.gamma_max)
        if not room.size:
            break
        cands = np.repeat(g[None], room.size, axis=0)
        cands[np.arange(room.size), room] += 1
        Gc = goodput(cell, cands, expectation)
        n += room.size
        j = int(np.argmax(Gc))
        if Gc[j] <= G:
            break
        g, G = cands[j], float(Gc[j])
    return Lengths(g, G, f"greedy/{expectation.policy}", n)


def uniform_length(cell: ReactiveCell, expectation: Expectation) -> Lengths:
    """The optimal uniform length: ``gamma_k = g`` for all ``k``, ``g`` by exhaustive search over ``0..gamma_max``."""
    cands = np.repeat(np.arange(cell.gamma_max + 1)[:, None], cell.K, axis=1)
    G = goodput(cell, cands, expectation)
    i = int(np.argmax(G))
    return Lengths(cands[i], float(G[i]), f"uniform/{expectation.policy}", len(cands))


def computation_only(cell: ReactiveCell) -> np.ndarray:
    """Computation-only length control: ``argmax L_bar(gamma) / T^comp(gamma)``, lengths from the computation latency
    alone (the exchange ignored). Exact: at a drafting makespan ``m`` every device drafts ``min(gamma_max,
    floor(m / T^dft_k))``, and every ``m`` in ``{0} U {g T^dft_k}`` is tried (our reading of the baseline)."""
    m = np.concatenate([[0.0], (np.arange(1, cell.gamma_max + 1)[:, None] * cell.draft_s[None, :]).ravel()])
    g = np.clip(np.floor(m[:, None] / cell.draft_s[None, :] * (1 + 1e-12)), 0, cell.gamma_max).astype(np.int64)
    G = expected_tokens(cell, g) / computation_time(cell, g)
    return g[int(np.argmax(G))]


def exhaustive_optimum(cell: ReactiveCell, expectation: Expectation, chunk: int = 20_000,
                       max_vectors: int = 2_000_000) -> Lengths:
    """The exact optimum over every ``gamma in {0..gamma_max}^K`` (the reference; small ``K``)."""
    n = (cell.gamma_max + 1) ** cell.K
    if n > max_vectors:
        raise ValidationError(f"exhaustive search over {cell.gamma_max + 1}^{cell.K} length vectors exceeds "
                              f"max_vectors = {max_vectors:,}")
    best_g, best_G = None, -np.inf
    for start in range(0, n, chunk):
        idx = np.arange(start, min(n, start + chunk))
        g = np.stack(np.unravel_index(idx, (cell.gamma_max + 1,) * cell.K), axis=-1).astype(np.int64)
        G = goodput(cell, g, expectation)
        i = int(np.argmax(G))
        if G[i] > best_G:
            best_g, best_G = g[i], float(G[i])
    return Lengths(best_g, best_G, f"exhaustive/{expectation.policy}", n)


__all__ = ["GAMMA_MAX", "N_SAA", "MODE_POLICIES", "exchange_bits", "ReactiveCell", "check_lengths", "expected_tokens",
           "computation_time", "round_time", "ul_time", "dl_power", "dl_time", "ul_order", "comm_time",
           "brute_force_comm_time", "prefix_bisection", "rejection_prob", "all_outcomes", "Expectation",
           "exact_expectation", "saa_expectation", "goodput", "Lengths", "algorithm1", "uniform_length",
           "computation_only", "exhaustive_optimum", "joint_exchange_time"]


# ------------------------------------------------------------------------------------------------------------------
# Beyond the paper: the exchange with the band optimised too (ours)
# ------------------------------------------------------------------------------------------------------------------
def _h_inverse(y):
    """``u >= 0`` with ``h(u) = e^u (u - 1) + 1 = y`` (elementwise, ``y > 0``): safeguarded Newton in ``log u``
    (:func:`spinlib.roots.newton_decreasing`); ``h(u) >= u^2 / 2`` brackets it by ``sqrt(2 y)``."""
    from ..roots import newton_decreasing

    y = np.asarray(y, dtype=float)
    top = np.log(np.sqrt(2.0 * y))

    def h(u):
        small = u < 1e-3
        series = u * u * (0.5 + u * (1.0 / 3.0 + u / 8.0))
        return np.where(small, series, u * np.exp(u) - np.expm1(u))

    def fdf(v):
        u = np.exp(v)
        hu = h(u)
        return np.log(y) - np.log(hu), -u * u * np.exp(u) / hu

    v, _, _ = newton_decreasing(fdf, top - 40.0, top, top - 1.0, tol=1e-14, f_tol=1e-13)
    return np.exp(v)


def _dl_min_power(cell: ReactiveCell, D, band, tau):
    """Least total DL power [W] for the DL sets ``D [A, K]`` (bool) to finish by ``tau [A]`` [s] within ``band [A]``
    [Hz]: ``min sum_D p_k(b_k)`` s.t. ``sum_D b_k <= band``, ``p_k(b) = (N0 b / |h_k|^2)(2^(S / (b tau)) - 1)`` convex
    and falling in ``b``; KKT: ``dp_k/db_k = -mu`` for every DL device, i.e. ``h(u_k) = mu |h_k|^2 / N0`` with
    ``u_k = S ln2 / (b_k tau)`` (:func:`_h_inverse`), ``mu`` by bisection in ``log mu`` on the band. ``inf`` where
    ``band <= 0`` and the set is not empty."""
    D = np.asarray(D, dtype=bool)
    A = D.shape[0]
    n0 = cell.n0_dev_w_per_hz
    ln2S = np.log(2.0) * cell.bits
    tau = np.asarray(tau, dtype=float)

    def bands(log_mu):
        u = _h_inverse(np.exp(log_mu)[:, None] * cell.gain[None, :] / n0)
        return u, ln2S / (u * tau[:, None])

    lo, hi = np.full(A, -200.0), np.full(A, 200.0)
    for _ in range(60):  # sum_D b_k(mu) falls in mu (bracket width 400 in log mu: 60 halvings reach 4e-16)
        mid = 0.5 * (lo + hi)
        _, b = bands(mid)
        over = np.where(D, b, 0.0).sum(axis=1) > band
        lo, hi = np.where(over, mid, lo), np.where(over, hi, mid)
    u, b = bands(hi)
    with np.errstate(over="ignore"):  # a device outside D may sit at an absurd u; it is masked out
        p = np.where(D, n0 * b / cell.gain * np.expm1(u), 0.0).sum(axis=1)
    empty = ~D.any(axis=1)
    return np.where(empty, np.where(band >= 0, 0.0, np.inf), np.where(band > 0, p, np.inf))


def joint_exchange_time(cell: ReactiveCell, rejected, max_devices: int = 10) -> dict:
    """The exchange of one outcome with modes, DL powers *and* the band split optimised (ours; paper 2 splits the
    band equally, Sec. III): ``min tau`` s.t. UL devices reach ``S / tau`` at full power with ``b_k >=``
    ``R_k^{-1}(S / tau)``, DL devices reach it with their band and power, ``sum_R b_k <= B``, ``sum_D p_k <= P^dl``.

    Every UL/DL assignment of the rejected devices is tried (``<= max_devices`` of them); for each, ``tau`` by
    bisection in ``log tau`` (45 steps) below its equal-split time (feasible), each probe a convex feasibility test:
    the UL bands in closed form (:func:`spinlib.channel.shannon_bandwidth_for_rate`), the DL power by
    :func:`_dl_min_power`. Returns ``tau`` [s], the UL set, whether that set is a prefix of Lemma 2's order, the
    equal-split optimum (:func:`comm_time`) and the best prefix assignment's ``tau``.
    """
    from ..channel import shannon_bandwidth_for_rate

    Rk = np.flatnonzero(np.asarray(rejected, dtype=bool))
    m = Rk.size
    if m == 0:
        return {"tau": 0.0, "ul": [], "prefix": True, "tau_equal": 0.0, "tau_best_prefix": 0.0}
    if m > max_devices:
        raise ValidationError(f"joint_exchange_time tries all 2^{m} assignments: at most {max_devices} rejected devices")
    masks = ((np.arange(2 ** m)[:, None] >> np.arange(m)[None, :]) & 1).astype(bool)  # [A, m] True: UL
    A = len(masks)
    U = np.zeros((A, cell.K), dtype=bool)
    U[:, Rk] = masks
    Dm = np.zeros((A, cell.K), dtype=bool)
    Dm[:, Rk] = ~masks
    # the equal split's time of each assignment (feasible: an upper end for the bisection)
    b_eq = cell.bandwidth_hz / m
    ul_eq = ul_time(cell, b_eq)
    hi = np.maximum(np.where(U, ul_eq, 0.0).max(axis=1),
                    _dl_equal(cell, (Dm * (1.0 / cell.gain)).sum(axis=1), b_eq))
    lo = hi * 1e-6
    a_ul = cell.p_ul_w * cell.gain / cell.n0_ser_w_per_hz
    for _ in range(45):  # a bracket of 1e6 in ratio: 45 halvings of its log reach 4e-13 relative
        mid = np.sqrt(lo * hi)
        need_ul = np.where(U, shannon_bandwidth_for_rate(cell.bits / mid[:, None], a_ul[None, :]), 0.0).sum(axis=1)
        left = cell.bandwidth_hz - need_ul
        ok = np.isfinite(left) & (_dl_min_power(cell, Dm, np.where(np.isfinite(left), left, -1.0), mid)
                                  <= cell.p_dl_w)
        hi, lo = np.where(ok, mid, hi), np.where(ok, lo, mid)
    best = int(np.argmin(hi))
    order = [k for k in ul_order(cell) if k in set(Rk.tolist())]
    prefixes = [set(order[:n]) for n in range(m + 1)]
    is_prefix = np.array([set(np.flatnonzero(U[i]).tolist()) in prefixes for i in range(A)])
    return {"tau": float(hi[best]), "ul": np.flatnonzero(U[best]).tolist(),
            "prefix": bool(is_prefix[best]), "tau_best_prefix": float(hi[is_prefix].min()),
            "tau_equal": float(comm_time(cell, np.asarray(rejected, dtype=bool)[None])[0])}
