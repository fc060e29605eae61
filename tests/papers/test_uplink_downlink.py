"""Paper 2's reactive protocol against brute force, Lemma 1's root, enumeration and Monte Carlo, on fresh instances."""
import numpy as np
import pytest

from helpers import fresh_seed
from spinlib.channel import dbm_to_w
from spinlib.papers import settings as st
from spinlib.papers import uplink_downlink as ud
from spinlib.validation import ValidationError


def _cell(rng, K, pair="qwen2.5"):
    dev = st.updown_devices(rng, pair, K)
    return st.updown_round(rng, pair, dev, dbm_to_w(rng.uniform(0, 20)), dbm_to_w(rng.uniform(15, 45)))


def test_optimal_reactive_policy_equals_brute_force_and_proposition1():
    """Lemma 2's prefix scan (closed-form DL time) = every UL/DL assignment with Lemma 1's root = Prop. 1's bisection."""
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for _ in range(25):
        c = _cell(rng, int(rng.integers(1, 9)))
        R = rng.random((4, c.K)) < rng.uniform(0.2, 0.9)
        scan = ud.comm_time(c, R)
        for i in range(len(R)):
            bf, _ = ud.brute_force_comm_time(c, R[i])
            pb, _ = ud.prefix_bisection(c, R[i])
            assert scan[i] == pytest.approx(bf, rel=1e-9, abs=1e-15), seed
            assert pb == pytest.approx(bf, rel=1e-9, abs=1e-15), seed
        for pol in ("all-ul", "all-dl"):
            assert np.all(scan <= ud.comm_time(c, R, pol) * (1 + 1e-12))


def test_lemma1_power_meets_the_budget_at_its_root():
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for _ in range(20):
        c = _cell(rng, 6)
        D = rng.random(c.K) < 0.6
        if not D.any():
            continue
        b = rng.uniform(0.2e6, 3e6, size=c.K)
        tau = ud.dl_time(c, D, b)
        p = ud.dl_power(c, b[D], tau, np.flatnonzero(D))
        assert p.sum() == pytest.approx(c.p_dl_w, rel=1e-9), seed
        # with one band for all, the closed form of comm_time's all-DL case is the same root
        R = D[None]
        beq = np.full(c.K, c.bandwidth_hz / D.sum())
        assert ud.comm_time(c, R, "all-dl")[0] == pytest.approx(ud.dl_time(c, D, beq), rel=1e-9)


def test_exact_expectation_equals_enumeration_and_monte_carlo():
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    c = _cell(rng, 5)
    gamma = rng.integers(0, 8, size=(3, c.K))
    ex = ud.exact_expectation(c)
    got = ex(gamma)
    for j in range(len(gamma)):
        q = 1 - c.alpha ** gamma[j]
        ref = 0.0
        for o in ud.all_outcomes(c.K):
            ref += np.prod(np.where(o, q, 1 - q)) * ud.comm_time(c, o[None])[0]
        assert got[j] == pytest.approx(ref, rel=1e-10), seed
    mc = ud.saa_expectation(c, np.random.default_rng(seed), n=200_000)
    R = mc.u < (1 - c.alpha ** gamma[:, None, :])
    v = ud.comm_time(c, R)
    se = v.std(axis=1) / np.sqrt(v.shape[1])
    assert np.all(np.abs(mc(gamma) - got) <= 5 * se + 1e-15), seed


def test_greedy_and_length_baselines_against_exhaustive_search():
    """The exhaustive optimum (exact expectation) bounds Algorithm 1, the uniform length and computation-only."""
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for _ in range(4):
        c = _cell(rng, 3)
        ex = ud.exact_expectation(c)
        opt = ud.exhaustive_optimum(c, ex)
        for s in (ud.algorithm1(c, ex), ud.uniform_length(c, ex)):
            assert s.goodput <= opt.goodput * (1 + 1e-12), seed
            assert s.goodput == pytest.approx(float(ud.goodput(c, s.gamma, ex)), rel=1e-12)
        assert float(ud.goodput(c, ud.computation_only(c), ex)) <= opt.goodput * (1 + 1e-12)
        g = np.stack(np.unravel_index(np.arange(21 ** 3), (21,) * 3), axis=-1)
        assert opt.goodput == pytest.approx(ud.goodput(c, g, ex).max(), rel=1e-12)


def test_round_time_is_the_kernel_and_bad_inputs_are_one_line():
    rng = np.random.default_rng(0)
    c = _cell(rng, 4)
    g = np.array([3, 0, 5, 2])
    ex = np.array([0.01, 0.0, 0.03, 0.02])
    assert ud.round_time(c, g, ex) == pytest.approx(np.max(g * c.draft_s) + c.t0_s + 4 * c.t1_s + 0.03)
    with pytest.raises(ValidationError, match="0..20"):
        ud.check_lengths(c, np.array([0, 1, 2, 21]))
    with pytest.raises(ValidationError, match="policy"):
        ud.comm_time(c, np.ones((1, 4), bool), "both")
    with pytest.raises(ValidationError, match="p_dl_w"):
        ud.ReactiveCell(c.draft_s, c.alpha, c.gain, 1e6, c.p_ul_w, -1.0, 1e-20, 1e-20, 1e4, 0.04, 0.007)
    with pytest.raises(ValidationError, match=r"\[1, 16\]"):
        ud.all_outcomes(17)


def _cvxpy_feasible(c, U, D, tau):
    """The exchange's convex feasibility at ``tau`` (band in MHz, rates via rel_entr), solved by CVXPY (Clarabel)."""
    import cvxpy as cp

    devs = np.flatnonzero(U | D)
    b = cp.Variable(len(devs), nonneg=True)
    p = cp.Variable(len(devs), nonneg=True)
    need = c.bits * np.log(2.0) / (tau * 1e6)
    cons = [cp.sum(b) <= c.bandwidth_hz / 1e6, cp.sum(p) <= c.p_dl_w]
    for i, k in enumerate(devs):
        if U[k]:
            cons += [-cp.rel_entr(b[i], b[i] + c.p_ul_w[k] * c.gain[k] / c.n0_ser_w_per_hz / 1e6) >= need, p[i] == 0]
        else:
            cons += [-cp.rel_entr(b[i], b[i] + p[i] * c.gain[k] / c.n0_dev_w_per_hz / 1e6) >= need]
    prob = cp.Problem(cp.Minimize(0), cons)
    prob.solve(solver=cp.CLARABEL)
    return prob.status in ("optimal", "optimal_inaccurate")


def test_joint_exchange_time_is_the_convex_optimum():
    """The joint (mode, band, power) exchange time: CVXPY finds it feasible 0.5 % above and infeasible 0.5 % below for
    every assignment; it never exceeds the paper's equal-split optimum (Lemma 2)."""
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for _ in range(2):
        c = _cell(rng, 3)
        R = np.ones(3, dtype=bool)
        j = ud.joint_exchange_time(c, R)
        assert j["tau"] <= j["tau_equal"] * (1 + 1e-9) and j["tau"] <= j["tau_best_prefix"] * (1 + 1e-12)
        U = np.isin(np.arange(3), j["ul"])
        assert _cvxpy_feasible(c, U, R & ~U, j["tau"] * 1.005), seed
        for mask in range(8):
            Um = np.array([(mask >> i) & 1 for i in range(3)], dtype=bool)
            assert not _cvxpy_feasible(c, Um, R & ~Um, j["tau"] * 0.995), (seed, mask)
