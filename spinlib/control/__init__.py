"""Draft-length and bandwidth control policies: one module per problem, one registry.

``solve(scenario, "heterogeneous-sync")`` returns an :class:`~spinlib.rounds.Allocation`;
``POLICIES`` maps each name to its function and a one-line description.
Nothing here imports torch: the optimisation side stays light.
"""
from __future__ import annotations

from typing import Callable

from ..rounds import Allocation
from ..scenario import Scenario, ValidationError
from . import baselines
from .exhaustive import solve_exhaustive
from .heterogeneous import solve_heterogeneous_async, solve_heterogeneous_sync
from .homogeneous import solve_homogeneous
from . import uldl

POLICIES: dict[str, tuple[Callable[..., Allocation], str]] = {
    "homogeneous": (lambda s, L_max=16, **_: solve_homogeneous(s, L_max),
                    "optimal common draft length + optimal bandwidth (sync batch)"),
    "heterogeneous-sync": (lambda s, L_max=16, **_: solve_heterogeneous_sync(s, L_max),
                           "per-user draft lengths + optimal bandwidth, one synchronous ragged batch (model A)"),
    "heterogeneous-async": (lambda s, L_max=16, **_: solve_heterogeneous_async(s, L_max),
                            "per-user draft lengths + optimal bandwidth, asynchronous rounds (model B)"),
    "exhaustive": (lambda s, L_max=8, **_: solve_exhaustive(s, L_max, "sync"),
                   "reference: all integer length vectors, optimal bandwidth each (sync, small K)"),
    "exhaustive-async": (lambda s, L_max=8, **_: solve_exhaustive(s, L_max, "async"),
                         "reference: all integer length vectors, optimal bandwidth each (async, small K)"),
    "agnostic": (baselines.agnostic, "baseline: equal bandwidth, L tuned for the average user"),
    "equal": (baselines.equal_fixed_length, "baseline: equal bandwidth, fixed L (--draft-length)"),
    "optimal-bandwidth-fixed-length": (baselines.optimal_bandwidth_fixed_length,
                                       "baseline: optimal bandwidth, fixed L (--draft-length)"),
    "optimal-length-equal-bandwidth": (baselines.optimal_length_equal_bandwidth,
                                       "baseline: equal bandwidth, best L"),
    "server-only": (baselines.server_only, "baseline: autoregressive decoding on the server (L = 0)"),
    # paper 2: uplink or downlink (synchronous round with modes, spinlib.uldl)
    "uldl-optimal": (uldl.solve_uldl_optimal,
                     "UL/DL: top-m mode structure + greedy lengths + optimal bandwidth and DL power "
                     "(modes certified exhaustively for K <= 16)"),
    "uldl-exhaustive": (uldl.solve_uldl_exhaustive,
                        "UL/DL reference: all 2^K mode assignments, same greedy lengths (K <= 12)"),
    "all-ul": (uldl.solve_all_ul, "UL/DL baseline: every device uploads its draft distributions"),
    "all-dl": (uldl.solve_all_dl, "UL/DL baseline: every device downloads the target distribution"),
    "uldl-fixed-length": (uldl.solve_uldl_fixed_length,
                          "UL/DL: optimal modes and power, fixed L (--draft-length)"),
}
ULDL_POLICIES = ("uldl-optimal", "uldl-exhaustive", "all-ul", "all-dl", "uldl-fixed-length")

BASELINES = ("agnostic", "equal", "optimal-bandwidth-fixed-length", "optimal-length-equal-bandwidth", "server-only")


def solve(scenario: Scenario, policy: str, **kwargs) -> Allocation:
    """Run the policy ``policy`` (see :data:`POLICIES`) on ``scenario``.

    Keyword arguments: ``L_max``, ``draft_length`` (fixed-length baselines), ``round_model``
    (baselines: "sync" or "async").
    """
    if policy not in POLICIES:
        raise ValidationError(f"policy must be one of {sorted(POLICIES)}, got {policy!r}")
    return POLICIES[policy][0](scenario, **kwargs)


__all__ = ["POLICIES", "BASELINES", "ULDL_POLICIES", "solve", "solve_homogeneous", "solve_heterogeneous_sync",
           "solve_heterogeneous_async", "solve_exhaustive"]
