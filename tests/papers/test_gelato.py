"""GELATO as written (spinlib.papers.gelato): the paper's step cost (1)-(4) against a hand computation, the budget
of (8) against a brute search, the leaky bucket (12)-(13) against its definition, the surrogate (6) against a
Monte Carlo of the model, the energy queue (7) against its identity, and refusals of bad input."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spinlib.papers import gelato as G
from spinlib.validation import ValidationError

S = G.GelatoSetting()


def test_step_cost_is_the_papers_equations_by_hand():
    gamma, ctx, gain, B, t_llm = 6, 300.0, 3e-11, 2e6, 0.1
    d, f = 896, 4864
    flops = 24 * gamma * (6 * d * d + 4 * (ctx + gamma / 2) * d + 2 * d * d + 4 * d * f)
    assert G.draft_flops(S, gamma, ctx) == pytest.approx(flops, rel=1e-12)
    p_tx = 10 ** ((23 - 30) / 10)
    rate = B * math.log2(1 + p_tx * gain / (10 ** ((-174 - 30) / 10) * B))
    bits = gamma * 4000 * (16 + 18)
    T, E = G.step_cost(S, gamma, ctx, gain, B, t_llm)
    assert T == pytest.approx(flops / 40e9 + bits / rate + t_llm, rel=1e-12)
    assert E == pytest.approx(12 * flops / 40e9 + p_tx * bits / rate, rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.floats(0, 50), st.floats(0.01, 1000), st.floats(1e-12, 1e-9), st.floats(0.5e6, 20e6), st.integers(0, 4000))
def test_the_budget_is_the_first_maximiser_of_the_utility(queue, V, gain, B, ctx):
    def utility(g):
        T, E = G.step_cost(S, g, ctx, gain, B, 0.1)
        return V * sum(S.rho0 ** i for i in range(g + 1)) / T - queue * E
    u = [utility(g) for g in range(1, S.gamma_max + 1)]
    best = max(u)
    assert G.choose_budget(S, queue, V, ctx, gain, B, 0.1) == 1 + next(i for i, x in enumerate(u)
                                                                         if x >= best - 1e-12 * abs(best))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 3), min_size=1, max_size=15), st.floats(0.05, 1), st.floats(0.05, 1))
def test_the_leaky_bucket_stops_where_its_definition_says(H, h_th, th_th):
    theta, ok = 0.0, []
    for h in H:
        theta = max(0.0, theta + h - h_th)
        ok.append(theta <= th_th)
    j = 0
    while j < len(ok) and ok[j]:
        j += 1
    assert G.early_exit_length(H, h_th, th_th) == max(j, 1)


@pytest.mark.parametrize("gamma", [1, 4, 9])
def test_the_surrogate_is_the_models_mean_tokens(gamma):
    """With i.i.d. entropies and acceptance phi(H_i), E[N] = sum_{i <= gamma} rho_0^i exactly (6): the Monte Carlo
    mean of a static run lies within 4 standard errors."""
    r = G.run(S, "static", bandwidth_hz=5e6, steps=20_000, seed=3, gamma=gamma)
    exact = sum(S.rho0 ** i for i in range(gamma + 1))
    sd = math.sqrt(sum((2 * i + 1) * S.rho0 ** i for i in range(gamma + 1)) - exact ** 2)  # Var N from E[N^2]
    assert abs(r["mean_tokens"] - exact) < 4 * sd / math.sqrt(20_000)


@pytest.mark.parametrize("budget_j,V", [(0.5, 10.0), (0.6, 10.0), (0.7, 1.0)])
def test_the_energy_queue_keeps_the_long_term_budget(budget_j, V):
    """(7) gives sum_k E_k - K E_bar <= Q_{K+1}: the mean energy per step exceeds the budget by at most the final
    queue over K, which stays small (the long-term constraint (5b) holds up to O(1/K))."""
    s = G.GelatoSetting(energy_budget_j=budget_j)
    for policy in ("gelato", "budget-only"):
        r = G.run(s, policy, bandwidth_hz=2e6, steps=4000, seed=5, V=V)
        assert r["mean_energy_j"] <= budget_j + r["final_queue_j"] / 4000 + 1e-12
        assert r["mean_energy_j"] <= budget_j * 1.05
        assert r["queue_changed_share"] > 0.2  # these budgets bind: the queue acts
    free = G.run(G.GelatoSetting(energy_budget_j=100.0), "budget-only", bandwidth_hz=2e6, steps=4000, seed=5, V=V)
    assert free["mean_energy_j"] > budget_j * 1.2  # without a binding budget the same runs spend more


@settings(max_examples=40, deadline=None)
@given(st.floats(1e-12, 1e-9), st.floats(0.5e6, 20e6), st.integers(0, 4000), st.floats(0.1, 100))
def test_a_longer_queue_never_asks_for_a_longer_budget(gain, B, ctx, V):
    budgets = [G.choose_budget(S, q, V, ctx, gain, B, 0.1) for q in np.linspace(0, 50, 26)]
    assert all(b >= c for b, c in zip(budgets, budgets[1:]))


def test_the_entropy_exit_cuts_lengths_and_energy_and_drafts_at_least_one_token():
    a = G.run(S, "gelato", bandwidth_hz=1e6, steps=2000, seed=4)
    b = G.run(S, "budget-only", bandwidth_hz=1e6, steps=2000, seed=4)
    assert a["mean_gamma"] < b["mean_gamma"] and a["mean_energy_j"] < b["mean_energy_j"]
    assert G.early_exit_length([5.0, 0.0, 0.0], S.h_threshold, 1.2 * S.h_threshold) == 1  # overflows at once


def test_runs_are_reproducible_and_refuse_bad_input():
    a = G.run(S, "gelato", bandwidth_hz=1e6, steps=200, seed=9)
    assert a == G.run(S, "gelato", bandwidth_hz=1e6, steps=200, seed=9)
    assert a != G.run(S, "gelato", bandwidth_hz=1e6, steps=200, seed=10)
    for kw, word in (({"policy": "dynamic"}, "policy"), ({"bandwidth_hz": 0.0}, "bandwidth_hz"),
                     ({"gamma": 16}, "gamma"), ({"steps": 0}, "steps"), ({"V": -1.0}, "V")):
        args = {"policy": "static", "bandwidth_hz": 1e6, **kw}
        with pytest.raises(ValidationError, match=word):
            G.run(S, args.pop("policy"), **args)
    with pytest.raises(ValidationError, match="rho0"):
        G.GelatoSetting(rho0=1.0)
    with pytest.raises(ValidationError, match="topp_set"):
        G.GelatoSetting(topp_set=0)


def test_the_fig5_study_sweeps_its_knob_with_common_seeds():
    from spinlib.studies.papers import gelato_fig5

    rows = gelato_fig5("t_llm_ms", [60, 140], 2, 0, steps=50)
    assert {(r["x"], r["policy"]) for r in rows} == {(x, p) for x in (60, 140)
                                                      for p in ("gelato", "budget-only", "static-5", "static-7", "static-9")}
    slow = {r["policy"]: r for r in rows if r["x"] == 140 and r["seed"] == 0}
    fast = {r["policy"]: r for r in rows if r["x"] == 60 and r["seed"] == 0}
    assert slow["static-5"]["mean_tokens"] == fast["static-5"]["mean_tokens"]  # common draws: T_LLM changes time only
    assert slow["static-5"]["throughput"] < fast["static-5"]["throughput"]
    with pytest.raises(ValidationError, match="knob"):
        gelato_fig5("distance_m", [100], 1, 0)
