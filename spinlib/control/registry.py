"""The open, strict policy registry: every policy is one function registered by a decorator.

A policy maps a :class:`~spinlib.scenario.Scenario` to an :class:`~spinlib.rounds.Allocation`.
Its keyword parameters (with defaults) are its declared parameters: :func:`solve` passes only
those and refuses any other argument with one line naming it, so a misspelt ``L_maxx=3`` or a
``round_model`` given to a policy that has none is an error, never silently dropped.

Add a policy from your own file or notebook, without touching ``spinlib``::

    from spinlib.control import register_policy, solve
    from spinlib.rounds import Allocation

    @register_policy("my-policy", "every user drafts L, equal bandwidth")
    def my_policy(scenario, L: int = 3):
        ...
        return Allocation(...)

    solve(scenario, "my-policy", L=2)

Every sweep (:mod:`spinlib.experiments`), the command line (``solve --list-policies``,
``solve --policy``, ``emulate --policy``; load a file of policies with ``--plugin FILE.py`` or
``$SPINLIB_PLUGINS``) and the testbed pick registered policies up by name.
"""
from __future__ import annotations

import importlib.util
import inspect
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..scenario import Scenario, ValidationError

FAMILIES = ("paper1", "paper2", "reference", "baseline", "online", "user")


@dataclass(frozen=True)
class Policy:
    """A registered policy.

    Parameters
    ----------
    name : str
        Registry key (``solve(s, name)``).
    fn : callable
        ``fn(scenario, **params) -> Allocation``.
    description : str
        One line for ``--list-policies``.
    params : dict
        Declared keyword parameters and their defaults (from ``fn``'s signature).
    family : str
        One of :data:`FAMILIES` (used to pick groups of policies in sweeps and listings).
    max_users : int or None
        Largest K the policy is meant for; :func:`solve` refuses larger scenarios before starting.
    """

    name: str
    fn: Callable[..., Any]
    description: str
    params: dict
    family: str = "user"
    max_users: int | None = None

    def __call__(self, scenario: Scenario, **kwargs):
        return solve(scenario, self.name, **kwargs)


POLICIES: dict[str, Policy] = {}


def declared_params(name: str, fn: Callable) -> dict:
    """``{parameter: default}`` of ``fn(first, **params)``: every parameter after the first, each with a
    default and none of them ``*args``/``**kwargs`` (else a TypeError naming the policy ``name``).
    Shared by every registry of policies (paper 1/2 policies, BALANCE, online controllers)."""
    sig = inspect.signature(fn)
    items = list(sig.parameters.values())
    if not items or items[0].kind not in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
        raise TypeError(f"policy {name!r}: the first parameter of {fn.__qualname__} must be the scenario")
    params = {}
    for p in items[1:]:
        if p.kind in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL):
            raise TypeError(f"policy {name!r}: {fn.__qualname__} takes *args/**kwargs; declare each parameter "
                            "by name so that solve() can refuse unknown ones")
        if p.default is inspect.Parameter.empty:
            raise TypeError(f"policy {name!r}: parameter {p.name!r} of {fn.__qualname__} needs a default")
        params[p.name] = p.default
    return params


def register_policy(name: str, description: str, *, family: str = "user", max_users: int | None = None,
                    replace: bool = False):
    """Decorator: register ``fn(scenario, **params) -> Allocation`` as policy ``name``.

    Parameters
    ----------
    name : str
        Unique name (``replace=True`` to overwrite an existing one on purpose).
    description : str
        One line shown by ``python -m spinlib solve --list-policies``.
    family : str
        One of :data:`FAMILIES`; user policies default to ``"user"``.
    max_users : int, optional
        Largest number of users the policy accepts (it does not scale beyond).
    """
    if not isinstance(name, str) or not name or any(c.isspace() for c in name):
        raise ValidationError(f"policy name must be a non-empty string without spaces, got {name!r}")
    if family not in FAMILIES:
        raise ValidationError(f"family must be one of {FAMILIES}, got {family!r}")

    def deco(fn: Callable) -> Callable:
        if name in POLICIES and not replace and POLICIES[name].fn is not fn:
            existing = POLICIES[name].fn
            same_def = (getattr(existing, "__module__", None), getattr(existing, "__qualname__", None)) == \
                (getattr(fn, "__module__", None), getattr(fn, "__qualname__", None))
            if not same_def:  # re-running a notebook cell re-registers the same definition: allowed
                raise ValidationError(f"policy {name!r} is already registered; pass replace=True to overwrite it")
        POLICIES[name] = Policy(name, fn, description, declared_params(name, fn), family, max_users)
        return fn

    return deco


