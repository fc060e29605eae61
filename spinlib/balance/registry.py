"""The open registry of BALANCE policies (one :class:`spinlib.registry.Registry`, the rules of every registry).

A BALANCE policy maps a :class:`~spinlib.balance.model.BalanceInstance` to a
:class:`~spinlib.balance.model.Schedule`. Its keyword parameters (with defaults) are its declared
parameters; :func:`solve_balance` refuses any other with one line, and re-checks every returned
schedule with :func:`~spinlib.balance.model.feasible` (an infeasible schedule is an error, never a
result). Add your own in one file::

    from spinlib.balance import Schedule, register_balance_policy, solve_balance

    @register_balance_policy("all-sd", "everyone in SD (may be infeasible)")
    def all_sd(instance, phi: float = 0.0):
        return Schedule(("SD",) * instance.num_users, phi, "all-sd")

The command line loads such a file with ``python -m spinlib balance --plugin FILE.py``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..registry import Registry, declared_params
from ..validation import ValidationError
from .model import BalanceInstance, Schedule, feasible

FAMILIES = ("balance", "reference", "baseline", "user")


@dataclass(frozen=True)
class BalancePolicy:
    """A registered BALANCE policy (``fn(instance, **params) -> Schedule``)."""

    name: str
    fn: Callable[..., Any]
    description: str
    params: dict
    family: str = "user"
    max_users: int | None = None


REGISTRY: Registry[BalancePolicy] = Registry("policy", FAMILIES, forbidden=":,=")
BALANCE_POLICIES: dict[str, BalancePolicy] = REGISTRY.entries


def register_balance_policy(name: str, description: str, *, family: str = "user", max_users: int | None = None,
                            replace: bool = False):
    """Decorator: register ``fn(instance, **params) -> Schedule`` as BALANCE policy ``name``."""
    REGISTRY.check_new(name, family)

    def deco(fn: Callable) -> Callable:
        REGISTRY.add(BalancePolicy(name, fn, description, declared_params(name, fn), family, max_users), fn, replace,
                     what="balance policy")
        return fn

    return deco


def unregister_balance_policy(name: str) -> None:
    REGISTRY.remove(name)


def get_balance_policy(name: str) -> BalancePolicy:
    return REGISTRY.get(name)


def solve_balance(instance: BalanceInstance, policy: str, **params) -> Schedule:
    """Run BALANCE policy ``policy`` with its declared ``params``; the schedule is re-checked (module docstring)."""
    if not isinstance(instance, BalanceInstance):
        raise ValidationError(f"instance must be a BalanceInstance, got {type(instance).__name__}")
    pol = get_balance_policy(policy)
    REGISTRY.check_params(policy, params)
    REGISTRY.check_size(policy, instance.num_users, "instance")
    sched = pol.fn(instance, **params)
    if not isinstance(sched, Schedule):
        raise ValidationError(f"policy {policy!r} returned {type(sched).__name__}, not a Schedule")
    check = feasible(instance, sched)
    if not check.ok:
        raise ValidationError(f"policy {policy!r} returned an infeasible schedule: {check.violations[0]}")
    return sched


__all__ = ["BalancePolicy", "BALANCE_POLICIES", "register_balance_policy", "unregister_balance_policy",
           "get_balance_policy", "solve_balance"]
