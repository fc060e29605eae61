"""The open registry of online controllers: a controller is one class registered by a decorator.

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
from ..registry import parse_params
from ..registry import Registry, declared_params

FAMILIES = ("specstop", "anchor", "gelato", "oracle", "multi-user", "user")


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


@dataclass(frozen=True)
class ControllerEntry:
    name: str
    cls: type
    description: str
    params: dict
    family: str = "user"


REGISTRY: Registry[ControllerEntry] = Registry("controller", FAMILIES, forbidden=":,=")
CONTROLLERS: dict[str, ControllerEntry] = REGISTRY.entries


def register_controller(name: str, description: str, *, family: str = "user", replace: bool = False):
    """Class decorator: register a :class:`Controller` subclass as ``name`` (module docstring)."""
    REGISTRY.check_new(name, family)

    def deco(cls):
        if not (isinstance(cls, type) and issubclass(cls, Controller)):
            raise TypeError(f"controller {name!r} must be a subclass of spinlib.online.Controller")
        params = declared_params(name, cls.__init__, skip=2, kind="controller")  # after self, env
        REGISTRY.add(ControllerEntry(name, cls, description, params, family), cls, replace)
        return cls

    return deco


def get_controller(name: str) -> ControllerEntry:
    """The registered controller ``name``, or one line listing the registered names."""
    return REGISTRY.get(name)


def controller_names(family: str | None = None) -> list[str]:
    return REGISTRY.names(family)


def check_controller_params(name: str, params: dict) -> None:
    REGISTRY.check_params(name, params)


def make_controller(name: str, env: Env, **params) -> Controller:
    """An instance of the registered controller ``name`` with its declared ``params``."""
    check_controller_params(name, params)
    return get_controller(name).cls(env, **params)


@dataclass(frozen=True)
class ControllerSpec:
    """A controller to run: its registered name, parameters and the label it is reported under."""

    name: str
    params: tuple = ()
    label: str = ""

    @property
    def kwargs(self) -> dict:
        return dict(self.params)

    @property
    def title(self) -> str:
        if self.label:
            return self.label
        if not self.params:
            return self.name
        return self.name + ":" + ",".join(f"{k}={v}" for k, v in self.params)


def cspec(name: str, label: str = "", **params) -> ControllerSpec:
    """A :class:`ControllerSpec` (checked now: unknown names and parameters are one line)."""
    check_controller_params(name, params)
    return ControllerSpec(name, tuple(sorted(params.items())), label)


def parse_spec(text: str) -> ControllerSpec:
    """``"name"`` or ``"name:key=value,key=value"`` (:func:`parse_params`) as a checked spec."""
    name, params = parse_params(text)
    return cspec(name, **params)


def as_spec(x) -> ControllerSpec:
    if isinstance(x, ControllerSpec):
        check_controller_params(x.name, x.kwargs)
        return x
    return parse_spec(x)


__all__ = ["FAMILIES", "Env", "Controller", "ControllerEntry", "CONTROLLERS", "register_controller", "get_controller",
           "controller_names", "check_controller_params", "make_controller", "ControllerSpec", "cspec", "parse_params",
           "parse_spec",
           "as_spec"]
