"""Paper 1's model and algorithms against independent references on fresh random instances of its setting."""
import numpy as np
import pytest
from scipy.optimize import brentq

from helpers import fresh_seed
from spinlib.papers import multispin as ms
from spinlib.papers import settings as st
from spinlib.validation import ValidationError


def _cell(rng, K, pair="llama2", band_per_device=0.5e6):
    dev = st.multispin_devices(rng, pair, K, rng.uniform(5e-3, 30e-3))
    return st.multispin_round(rng, pair, dev, 10 ** rng.uniform(-10.5, -8.0), bandwidth_hz=band_per_device * K)


def test_round_time_is_equation_26_plus_7():
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for _ in range(20):
        c = _cell(rng, int(rng.integers(1, 12)))
        L = rng.integers(1, c.L_max + 1, size=(5, c.K))
        b = rng.dirichlet(np.ones(c.K), size=5) * c.bandwidth_hz
        direct = np.max(L * (c.draft_s + c.bits_per_token / (b * c.spectral_eff)), axis=1) + c.t_fix_s + c.K * c.t_lin_s
        np.testing.assert_allclose(ms.round_time(c, L, b), direct, rtol=1e-12, err_msg=f"seed {seed}")
        N = ((1 - c.alpha ** (L + 1)) / (1 - c.alpha)).sum(axis=1)
        np.testing.assert_allclose(ms.goodput(c, L, b), N / direct, rtol=1e-12)


def test_makespan_split_is_the_root_and_beats_random_splits():
    """Lemma 3: equal finish times, the whole band, the scalar root of (32) (brentq), and no random split finishes earlier."""
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for _ in range(30):
        c = _cell(rng, int(rng.integers(1, 10)))
        L = rng.integers(1, c.L_max + 1, size=c.K)
        phi, b = ms.makespan_split(c, L)
        finish = L * (c.draft_s + c.bits_per_token / (b * c.spectral_eff))
        np.testing.assert_allclose(finish, phi, rtol=1e-8, err_msg=f"seed {seed}")
        assert b.sum() == pytest.approx(c.bandwidth_hz, rel=1e-12)
        f = lambda p: np.sum(c.bits_per_token * L / (c.spectral_eff * (p - L * c.draft_s))) - c.bandwidth_hz
        lo = np.max(L * c.draft_s)
        ref = brentq(f, lo * (1 + 1e-15) + 1e-300, lo + 10 * np.sum(c.bits_per_token * L / c.spectral_eff) / c.bandwidth_hz,
                     xtol=1e-16, rtol=1e-14)
        assert phi == pytest.approx(ref, rel=1e-9), seed
        rand = rng.dirichlet(np.ones(c.K), size=200) * c.bandwidth_hz
        assert np.all(ms.round_time(c, L, rand) >= ms.round_time(c, L, b) * (1 - 1e-9))


def test_theorem1_closed_form_equals_exhaustive_search():
    """Theorem 1 (24) with the floor/ceil rule equals the exhaustive best common length on random (alpha, T^ver, theta*)."""
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for _ in range(300):
        a, tv, th = rng.uniform(0.3, 0.98), rng.uniform(0.01, 1.0), rng.uniform(0.005, 0.2)
        L = np.arange(1, ms.L_MAX + 1)
        tau = (1 - a ** (L + 1)) / ((L * th + tv) * (1 - a))
        best = int(L[np.argmax(tau)])
        got = ms.homogeneous_length(a, tv, th)
        assert tau[got - 1] == pytest.approx(tau[best - 1], rel=1e-12), (seed, a, tv, th, got, best)


def test_proposition1_lengths_satisfy_the_stationarity_condition():
    """App. E: -alpha^(L+1) ln(alpha) / (1 - alpha) = lambda Q phi / (r (phi - L T^S)^2) at L~ (relative residual 1e-8)."""
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    c = _cell(rng, 8)
    phi_lo, phi_hi, lam_hi = ms.grid_ranges(c)
    phi = rng.uniform(phi_lo, phi_hi, size=40)
    lam = lam_hi * 10 ** rng.uniform(-8, 0, size=40)
    Lt = ms.relaxed_lengths(c, phi, lam)
    lhs = -c.alpha ** (Lt + 1) * np.log(c.alpha) / (1 - c.alpha)
    rhs = lam[:, None] * c.bits_per_token * phi[:, None] / (c.spectral_eff * (phi[:, None] - Lt * c.draft_s) ** 2)
    assert np.all(Lt < phi[:, None] / c.draft_s)
    np.testing.assert_allclose(lhs, rhs, rtol=1e-8, err_msg=f"seed {seed}")


