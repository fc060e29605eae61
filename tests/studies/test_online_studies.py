"""Notebook 10's studies (spinlib.studies.online): the claim-map points against direct arena runs and
closed forms, the critical delay's two-point estimate and its bootstrap interval, the O(1/V) fit and the
regret-growth exponent, on fresh random inputs."""
import math

import numpy as np
import pytest

from spinlib.online.stopping import RoundCosts, critical_delay
from spinlib.studies.online import critical_delay_intervals, critical_delay_two_points, regret_exponent
from spinlib.validation import ValidationError


def test_online_points_are_the_arena_and_check_their_axes():
    """UCB-SpecStop's margins and GELATO's gains at one point: finite, consistent with a direct arena
    run (the margin is the ratio of the two controllers' throughputs), unknown axes are one line."""
    from spinlib.online import ArenaConfig, Delay, cspec, run_arena
    from spinlib.online.measured import pair_streams, pair_timings
    from spinlib.studies.online import gelato_gain_point, specstop_margin_point

    cell = {"delay_ms": 300, "draft_cost_ratio": 0.2, "pair": "smollm2-rtn4g16", "rounds": 200, "users": 2}
    m = specstop_margin_point(cell, 5)
    tim = pair_timings("smollm2-rtn4g16")
    tim["t_d"] = 0.2 * (tim["t0"] + 2 * tim["t1"])
    specs = [cspec("ucb-specstop"), cspec("specdec++", h=0.7)]
    s = run_arena(specs, pair_streams("smollm2-rtn4g16"),
                  ArenaConfig(rounds=200, users=2, L_max=8, delay=Delay("exponential", 0.3), **tim), seed=5).summary()
    assert m["margin_specdecpp"] == pytest.approx(s.loc["ucb-specstop", "user_goodput_tokens_per_s"]
                                                  / s.loc[specs[1].title, "user_goodput_tokens_per_s"] - 1, rel=1e-9)
    g = gelato_gain_point({"budget_fraction": 0.5, "delay_ms": 200, "pair": "smollm2-rtn4g16", "rounds": 200,
                           "users": 2}, 3)
    assert all(np.isfinite(v) for v in g.values()) and g["budget_j"] > 0 and g["debt_j"] >= 0
    for fn in (specstop_margin_point, gelato_gain_point):
        with pytest.raises(ValidationError, match="unknown axes"):
            fn({"delay": 1}, 0)


@pytest.mark.parametrize("seed", range(6))
def test_critical_delay_and_log_growth_points_on_random_costs(seed):
    """The closed-form critical delay's sign says whether one drafted token is optimal at zero delay
    (checked by enumerating J(L) directly), the brute-force flip agrees, and the optimal length's slope
    in ln D is near the law's 1 / ln(1/alpha)."""
    from spinlib.studies.online import _map_costs, critical_delay_point, log_growth_point
    from spinlib.online.stopping import iid_survival, per_token_latency

    rng = np.random.default_rng([28, seed])
    cell = {"alpha": float(rng.uniform(0.2, 0.95)), "draft_cost_ratio": float(rng.uniform(0.02, 1.0))}
    r = critical_delay_point(cell, seed)
    costs, T = _map_costs(cell, seed, "qwen-coder")
    J = per_token_latency(iid_survival(cell["alpha"], 12), costs)
    assert (r["D_c_rel"] > 0) == (int(np.argmin(J[1:])) + 1 == 1)
    assert r["flip_agrees"] == 1.0 and r["D_c_ms"] == pytest.approx(1e3 * r["D_c_rel"] * T)
    g = log_growth_point(cell, seed)
    assert 0.7 < g["slope_ratio"] < 1.3 and g["L_last"] >= 1
    with pytest.raises(ValidationError, match="L_cap"):
        log_growth_point({"alpha": 0.95, "draft_cost_ratio": 0.05}, 0, L_cap=20)
    for fn in (critical_delay_point, log_growth_point):
        with pytest.raises(ValidationError, match="unknown axes"):
            fn({"alpha": 0.5, "delay": 1}, 0)


