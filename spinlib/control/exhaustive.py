"""Reference solver: exhaustive search over integer draft-length vectors.

Every ``L in {0..L_max}^K`` is evaluated with its provably optimal bandwidth (the exact
sub-problem solvers of :mod:`.bandwidth`), so the best vector is the global optimum of the
mixed-integer problem. The cost grows as ``(L_max+1)^K``: for tests on small instances only.
"""
from __future__ import annotations

import numpy as np

from ..acceptance import tokens_table
from ..channel import RateModel
from ..rounds import Allocation
from ..scenario import Scenario
from ..validation import ValidationError, check_int_range, count_text
from .heterogeneous import evaluate_async_lengths, evaluate_sync_lengths
from .registry import register_policy
from .search import length_vectors

MAX_VECTORS = 2_000_000
_CHUNK = 20_000


def all_length_vectors(K: int, L_max: int) -> np.ndarray:
    """``[(L_max+1)^K, K]`` array of every draft-length vector (:func:`.search.length_vectors`)."""
    return length_vectors(K, L_max)


def solve_exhaustive(scenario: Scenario, L_max: int = 8, round_model: str = "sync",
                     rates: RateModel | None = None) -> Allocation:
    """Global optimum over all length vectors (``round_model`` "sync" = model A, "async" = model B)."""
    check_int_range("L_max", L_max, 1, 64)
    K = scenario.num_users
    n = (L_max + 1) ** K
    if n > MAX_VECTORS:
        raise ValidationError(
            f"exhaustive search over (L_max+1)^K = {count_text(n)} vectors exceeds {MAX_VECTORS:,}; use fewer users or a smaller L_max"
        )
    rates = rates or RateModel.of(scenario)
    table = tokens_table(scenario, L_max)
    if round_model not in ("sync", "async"):
        raise ValidationError(f"round_model must be 'sync' or 'async', got {round_model!r}")
    evaluate = evaluate_sync_lengths if round_model == "sync" else evaluate_async_lengths
    Ls = all_length_vectors(K, L_max)
    best_G, best_L, best_b = -np.inf, None, None
    for start in range(0, n, _CHUNK):
        chunk = Ls[start:start + _CHUNK]
        G, b = evaluate(scenario, chunk, table, rates)
        i = int(np.argmax(G))
        if G[i] > best_G:
            best_G, best_L, best_b = float(G[i]), chunk[i], b[i]
    name = "exhaustive" if round_model == "sync" else "exhaustive-async"
    return Allocation(tuple(int(x) for x in best_L), tuple(best_b.tolist()), round_model, name, best_G,
                      {"vectors": n})


@register_policy("exhaustive", "reference: all integer length vectors, optimal bandwidth each (sync, small K)",
                 family="reference")
def exhaustive_sync(scenario: Scenario, L_max: int = 8) -> Allocation:
    """Policy ``exhaustive``: :func:`solve_exhaustive` for the synchronous round (model A)."""
    return solve_exhaustive(scenario, L_max, "sync")


@register_policy("exhaustive-async", "reference: all integer length vectors, optimal bandwidth each (async, small K)",
                 family="reference")
def exhaustive_async(scenario: Scenario, L_max: int = 8) -> Allocation:
    """Policy ``exhaustive-async``: :func:`solve_exhaustive` for asynchronous rounds (model B)."""
    return solve_exhaustive(scenario, L_max, "async")
