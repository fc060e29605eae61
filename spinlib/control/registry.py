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
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..registry import Registry, declared_params
from ..scenario import Scenario
from ..validation import ValidationError

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


REGISTRY: Registry[Policy] = Registry("policy", FAMILIES, forbidden=":,=")
POLICIES: dict[str, Policy] = REGISTRY.entries


def register_policy(name: str, description: str, *, family: str = "user", max_users: int | None = None,
                    replace: bool = False):
    """Decorator: register ``fn(scenario, **params) -> Allocation`` as policy ``name``.

    Parameters
    ----------
    name : str
        Unique name (``replace=True`` to overwrite an existing one on purpose; re-running a notebook
        cell re-registers the same definition, which is allowed).
    description : str
        One line shown by ``python -m spinlib solve --list-policies``.
    family : str
        One of :data:`FAMILIES`; user policies default to ``"user"``.
    max_users : int, optional
        Largest number of users the policy accepts (it does not scale beyond).
    """
    REGISTRY.check_new(name, family)

    def deco(fn: Callable) -> Callable:
        REGISTRY.add(Policy(name, fn, description, declared_params(name, fn), family, max_users), fn, replace)
        return fn

    return deco


def unregister_policy(name: str) -> None:
    """Remove a registered policy (tests, notebooks that redefine one)."""
    REGISTRY.remove(name)


def get_policy(name: str) -> Policy:
    """The registered policy ``name``, or one line listing the registered names."""
    return REGISTRY.get(name)


def policy_names(family: str | None = None) -> list[str]:
    """Registered names (of one family), in registration order."""
    return REGISTRY.names(family)


def check_params(name: str, kwargs: dict) -> None:
    """Raise a one-line :class:`ValidationError` for any argument policy ``name`` does not declare."""
    REGISTRY.check_params(name, kwargs)


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
    REGISTRY.check_size(policy, scenario.num_users, "scenario")
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
    try:
        spec.loader.exec_module(module)
    except SystemExit as e:  # a plugin registers; it cannot end the command (silently, with exit 0)
        del sys.modules[mod_name]
        raise ValidationError(f"plugin {str(path)!r} called sys.exit({e.code!r}) while loading: a plugin may only "
                              "define and register") from None
    except ValidationError:
        del sys.modules[mod_name]
        raise
    except Exception as e:  # the plugin's own error, not ours: named as such, one line
        del sys.modules[mod_name]
        raise ValidationError(f"plugin {str(path)!r} failed while loading: {type(e).__name__}: "
                              f"{str(e).splitlines()[0] if str(e) else ''}") from None


def load_env_plugins() -> None:
    """Load every file named in ``$SPINLIB_PLUGINS`` (``os.pathsep``-separated)."""
    for item in filter(None, os.environ.get("SPINLIB_PLUGINS", "").split(os.pathsep)):
        load_plugin(item)


__all__ = ["Policy", "POLICIES", "FAMILIES", "register_policy", "unregister_policy", "get_policy", "policy_names",
           "check_params", "declared_subset", "solve", "load_plugin", "load_env_plugins"]
