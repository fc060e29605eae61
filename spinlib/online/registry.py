"""Per-user online controllers: a controller is one class registered by a decorator, in the one decider
registry (:data:`spinlib.online.deciders.DECIDERS`, beside the multi-user controllers), needing a per-user
environment (:class:`Env`); it plays wherever that is provided (the arena, the real engine, and
re-planning when its ``stop`` reads no draft observables: :mod:`spinlib.online.deciders`).

An online controller decides each round's draft length for ``K`` users at once (arrays ``[K]``).
It subclasses :class:`Controller` and declares its parameters as keyword arguments (with
defaults) of ``__init__(self, env, ...)``; :func:`make_controller` passes only those and refuses any
other with one line, as :func:`spinlib.control.registry.solve` does for policies. Add one from
your own file or notebook, without touching ``spinlib``::

    from spinlib.online import Controller, register_controller

    @register_controller("always-two", "drafts 2 tokens every round")
    class AlwaysTwo(Controller):
        def __init__(self, env, L: int = 2):
            super().__init__(env)
            self.L = L

        def choose(self, ctx):
            return np.full(self.env.K, self.L)

    run_arena(["always-two", "ucb-specstop"], streams, config)

The round (:mod:`spinlib.online.arena`): ``choose(ctx) -> L_ref [K]`` before drafting (``ctx`` holds
the round index, the current uplink rate and the channel state: ``ctx.state`` and ``ctx.delay_mean``), ``stop(ctx, L_ref) -> L [K]`` while drafting (the
draft's per-position confidence and entropy, ``ctx.top_prob`` and ``ctx.entropy`` ``[K, L_max]``,
may end the round early), then ``update(out)`` with what the round realised (``out.L``,
``out.A``, ``out.N``, ``out.T``, ``out.E``, ``out.D``, ``out.rate``, all ``[K]``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..decision import never_stops
from .deciders import (DECIDERS, FAMILIES, DeciderEntry, Spec, as_spec, check_playable, decider_spec, playable,
                        register_decider)
from ..registry import Registry, parse_params
from ..validation import ValidationError


@dataclass(frozen=True)
class Env:
    """What a controller knows of the system before the first round (the arena builds it).

    Parameters
    ----------
    K : int
        Users.
    L_max : int
        Largest draft length.
    t_d, t0, t1 : float
        Drafting [s/token] and verification ``t0 + t1 (L + 1)`` [s, s/token] times.
    mean_delay_s : float
        Mean communication delay per round [s] (its realisations are not known in advance).
    bits_per_token : float
        Uplink bits per drafted token.
    energy : EnergyModel
        The device's energy model (:mod:`spinlib.online.energy`).
    energy_budget_j : float
        Average energy allowed per round [J].
    rng : numpy.random.Generator
        The controller's own generator (spawned from the arena's one).
    survival : float array [K, L_max + 1] or None
        The streams' true prefix survival ``S_k(i)`` (for oracle controllers only).
    delay_levels_s : tuple of float
        The delay means the channel state indexes (``ctx.state``, :class:`spinlib.online.Delay`);
        one entry when the delay's law does not move.
    """

    K: int
    L_max: int
    t_d: float
    t0: float
    t1: float
    mean_delay_s: float
    bits_per_token: float
    energy: Any
    energy_budget_j: float
    rng: np.random.Generator
    survival: np.ndarray | None = None
    delay_levels_s: tuple = ()


class Controller:
    """Base class: a fixed length ``L_max`` unless ``choose``/``stop``/``update`` are overridden."""

    def __init__(self, env: Env):
        self.env = env

    def choose(self, ctx) -> np.ndarray:
        """Reference length ``L_ref [K]`` (ints in ``1..L_max``) before drafting."""
        return np.full(self.env.K, self.env.L_max)

    @never_stops
    def stop(self, ctx, L_ref: np.ndarray) -> np.ndarray:
        """Drafted length ``L [K]`` (``<= L_ref``), from what the draft sees while drafting (the base class
        never stops early; an override without :func:`spinlib.decision.never_stops` is asked every position)."""
        return L_ref

    def update(self, out) -> None:
        """Learn from the realised round ``out``."""


ControllerEntry = DeciderEntry  # one entry type for every decider (spinlib.online.deciders)
REGISTRY: Registry[DeciderEntry] = DECIDERS  # the one registry of deciders, per-user and multi-user alike
CONTROLLERS: dict[str, DeciderEntry] = REGISTRY.entries


def register_controller(name: str, description: str, *, family: str = "user", needs=(), replace: bool = False):
    """Class decorator: register a :class:`Controller` subclass as ``name`` (module docstring) in the one
    decider registry (:data:`spinlib.online.deciders.DECIDERS`), needing a per-user environment (plus
    ``needs``, e.g. ``("true-survival",)`` for an oracle; ``draft-observables`` is added when its
    ``stop`` reads them)."""
    return register_decider(name, description, env="per-user-env", family=family, needs=needs, base=Controller,
                            replace=replace)


def get_controller(name: str) -> DeciderEntry:
    """The registered controller ``name``, or one line listing the registered names."""
    return REGISTRY.get(name)


def controller_names(family: str | None = None, player: str = "arena") -> list[str]:
    """The registered deciders ``player`` can play (:func:`spinlib.online.deciders.playable`; default the arena:
    the per-user controllers), of one family."""
    return playable(player, family)


def check_controller_params(name: str, params: dict) -> None:
    REGISTRY.check_params(name, params)


def make_controller(name: str, env: Env, *, player: str = "arena", **params) -> Controller:
    """An instance of the registered controller ``name`` with its declared ``params``, built on a per-user
    ``env``; one line if ``player`` (:data:`spinlib.online.deciders.PLAYERS`) cannot play it."""
    entry = check_playable(name, player)
    if "per-user-env" not in entry.needs:
        raise ValidationError(f"controller {name!r} is built on the whole cell (a MultiUserEnv), not on a "
                              f"per-user Env: play it with replan")
    check_controller_params(name, params)
    return entry.cls(env, **params)


ControllerSpec = Spec  # the one spec type (spinlib.online.deciders.Spec)


def cspec(name: str, label: str = "", **params) -> Spec:
    """A :class:`~spinlib.online.deciders.Spec` of a registered decider (checked now: unknown names and
    parameters are one line)."""
    return decider_spec(name, label, **params)


def parse_spec(text: str) -> Spec:
    """``"name"`` or ``"name:key=value,key=value"`` (:func:`parse_params`) as a checked spec."""
    name, params = parse_params(text)
    return cspec(name, **params)


__all__ = ["FAMILIES", "Env", "Controller", "ControllerEntry", "CONTROLLERS", "register_controller", "get_controller",
           "controller_names", "check_controller_params", "make_controller", "ControllerSpec", "cspec", "parse_params",
           "parse_spec", "as_spec"]