def test_regret_and_gelato_v_points_are_finite_and_fit_like_regret_exponent():
    from spinlib.studies.online import _growth_fitter, gelato_v_point, regret_exponent, regret_growth_point

    cell = {"c": 0.5, "delay_ms": 200, "pair": "smollm2-rtn4g16", "rounds": 300, "users": 2}
    r = regret_growth_point(cell, 3)
    assert 0 < r["p"] <= 3 and np.isfinite(r["regret_s"]) and r["user_goodput_tokens_per_s"] > 0
    t = np.arange(1, 65, dtype=float)
    y = 2 + 3 * t ** 0.4
    assert _growth_fitter(t, 1 / 32)(y) == pytest.approx(0.4, abs=1e-3)
    assert regret_exponent(t, np.vstack([y, y]), n_boot=5)["p"] == pytest.approx(_growth_fitter(t, 1 / 32)(y))
    g = gelato_v_point({"budget_fraction": 0.5, "delay_ms": 200, "pair": "smollm2-rtn4g16", "rounds": 200,
                        "users": 2}, 3, V_values=(0.3, 3.0))
    assert all(np.isfinite(v) for v in g.values()) and g["budget_j"] > 0 and g["debt_max_j"] >= 0
    for fn in (regret_growth_point, gelato_v_point):
        with pytest.raises(ValidationError, match="unknown axes"):
            fn({"delay": 1}, 0)


@pytest.mark.parametrize("seed", range(20))
def test_two_point_critical_delay_equals_the_closed_form_on_a_line(seed):
    rng = np.random.default_rng([4, seed])
    S = np.concatenate([[1.0], np.sort(rng.uniform(0.01, 1.0, 3))[::-1]])
    t_d, t0, t1 = rng.uniform(0.001, 0.2), rng.uniform(0.0, 0.3), rng.uniform(0.0, 0.02)
    a = critical_delay(S, RoundCosts(t_d, t0, t1, 0.0))
    b = critical_delay_two_points(S, t_d, t0 + 2 * t1, t0 + 3 * t1)
    assert b == pytest.approx(a, rel=1e-9, abs=1e-12)
    assert math.isinf(critical_delay_two_points(np.array([1.0, 0.5, 0.0]), t_d, 0.1, 0.1))


def test_critical_delay_interval_is_reproducible_and_brackets_its_replicates():
    r = critical_delay_intervals(["smollm2-rtn3g16"], n_boot=60, seed=3)["smollm2-rtn3g16"]
    again = critical_delay_intervals(["smollm2-rtn3g16"], n_boot=60, seed=3)["smollm2-rtn3g16"]
    assert r == again
    reps = np.array(r["replicates_s"])
    assert r["ci_low_s"] <= np.median(reps) <= r["ci_high_s"] and len(reps) == 60
    assert r["fit_rms_residual_s"] > 0 and np.isfinite(r["D_c_two_points_s"])


def test_optimal_length_interval_rides_on_the_same_replicates():
    # the point L* is brute force's on the pair's point timings and pooled survival; the delays do not move the
    # critical delay's replicates (one generator stream); L* is non-decreasing in D at the point and at both ends
    from spinlib.online.measured import pair_timings, pooled_survival
    from spinlib.online.stopping import brute_force_length

    pair, Ds = "qwen-coder", (0.05, 0.5, 5.0)
    r = critical_delay_intervals([pair], n_boot=60, seed=3, lengths_at_s=Ds)[pair]
    plain = critical_delay_intervals([pair], n_boot=60, seed=3)[pair]
    assert r["replicates_s"] == plain["replicates_s"] and plain["L_star_at"] == {}
    tim = pair_timings(pair)
    S = pooled_survival(pair, 12)
    at = [r["L_star_at"][str(D)] for D in Ds]
    for D, v in zip(Ds, at):
        assert v["L"] == brute_force_length(S, RoundCosts(tim["t_d"], tim["t0"], tim["t1"], D))[0]
        assert 1 <= v["ci_low"] <= v["ci_high"] <= 12 and 0 <= v["share_same"] <= 1
    for key in ("L", "ci_low", "ci_high"):
        assert [v[key] for v in at] == sorted(v[key] for v in at)
    assert at[-1]["L"] > at[0]["L"]


