"""Uplink or downlink (paper 2): payload model, DL power vs CVXPY, mode structure vs 2^K search.

Tolerances: the DL power split must match the CVXPY reference within 1e-6 relative (measured:
3e-8; spinlib.control.reference, tests/control/test_reference.py); budgets hold to 1e-9 relative; the
certified mode selection equals the 2^K search to 1e-9 relative.
"""
import itertools
import json

import numpy as np
import pytest

from spinlib import Allocation, evaluate, random_scenario, tokens_table
from spinlib.control import solve, declared_subset
from spinlib.control import uldl as U
from spinlib.control.power import min_max_downlink_power
from spinlib.control.reference import downlink_power_cvxpy
from spinlib.scenario import Downlink, Payload
from spinlib.validation import ValidationError
from spinlib.acceptance import accept_all_table
from spinlib.modes import mode_payload
from spinlib.presets import random_uldl_scenario


def test_payload_per_mode():
    s = random_scenario(3, 0, payload=Payload(32000, "full", 16))
    pi = accept_all_table(tokens_table(s, 8))
    L = np.array([0, 2, 5])
    S, d, c = mode_payload(s, L, np.array([True, False, False]), pi)
    idb = 15
    assert S[0] == idb + 32000 * 16
    assert S[1] == S[2] == idb + 16
    a = s.alpha
    np.testing.assert_allclose(d[1:], (1 - a[1:] ** L[1:]) * 32000 * 16)
    np.testing.assert_allclose(c[1:], (1 - a[1:] ** L[1:]) * s.downlink.correction_time_s)
    assert d[0] == 0 and c[0] == 0
    # a non-drafting device sends nothing in either mode
    S0, d0, _ = mode_payload(s, np.zeros(3, int), np.zeros(3, bool), pi)
    assert np.all(d0 == 0)
    # variant "all": ids up, every p down
    s_all = s.replace(downlink=Downlink(variant="all"))
    S, d, c = mode_payload(s_all, L, np.zeros(3, bool), pi)
    assert S[1] == idb and d[2] == 6 * 32000 * 16
    # top-k: k (id + Q) bits per distribution
    assert Payload(32000, "topk", 16, 128).distribution_bits == 128 * (15 + 16)
    with pytest.raises(ValidationError, match="payload.mode 'ids'"):
        Payload(32000, "ids").distribution_bits


def test_profile_drives_dl_bits():
    """With a measured prefix profile, P(reject) = 1 - pi_L comes from it, not from alpha^L."""
    s = random_scenario(1, 0, payload=Payload(1000, "full", 8))
    u = s.users[0]
    prof = (0.9, 0.5, 0.2)
    s2 = s.replace(users=(type(u)(u.draft_time_s, u.alpha, u.channel_gain, u.tx_power_w, prof),))
    pi = accept_all_table(tokens_table(s2, 5))
    np.testing.assert_allclose(pi[0, :4], [1.0, 0.9, 0.5, 0.2])
    _, d, _ = mode_payload(s2, np.array([2]), np.array([False]), pi)
    assert d[0] == pytest.approx(0.5 * 8000)


def test_dl_power_matches_cvxpy(rng):
    for _ in range(25):
        K = int(rng.integers(1, 12))
        s = random_uldl_scenario(K, rng)
        d = rng.uniform(1e2, 2e6, K) * (rng.random(K) < 0.8)
        c = rng.uniform(0, 2e-3, K) * (d > 0)
        E, p = min_max_downlink_power(s, d, c)
        E_ref, p_ref, info = downlink_power_cvxpy(s, d, c, return_info=True)
        if not np.any(d > 0):
            assert E == 0 and np.all(p == 0) and E_ref == 0 and info.status == "trivial"
            continue
        assert info.status == "optimal"  # anything else raises ReferenceSolverError
        assert p.sum() <= s.downlink.power_w * (1 + 1e-9)
        assert np.all(p[d == 0] == 0) and np.all(p[d > 0] > 0)
        assert E == pytest.approx(E_ref, rel=1e-6)  # weak-channel cells included
        # all DL devices finish together (the equal-finish-time optimality condition)
        from spinlib.channel import downlink_rate
        on = d > 0
        t = c[on] + d[on] / downlink_rate(s, p, np.count_nonzero(on))[on]
        np.testing.assert_allclose(t, E, rtol=1e-9)


