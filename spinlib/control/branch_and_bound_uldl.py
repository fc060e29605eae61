"""Certified upper bound and branch-and-bound for the joint UL/DL problem (paper 2).

The problem (:mod:`.uldl`): each device k picks an *item* ``i = (m, L)``, a mode ``m`` (UL, DL) and
a draft length ``L``; the round is::

    G* = max  sum_k N_k(L_k) / ( D*(x) + E*(x) + c0 + t1 sum_k L_k ),

``c0 = t0 + t1 K + T_fb + T_acc`` [s], ``D*`` the FDMA makespan (:func:`.bandwidth.min_makespan_bandwidth`,
per-item payload ``S_i``) and ``E*`` the DL phase (:func:`.power.min_max_downlink_power`): the
smallest ``E`` with ``sum_{k in DL} p_k(E; w) <= P_BS``, ``w = W / n_DL`` the band of each of the
``n_DL`` downloading devices (DL mode, ``d_k > 0``). ``E* = 0`` when ``n_DL = 0``.

Nodes
-----
A node is a box ``D in [D_lo, D_hi]``, ``E in [E_lo, E_hi]``, ``n_DL in [n_lo, n_hi]`` (``n_lo >= 1``)
and, per device, a set of allowed items. It stands for the item vectors x of its sets whose
``(D*(x), E*(x), n_DL(x))`` lie in the box. The vectors with ``n_DL = 0`` are the all-UL problem,
which is paper 1's synchronous round: its certified bound comes from
:func:`.branch_and_bound.branch_and_bound_sync` (through ``heterogeneous-sync``) and is passed in.

Node relaxation
---------------
For x in the node: ``b_i(D)`` decreases in D, so ``sum_k b_{x_k}(D_hi) <= B``; the power a DL device
needs, ``p(E, w) = (w / a)(2^{d / (w (E - c))} - 1)``, decreases in E and in w (``(e^{beta/w} - 1) w``
decreases in w), and ``w = W / n_DL <= W / n_lo``, so ``sum_k p_{x_k}(E_hi, W / n_lo) <= P_BS``; the
count satisfies ``n_lo <= sum_k [x_k downloads] <= n_hi``; and the denominator is at least
``den(x) = D_lo + E_lo + c0 + t1 sum_k L_k``. For any ``theta`` and multipliers ``mu, nu >= 0`` and
``lam`` (real; ``n_ref = n_lo`` if ``lam >= 0`` else ``n_hi``) the added terms
``mu (B - sum b) + nu (P - sum p) + lam (n_DL - n_ref)`` are ``>= 0``, hence::

    num(x) - theta den(x) <= Phi = sum_k max_{i allowed} [ N_i - theta t1 L_i - mu b_i - nu p_i + lam n_i ]
                                   + mu B + nu P - lam n_ref - theta (D_lo + E_lo + c0)

and ``F(x) <= theta + Phi / den_min`` (``Phi >= 0``) or ``theta + Phi / den_max`` (``Phi < 0``) with
``den_min, den_max`` the extremes of ``den`` over the node's items. Every (theta, mu, nu, lam) gives
a valid bound; the code picks them by Dinkelbach steps on theta and coordinate bisection on the
convex piecewise-linear ``Phi`` (each multiplier's subgradient is its constraint's slack). Needs are
scaled by ``1 - 1e-12`` and ``D_lo, E_lo`` too, so that rounding cannot make the relaxation tighter
than the problem. Items that cannot fit beside the other devices' smallest needs (either resource)
are removed from a node.

Root and branching
------------------
Every vector with ``n_DL >= 1`` has a drafting DL device, so ``D* >= d1 = min_k (tau_k + S_DL / R_k(B))``
and ``E* >= e1 = min`` over DL items of ``c_i + d_i / r_i(P_BS, W)``; a vector with
``D* + E* > sum_k N_k(L_max) / G_inc - c0`` cannot beat the incumbent. The root boxes cover
``[d1, D_top] x [e1, E_top] x [1, K]``. Best-first, in batches: a node whose D (or E) interval is at
least half its relative gap (as a share of the denominator) is split there at the midpoint; else a
node with ``n_lo < n_hi`` is split in n; else the device with the most allowed items has them split
in two at its Lagrangian choice. Nodes with at most ``enum_max`` vectors are enumerated with the exact
continuous sub-problems (their exact maximum is their bound and a candidate). Each bounded node also
offers its Lagrangian choice, evaluated exactly, as a candidate. The bound returned is the largest of
the incumbent, the all-UL bound, and the bounds of every node discarded or still open: every vector
lies in one of them.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from ..channel import LN2
from ..modes import mode_payload, uplink_bits_per_token
from ..rounds import sync_round_time
from .bandwidth import min_makespan_bandwidth, required_bandwidth
from .power import min_max_downlink_power, required_power
from .search import Incumbent, SearchResult, best_first

SAFETY = 1e-12


@dataclass(frozen=True)
class Items:
    """The (mode, length) items of every device, arrays ``[I, K]`` (I = 2 L_max + 1).

    Items ``0..L_max`` are UL with ``L = i``; items ``L_max + 1 .. 2 L_max`` are DL with ``L = i - L_max``
    (DL with ``L = 0`` is the same as UL with ``L = 0``: nothing is sent either way).
    """

    N: np.ndarray  # expected tokens per round
    L: np.ndarray  # draft length
    ul: np.ndarray  # True for UL items
    S: np.ndarray  # uplink bits per drafted token [bit]
    d: np.ndarray  # expected DL bits [bit] (0 for UL)
    c: np.ndarray  # device correction time [s] (0 for UL)
    n: np.ndarray  # 1 where the item downloads (d > 0)


def make_items(prob) -> Items:
    """Items of a :class:`.uldl.Problem`."""
    K, P = prob.K, prob.L_max + 1
    Lv = np.concatenate([np.arange(P), np.arange(1, P)])
    ul = np.concatenate([np.ones(P, bool), np.zeros(P - 1, bool)])
    L = np.broadcast_to(Lv[:, None], (len(Lv), K)).copy()
    U = np.broadcast_to(ul[:, None], L.shape)
    S, d, c = mode_payload(prob.scenario, L, U, prob.pi)
    S = np.broadcast_to(uplink_bits_per_token(prob.scenario.payload, prob.scenario.downlink.variant, U), L.shape)
    N = prob.table[np.arange(K)[None, :], L]
    return Items(N=N, L=L, ul=ul, S=np.array(S, float), d=d, c=c, n=(d > 0).astype(float))


def item_vectors(items: Items, idx: np.ndarray):
    """Item indices ``[..., K]`` -> ``(L, ul)`` arrays for :meth:`.uldl.Problem.goodput`."""
    K = idx.shape[-1]
    return items.L[idx, np.arange(K)], items.ul[idx]


@dataclass
class NodeBounds:
    upper: np.ndarray  # [M] (-inf: empty node)
    choice: np.ndarray  # [M, K] Lagrangian item choice at the best multipliers
    allowed: np.ndarray  # [M, I, K] tightened item sets


def uldl_node_bounds(prob, items: Items, Dl, Dh, El, Eh, nl, nh, allowed, theta0,
                     n_dinkelbach: int = 2, n_cycles: int = 2, n_bisect: int = 18) -> NodeBounds:
    """Lagrangian/Dinkelbach upper bounds on M nodes at once (module docstring)."""
    sc = prob.scenario
    K = prob.K
    M = len(Dl)
    B = sc.radio.bandwidth_hz
    Pw = sc.downlink.power_w
    W = sc.downlink.bandwidth_hz
    t1 = sc.server.t1_s_per_token
    c0 = float(sync_round_time(sc, 0.0, 0.0))
    a_w = sc.gain / sc.radio.noise_psd_w_per_hz
    rows = np.arange(M)[:, None]
    cols = np.arange(K)[None, :]
    cb = required_bandwidth(prob.rates, items.S[None], items.L[None], sc.tau[None, None, :],
                            np.asarray(Dh)[:, None, None]) * (1.0 - SAFETY)  # [M, I, K]
    w = (W / np.asarray(nl, float))[:, None, None]
    Ehx = np.asarray(Eh)[:, None, None]
    p, _ = required_power(items.d[None], items.c[None], Ehx, a_w, w)
    slack_ok = Ehx > items.c[None]
    cp = np.where(items.n[None] > 0, np.where(slack_ok & np.isfinite(p), p * (1.0 - SAFETY), np.inf), 0.0)
    ok = np.asarray(allowed, bool) & np.isfinite(cb) & np.isfinite(cp)
    for _ in range(2):  # remove items that cannot fit beside the others' smallest needs
        for cost, cap in ((cb, B), (cp, Pw)):
            cmin = np.min(np.where(ok, cost, np.inf), axis=1)  # [M, K]
            base = cmin.sum(axis=1)
            with np.errstate(invalid="ignore"):
                ok &= (cost - cmin[:, None, :] + base[:, None, None]) <= cap * (1 + 1e-15)
        # the count: at least n_lo downloading items must remain possible, at most n_hi forced
        can_dl = (ok & (items.n[None] > 0)).any(axis=1).sum(axis=1)
        must_dl = (~(ok & (items.n[None] == 0)).any(axis=1) & ok.any(axis=1)).sum(axis=1)
        bad = (can_dl < nl) | (must_dl > nh)
        ok &= ~bad[:, None, None]
    live = ok.any(axis=1).all(axis=1)
    cb = np.where(ok, cb, 0.0)
    cp = np.where(ok, cp, 0.0)
    Lf = items.L[None].astype(float)
    Lmin = np.min(np.where(ok, Lf, np.inf), axis=1).sum(axis=1)
    Lmax = np.max(np.where(ok, Lf, -np.inf), axis=1).sum(axis=1)
    den0 = np.asarray(Dl) * (1 - SAFETY) + np.asarray(El) * (1 - SAFETY) + c0
    den_min = den0 + t1 * Lmin
    den_max = den0 + t1 * Lmax
    nl = np.asarray(nl, float)
    nh = np.asarray(nh, float)
    cn = items.n[None]

    def evaluate(theta, mu, nu, lam):
        val = items.N[None] - theta[:, None, None] * t1 * Lf - mu[:, None, None] * cb - nu[:, None, None] * cp \
            + lam[:, None, None] * cn
        score = np.where(ok, val, -np.inf)
        idx = np.argmax(score, axis=1)
        best = score[rows, idx, cols].sum(axis=1)
        ub = cb[rows, idx, cols].sum(axis=1)
        up = cp[rows, idx, cols].sum(axis=1)
        un = cn[0][idx, cols].sum(axis=1)
        n_ref = np.where(lam >= 0, nl, nh)
        phi = best + mu * B + nu * Pw - lam * n_ref - theta * den0
        # subgradients (Phi decreases in mu while B - used < 0, ...)
        return phi, idx, B - ub, Pw - up, un - n_ref, lam

    scale_mu = np.maximum(items.N.sum() / B, 1e-300)
    scale_nu = np.maximum(items.N.sum() / Pw, 1e-300)
    scale_lam = float(items.N.max() + 1.0)
    theta = np.broadcast_to(np.asarray(theta0, float), (M,)).copy()
    upper = np.full(M, np.inf)
    choice = np.zeros((M, K), dtype=int)
    mu = np.zeros(M)
    nu = np.zeros(M)
    lam = np.zeros(M)
    for _ in range(n_dinkelbach):
        phi_best, idx_best, *_ = evaluate(theta, mu, nu, lam)
        mults = [mu, nu, lam]

        def take(phi, idx):
            nonlocal phi_best, idx_best
            better = phi < phi_best
            phi_best = np.where(better, phi, phi_best)
            idx_best = np.where(better[:, None], idx, idx_best)

        for _cycle in range(n_cycles):
            for j, scale in enumerate((scale_mu, scale_nu, scale_lam)):
                def at(v):
                    m = [x.copy() for x in mults]
                    m[j] = v
                    phi, idx, gb, gp, gn, _ = evaluate(theta, *m)
                    take(phi, idx)
                    return (gb, gp, gn)[j]
                cur = mults[j]
                if j < 2:  # mu, nu >= 0: minimise over [0, hi]; g(v) = slack, increasing in v
                    g0 = at(np.zeros(M))
                    lo = np.zeros(M)
                    hi = np.where(g0 >= 0, 0.0, np.maximum(cur, scale))
                    need = g0 < 0
                    for _d in range(60):
                        if not need.any():
                            break
                        g = at(hi)
                        need &= g < 0
                        lo = np.where(need, hi, lo)
                        hi = np.where(need, hi * 4.0, hi)
                    for _b in range(n_bisect):
                        mid = np.where(hi > 0, np.where(lo > 0, np.sqrt(lo * hi), 0.5 * hi), 0.0)
                        g = at(mid)
                        lo = np.where(g < 0, mid, lo)
                        hi = np.where(g < 0, hi, mid)
                    mults[j] = hi
                else:  # lam real: g(lam) = n_DL(lam) - n_ref is increasing in lam (n_DL grows)
                    g0 = at(np.zeros(M))
                    # search towards the side the subgradient points to (minimise: move against g)
                    sgn = np.where(g0 > 0, -1.0, np.where(g0 < 0, 1.0, 0.0))
                    lo = np.zeros(M)
                    hi = sgn * scale
                    for _b in range(n_bisect):
                        mid = 0.5 * (lo + hi)
                        g = at(mid)
                        move = ((g * sgn) < 0)  # still on the same side: go further
                        lo = np.where(move, mid, lo)
                        hi = np.where(move, hi, mid)
                    mults[j] = np.where(sgn == 0, 0.0, lo)
        mu, nu, lam = mults
        with np.errstate(divide="ignore", invalid="ignore"):
            bound = np.where(phi_best >= 0, theta + phi_best / den_min, theta + phi_best / den_max)
        upper = np.minimum(upper, np.where(live, bound, np.inf))
        choice = idx_best
        # Dinkelbach: the relaxed ratio of the Lagrangian choice
        num = items.N[choice, cols].sum(axis=1)
        den = den0 + t1 * items.L[choice, cols].sum(axis=1)
        new_theta = num / den
        if not np.any(live & (phi_best > 0) & (new_theta > theta * (1 + 1e-12))):
            break
        theta = np.where(phi_best > 0, np.maximum(theta, new_theta), theta)
    upper = np.where(live, upper, -np.inf)
    return NodeBounds(upper, choice, ok)


def tighten(prob, items: Items, Dl, Dh, El, Eh, nl, nh, al):
    """Cut each node's (D, E) box to the range its item sets allow.

    ``D*`` increases with every device's ``L`` and bits per token, so it lies between ``D*`` of the
    vectors of the smallest and of the largest (L, S) each device's set allows (fictitious items:
    the smallest L with the smallest S). ``E*`` is at least that of the devices that must download
    (every allowed item downloads), each at its smallest (d, c), with the band ``W / n_forced``
    (the true band ``W / n_DL`` is no larger); and at most that of every device that may download at
    its largest (d, c) with the band ``W / n_may``. Returns ``(Dl, Dh, El, Eh, keep)``.
    """
    sc = prob.scenario
    Lf = items.L[None].astype(float)
    dn = (items.n[None] > 0) & al  # allowed downloading items
    up = ~dn & al  # allowed items that do not download (UL, or L = 0)
    L_lo = np.min(np.where(al, Lf, np.inf), axis=1)
    L_hi = np.max(np.where(al, Lf, -np.inf), axis=1)
    S_lo = np.min(np.where(al & (Lf > 0), items.S[None], np.inf), axis=1)
    S_hi = np.max(np.where(al & (Lf > 0), items.S[None], 0.0), axis=1)
    S_lo = np.where(np.isfinite(S_lo), S_lo, 0.0)
    with np.errstate(invalid="ignore"):
        D_min, _ = min_makespan_bandwidth(sc, np.where(np.isfinite(L_lo), L_lo, 0).astype(int), prob.rates,
                                          bits_per_token=S_lo)
        D_max, _ = min_makespan_bandwidth(sc, np.where(np.isfinite(L_hi), L_hi, 0).astype(int), prob.rates,
                                          bits_per_token=np.maximum(S_hi, S_lo))
    forced = dn.any(axis=1) & ~up.any(axis=1)  # [M, K]
    may = dn.any(axis=1)
    d_lo = np.where(forced, np.min(np.where(dn, items.d[None], np.inf), axis=1), 0.0)
    c_lo = np.where(forced, np.min(np.where(dn, items.c[None], np.inf), axis=1), 0.0)
    d_hi = np.where(may, np.max(np.where(dn, items.d[None], 0.0), axis=1), 0.0)
    c_hi = np.where(may, np.max(np.where(dn, items.c[None], 0.0), axis=1), 0.0)
    E_min, _ = min_max_downlink_power(sc, d_lo, c_lo)
    E_max, _ = min_max_downlink_power(sc, d_hi, c_hi)
    Dl = np.maximum(Dl, np.asarray(D_min) * (1 - SAFETY))
    Dh = np.minimum(Dh, np.asarray(D_max) * (1 + SAFETY))
    El = np.maximum(El, np.asarray(E_min) * (1 - SAFETY))
    Eh = np.minimum(Eh, np.asarray(E_max) * (1 + SAFETY))
    keep = (Dl <= Dh) & (El <= Eh) & al.any(axis=1).all(axis=1)
    keep &= may.sum(axis=1) >= nl
    keep &= forced.sum(axis=1) <= nh
    return Dl, Dh, El, Eh, keep


class UldlSearch:
    """The joint UL/DL problem as a :class:`spinlib.control.search.NodeSearch`: nodes are (D, E)
    boxes, a range of the number of downloading devices and per-device item sets (module docstring).
    Candidate rows are item indices [n, K] (:func:`item_vectors`)."""

    def __init__(self, prob, *, enum_max: int = 512, n_root: int = 4, near_leaf_max: float = 1e5,
                 near_leaf_width: float = 0.01):
        self.prob, self.items = prob, make_items(prob)
        self.enum_max, self.n_root = enum_max, n_root
        self.near_leaf_max, self.near_leaf_width = near_leaf_max, near_leaf_width
        self.c0 = float(sync_round_time(prob.scenario, 0.0, 0.0))

    def evaluate(self, idx: np.ndarray) -> np.ndarray:
        L, ul = item_vectors(self.items, idx)
        return np.asarray(self.prob.goodput(L, ul), float).reshape(-1)

    def items_of(self, L, ul) -> np.ndarray:
        """Item indices [K] of lengths ``L`` and modes ``ul`` (DL with L = 0 is item 0, as UL)."""
        L = np.asarray(L, int)
        return np.where(np.asarray(ul, bool) | (L == 0), L, self.prob.L_max + L)

    def root(self, inc: Incumbent) -> dict:
        prob, items, n_root = self.prob, self.items, self.n_root
        sc, K = prob.scenario, prob.K
        I = items.L.shape[0]
        B, Pw, W = sc.radio.bandwidth_hz, sc.downlink.power_w, sc.downlink.bandwidth_hz
        dl_items = items.n > 0
        if not dl_items.any():  # no device can download: every vector is all-UL
            return {}
        rate_full = prob.rates.rate(np.full(K, B))
        S_dl = items.S[~items.ul][0]
        with np.errstate(divide="ignore"):
            d1 = float(np.min(sc.tau + S_dl / rate_full))
            a_w = sc.gain / sc.radio.noise_psd_w_per_hz
            r_dl = W * np.log1p(Pw * a_w / W) / LN2
            e1 = float(np.min(np.where(dl_items, items.c + items.d / r_dl[None, :], np.inf)))
        top = float(items.N.max(axis=0).sum()) / inc.value - self.c0 if inc.value > 0 else np.inf
        if not np.isfinite(top) or top <= d1 + e1:
            return {}
        D_top, E_top = top - e1, top - d1
        dE = np.geomspace(d1 * (1 - SAFETY), D_top, n_root + 1)
        eE = np.geomspace(e1 * (1 - SAFETY), E_top, n_root + 1)
        n_edges = sorted({1, *[int(x) for x in np.unique(np.geomspace(1, K + 1, n_root + 1).astype(int))], K + 1})
        cells = list(itertools.product(range(n_root), range(n_root), range(len(n_edges) - 1)))
        base_allowed = np.ones((I, K), bool)
        base_allowed[prob.L_max + 1:] = dl_items[prob.L_max + 1:]  # DL items that download (else same as UL)
        return {"Dl": np.array([dE[a] for a, _, _ in cells]), "Dh": np.array([dE[a + 1] for a, _, _ in cells]),
                "El": np.array([eE[b] for _, b, _ in cells]), "Eh": np.array([eE[b + 1] for _, b, _ in cells]),
                "nl": np.array([n_edges[c] for _, _, c in cells], float),
                "nh": np.array([n_edges[c + 1] - 1 for _, _, c in cells], float),
                "al": np.broadcast_to(base_allowed, (len(cells), I, K)).copy()}

    def expand(self, nodes: dict, inc: Incumbent):
        prob, items, K = self.prob, self.items, self.prob.K
        keys = ("Dl", "Dh", "El", "Eh", "nl", "nh", "al")
        Dl, Dh, El, Eh, nl, nh, al = (nodes[k] for k in keys)
        closed = -np.inf
        # tighten the intervals to what the item sets allow (drops empty nodes)
        Dl, Dh, El, Eh, keep = tighten(prob, items, Dl, Dh, El, Eh, nl, nh, al)
        Dl, Dh, El, Eh, nl, nh, al = (x[keep] for x in (Dl, Dh, El, Eh, nl, nh, al))
        if len(Dl):
            size = al.sum(axis=1).astype(float)  # [M, K]
            small = np.log(np.maximum(size, 1)).sum(axis=1) <= np.log(self.enum_max) + 1e-9
            for m in np.flatnonzero(small):
                sets = [np.flatnonzero(al[m, :, k]) for k in range(K)]
                if any(len(s) == 0 for s in sets):
                    continue
                closed = max(closed, float(inc.offer(np.array(list(itertools.product(*sets)), dtype=int)).max()))
            Dl, Dh, El, Eh, nl, nh, al = (x[~small] for x in (Dl, Dh, El, Eh, nl, nh, al))
        if not len(Dl):
            return {}, closed, 0
        res = uldl_node_bounds(prob, items, Dl, Dh, El, Eh, nl, nh, al, inc.threshold)
        inc.offer(res.choice[res.upper > -np.inf])
        return ({"Dl": Dl, "Dh": Dh, "El": El, "Eh": Eh, "nl": nl, "nh": nh, "al": res.allowed,
                 "ub": res.upper, "ch": res.choice}, closed, len(Dl))

    def split(self, p: dict, inc: Incumbent) -> dict:
        """On the wider of the D and E intervals while it is at least half the node's gap (near a leaf,
        intervals narrower than ``near_leaf_width`` are left to the enumeration), then on the number of
        downloading devices, then on the item set of the device with the most items (at its choice)."""
        den = p["Dl"] + p["El"] + self.c0
        node_gap = (p["ub"] - inc.value) / p["ub"]
        wD = (p["Dh"] - p["Dl"]) / den
        wE = (p["Eh"] - p["El"]) / den
        size = p["al"].sum(axis=1)  # [n, K]
        near_leaf = np.log(np.maximum(size, 1)).sum(axis=1) <= np.log(self.near_leaf_max)
        thr = np.where(near_leaf, np.maximum(0.5 * node_gap, self.near_leaf_width), 0.5 * node_gap)
        by_DE = (np.maximum(wD, wE) >= thr) & (np.maximum(wD, wE) > 1e-12)
        by_n = ~by_DE & (p["nh"] > p["nl"]) & ~near_leaf
        by_user = ~by_DE & ~by_n
        split_D = by_DE & (wD >= wE)
        split_E = by_DE & ~split_D
        mD = 0.5 * (p["Dl"] + p["Dh"])
        mE = 0.5 * (p["El"] + p["Eh"])
        mn = np.floor(0.5 * (p["nl"] + p["nh"]))
        c1 = {k: v.copy() for k, v in p.items()}
        c2 = {k: v.copy() for k, v in p.items()}
        c1["Dh"] = np.where(split_D, mD, p["Dh"])
        c2["Dl"] = np.where(split_D, mD, p["Dl"])
        c1["Eh"] = np.where(split_E, mE, p["Eh"])
        c2["El"] = np.where(split_E, mE, p["El"])
        c1["nh"] = np.where(by_n, mn, p["nh"])
        c2["nl"] = np.where(by_n, mn + 1, p["nl"])
        for r in np.flatnonzero(by_user):
            k = int(np.argmax(size[r]))
            members = np.flatnonzero(p["al"][r, :, k])
            pos = int(np.searchsorted(members, p["ch"][r, k]))
            cut = members[min(max(pos, 0), len(members) - 2)] if len(members) > 1 else members[0]
            c1["al"][r, cut + 1:, k] = False
            c2["al"][r, :cut + 1, k] = False
        return {k: np.concatenate([c1[k], c2[k]]) for k in ("Dl", "Dh", "El", "Eh", "nl", "nh", "al")}


def branch_and_bound_uldl(prob, L_inc, ul_inc, G_inc: float, ub_all_ul: float, *, gap: float = 1e-9,
                          time_limit_s: float = 10.0, batch: int = 32, enum_max: int = 512,
                          n_root: int = 4, near_leaf_max: float = 1e5, near_leaf_width: float = 0.01,
                          max_nodes: int = 1000) -> tuple[np.ndarray, np.ndarray, SearchResult]:
    """Best-first branch-and-bound over (D, E, n_DL) boxes and item sets (module docstring): the
    engine of :func:`spinlib.control.search.best_first` on :class:`UldlSearch`.

    Parameters
    ----------
    prob : :class:`.uldl.Problem`.
    L_inc, ul_inc, G_inc : the incumbent (its exact goodput [token/s]).
    ub_all_ul : a certified upper bound on the all-UL vectors (``n_DL = 0``) [token/s].
    gap : relative tolerance: nodes whose bound is ``<= G_inc (1 + gap)`` are discarded.
    time_limit_s : wall-clock budget [s]; on expiry the open nodes' bounds enter the upper bound.
    max_nodes : node budget (reproducible, unlike the clock); status "node_limit" when it binds.

    Returns
    -------
    (L, ul, result)
        The lengths and modes found and the search's :class:`~spinlib.control.search.SearchResult`:
        ``result.value`` (their goodput) ``>= G_inc``, ``result.upper_bound >= G*``.
    """
    problem = UldlSearch(prob, enum_max=enum_max, n_root=n_root, near_leaf_max=near_leaf_max,
                         near_leaf_width=near_leaf_width)
    res = best_first(problem, problem.items_of(L_inc, ul_inc), G_inc, gap=gap, time_limit_s=time_limit_s,
                     max_nodes=max_nodes, batch=batch, outside_bound=float(ub_all_ul))
    if res.value > G_inc:
        L, ul = item_vectors(problem.items, res.x)
    else:  # the incumbent stands: keep its own modes (a DL device with L = 0 stays DL)
        L, ul = np.array(L_inc, int), np.array(ul_inc, bool)
    return L, ul, res


__all__ = ["Items", "make_items", "uldl_node_bounds", "branch_and_bound_uldl", "UldlSearch"]
