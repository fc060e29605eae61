"""The open registry of BALANCE policies (same rules as :mod:`spinlib.control.registry`).

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

from ..control.registry import declared_params
from ..scenario import ValidationError
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


BALANCE_POLICIES: dict[str, BalancePolicy] = {}


def register_balance_policy(name: str, description: str, *, family: str = "user", max_users: int | None = None,
                            replace: bool = False):
    """Decorator: register ``fn(instance, **params) -> Schedule`` as BALANCE policy ``name``."""
    if not isinstance(name, str) or not name or any(c.isspace() for c in name):
        raise ValidationError(f"policy name must be a non-empty string without spaces, got {name!r}")
    if family not in FAMILIES:
        raise ValidationError(f"family must be one of {FAMILIES}, got {family!r}")

    def deco(fn: Callable) -> Callable:
        old = BALANCE_POLICIES.get(name)
        if old is not None and not replace and old.fn is not fn and \
                (old.fn.__module__, old.fn.__qualname__) != (fn.__module__, fn.__qualname__):
            raise ValidationError(f"balance policy {name!r} is already registered; pass replace=True to overwrite it")
        BALANCE_POLICIES[name] = BalancePolicy(name, fn, description, declared_params(name, fn), family, max_users)
        return fn

    return deco


def unregister_balance_policy(name: str) -> None:
    get_balance_policy(name)
    del BALANCE_POLICIES[name]


def get_balance_policy(name: str) -> BalancePolicy:
    if not isinstance(name, str) or name not in BALANCE_POLICIES:
        raise ValidationError(f"policy must be one of {sorted(BALANCE_POLICIES)}, got {name!r}")
    return BALANCE_POLICIES[name]


def solve_balance(instance: BalanceInstance, policy: str, **params) -> Schedule:
    """Run BALANCE policy ``policy`` with its declared ``params``; the schedule is re-checked (module docstring)."""
    if not isinstance(instance, BalanceInstance):
        raise ValidationError(f"instance must be a BalanceInstance, got {type(instance).__name__}")
    pol = get_balance_policy(policy)
    for key in params:
        if key not in pol.params:
            allowed = ", ".join(pol.params) or "none"
            raise ValidationError(f"policy {policy!r} takes no parameter {key!r} (its parameters: {allowed})")
    if pol.max_users is not None and instance.num_users > pol.max_users:
        raise ValidationError(f"policy {policy!r} accepts at most {pol.max_users:,} users, the instance has "
                              f"{instance.num_users:,}")
    sched = pol.fn(instance, **params)
    if not isinstance(sched, Schedule):
        raise ValidationError(f"policy {policy!r} returned {type(sched).__name__}, not a Schedule")
    check = feasible(instance, sched)
    if not check.ok:
        raise ValidationError(f"policy {policy!r} returned an infeasible schedule: {check.violations[0]}")
    return sched


__all__ = ["BalancePolicy", "BALANCE_POLICIES", "register_balance_policy", "unregister_balance_policy",
           "get_balance_policy", "solve_balance"]
