"""spinlib.goodput: the one estimator of goodput over played rounds, its interval, and the result type
every round simulator shares."""
import numpy as np

from spinlib import random_scenario, simulate_rounds
from spinlib.control import solve
from spinlib.decision import FixedLength
from spinlib.emulator import EmulatorConfig, Fading, emulate
from spinlib.goodput import GoodputEstimate, goodput_interval, goodput_sum_interval
from spinlib.online import replan as rep


def test_every_round_simulator_returns_a_goodput_estimate_that_holds_its_interval():
    """The Monte Carlo check, the testbed (sync and async clocks) and the multi-user player all return
    a GoodputEstimate computed by goodput.py; fresh random cells."""
    ss = np.random.SeedSequence()
    rng = np.random.default_rng(ss)
    for _ in range(3):
        s = random_scenario(int(rng.integers(2, 6)), seed=int(rng.integers(1 << 30)))
        sync, asyn = solve(s, "heterogeneous-sync", L_max=6), solve(s, "heterogeneous-async", L_max=6)
        cfg = rep.ReplanConfig(rounds=int(rng.integers(20, 60)), seed=int(rng.integers(1 << 30)), fading=Fading("rayleigh"))
        results = [simulate_rounds(s, sync, 200, np.random.default_rng(rng.integers(1 << 30))),
                   simulate_rounds(s, asyn, 200, np.random.default_rng(rng.integers(1 << 30))),
                   emulate(s, sync, EmulatorConfig(rounds=200, seed=int(rng.integers(1 << 30)))),
                   emulate(s, asyn, EmulatorConfig(rounds=200, seed=int(rng.integers(1 << 30)))),
                   rep.play(s, FixedLength(sync.L), rep.fading_draws(s, cfg), cfg)]
        for r in results:
            assert isinstance(r, GoodputEstimate), type(r)
            assert r.ci_low <= r.goodput_tokens_per_s <= r.ci_high and r.covers(r.goodput_tokens_per_s), (ss.entropy, r)


def test_the_interval_is_the_delta_method_of_the_ratio():
    """Against the formula written out, on random (tokens, durations) pairs: G = sum N / sum T and
    half-width z std(N - G T) / (sqrt(n) mean T); the sum over users adds the variances."""
    from scipy.stats import norm

    rng = np.random.default_rng(np.random.SeedSequence().entropy)
    for _ in range(20):
        n, K = int(rng.integers(2, 500)), int(rng.integers(1, 6))
        N, T = rng.integers(1, 9, (n, K)).astype(float), rng.uniform(0.05, 2.0, (n, K))
        c = float(rng.uniform(0.5, 0.999))
        z = norm.ppf(0.5 + c / 2)
        G, lo, hi = goodput_interval(N[:, 0], T[:, 0], c)
        g = N[:, 0].sum() / T[:, 0].sum()
        half = z * (N[:, 0] - g * T[:, 0]).std(ddof=1) / (np.sqrt(n) * T[:, 0].mean())
        assert np.isclose(G, g, rtol=1e-12) and np.isclose(hi - G, half, rtol=1e-9) and np.isclose(G - lo, half, rtol=1e-9)
        G, lo, hi = goodput_sum_interval(N, T, N.sum(0), T.sum(0), c)
        gk = N.sum(0) / T.sum(0)
        var = sum((N[:, k] - gk[k] * T[:, k]).var(ddof=1) / (n * T[:, k].mean() ** 2) for k in range(K))
        assert np.isclose(G, gk.sum(), rtol=1e-12) and np.isclose(hi - G, z * np.sqrt(var), rtol=1e-9)
