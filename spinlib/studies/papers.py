"""Notebook 11: the papers' own models under their published settings (records for :func:`spinlib.cache.cached_call`).

Seeding: one master seed; device populations ``i = 0..n_pop-1`` come from :func:`spinlib.study.study_seeds`
and are the same at every sweep value (common random numbers across the points of a figure); each population's
generator then draws its rounds' channels (and the SAA's uniforms) in order.
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import brentq

from ..papers import gelato as gl
from ..papers import multispin as ms
from ..papers import settings as st
from ..papers import uplink_downlink as ud
from ..study import study_seeds
from ..validation import ValidationError

#: a roofline reference for paper 1's unstated device times (not used by the calibration, shown beside it): the
#: draft's fp16 weights streamed once per token at 65 % of the Apple M4 Pro's 273 GB/s (2.2 GB and 1.6 GB)
M4PRO_DRAFT_S = {"llama2": 2.2e9 / (0.65 * 273e9), "qwen3.5": 1.6e9 / (0.65 * 273e9)}
#: paper 1 Fig. 6: Multi-SPIN's goodput at the default setting (K = 20, B = 10 MHz) [token/s]
FIG6_GOODPUT = {"llama2": 145.0, "qwen3.5": 153.0}
#: paper 1 Fig. 7 / Sec. VI-C: Hete-Multi-SPIN over Fixed BW&L at the smallest budget, B = 5 MHz, both pairs
FIG7_GAIN, FIG7_BANDWIDTH_HZ = 0.88, 5e6
MULTISPIN_POLICIES = tuple(ms.POLICIES)
UPDOWN_POLICIES = ("proposed", "all-ul", "all-dl", "random", "uniform", "computation-only")


def _rounds(pair: str, K: int, B: float, tx_power_w: float, draft_ref_s: float, n_pop: int, n_rounds: int, seed: int):
    for s in study_seeds(seed, n_pop):
        rng = np.random.default_rng(s)
        dev = st.multispin_devices(rng, pair, K, draft_ref_s)
        for _ in range(n_rounds):
            yield st.multispin_round(rng, pair, dev, tx_power_w, bandwidth_hz=B)


def _power_for_goodput(pair: str, draft_ref_s: float, n_pop: int, n_rounds: int, seed: int) -> float | None:
    """The power [W] at which Algorithm 1's mean goodput at the defaults is Fig. 6's value (None: out of reach)."""
    K, B = st.MULTISPIN_RADIO["num_users"], st.MULTISPIN_RADIO["bandwidth_hz"]

    def f(x):
        return np.mean([ms.algorithm1(c).goodput for c in _rounds(pair, K, B, 10.0 ** x, draft_ref_s, n_pop, n_rounds,
                                                                  seed)]) - FIG6_GOODPUT[pair]
    if f(-4.0) < 0:
        return None
    return 10.0 ** brentq(f, -14.0, -4.0, xtol=1e-4)


def _fig7_gain(pair: str, tx_power_w: float, draft_ref_s: float, n_pop: int, n_rounds: int, seed: int) -> float:
    cells = list(_rounds(pair, st.MULTISPIN_RADIO["num_users"], FIG7_BANDWIDTH_HZ, tx_power_w, draft_ref_s, n_pop,
                         n_rounds, seed))
    return float(np.mean([ms.algorithm1(c).goodput for c in cells]) / np.mean([ms.fixed_bw_l(c).goodput for c in cells])
                 - 1.0)


def multispin_calibration(pair: str, n_pop: int, n_rounds: int, seed: int) -> dict:
    """Paper 1's two unstated numbers, the reference device time ``T_bar^S`` [s/token] and the transmit power ``p`` [W],
    fitted to two published ones (our calibration): Algorithm 1's mean goodput at the defaults equals Fig. 6's (145 /
    153 token/s) and its mean gain over Fixed BW&L at B = 5 MHz equals Fig. 7's 88 %. For each ``T_bar^S`` the power
    follows from the first condition (``brentq`` in ``log10 p``); the gain falls as the device time grows (the power
    that keeps Fig. 6's goodput then rises and the upload shrinks), and ``brentq`` finds the ``T_bar^S`` of the second.
    Every other number of Figs. 7-8 is then a prediction."""
    def gain_at(T):
        p = _power_for_goodput(pair, T, n_pop, n_rounds, seed)
        return (-1.0 if p is None else _fig7_gain(pair, p, T, n_pop, n_rounds, seed) - FIG7_GAIN), p

    lo, hi = 2e-3, 60e-3
    while gain_at(hi)[0] == -1.0 and hi > lo * 1.5:  # Fig. 6 out of reach at this device time: shorten it
        hi *= 0.8
    if gain_at(lo)[0] < 0 or gain_at(hi)[0] > 0:
        raise ValidationError(f"{pair}: no device time in [{lo}, {hi}] s fits Fig. 6 and Fig. 7 together")
    T = brentq(lambda t: gain_at(t)[0], lo, hi, xtol=1e-5)
    p = _power_for_goodput(pair, T, n_pop, n_rounds, seed)
    return {"pair": pair, "draft_ref_s": float(T), "tx_power_w": float(p), "roofline_draft_s": M4PRO_DRAFT_S[pair],
            "target_goodput": FIG6_GOODPUT[pair], "target_gain": FIG7_GAIN,
            "gain": _fig7_gain(pair, p, T, n_pop, n_rounds, seed),
            "goodput": float(np.mean([ms.algorithm1(c).goodput for c in _rounds(
                pair, st.MULTISPIN_RADIO["num_users"], st.MULTISPIN_RADIO["bandwidth_hz"], p, T, n_pop, n_rounds,
                seed)]))}


def multispin_sweep(pair: str, knob: str, values: list, tx_power_w: float, draft_ref_s: float, n_pop: int,
                    n_rounds: int, seed: int) -> list[dict]:
    """Paper 1 Figs. 7 (``knob = "bandwidth_hz"``) and 8 (``"num_users"``): every policy's goodput per round."""
    if knob not in ("bandwidth_hz", "num_users"):
        raise ValidationError(f"knob must be 'bandwidth_hz' or 'num_users', got {knob!r}")
    rows = []
    for x in values:
        K = int(x) if knob == "num_users" else st.MULTISPIN_RADIO["num_users"]
        B = float(x) if knob == "bandwidth_hz" else st.MULTISPIN_RADIO["bandwidth_hz"]
        for i, s in enumerate(study_seeds(seed, n_pop)):
            rng = np.random.default_rng(s)
            dev = st.multispin_devices(rng, pair, K, draft_ref_s)
            for r in range(n_rounds):
                cell = st.multispin_round(rng, pair, dev, tx_power_w, bandwidth_hz=B)
                row = {"x": x, "population": i, "round": r}
                for name, policy in ms.POLICIES.items():
                    sol = policy(cell)
                    row[name] = sol.goodput
                    row[f"{name}_mean_L"] = float(sol.L.mean())
                rows.append(row)
    return rows


def multispin_gap_study(pair: str, K: int, n: int, tx_power_w: float, draft_ref_s: float, seed: int,
                        band_per_device_hz: float = 0.5e6) -> list[dict]:
    """Algorithm 1 and the baselines against the exhaustive optimum of (P2) on ``n`` random instances of paper 1's
    setting with ``K`` devices (``B = K x 0.5 MHz``: the default's band per device)."""
    rows = []
    for i, s in enumerate(study_seeds(seed, n)):
        rng = np.random.default_rng(s)
        dev = st.multispin_devices(rng, pair, K, draft_ref_s)
        cell = st.multispin_round(rng, pair, dev, tx_power_w, bandwidth_hz=K * band_per_device_hz)
        opt = ms.exhaustive_optimum(cell)
        row = {"instance": i, "optimum": opt.goodput, "optimum_L": opt.L.tolist()}
        for name, policy in ms.POLICIES.items():
            row[name] = policy(cell).goodput
        rows.append(row)
    return rows


def multispin_certified_gap(pair: str, K: int, n: int, tx_power_w: float, draft_ref_s: float, seed: int) -> list[dict]:
    """Algorithm 1 and the baselines against the certified optimum of (P2) (:func:`spinlib.papers.multispin.
    certified_optimum`) on ``n`` rounds of paper 1's default setting (``K`` devices, B = 10 MHz), one population each."""
    rows = []
    for i, s in enumerate(study_seeds(seed, n)):
        rng = np.random.default_rng(s)
        cell = st.multispin_round(rng, pair, st.multispin_devices(rng, pair, K, draft_ref_s), tx_power_w)
        cert = ms.certified_optimum(cell)
        row = {"instance": i, "optimum": cert.goodput, "upper_bound": cert.info["upper_bound"],
               "certified_gap": cert.info["gap"], "status": cert.info["status"], "intervals": cert.info["nodes"],
               "optimum_mean_L": float(cert.L.mean())}
        for name, policy in ms.POLICIES.items():
            row[name] = policy(cell).goodput
        rows.append(row)
    return rows


def updown_powers(knob: str, x: float, K: int) -> tuple[float, float]:
    """``(P^ul, P^dl)`` [W] of a point of paper 2's figures: Figs. 7-8 ``knob = "p_dl_dbm"`` (``P^ul`` = 10 dBm);
    Figs. 9-11 ``"ratio"``: ``P^dl / P^ul = x`` and ``P^dl + K P^ul = P_tot(K) = 1 W + K 31.6 mW`` (30 and 15 dBm)."""
    from ..channel import dbm_to_w

    if knob == "p_dl_dbm":
        return float(dbm_to_w(st.UPDOWN_RADIO["p_ul_dbm"])), float(dbm_to_w(x))
    if knob == "ratio":
        total = float(dbm_to_w(30.0) + K * dbm_to_w(15.0))
        p_ul = total / (x + K)
        return p_ul, x * p_ul
    raise ValidationError(f"knob must be 'p_dl_dbm' or 'ratio', got {knob!r}")


def _evaluation(cell, policy: str, rng, n_eval: int):
    """Exact expectation up to 12 devices, else a fresh SAA of ``n_eval`` outcomes (independent of the search's)."""
    if cell.K <= 12:
        return ud.exact_expectation(cell, policy, rng)
    return ud.saa_expectation(cell, rng, policy, n_eval)


def updown_point(pair: str, K: int, p_ul_w: float, p_dl_w: float, rng: np.random.Generator, n_saa: int,
                 n_eval: int, policies=UPDOWN_POLICIES) -> dict:
    """One round of paper 2: every policy's lengths (Algorithm 1 on its own SAA, or a length baseline) and its goodput
    under an independent evaluation; for the proposed scheme also the mean length and the expected share of rejected
    devices sent up."""
    dev = st.updown_devices(rng, pair, K)
    cell = st.updown_round(rng, pair, dev, p_ul_w, p_dl_w)
    row = {}
    opt_eval = _evaluation(cell, "optimal", rng, n_eval)
    search = ud.saa_expectation(cell, rng, "optimal", n_saa)
    for name in policies:
        if name in ("proposed", "uniform", "computation-only"):
            if name == "proposed":
                g = ud.algorithm1(cell, search).gamma
            elif name == "uniform":
                g = ud.uniform_length(cell, search).gamma
            else:
                g = ud.computation_only(cell)
            ev = opt_eval
        else:
            mode = {"all-ul": "all-ul", "all-dl": "all-dl", "random": "random"}[name]
            g = ud.algorithm1(cell, ud.saa_expectation(cell, rng, mode, n_saa)).gamma
            ev = _evaluation(cell, mode, rng, n_eval)
        row[name] = float(ud.goodput(cell, g, ev))
        if name == "proposed":
            row["proposed_mean_gamma"] = float(g.mean())
            u = rng.random((n_eval, K)) < ud.rejection_prob(cell, g)
            _, n_ul = ud.comm_time(cell, u, return_ul=True)
            rej = u.sum()
            row["proposed_ul_share"] = float(n_ul.sum() / rej) if rej else float("nan")
    return row


def updown_sweep(pair: str, knob: str, values: list, K: int, n_pop: int, seed: int, n_saa: int = ud.N_SAA,
                 n_eval: int = 10_000, policies=UPDOWN_POLICIES) -> list[dict]:
    """Paper 2 Figs. 7-11 (:func:`updown_powers`): ``n_pop`` device populations (one round each) per value."""
    rows = []
    for x in values:
        p_ul, p_dl = updown_powers(knob, x, K)
        for i, s in enumerate(study_seeds(seed, n_pop)):
            rows.append({"x": x, "population": i, "p_ul_w": p_ul, "p_dl_w": p_dl,
                         **updown_point(pair, K, p_ul, p_dl, np.random.default_rng(s), n_saa, n_eval, policies)})
    return rows


def updown_joint_study(pair: str, p_dl_dbm_values: list, n: int, seed: int, K: int = 8, gamma: int = 8,
                       max_rejected: int = 6) -> list[dict]:
    """Paper 2's exchange with the band optimised too (ours, :func:`spinlib.papers.uplink_downlink.joint_exchange_time`)
    against the paper's equal split: ``n`` outcomes per DL power, each of ``K`` devices drafting ``gamma`` tokens
    (rejected with probability ``1 - alpha^gamma``; outcomes with no rejection or more than ``max_rejected`` redrawn)."""
    from ..channel import dbm_to_w

    rows = []
    for x in p_dl_dbm_values:
        for i, s in enumerate(study_seeds(seed, n)):
            rng = np.random.default_rng(s)
            cell = st.updown_round(rng, pair, st.updown_devices(rng, pair, K),
                                   float(dbm_to_w(st.UPDOWN_RADIO["p_ul_dbm"])), float(dbm_to_w(x)))
            while True:
                R = rng.random(K) < ud.rejection_prob(cell, np.full(K, gamma))
                if 0 < R.sum() <= max_rejected:
                    break
            j = ud.joint_exchange_time(cell, R)
            rows.append({"x": x, "instance": i, "rejected": int(R.sum()), "tau_equal": j["tau_equal"],
                         "tau_joint": j["tau"], "tau_best_prefix": j["tau_best_prefix"], "prefix": j["prefix"],
                         "ul": len(j["ul"])})
    return rows


def updown_gap_study(pair: str, K: int, n: int, seed: int, n_saa: int = ud.N_SAA) -> list[dict]:
    """Algorithm 1 (on its SAA, as the paper) and the length baselines against the exhaustive optimum with the exact
    expectation, on ``n`` random instances of paper 2's setting with ``K`` devices (``P^dl`` = 30 dBm); also the SAA's
    relative error of ``E[T^comm]`` at the greedy lengths."""
    p_ul, p_dl = updown_powers("p_dl_dbm", 30.0, K)
    rows = []
    for i, s in enumerate(study_seeds(seed, n)):
        rng = np.random.default_rng(s)
        cell = st.updown_round(rng, pair, st.updown_devices(rng, pair, K), p_ul, p_dl)
        ex = ud.exact_expectation(cell)
        saa = ud.saa_expectation(cell, rng, "optimal", n_saa)
        opt = ud.exhaustive_optimum(cell, ex)
        greedy = ud.algorithm1(cell, saa)
        greedy_exact = ud.algorithm1(cell, ex)
        e_exact = float(ex(greedy.gamma))
        rows.append({"instance": i, "optimum": opt.goodput, "greedy_saa": float(ud.goodput(cell, greedy.gamma, ex)),
                     "greedy_exact": greedy_exact.goodput,
                     "uniform": float(ud.goodput(cell, ud.uniform_length(cell, ex).gamma, ex)),
                     "computation-only": float(ud.goodput(cell, ud.computation_only(cell), ex)),
                     "saa_rel_error": float(abs(saa(greedy.gamma) - e_exact) / e_exact) if e_exact > 0 else 0.0})
    return rows


#: GELATO's Fig. 5: (a, b) the bandwidths [MHz] at T^LLM = 100 ms, (c, d) the verification latencies [ms] at 5 MHz,
#: the static baselines it plots, and the numbers its text states (Sec. IV)
GELATO_FIG5 = {"bandwidth_mhz": (1, 2, 4, 7, 10), "t_llm_ms": (60, 80, 100, 120, 140), "static_gammas": (5, 7, 9),
               "gain_1mhz": (0.6498, -0.4747), "tllm_gain": {60: 0.2595, 140: 0.2004}, "tllm_energy_cut": 0.2339}
GELATO_KNOBS = ("bandwidth_mhz", "t_llm_ms")


def gelato_fig5(knob: str, values, n_seeds: int, seed: int, steps: int = 1000, V: float = 10.0,
                bandwidth_mhz: float = 5.0, t_llm_ms: float = 100.0,
                static_gammas=GELATO_FIG5["static_gammas"]) -> list[dict]:
    """GELATO (Algorithm 1, weight ``V``), its outer loop alone (``budget-only``, our ablation) and static SD at each
    fixed ``gamma`` on the paper's model and settings (:mod:`spinlib.papers.gelato`, with our choices for what the
    text leaves out), over ``knob`` (``"bandwidth_mhz"``: Fig. 5(a, b), at ``t_llm_ms``; ``"t_llm_ms"``: Fig. 5(c,
    d), at ``bandwidth_mhz``): one record per (value ``x``, policy, seed) with :func:`spinlib.papers.gelato.run`'s
    metrics; the seeds from :func:`spinlib.study.study_seeds`, the same at every value and for every policy."""
    if knob not in GELATO_KNOBS:
        raise ValidationError(f"knob must be one of {GELATO_KNOBS}, got {knob!r}")
    s = gl.GelatoSetting()
    rows = []
    for x in values:
        B = (x if knob == "bandwidth_mhz" else bandwidth_mhz) * 1e6
        t_llm = (x if knob == "t_llm_ms" else t_llm_ms) * 1e-3
        for i, sd in enumerate(study_seeds(seed, n_seeds)):
            runs = {p: gl.run(s, p, bandwidth_hz=B, steps=steps, seed=sd, V=V, t_llm_s=t_llm)
                    for p in ("gelato", "budget-only")}
            for g in static_gammas:
                runs[f"static-{g}"] = gl.run(s, "static", bandwidth_hz=B, steps=steps, seed=sd, gamma=g, t_llm_s=t_llm)
            rows += [{"x": x, "policy": p, "seed": i, **r} for p, r in runs.items()]
    return rows


__all__ = ["GELATO_FIG5", "GELATO_KNOBS", "gelato_fig5", "M4PRO_DRAFT_S", "FIG6_GOODPUT", "FIG7_GAIN", "FIG7_BANDWIDTH_HZ", "MULTISPIN_POLICIES", "UPDOWN_POLICIES", "multispin_calibration",
           "multispin_sweep", "multispin_gap_study", "multispin_certified_gap", "updown_powers", "updown_point", "updown_sweep",
           "updown_gap_study", "updown_joint_study"]
