"""Claim maps (:mod:`spinlib.maps`): grid records, per-cell verdicts with intervals, region shares and
boundaries, on synthetic records with known answers and on paper 1's point function."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from spinlib.maps import Grid, cell_verdicts, grid_records, grid_seeds, region_text
from spinlib.studies.paper_maps import paper1_gain_point, paper2_dl_side_point
from spinlib.validation import ValidationError


def _noise_point(cell, seed):
    rng = np.random.default_rng(seed)
    return {"m": cell["a"] * cell["b"] + 0.01 * rng.standard_normal(), "seed_echo": seed}


def test_grid_refuses_what_cannot_give_an_interval():
    for bad in [dict(axes=(), n_seeds=3, seed=0), dict(axes=(("a", ()),), n_seeds=3, seed=0),
                dict(axes=(("a", (1,)),), n_seeds=1, seed=0)]:
        with pytest.raises(ValidationError):
            Grid(**bad)


def test_grid_records_are_complete_deterministic_and_share_seeds():
    g = Grid((("a", (0.0, 1.0, 2.0)), ("b", (-1.0, 1.0))), 3, 5)
    r1 = grid_records(_noise_point, g, n_jobs=1, progress=False)
    r2 = grid_records(_noise_point, g, n_jobs=2, progress=False)
    assert r1 == r2 and len(r1) == 3 * 2 * 3
    df = pd.DataFrame(r1)
    assert (df["seed"] == df["seed_echo"]).all()
    assert set(df["seed"]) == set(grid_seeds(5, 3))
    assert df.groupby(["a", "b"])["seed"].apply(lambda s: sorted(s)).map(tuple).nunique() == 1  # common seeds


@pytest.mark.parametrize("seed", range(5))
def test_cell_verdicts_match_the_t_interval(seed):
    rng = np.random.default_rng([25, seed])
    rec = [{"x": x, "seed": i, "m": float(mu + rng.normal(0, 0.5))}
           for x, mu in ((1, -3.0), (2, 0.0), (3, 3.0)) for i in range(int(rng.integers(2, 9)))]
    v = cell_verdicts(rec, ["x"], "m", threshold=0.0).set_index("x")
    for x in (1, 2, 3):
        d = np.array([r["m"] for r in rec if r["x"] == x])
        half = stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d))
        assert v.loc[x, "lo"] == pytest.approx(d.mean() - half) and v.loc[x, "hi"] == pytest.approx(d.mean() + half)
        expect = "holds" if d.mean() - half > 0 else ("fails" if d.mean() + half <= 0 else "undecided")
        assert v.loc[x, "verdict"] == expect
    # a metric at the threshold in every seed (zero spread) fails "above the threshold": not undecided
    flat = cell_verdicts([{"x": 0, "seed": i, "m": 0.0} for i in range(4)], ["x"], "m", threshold=0.0)
    assert flat["verdict"].tolist() == ["fails"]


def test_region_text_shares_and_boundary():
    # holds for a >= 2 when b = 0, never when b = 1
    rows = []
    for b in (0, 1):
        for a in (1, 2, 3):
            verdict = "holds" if (b == 0 and a >= 2) else ("fails" if b == 1 else "undecided")
            rows.append({"a": a, "b": b, "mean": 0.0, "lo": 0.0, "hi": 0.0, "n": 2, "verdict": verdict})
    out = region_text(pd.DataFrame(rows), "a")
    assert out["shares"] == pytest.approx({"holds": 2 / 6, "undecided": 1 / 6, "fails": 3 / 6})
    assert {b["b"]: b["holds_from"] for b in out["boundary"]} == {0: 2, 1: None}


def test_paper1_point_respects_the_optimiser_order_and_checks_its_axes():
    for cell in ({"bandwidth_mhz": 2.0, "heterogeneity": 1.0, "num_users": 4}, {"heterogeneity": 0.0, "num_users": 3}):
        r = paper1_gain_point(cell, 11, L_max=8)
        assert r["gain_het"] >= r["gain_hom"] - 1e-9 >= -2e-9  # heterogeneous >= homogeneous >= agnostic
    with pytest.raises(ValidationError, match="unknown axes"):
        paper1_gain_point({"bandwidth": 1.0}, 0)


def test_paper2_point_reports_the_dl_side_and_checks_its_axes():
    r = paper2_dl_side_point({"dl_power_dbm": 46.0, "cell_radius_m": 1500.0, "num_users": 4}, 5)
    assert 0.0 <= r["dl_share"] <= 1.0 and 0 <= r["drafting"] <= 4
    assert np.isnan(r["far_dl_db"]) == (r["dl_share"] in (0.0, 1.0) or r["drafting"] == 0)
    with pytest.raises(ValidationError, match="unknown axes"):
        paper2_dl_side_point({"radius": 1.0}, 0)


def test_plot_map_marks_every_cell(tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from spinlib.maps import plot_map
    v = pd.DataFrame([{"a": a, "b": b, "mean": a - b, "lo": 0, "hi": 0, "n": 2,
                       "verdict": ["holds", "fails", "undecided"][(a + b) % 3]} for a in (1, 2) for b in (1, 2, 3)])
    fig, ax = plt.subplots()
    plot_map(ax, v, "a", "b", label="m", fmt="{:+.0f}", center=0.0)
    texts = [t.get_text() for t in ax.texts]
    assert len(texts) == 6 and {t[0] for t in texts} == {"o", "x", "?"}
    plt.close(fig)


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


@pytest.mark.parametrize("seed", range(4))
def test_balance_hybrid_point_is_the_regime_point_and_never_negative(seed):
    """The map's gain is (BALANCE - better single mode) / K of the same instance hybrid_regime_point
    solves (defaults = the generator's), >= 0, and an unknown axis is one line."""
    from spinlib.balance import random_instance, solve_balance
    from spinlib.studies.balance import HYBRID_MAP_DEFAULTS, balance_hybrid_point

    rng = np.random.default_rng(seed)
    K = int(rng.integers(5, 60))
    cell = {"num_users": K, "memory_gb": float(rng.choice([20.0, 40.0, 80.0])), "budget_ms_low": 5.0}
    r = balance_hybrid_point(cell, seed)
    assert r["hybrid_gain"] >= 0 and r["hybrid_gain"] * K == r["hybrid_gain_users"]
    kw = dict(memory_gb=cell["memory_gb"], token_budget_ms=(5.0, 5.0 * HYBRID_MAP_DEFAULTS["budget_spread"]),
              output_tokens=(32, 512), prompt_tokens=(64, 2048), alpha_range=(0.3, 0.9), draft_length=4)
    inst = random_instance(K, np.random.default_rng(np.random.SeedSequence(seed)), **kw)
    best = max(solve_balance(inst, "ad-only").served, solve_balance(inst, "sd-only").served)
    assert r["best_single_share"] == best / K
    with pytest.raises(ValidationError, match="unknown axes"):
        balance_hybrid_point({"users": 3}, 0)


@pytest.mark.parametrize("seed", range(5))
def test_cell_verdicts_every_rule_is_the_seedwise_min_and_max(seed):
    """rule="every" (an exact property): holds when every instance is above the threshold, fails when none
    is, undecided when some are; lo/hi are the smallest and largest value over the seeds."""
    rng = np.random.default_rng([26, seed])
    rec = [{"x": x, "seed": i, "m": float(rng.choice(vals))}
           for x, vals in ((1, (1.0,)), (2, (0.0,)), (3, (0.0, 1.0))) for i in range(int(rng.integers(2, 9)))]
    v = cell_verdicts(rec, ["x"], "m", threshold=0.5, rule="every").set_index("x")
    for x in (1, 2, 3):
        d = np.array([r["m"] for r in rec if r["x"] == x])
        assert (v.loc[x, "lo"], v.loc[x, "hi"]) == (d.min(), d.max())
        expect = "holds" if d.min() > 0.5 else ("fails" if d.max() <= 0.5 else "undecided")
        assert v.loc[x, "verdict"] == expect
    with pytest.raises(ValidationError, match="rule"):
        cell_verdicts(rec, ["x"], "m", rule="most")
    with pytest.raises(ValidationError, match="metric"):
        cell_verdicts(rec, ["x"], "missing")


@pytest.mark.parametrize("seed", range(4))
def test_paper1_compensation_point_detects_both_directions(seed):
    """The homogeneous split gives a slower or farther user more bandwidth (a theorem of equal finish
    times: every user compensated on fresh random cells); a *faster* draft must read as not compensated."""
    from spinlib.studies.paper_maps import paper1_compensation_point

    rng = np.random.default_rng([27, seed])
    cell = {"num_users": int(rng.integers(2, 30)), "bandwidth_mhz": float(rng.choice([1.0, 10.0, 40.0])),
            "heterogeneity": float(rng.uniform(0, 1))}
    assert paper1_compensation_point(cell, seed)["compensated"] == 1.0
    r = paper1_compensation_point(cell, seed, draft_step=1 / 1.2, loss_step_db=-2.0)
    assert r["compensated_compute"] == 0.0 and r["compensated_channel"] == 0.0
    with pytest.raises(ValidationError, match="unknown axes"):
        paper1_compensation_point({"users": 3}, 0)


@pytest.mark.parametrize("seed", range(3))
def test_paper1_rewards_point_agrees_with_the_exhaustive_optimum(seed):
    """On 3 users identical except alpha, the point's verdict for model A equals the monotonicity of the
    exhaustive optimum (an independent reference) of the same cell."""
    from spinlib import User, random_scenario
    from spinlib.control import solve
    from spinlib.studies.paper_maps import paper1_rewards_point

    cell = {"num_users": 3, "bandwidth_mhz": float([1.0, 5.0, 20.0][seed])}
    r = paper1_rewards_point(cell, seed)
    s = random_scenario(3, seed=seed, preset="llama2-7b-l4", bandwidth_hz=cell["bandwidth_mhz"] * 1e6)
    alphas = np.sort(np.random.default_rng(seed).uniform(0.3, 0.95, 3))
    u0 = s.users[0]
    s = s.replace(users=tuple(User(0.004, float(a), u0.channel_gain, u0.tx_power_w) for a in alphas))
    x = solve(s, "exhaustive", L_max=16)
    mono = bool(np.all(np.diff(x.b) >= -1e-6 * s.radio.bandwidth_hz) and np.all(np.diff(x.L) >= 0))
    assert r["rewards_sync"] == float(mono)
    with pytest.raises(ValidationError, match="unknown axes"):
        paper1_rewards_point({"alpha": 3}, 0)


@pytest.mark.parametrize("seed", range(4))
def test_paper2_structure_point_is_the_exhaustive_comparison(seed):
    from spinlib.control import uldl as U
    from spinlib.studies.paper_maps import paper2_structure_point
    from spinlib.presets import random_uldl_scenario

    cell = {"num_users": 3 + seed, "dl_power_dbm": 20.0 + 8 * seed}
    r = paper2_structure_point(cell, seed)
    assert 0.0 <= r["gap"] < 1 and r["structure_optimal"] == float(r["gap"] <= 1e-9)
    rng = np.random.default_rng(seed)
    s = random_uldl_scenario(cell["num_users"], rng)
    from spinlib.channel import dbm_to_w
    import dataclasses
    s = s.replace(downlink=dataclasses.replace(s.downlink, power_w=float(dbm_to_w(cell["dl_power_dbm"]))))
    L = rng.integers(0, 9, cell["num_users"])
    assert r["drafting"] == int((L > 0).sum())
    _, G_x = U.exhaustive_modes(U.Problem(s, 8), L)
    _, G_s, _ = U.structured_modes(U.Problem(s, 8), L, index="marginal")
    assert r["gap"] == pytest.approx(max(0.0, 1 - G_s / G_x), abs=1e-12)
    with pytest.raises(ValidationError, match="unknown axes"):
        paper2_structure_point({"power": 3}, 0)


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
