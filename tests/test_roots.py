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


def test_newton_on_rows_is_the_batch_iteration_bit_for_bit(rng):
    """``rows=True`` evaluates only the entries still iterating, and each live entry ends where the
    batch iteration ends it, bit for bit (2-D batches, entries masked out, some roots at a bracket end)."""
    a, p, c = (v.reshape(40, 5) for v in _family(rng, 200))
    c[0, :2] = 50.0  # no root inside: the bracket's upper end
    live = rng.random((40, 5)) < 0.8
    f = lambda t, a, p, c: (c - a * np.exp(t) ** p - t, -a * p * np.exp(t) ** p - 1.0)  # noqa: E731
    lo, hi = np.full((40, 5), np.log(1e-6)), np.full((40, 5), np.log(1e3))
    x_all, _, _ = newton_decreasing(lambda t: f(t, a, p, c), lo, hi, tol=1e-14, f_tol=1e-13, live=live)
    seen = []

    def on_rows(t, idx):
        seen.append(len(idx))
        return f(t, a.ravel()[idx], p.ravel()[idx], c.ravel()[idx])

    x_rows, _, _ = newton_decreasing(on_rows, lo, hi, tol=1e-14, f_tol=1e-13, live=live, rows=True)
    assert x_rows.shape == x_all.shape
    assert x_rows[live].tobytes() == x_all[live].tobytes()
    assert np.all(x_rows[~live] == 0.5 * (lo + hi)[~live])  # not live: left at the start
    assert seen[0] == live.sum() and sum(seen) < len(seen) * live.sum()  # converged entries drop out
