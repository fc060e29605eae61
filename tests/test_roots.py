"""Batched root finders against scipy's brentq on random monotone functions."""
import numpy as np
from scipy.optimize import brentq

from spinlib.roots import newton_decreasing


def _family(rng, n):
    # decreasing f(x) = c - a * x^p - log(x) on x in [lo, hi], p, a > 0
    return rng.uniform(0.5, 3, n), rng.uniform(0.1, 10, n), rng.uniform(-2, 2, n)


def test_newton_matches_brentq(rng):
    a, p, c = _family(rng, 500)
    f = lambda x: c - a * x**p - np.log(x)  # noqa: E731
    df = lambda x: -a * p * x ** (p - 1) - 1 / x  # noqa: E731
    lo, hi = np.full(500, 1e-6), np.full(500, 1e3)
    ref = np.array([brentq(lambda x: c[i] - a[i] * x ** p[i] - np.log(x), 1e-6, 1e3, xtol=1e-15, rtol=1e-15)
                    for i in range(500)])
    # Newton as the solvers use it: in t = log x, on a bracket a few dozen units wide
    t, _, _ = newton_decreasing(lambda t: (f(np.exp(t)), np.exp(t) * df(np.exp(t))), np.log(lo), np.log(hi),
                                tol=1e-14, f_tol=1e-13)
    np.testing.assert_allclose(np.exp(t), ref, rtol=1e-10)


def test_newton_keeps_exact_roots_and_survives_infinities():
    # f = 0 exactly at the start: stays there; f = +inf at the lower end: bisects safely
    x, _, _ = newton_decreasing(lambda x: (2.0 - x, -np.ones_like(x)), np.array([0.0]), np.array([4.0]), np.array([2.0]))
    assert x[0] == 2.0
    g = lambda x: (np.where(x > 1, 1 / (x - 1) - 1, np.inf), -1 / (x - 1) ** 2)  # noqa: E731
    x, _, _ = newton_decreasing(g, np.array([1.0]), np.array([10.0]))
    assert abs(x[0] - 2.0) < 1e-10