def test_lambertw_of_exp_is_continuous_at_its_switch():
    from scipy.special import lambertw

    y = np.array([1.0, 50.0, 699.9, 700.0])
    np.testing.assert_allclose(ms._lambertw0_exp(y), lambertw(np.exp(y)).real, rtol=1e-14)
    w = ms._lambertw0_exp(np.array([700.1, 5000.0]))
    np.testing.assert_allclose(w + np.log(w), [700.1, 5000.0], rtol=1e-14)


def test_algorithm1_and_baselines_against_exhaustive_search():
    """Exhaustive search over 1..25 per device (Lemma 3's exact split) bounds every policy; Uni-BW's exact form equals
    the exhaustive search under the equal split; Algorithm 1 is feasible and within 10 % of the optimum here."""
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for _ in range(6):
        c = _cell(rng, 3)
        opt = ms.exhaustive_optimum(c)
        assert opt.evaluated == ms.L_MAX ** 3
        for name, policy in ms.POLICIES.items():
            s = policy(c)
            assert s.b.sum() <= c.bandwidth_hz * (1 + 1e-9)
            assert s.goodput == pytest.approx(float(ms.goodput(c, s.L, s.b)), rel=1e-12)
            assert s.goodput <= opt.goodput * (1 + 1e-9), (seed, name)
        a1 = ms.algorithm1(c)
        assert a1.goodput >= 0.9 * opt.goodput, (seed, a1.goodput, opt.goodput)
        L = 1 + np.stack(np.unravel_index(np.arange(ms.L_MAX ** 3), (ms.L_MAX,) * 3), axis=-1)
        uni = ms.goodput(c, L, ms.equal_split(c)).max()
        assert ms.uni_bw(c).goodput == pytest.approx(uni, rel=1e-12), seed


def test_bad_inputs_are_one_line():
    good = dict(draft_s=[0.01, 0.02], alpha=[0.8, 0.7], spectral_eff=[2.0, 3.0], bandwidth_hz=1e6,
                bits_per_token=31744.0, t_fix_s=0.02, t_lin_s=0.01)
    ms.MultiSpinCell(**good)
    for field, bad in [("alpha", [0.8, 1.0]), ("alpha", [0.8]), ("draft_s", [0.01, np.nan]), ("bandwidth_hz", -1.0),
                       ("spectral_eff", [2.0, 0.0]), ("t_lin_s", float("inf")), ("L_max", 0)]:
        with pytest.raises(ValidationError) as e:
            ms.MultiSpinCell(**{**good, field: bad})
        assert field in str(e.value) and "\n" not in str(e.value)
    c = ms.MultiSpinCell(**good)
    with pytest.raises(ValidationError, match="1..25"):
        ms.check_lengths(c, np.array([0, 3]))


def test_certified_optimum_equals_exhaustive_search_and_bounds_algorithm1():
    """The interval search with HiGHS's exact knapsack equals exhaustive search at K = 3, 4 (fresh instances), and
    at the paper's K = 20 it certifies a bound no policy exceeds."""
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for K in (3, 3, 4):
        c = _cell(rng, K)
        cs, ex = ms.certified_optimum(c), ms.exhaustive_optimum(c)
        assert cs.info["status"] == "optimal" and cs.info["gap"] <= 1e-6, (seed, cs.info)
        assert cs.goodput == pytest.approx(ex.goodput, rel=1e-9), seed
        assert cs.info["upper_bound"] >= ex.goodput * (1 - 1e-9), seed
    c = _cell(rng, 20)
    cs = ms.certified_optimum(c)
    assert cs.info["status"] == "optimal", (seed, cs.info)
    assert cs.goodput == pytest.approx(float(ms.goodput(c, cs.L, cs.b)), rel=1e-12)
    for policy in ms.POLICIES.values():
        assert policy(c).goodput <= cs.info["upper_bound"] * (1 + 1e-9), seed


def test_max_tokens_within_is_monotone_and_feasible():
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    c = _cell(rng, 6)
    lo = float(ms.makespan_split(c, np.ones(6))[0])
    prev = -np.inf
    for phi in np.linspace(lo, 6 * lo, 12):
        M, L, U = ms.max_tokens_within(c, phi, bound=True)
        M2, L2 = ms.max_tokens_within(c, phi)
        assert M2 == M and np.array_equal(L2, L), seed
        assert U >= prev - 1e-9, seed  # M is non-decreasing: the bound at phi is at least what fitted before
        assert M <= U <= M * (1 + 1e-6), seed  # HiGHS's optimality tolerance, well inside certified_optimum's gap
        prev = M
        # the lengths finish by phi exactly (HiGHS's feasibility tolerance is cut off, ms.FIT_TOL is float rounding)
        assert float(ms.makespan_split(c, L)[0]) <= phi * (1 + 1e-10), seed
        assert M == pytest.approx(float(ms.expected_tokens(c, L).sum()), rel=1e-12)
    assert ms.max_tokens_within(c, lo * 0.9)[1] is None