def unregister_policy(name: str) -> None:
    """Remove a registered policy (tests, notebooks that redefine one)."""
    get_policy(name)
    del POLICIES[name]


def get_policy(name: str) -> Policy:
    """The registered policy ``name``, or one line listing the registered names."""
    if not isinstance(name, str) or name not in POLICIES:
        raise ValidationError(f"policy must be one of {sorted(POLICIES)}, got {name!r}")
    return POLICIES[name]


def policy_names(family: str | None = None) -> list[str]:
    """Registered names (of one family), in registration order."""
    return [n for n, p in POLICIES.items() if family is None or p.family == family]


def check_params(name: str, kwargs: dict) -> None:
    """Raise a one-line :class:`ValidationError` for any argument policy ``name`` does not declare."""
    pol = get_policy(name)
    for key in kwargs:
        if key not in pol.params:
            allowed = ", ".join(pol.params) or "none"
            raise ValidationError(f"policy {name!r} takes no parameter {key!r} (its parameters: {allowed})")


def declared_subset(name: str, settings: dict) -> dict:
    """The entries of ``settings`` that policy ``name`` declares: an explicit opt-in for loops that
    run many policies with shared settings (``solve(s, p, **declared_subset(p, {"L_max": 8}))``)."""
    params = get_policy(name).params
    return {k: v for k, v in settings.items() if k in params}


def solve(scenario: Scenario, policy: str, **kwargs):
    """Run the registered policy ``policy`` on ``scenario`` with its declared parameters ``kwargs``.

    Raises :class:`ValidationError` (one line) for an unknown policy, an argument the policy does
    not declare, a non-:class:`Scenario` input or a policy that does not return an allocation.
    """
    from ..rounds import Allocation

    if not isinstance(scenario, Scenario):
        raise ValidationError(f"scenario must be a spinlib Scenario, got {type(scenario).__name__}")
    pol = get_policy(policy)
    check_params(policy, kwargs)
    if pol.max_users is not None and scenario.num_users > pol.max_users:
        raise ValidationError(f"policy {policy!r} accepts at most {pol.max_users:,} users, the scenario has "
                              f"{scenario.num_users:,}")
    alloc = pol.fn(scenario, **kwargs)
    if not isinstance(alloc, Allocation):
        raise ValidationError(f"policy {policy!r} returned {type(alloc).__name__}, not an Allocation")
    G = alloc.goodput_tokens_per_s
    if G is not None and not math.isfinite(G):
        raise ValidationError(f"policy {policy!r} produced a non-finite goodput ({G}): the scenario's values are "
                              "outside the range where the rate models are numerically meaningful")
    return alloc


def load_plugin(path: str | Path) -> None:
    """Import a Python file that registers policies (``--plugin`` / ``$SPINLIB_PLUGINS``)."""
    path = Path(path)
    if not path.is_file() or path.suffix != ".py":
        raise ValidationError(f"plugin must be an existing .py file, got {str(path)!r}")
    from ..cache import config_key

    mod_name = f"spinlib_plugin_{config_key(str(path.resolve()), 12)}"
    if mod_name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(mod_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    spec.loader.exec_module(module)


def load_env_plugins() -> None:
    """Load every file named in ``$SPINLIB_PLUGINS`` (``os.pathsep``-separated)."""
    for item in filter(None, os.environ.get("SPINLIB_PLUGINS", "").split(os.pathsep)):
        load_plugin(item)


__all__ = ["Policy", "POLICIES", "FAMILIES", "register_policy", "unregister_policy", "get_policy", "policy_names",
           "check_params", "declared_subset", "solve", "load_plugin", "load_env_plugins"]
