"""Baseline policies ("heterogeneity-agnostic" and partial optimisations), for the gain tables.

All use one common draft length (so that the synchronous batch stays homogeneous) unless noted:

* ``server-only``: L = 0, autoregressive decoding on the server (one token per round).
* ``equal``: equal bandwidth for drafting users, a fixed L (default 4).
* ``optimal-bandwidth-fixed-length``: fixed L, the optimal split for the round model.
* ``optimal-length-equal-bandwidth``: equal bandwidth, best common L (sync) or per-user best L
  (async, where users are decoupled once the bandwidth is fixed).
* ``agnostic``: equal bandwidth and the L that is optimal for K copies of the *average* user
  (mean draft time, mean alpha, geometric-mean channel gain) -- a design that ignores who is who.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..acceptance import tokens_table
from ..rounds import Allocation, evaluate
from ..scenario import Scenario, User
from ..validation import ValidationError, check_int_range
from .bandwidth import async_optimal_bandwidth, equal_bandwidth, min_makespan_bandwidth
from .registry import register_policy


def _alloc(scenario, L, b, round_model, policy, **info) -> Allocation:
    a = Allocation(tuple(int(x) for x in L), tuple(float(x) for x in b), round_model, policy, None, info)
    return dataclasses.replace(a, goodput_tokens_per_s=evaluate(scenario, a).goodput_tokens_per_s)


def _check_model(round_model: str) -> None:
    if round_model not in ("sync", "async"):
        raise ValidationError(f"round_model must be 'sync' or 'async', got {round_model!r}")


@register_policy("server-only", "baseline: autoregressive decoding on the server (L = 0)", family="baseline")
def server_only(scenario: Scenario, round_model: str = "sync") -> Allocation:
    _check_model(round_model)
    K = scenario.num_users
    return _alloc(scenario, np.zeros(K, int), np.zeros(K), round_model, "server-only")


@register_policy("equal", "baseline: equal bandwidth, fixed L (draft_length)", family="baseline")
def equal_fixed_length(scenario: Scenario, draft_length: int = 4, round_model: str = "sync") -> Allocation:
    _check_model(round_model)
    check_int_range("draft_length", draft_length, 0, 64)
    L = np.full(scenario.num_users, draft_length)
    return _alloc(scenario, L, equal_bandwidth(scenario, L), round_model, "equal", draft_length=draft_length)


@register_policy("optimal-bandwidth-fixed-length", "baseline: optimal bandwidth, fixed L (draft_length)",
                 family="baseline")
def optimal_bandwidth_fixed_length(scenario: Scenario, draft_length: int = 4, round_model: str = "sync") -> Allocation:
    _check_model(round_model)
    check_int_range("draft_length", draft_length, 0, 64)
    L = np.full(scenario.num_users, draft_length)
    if round_model == "sync":
        _, b = min_makespan_bandwidth(scenario, L)
    else:
        N = tokens_table(scenario, draft_length)[:, draft_length]
        b, _ = async_optimal_bandwidth(scenario, L, N)
    return _alloc(scenario, L, b, round_model, "optimal-bandwidth-fixed-length", draft_length=draft_length)


def _best_common_length_equal_bw(scenario: Scenario, L_max: int) -> int:
    Ls = np.arange(L_max + 1)
    K = scenario.num_users
    cands = np.repeat(Ls[:, None], K, axis=1)
    G = [evaluate(scenario, Allocation(tuple(c), tuple(equal_bandwidth(scenario, c)))).goodput_tokens_per_s
         for c in cands]
    return int(np.argmax(G))


@register_policy("optimal-length-equal-bandwidth", "baseline: equal bandwidth, best L", family="baseline")
def optimal_length_equal_bandwidth(scenario: Scenario, L_max: int = 16, round_model: str = "sync") -> Allocation:
    _check_model(round_model)
    check_int_range("L_max", L_max, 1, 64)
    K = scenario.num_users
    if round_model == "sync":
        L = np.full(K, _best_common_length_equal_bw(scenario, L_max))
        return _alloc(scenario, L, equal_bandwidth(scenario, L), "sync", "optimal-length-equal-bandwidth")
    # async: with b = B/K fixed, each user's goodput N_k(L)/T_k(L) is maximised on its own
    b = np.full(K, scenario.radio.bandwidth_hz / K)
    G = np.stack([evaluate(scenario, Allocation(tuple([l] * K), tuple(b)), "async").user_goodput
                  for l in range(L_max + 1)])
    L = np.argmax(G, axis=0)
    return _alloc(scenario, L, b, "async", "optimal-length-equal-bandwidth")


def average_user_scenario(scenario: Scenario) -> Scenario:
    """K copies of the average user: mean tau, mean alpha, geometric-mean gain, mean power."""
    u = User(
        draft_time_s=float(np.mean(scenario.tau)),
        alpha=float(np.mean(scenario.alpha)),
        channel_gain=float(np.exp(np.mean(np.log(scenario.gain)))),
        tx_power_w=float(np.mean(scenario.power)),
        name="average",
    )
    return scenario.replace(users=tuple([u] * scenario.num_users))


@register_policy("agnostic", "baseline: equal bandwidth, L tuned for the average user", family="baseline")
def agnostic(scenario: Scenario, L_max: int = 16, round_model: str = "sync") -> Allocation:
    _check_model(round_model)
    check_int_range("L_max", L_max, 1, 64)
    L_avg = _best_common_length_equal_bw(average_user_scenario(scenario), L_max)
    L = np.full(scenario.num_users, L_avg)
    return _alloc(scenario, L, equal_bandwidth(scenario, L), round_model, "agnostic", length_for_average_user=L_avg)
