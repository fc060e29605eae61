"""BALANCE: hybrid autoregressive / speculative serving on one edge server (our reconstruction).

* :mod:`.model` -- users, server, :class:`Schedule` and the exact :func:`feasible` check;
* :mod:`.solvers` -- ``balance`` (exact on the phi grid, proof in its docstring) and the baselines
  ``ad-only``, ``sd-only``, ``greedy``;
* :mod:`.milp` -- the references ``milp`` (scipy/HiGHS) and ``exhaustive`` on the same grid;
* :mod:`.instances`, :mod:`.wireless` -- random instances from the roofline presets, and the FDMA
  uplink/downlink time inside the deadline;
* :mod:`.registry` -- the open policy registry (``register_balance_policy``, ``solve_balance``).
"""
from __future__ import annotations

from .model import (BALANCE_RANGES, SERVING_MODES, BalanceInstance, BalanceServer, BalanceUser, Feasibility, Schedule,
                    feasible)
from .registry import (BALANCE_POLICIES, BalancePolicy, get_balance_policy, register_balance_policy, solve_balance,
                       unregister_balance_policy)
from . import solvers, milp  # noqa: E402,F401,I001  (registers the built-in policies)
from .instances import random_instance, roofline_balance_server  # noqa: E402
from .solvers import greedy_counterexample, phi_grid, solve_exact_grid, thresholds  # noqa: E402
from .milp import exhaustive_grid, milp_at, solve_milp_grid  # noqa: E402
from .wireless import communication_times, wireless_instance  # noqa: E402

__all__ = ["SERVING_MODES", "BALANCE_RANGES", "BalanceUser", "BalanceServer", "BalanceInstance", "Schedule", "Feasibility",
           "feasible", "BALANCE_POLICIES", "BalancePolicy", "register_balance_policy", "unregister_balance_policy",
           "get_balance_policy", "solve_balance", "random_instance", "roofline_balance_server", "phi_grid",
           "thresholds", "solve_exact_grid", "greedy_counterexample", "milp_at", "solve_milp_grid", "exhaustive_grid",
           "communication_times", "wireless_instance"]