def test_fit_inverse_v_recovers_the_law_and_refuses_bad_input():
    from spinlib.studies.online import fit_inverse_v
    from spinlib.validation import ValidationError

    rng = np.random.default_rng(7)
    for _ in range(20):
        g, b = rng.uniform(1, 20), rng.uniform(0, 5)
        V = np.sort(rng.uniform(0.05, 50, 6))
        f = fit_inverse_v(V, g - b / V)
        assert abs(f["g_inf"] - g) < 1e-9 * g and abs(f["b"] - b) < 1e-8 and f["r2"] > 1 - 1e-12
        assert np.allclose(f["gap_at"], b / V)
    # a throughput that falls with V is fitted with b < 0: the law does not hold there
    assert fit_inverse_v([0.1, 1, 10], [10.0, 9.0, 8.0])["b"] < 0
    for bad in (([1, 2], [1, 2]), ([0, 1, 2], [1, 2, 3]), ([1, 2, 3], [1, float("nan"), 3])):
        with pytest.raises(ValidationError):
            fit_inverse_v(*bad)


# ---------------------------------------------------------------- the regret's growth
def _curves(f, seeds=6, noise=0.02, seed=0):
    t = np.unique(np.geomspace(1, 4000, 40).astype(int))
    rng = np.random.default_rng(seed)
    base = f(t.astype(float))
    return t, base[None, :] * (1 + noise * rng.standard_normal((seeds, t.size)))


def test_regret_exponent_tells_log_from_a_power_law():
    t, Y = _curves(lambda t: 5 + 3 * np.log(t))
    g = regret_exponent(t, Y)
    assert g["log_like"] and g["p_hi"] < 0.1
    t, Y = _curves(lambda t: 2 * t ** 0.5)
    g = regret_exponent(t, Y)
    assert not g["log_like"] and abs(g["p"] - 0.5) < 0.05 and g["p_lo"] <= 0.5 <= g["p_hi"]
    t, Y = _curves(lambda t: 0.1 * t)
    g = regret_exponent(t, Y)
    assert abs(g["p"] - 1) < 0.05 and math.isclose(g["per_doubling"], 2 ** g["p"])


@pytest.mark.parametrize("rounds, curves", [([1, 2, 3], [[1, 2, 3]]), ([3, 2, 1, 4], [[1, 2, 3, 4]] * 2),
                                            ([1, 2, 3, 4], [[1, 2, 3]] * 2)])
def test_regret_exponent_refuses_bad_curves(rounds, curves):
    with pytest.raises(ValidationError):
        regret_exponent(rounds, curves)


def test_regret_exponent_agrees_with_a_general_least_squares_fit():
    # independent reference: scipy's nonlinear least squares on all three parameters at once
    from scipy.optimize import curve_fit

    rng = np.random.default_rng(11)
    for _ in range(5):
        p_true = rng.uniform(0.2, 1.5)
        t, Y = _curves(lambda t: rng.uniform(0, 5) + rng.uniform(1, 3) * t ** p_true, seed=int(rng.integers(100)))
        g = regret_exponent(t, Y, n_boot=20)
        keep = t >= t[-1] / 32
        x, y = t[keep] / t[keep][-1], Y.mean(0)[keep]
        (a, b, p), _ = curve_fit(lambda x, a, b, p: a + b * x ** p, x, y, p0=(y[0], y[-1] - y[0], 1.0), maxfev=20000)
        assert abs(g["p"] - p) < 1e-3 * max(1, p), (g["p"], p)