def test_dl_power_batched_equals_single(rng):
    s = random_uldl_scenario(6, rng)
    d = rng.uniform(1e3, 1e6, (5, 6)) * (rng.random((5, 6)) < 0.7)
    c = np.zeros_like(d)
    E, p = min_max_downlink_power(s, d, c)
    for i in range(5):
        Ei, pi = min_max_downlink_power(s, d[i], c[i])
        assert E[i] == pytest.approx(Ei, rel=1e-12)
        np.testing.assert_allclose(p[i], pi, rtol=1e-9, atol=1e-300)


@pytest.mark.campaign
def test_batched_goodput_matches_evaluate(rng):
    """The solvers' batched goodput equals rounds.evaluate of the allocation they return (15 fresh cells)."""
    for _ in range(15):
        s = random_uldl_scenario(int(rng.integers(1, 7)), rng)
        for policy in ("uldl-optimal", "all-ul", "all-dl", "uldl-fixed-length"):
            a = solve(s, policy, **declared_subset(policy, dict(L_max=6, draft_length=3)))
            ev = evaluate(s, a)
            assert ev.goodput_tokens_per_s == pytest.approx(a.goodput_tokens_per_s, rel=1e-9)
            assert sum(a.bandwidth_hz) <= s.radio.bandwidth_hz * (1 + 1e-9)
            assert sum(a.dl_power_w) <= s.downlink.power_w * (1 + 1e-9)
            assert all(p == 0 for p, m in zip(a.dl_power_w, a.modes) if m == "UL")
            assert all(0 <= L <= 6 for L in a.draft_lengths)


@pytest.mark.campaign
def test_structure_vs_exhaustive_modes():
    """Top-m structure vs all 2^K assignments, fixed lengths, 200 random scenarios with K <= 10.

    Measured (this seed): the marginal index finds the optimum on 200/200 instances; the
    knapsack-ratio index misses it on 11/200 (by up to 9.3 %). The certified search (best_modes)
    is exact on all. Thresholds: <= 6 misses of at most 2 % for the marginal index.
    """
    rng = np.random.default_rng(1)
    misses, gaps, misses_knap = 0, [], 0
    for i in range(200):
        K = int(rng.integers(2, 11))
        s = random_uldl_scenario(K, rng)
        prob = U.Problem(s, 8)
        L = rng.integers(0, 9, K)
        ul_x, G_x = U.exhaustive_modes(prob, L)
        _, G_s, _ = U.structured_modes(prob, L)
        _, G_k, _ = U.structured_modes(prob, L, index="knapsack")
        ul_b, G_b, info = U.best_modes(prob, L)
        assert G_s <= G_x * (1 + 1e-12) and G_k <= G_x * (1 + 1e-12)
        assert G_b == pytest.approx(G_x, rel=1e-9) and info["certified"]
        assert info["structure_held"] == (G_s >= G_x * (1 - 1e-9))
        if G_s < G_x * (1 - 1e-9):
            misses += 1
            gaps.append(1 - G_s / G_x)
        misses_knap += G_k < G_x * (1 - 1e-9)
    assert misses <= 6, misses
    assert max(gaps, default=0) <= 0.02
    assert misses <= misses_knap  # the marginal index is the better one


def test_batched_search_matches_bruteforce_evaluation():
    """The 2^K search agrees with a plain loop over assignments evaluated one by one (K <= 5)."""
    rng = np.random.default_rng(3)
    for _ in range(20):
        K = int(rng.integers(1, 6))
        s = random_uldl_scenario(K, rng)
        prob = U.Problem(s, 6)
        L = rng.integers(1, 7, K)
        best = -np.inf
        for modes in itertools.product([False, True], repeat=K):
            a = U._allocation(prob, L, np.array(modes), "x")
            best = max(best, evaluate(s, a).goodput_tokens_per_s)
        _, G_x = U.exhaustive_modes(prob, L)
        assert G_x == pytest.approx(best, rel=1e-9)


@pytest.mark.campaign
def test_adaptive_beats_all_ul_all_dl_and_paper1():
    # 15 random cells (K = 1..8, a fixed seed); notebook 06 asserts the same on its 150 sweep points
    rng = np.random.default_rng(5)
    for _ in range(15):
        s = random_uldl_scenario(int(rng.integers(1, 9)), rng)
        a = solve(s, "uldl-optimal", L_max=8)
        G_ul = solve(s, "all-ul", L_max=8).goodput_tokens_per_s
        G_dl = solve(s, "all-dl", L_max=8).goodput_tokens_per_s
        G_p1 = solve(s, "heterogeneous-sync", L_max=8).goodput_tokens_per_s  # paper 1 = all devices in UL
        assert a.goodput_tokens_per_s >= max(G_ul, G_dl, G_p1) * (1 - 1e-12)


