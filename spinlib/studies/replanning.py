"""The study of notebook 10's multi-user section: every re-planner on random cells under each fading model
(long records, for :func:`spinlib.cache.cached_call`), played by :func:`spinlib.online.replan.run_replan`.
"""
from __future__ import annotations

from typing import Sequence

from ..control.heterogeneous import solve_heterogeneous_sync
from ..emulator.fading import FADING_MODELS, Fading
from ..study import study_seeds
from ..online.multiuser import parse_mspec
from ..online.replan import DEFAULT_CONTROLLERS, MAX_USERS, ReplanConfig, run_replan
from ..presets import random_scenario
from ..validation import ValidationError, check_int_range

#: the key of this study in the results cache (:func:`spinlib.cache.cache_name`): the module it was
#: first cached under, kept when it moved here
CACHE_NAMESPACE = "spinlib.online.replan"


def replan_under_fading(n_cells: int = 2, num_users: int = 4, rounds: int = 250, seed: int = 0,
                        fadings: Sequence[str] = FADING_MODELS, controllers: Sequence = DEFAULT_CONTROLLERS,
                        L_max: int = 8, timings: bool = False) -> list[dict]:
    """Every controller on ``n_cells`` random cells under each fading model: long records.

    Cells are :func:`spinlib.presets.random_scenario` ``(num_users, s_i)`` with ``s_i`` from
    :func:`spinlib.study.study_seeds` ``(seed, n_cells)``; cell ``i`` is played with
    ``ReplanConfig(rounds, seed=i, fading, L_max)`` (as :func:`spinlib.studies.allocation.fading_gains`
    emulates its cells). The default sizes run in well under a minute on a 2-core machine.

    Returns
    -------
    list of dict
        One per (cell, fading, controller): ``cell``, ``fading``, and :meth:`ReplanResult.record`
        (``goodput_tokens_per_s`` with ``ci_low``/``ci_high`` (99 %), ``round_tokens``,
        ``mean_round_time_s``, ``mean_L``, ``energy_per_token_j``, ``energy_per_round_j``, ``solver_status``,
        and for energy controllers ``budget_j``, ``debt_j``, ``max_debt_j``, ``energy_over_budget``).
        With ``timings`` also ``wall_s`` (not reproducible).
    """
    check_int_range("n_cells", n_cells, 1, 1000)
    check_int_range("num_users", num_users, 1, MAX_USERS)
    fadings = tuple(fadings)
    for f in fadings:
        if f not in FADING_MODELS:
            raise ValidationError(f"fadings must hold names from {FADING_MODELS}, got {f!r}")
    specs = [parse_mspec(c) for c in controllers]
    rows = []
    for i, sd in enumerate(study_seeds(seed, n_cells)):
        s = random_scenario(num_users, sd)
        avg = solve_heterogeneous_sync(s, L_max)
        for f in fadings:
            cfg = ReplanConfig(rounds=rounds, seed=i, fading=Fading(f), L_max=L_max)
            res = run_replan(s, specs, cfg, average_plan=avg, timings=timings)
            rows += [{"cell": i, "fading": f, **r.record()} for r in res]
    return rows


__all__ = ["replan_under_fading"]
