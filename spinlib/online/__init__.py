"""Online draft-length controllers compared on one arena.

* :mod:`~spinlib.online.stopping`: per-token latency ``J(L)``, the optimal stopping rule with known
  statistics, the critical delay, the large-delay law (UCB-SpecStop's theory, our model);
* :mod:`~spinlib.online.traces`: per-position traces of the packaged pairs (exact greedy replay);
* :mod:`~spinlib.online.registry`: the open controller registry (``@register_controller``);
* controllers: :mod:`~spinlib.online.specstop` (UCB-SpecStop, its per-token-aware variant, naive UCB,
  the known-statistics rule), :mod:`~spinlib.online.anchors` (fixed, SpecDec++ rule, Hugging Face schedules),
  :mod:`~spinlib.online.gelato` (GELATO and its two halves; energy model in
  :mod:`~spinlib.online.energy`);
* :mod:`~spinlib.online.arena`: :func:`run_arena`, every controller on identical inputs.
* :mod:`~spinlib.online.multiuser`: K devices sharing the band, re-planned every synchronous round
  on the current channel (paper 1's solver per round, the renewal-reward-correct Dinkelbach rule,
  cheap rules, a per-device energy queue); its own registry (``@register_multiuser_controller``).
  The per-round problem and its certified maximiser are in :mod:`~spinlib.online.round_problem`;
  :mod:`~spinlib.online.replan` plays them (:func:`run_replan`); the notebook's study is
  :func:`~spinlib.studies.replanning.replan_under_fading`.

Notebook 10 quotes what the papers state (their abstracts) and reproduces it on our models; the
module docstrings state the models we chose.
"""
from . import anchors, gelato, specstop  # noqa: F401  (registers the library's controllers)
from .arena import ArenaConfig, ArenaResult, Delay, Stream, energy_queue, mean_ci, run_arena
from .energy import ENERGY_PRESETS, EnergyModel, energy_preset
from .multiuser import MultiUserController, mspec, multiuser_controller_names, register_multiuser_controller
from .replan import ReplanConfig, ReplanResult, run_replan
from .registry import (CONTROLLERS, Controller, ControllerSpec, Env, controller_names, cspec, get_controller,
                       make_controller, parse_spec, register_controller)
from .stopping import (RoundCosts, brute_force_length, critical_delay, critical_delay_iid, iid_survival,
                       large_delay_length, optimal_stopping, per_token_latency)

__all__ = ["ArenaConfig", "ArenaResult", "Delay", "Stream", "run_arena", "energy_queue", "mean_ci", "EnergyModel",
           "ENERGY_PRESETS", "energy_preset", "CONTROLLERS", "Controller", "ControllerSpec", "Env", "controller_names",
           "cspec", "get_controller", "make_controller", "parse_spec", "register_controller", "RoundCosts",
           "brute_force_length", "critical_delay", "critical_delay_iid", "iid_survival", "large_delay_length",
           "optimal_stopping", "per_token_latency", "MultiUserController", "ReplanConfig", "ReplanResult", "mspec",
           "multiuser_controller_names", "register_multiuser_controller", "run_replan"]