@pytest.mark.campaign
def test_greedy_lengths_vs_exhaustive_lengths():
    """Greedy draft lengths vs every (mode, length) vector, K = 3, L_max = 5, 50 scenarios.

    Measured: exact on 50/50. Thresholds: exact on >= 80 %, gap <= 5 % (on other generators we
    saw gaps up to 2.4 %: the length search is a heuristic, the notebook reports its gap).
    """
    rng = np.random.default_rng(11)
    gaps = []
    for _ in range(50):
        s = random_uldl_scenario(3, rng)
        a = solve(s, "uldl-optimal", L_max=5, exhaustive_max=0)  # the search, not the enumeration
        G, _, _ = U.exhaustive_joint(s, 5)
        assert a.goodput_tokens_per_s <= G * (1 + 1e-9)
        gaps.append(1 - a.goodput_tokens_per_s / G)
    gaps = np.array(gaps)
    assert np.mean(gaps < 1e-9) >= 0.8
    assert gaps.max() <= 0.05


def test_uldl_exhaustive_refuses_large_k_and_ids_payload():
    with pytest.raises(ValidationError, match="accepts at most 10 users"):
        solve(random_scenario(13, 0), "uldl-exhaustive")
    with pytest.raises(ValidationError, match=r"K = 7, L_max = 8"):
        solve(random_scenario(7, 0, payload=Payload(32000, "full", 16)), "uldl-exhaustive")
    with pytest.raises(ValidationError, match="'ids'"):
        solve(random_scenario(3, 0, payload=Payload(32000, "ids")), "uldl-optimal")


@pytest.mark.campaign
def test_exhaustive_policy_is_the_joint_optimum():
    """uldl-exhaustive (every mode and length pair) equals exhaustive_joint and beats every policy."""
    rng = np.random.default_rng(8)
    for _ in range(10):
        s = random_uldl_scenario(int(rng.integers(1, 5)), rng)
        x = solve(s, "uldl-exhaustive", L_max=6)
        assert x.goodput_tokens_per_s == pytest.approx(U.exhaustive_joint(s, 6)[0], rel=1e-9)
        for policy in ("all-ul", "all-dl", "uldl-optimal"):
            assert x.goodput_tokens_per_s >= solve(s, policy, L_max=6).goodput_tokens_per_s * (1 - 1e-12)


def test_allocation_json_and_errors():
    s = random_uldl_scenario(4, np.random.default_rng(2))
    a = solve(s, "uldl-optimal", L_max=6)
    b = Allocation.from_json(a.to_json())
    assert b.modes == a.modes and b.dl_power_w == a.dl_power_w
    assert evaluate(s, b).goodput_tokens_per_s == pytest.approx(a.goodput_tokens_per_s, rel=1e-12)
    d = json.loads(a.to_json())
    with pytest.raises(ValidationError, match=r"modes\[1\] must be 'UL' or 'DL'"):
        Allocation.from_dict({**d, "modes": ["UL", "up", "DL", "DL"]})
    with pytest.raises(ValidationError, match="dl_power_w"):
        Allocation.from_dict({**d, "dl_power_w": [0.0, -1.0, 0.0, 0.0]})
    with pytest.raises(ValidationError, match="given together"):
        Allocation.from_dict({**d, "dl_power_w": None})
    over = [s.downlink.power_w] * 4
    with pytest.raises(ValidationError, match="above the budget P_BS"):
        evaluate(s, Allocation.from_dict({**d, "dl_power_w": over}))
    with pytest.raises(ValidationError, match="round_model must be 'sync'"):
        Allocation.from_dict({**d, "round_model": "async"})
    dl_k = [k for k, m in enumerate(a.modes) if m == "DL" and a.draft_lengths[k] > 0]
    if dl_k:
        p = list(a.dl_power_w)
        p[dl_k[0]] = 0.0
        with pytest.raises(ValidationError, match="is in DL mode and drafts"):
            evaluate(s, Allocation.from_dict({**d, "dl_power_w": p}))


def test_downlink_validation():
    with pytest.raises(ValidationError, match="power_w"):
        Downlink(power_w=-1)
    with pytest.raises(ValidationError, match="variant"):
        Downlink(variant="both")
    s = random_scenario(2, 0)
    dct = s.to_dict()
    dct["downlink"]["bandwidth_hz"] = 0
    with pytest.raises(ValidationError, match=r"downlink\.bandwidth_hz"):
        type(s).from_dict(dct)
