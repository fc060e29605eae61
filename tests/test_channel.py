"""Rate models: closed-form Lambert-W inverse against brentq, derivative, limits."""
import numpy as np
import pytest
from scipy.optimize import brentq

from spinlib.channel import (RateModel, path_loss_db, shannon_bandwidth_for_rate, shannon_rate,
                             shannon_rate_derivative, shannon_rate_limit)


def test_inverse_matches_brentq(rng):
    for _ in range(300):
        a = 10 ** rng.uniform(3, 9)
        r = rng.uniform(1e-6, 0.9999)
        R = r * shannon_rate_limit(a)
        b = shannon_bandwidth_for_rate(R, a)
        b_ref = brentq(lambda x: shannon_rate(x, a) - R, 1e-30, 1e30, xtol=1e-300, rtol=1e-15, maxiter=500)
        assert b == pytest.approx(b_ref, rel=1e-9)
        assert shannon_rate(b, a) == pytest.approx(R, rel=1e-12)


def test_inverse_edges():
    a = 1e6
    assert shannon_bandwidth_for_rate(0.0, a) == 0.0
    assert np.isinf(shannon_bandwidth_for_rate(shannon_rate_limit(a), a))
    assert np.isinf(shannon_bandwidth_for_rate(2 * shannon_rate_limit(a), a))
    # vectorised and monotone
    R = np.linspace(1, 0.999 * shannon_rate_limit(a), 500)
    b = shannon_bandwidth_for_rate(R, a)
    assert np.all(np.diff(b) > 0)


def test_rate_concave_increasing_and_derivative(rng):
    a = 3e6
    b = np.geomspace(1e2, 1e9, 400)
    R = shannon_rate(b, a)
    assert np.all(np.diff(R) > 0)
    d = shannon_rate_derivative(b, a)
    assert np.all(np.diff(d) < 0) and np.all(d > 0)
    h = b * 1e-6
    fd = (shannon_rate(b + h, a) - shannon_rate(b - h, a)) / (2 * h)
    np.testing.assert_allclose(d, fd, rtol=1e-5)
    assert R[-1] < shannon_rate_limit(a)


def test_linear_model_round_trip():
    a = np.array([1e6, 1e7, 1e8])
    m = RateModel("linear", a, bandwidth_hz=3e6)
    b = np.array([1e5, 2e5, 3e5])
    np.testing.assert_allclose(m.bandwidth_for_rate(m.rate(b)), b)
    # efficiency frozen at the equal share B/K = 1 MHz
    np.testing.assert_allclose(m.c, np.log2(1 + a / 1e6))


def test_path_loss():
    assert path_loss_db(1000.0) == pytest.approx(128.1)
    assert path_loss_db(100.0) == pytest.approx(128.1 - 37.6)
    with pytest.raises(ValueError, match="distance_m must be > 0"):
        path_loss_db(0.0)


def test_lambert_wm1_matches_scipy():
    """Our Newton W_{-1} agrees with scipy's lambertw to 1e-12 relative in Y - r (the bandwidth's denominator)."""
    from scipy.special import lambertw

    from spinlib.channel import lambert_wm1_neg

    rng = np.random.default_rng(7)
    r = np.concatenate([10 ** rng.uniform(-250, 0, 20000), 1 - 10 ** rng.uniform(-4, 0, 20000)])
    r = r[r < 1 - 1e-4]
    Y = lambert_wm1_neg(r)
    Y_ref = -lambertw(-r * np.exp(-r), k=-1).real
    assert np.all(Y > 1)
    np.testing.assert_allclose(Y - r, Y_ref - r, rtol=5e-8)  # scipy itself is only ~1e-8 accurate here
    # and ours solves the defining equation to rounding
    np.testing.assert_allclose(Y - np.log(Y), r - np.log(r), rtol=1e-14)


def test_the_one_faded_rate_model():
    """RateModel.faded: a_k h_k in place of a_k, for any shape [..., K] of fading factors; no fading (h = 1)
    is RateModel.of bit for bit; the per-round problem's faded_rates is the same model. Fresh random cells."""
    from spinlib import random_scenario
    from spinlib.channel import RateModel
    from spinlib.online.round_problem import faded_rates

    rng = np.random.default_rng(np.random.SeedSequence().entropy)
    for kind in ("shannon", "linear"):
        s = random_scenario(int(rng.integers(1, 9)), seed=int(rng.integers(1 << 30)), rate_model=kind)
        K = s.num_users
        h = rng.exponential(size=(int(rng.integers(1, 5)), K))
        b = rng.uniform(1e3, s.radio.bandwidth_hz, size=h.shape)
        want = np.stack([RateModel(kind, s.snr_scale_hz * h[r], s.radio.bandwidth_hz).rate(b[r]) for r in range(len(h))])
        assert np.array_equal(RateModel.faded(s, h).rate(b), want)  # every round at once
        assert np.array_equal(RateModel.faded(s, h[0]).rate(b[0]), want[0])
        assert np.array_equal(faded_rates(s, h[0]).rate(b[0]), want[0])
        assert np.array_equal(RateModel.faded(s, np.ones(K)).rate(b[0]), RateModel.of(s).rate(b[0]))
