"""Draft-length, bandwidth, power and mode control policies: one module per problem, one open registry.

``solve(scenario, "heterogeneous-sync")`` returns an :class:`~spinlib.rounds.Allocation`;
:data:`POLICIES` maps each registered name to its :class:`~spinlib.control.registry.Policy`
(function, declared parameters, description, family). Add your own with
:func:`register_policy` (see :mod:`spinlib.control.registry`). Nothing here imports torch: the
optimisation side stays light.
"""
from __future__ import annotations

from .registry import (FAMILIES, POLICIES, Policy, check_params, declared_subset, get_policy, load_env_plugins, load_plugin,
                       policy_names, register_policy, solve, unregister_policy)

# importing the solver modules registers the built-in policies
from . import homogeneous, heterogeneous, exhaustive, baselines, uldl  # noqa: E402,F401,I001
from .exhaustive import solve_exhaustive  # noqa: E402
from .heterogeneous import solve_heterogeneous_async, solve_heterogeneous_sync  # noqa: E402
from .homogeneous import solve_homogeneous  # noqa: E402

BASELINES = tuple(sorted(policy_names("baseline")))
ULDL_POLICIES = tuple(policy_names("paper2")) + ("uldl-exhaustive",)

__all__ = ["POLICIES", "FAMILIES", "BASELINES", "ULDL_POLICIES", "Policy", "register_policy", "unregister_policy",
           "get_policy", "policy_names", "check_params", "declared_subset", "solve", "load_plugin", "load_env_plugins",
           "solve_homogeneous", "solve_heterogeneous_sync", "solve_heterogeneous_async", "solve_exhaustive"]
