"""The study of notebook 10's multi-user section: every re-planner on random cells under each fading model
(long records, for :func:`spinlib.cache.cached_call`), played by :func:`spinlib.online.replan.run_replan`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..control.heterogeneous import solve_heterogeneous_sync
from ..emulator.fading import FADING_MODELS, Fading
from ..study import Study
from ..online.multiuser import parse_mspec
from ..online.replan import DEFAULT_CONTROLLERS, MAX_USERS, ReplanConfig, run_replan
from ..presets import random_scenario
from ..validation import ValidationError, check_bool, check_int_range

#: the key of this study in the results cache (:func:`spinlib.cache.cache_name`): the module it was
#: first cached under, kept when it moved here
CACHE_NAMESPACE = "spinlib.online.replan"


@dataclass(frozen=True)
class ReplanPoint:
    """One cell of :func:`replan_under_fading` under ``params["fading"]``: ``random_scenario(num_users,
    seed)``, every controller played with ``ReplanConfig(rounds, seed, fading, L_max, allow_long)``."""

    num_users: int
    rounds: int
    controllers: tuple
    L_max: int
    timings: bool
    allow_long: bool = False

    def __call__(self, params: dict, seed: int) -> list[dict]:
        s = random_scenario(self.num_users, seed)
        avg = solve_heterogeneous_sync(s, self.L_max)
        cfg = ReplanConfig(rounds=self.rounds, seed=seed, fading=Fading(params["fading"]), L_max=self.L_max,
                           allow_long=self.allow_long)
        res = run_replan(s, [parse_mspec(c) for c in self.controllers], cfg, average_plan=avg, timings=self.timings)
        return [r.record() for r in res]


def replan_under_fading(n_cells: int = 2, num_users: int = 4, rounds: int = 250, seed: int = 0,
                        fadings: Sequence[str] = FADING_MODELS, controllers: Sequence = DEFAULT_CONTROLLERS,
                        L_max: int = 8, timings: bool = False, n_jobs: int | None = None,
                        allow_long: bool = False) -> list[dict]:
    """Every controller on ``n_cells`` random cells under each fading model: long records of a
    :class:`~spinlib.study.Study` (:class:`ReplanPoint`, points ``fading``; the same cells and seeds under
    each fading model). The default sizes run in well under a minute on a 2-core machine.
    ``allow_long``: lift re-planning's search budget (:class:`~spinlib.online.replan.ReplanConfig`),
    for runs projected to take long; where the work runs, not what it computes, so not part of a
    cache key (:func:`spinlib.cache.cached_call`).

    Returns
    -------
    list of dict
        One per (fading, cell, controller): ``fading``, ``seed`` (the cell's), and :meth:`ReplanResult.record`
        (``goodput_tokens_per_s`` with ``ci_low``/``ci_high`` (99 %), ``round_tokens``,
        ``mean_round_time_s``, ``mean_L``, ``energy_per_token_j``, ``energy_per_round_j``, ``solver_status``,
        and for energy controllers ``budget_j``, ``debt_j``, ``max_debt_j``, ``energy_over_budget``).
        With ``timings`` also ``wall_s`` (not reproducible).
    """
    check_int_range("n_cells", n_cells, 1, 1000)
    check_int_range("num_users", num_users, 1, MAX_USERS)
    check_bool("allow_long", allow_long)
    fadings = tuple(fadings)
    for f in fadings:
        if f not in FADING_MODELS:
            raise ValidationError(f"fadings must hold names from {FADING_MODELS}, got {f!r}")
    for c in controllers:
        parse_mspec(c)  # a bad spec fails here, before any work
    point = ReplanPoint(int(num_users), int(rounds), tuple(controllers), int(L_max), bool(timings), allow_long)
    return Study("replan-under-fading", point, [{"fading": f} for f in fadings], n_cells, seed).run(n_jobs=n_jobs)


__all__ = ["replan_under_fading", "ReplanPoint"]
