"""One registry class for everything users can add by name: paper 1/2 policies
(:mod:`spinlib.control.registry`), BALANCE policies (:mod:`spinlib.balance.registry`), online
controllers (:mod:`spinlib.online.registry`), model pairs (:data:`spinlib.sd.models.PAIRS`), scenario
presets (:data:`spinlib.presets.PRESETS`) and device energy presets
(:data:`spinlib.online.energy.ENERGY_PRESETS`). A registry reads like a mapping (``name in R``,
``R[name]``, ``R.items()``), and a data entry (a pair, a preset) is added with :meth:`Registry.register`.

The rules are the same for all three: a name is a non-empty string without spaces; a family is
one of the registry's families; registering a name twice is an error unless it is the same
definition again (re-running a notebook cell) or ``replace=True``; an unknown name, or a parameter
the entry does not declare, is one line that lists what is allowed. Entries are frozen
dataclasses with at least ``name``, ``description``, ``params`` and ``family``.
"""
from __future__ import annotations

import inspect
import math
from typing import Any, Callable, Generic, Iterator, TypeVar

from .validation import ValidationError

E = TypeVar("E")


def declared_params(name: str, fn: Callable, skip: int = 1, kind: str = "policy") -> dict:
    """``{parameter: default}`` of ``fn``'s keyword parameters after the first ``skip`` ones.

    Every declared parameter needs a default, and ``*args``/``**kwargs`` are refused (a TypeError
    naming ``kind`` ``name``): an entry must name each parameter so that unknown ones can be refused.
    """
    items = list(inspect.signature(fn).parameters.values())
    if skip == 1 and (not items or items[0].kind not in (inspect.Parameter.POSITIONAL_ONLY,
                                                         inspect.Parameter.POSITIONAL_OR_KEYWORD)):
        raise TypeError(f"{kind} {name!r}: the first parameter of {fn.__qualname__} must be the scenario")
    params = {}
    for p in items[skip:]:
        if p.kind in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL):
            raise TypeError(f"{kind} {name!r}: {fn.__qualname__} takes *args/**kwargs; declare each parameter "
                            "by name so that unknown ones can be refused")
        if p.default is inspect.Parameter.empty:
            raise TypeError(f"{kind} {name!r}: parameter {p.name!r} of {fn.__qualname__} needs a default")
        params[p.name] = p.default
    return params


class Registry(Generic[E]):
    """Named entries of one kind (module docstring).

    Parameters
    ----------
    kind : str
        What an entry is called in messages ("policy", "controller").
    families : tuple of str
        Allowed families.
    forbidden : str
        Characters a name may not contain besides whitespace (e.g. ``":,="`` where names are parsed
        from ``name:key=value`` specs).
    """

    def __init__(self, kind: str, families: tuple, forbidden: str = "") -> None:
        self.kind, self.families, self.forbidden = kind, tuple(families), forbidden
        self.entries: dict[str, E] = {}

    def check_new(self, name: str, family: str) -> None:
        """Refuse a malformed name or an unknown family (one line)."""
        if not isinstance(name, str) or not name or any(c.isspace() or c in self.forbidden for c in name):
            extra = "".join(f", {c!r}" for c in self.forbidden)
            raise ValidationError(f"{self.kind} name must be a non-empty string without spaces{extra}, got {name!r}")
        if family not in self.families:
            raise ValidationError(f"family must be one of {self.families}, got {family!r}")

    def add(self, entry: E, definition: Any, replace: bool = False, what: str | None = None) -> None:
        """Register ``entry`` (its ``name``); ``definition`` is the function or class behind it (the same
        definition, by module and qualified name, may register again) or, for a data entry, the entry
        itself (an equal entry may register again); another one only with ``replace``."""
        old = self.entries.get(entry.name)
        if old is not None and not replace:
            prev = old.fn if hasattr(old, "fn") else old.cls if hasattr(old, "cls") else old
            if callable(definition):
                same = prev is definition or (getattr(prev, "__module__", None), getattr(prev, "__qualname__", None)) \
                    == (getattr(definition, "__module__", None), getattr(definition, "__qualname__", None))
            else:
                same = prev == definition
            if not same:
                raise ValidationError(f"{what or self.kind} {entry.name!r} is already registered; pass replace=True "
                                      "to overwrite it")
        self.entries[entry.name] = entry

    def register(self, entry: E, replace: bool = False) -> E:
        """Add a data entry (a frozen dataclass with ``name``, ``family``, ``description`` and ``params``):
        its name and family checked, an equal entry may register again. Returns the entry."""
        self.check_new(entry.name, entry.family)
        self.add(entry, entry, replace=replace)
        return entry

    def __getitem__(self, name: str) -> E:
        return self.get(name)

    def __contains__(self, name) -> bool:
        return name in self.entries

    def __len__(self) -> int:
        return len(self.entries)

    def keys(self):
        return self.entries.keys()

    def values(self):
        return self.entries.values()

    def items(self):
        return self.entries.items()

    def get(self, name: str) -> E:
        """The entry ``name``, or one line listing the registered names."""
        if not isinstance(name, str) or name not in self.entries:
            raise ValidationError(f"{self.kind} must be one of {sorted(self.entries)}, got {name!r}")
        return self.entries[name]

    def remove(self, name: str) -> None:
        self.get(name)
        del self.entries[name]

    def names(self, family: str | None = None) -> list[str]:
        """Registered names (of one family), in registration order."""
        return [n for n, e in self.entries.items() if family is None or e.family == family]

    def check_params(self, name: str, params: dict) -> None:
        """One line for any parameter entry ``name`` does not declare."""
        entry = self.get(name)
        for key in params:
            if key not in entry.params:
                allowed = ", ".join(entry.params) or "none"
                raise ValidationError(f"{self.kind} {name!r} takes no parameter {key!r} (its parameters: {allowed})")

    def check_size(self, name: str, users: int, of: str) -> None:
        """One line when ``users`` exceeds the entry's ``max_users`` (before any work starts)."""
        cap = getattr(self.get(name), "max_users", None)
        if cap is not None and users > cap:
            raise ValidationError(f"{self.kind} {name!r} accepts at most {cap:,} users, the {of} has {users:,}")

    def listing(self, width: int = 20, only=None) -> list[str]:
        """One line per entry (those named in ``only``, if given) for ``--list-policies`` /
        ``--list-controllers``: name, family, description, declared parameters with their defaults and,
        for a decider, what it needs from the player (:mod:`spinlib.online.deciders`)."""
        lines = []
        for name, e in self.entries.items():
            if only is not None and name not in only:
                continue
            params = ", ".join(f"{k}={v!r}" for k, v in e.params.items())
            needs = ", ".join(sorted(getattr(e, "needs", ())))
            lines.append(f"{name:{width}s} [{e.family}] {e.description}" + (f" (parameters: {params})" if params else "")
                         + (f" [needs: {needs}]" if needs else ""))
        return lines

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)


def parse_params(text: str, kind: str = "controller") -> tuple[str, dict]:
    """``"name"`` or ``"name:key=value,key=value"`` -> ``(name, params)``: values parsed as int, float,
    ``None`` (``None``/``none``) or string; one line for a malformed item or an integer beyond the
    float range (a traceback in the controller's checks otherwise), a non-finite number (``nan``, ``inf``) or
    a parameter given twice (never "the last one wins"). The one spec syntax of the library: controllers,
    multi-user controllers and policies (``--policy name:key=value``) are all written this way; ``kind``
    names the entry in messages. ``--set key=value`` on the command line is sugar for the same items
    (:func:`parse_items`)."""
    if not isinstance(text, str) or not text.strip():
        raise ValidationError(f"{kind} spec must be 'name' or 'name:key=value,...', got {text!r}")
    name, _, rest = text.strip().partition(":")
    return name.strip(), parse_items(list(filter(None, rest.split(","))), kind, f"{kind} spec {text[:80]!r}")


def parse_items(items, kind: str = "controller", where: str | None = None, into: dict | None = None) -> dict:
    """``["key=value", ...]`` -> ``{key: value}`` by the spec rules of :func:`parse_params` (added to ``into``:
    a key already there is "given twice"); ``where`` names the source in messages."""
    where = where or f"{kind} parameters"
    params = dict(into or {})
    for item in items:
        key, eq, val = item.partition("=")
        if not eq or not key.strip():
            raise ValidationError(f"{where}: parameter {item[:40]!r} must be key=value")
        if val.strip() in ("None", "none"):
            val = None
        else:
            for conv in (int, float):
                try:
                    val = conv(val)
                    break
                except ValueError:  # also an integer string beyond Python's digit limit: then a float (inf)
                    continue
            if isinstance(val, int):
                try:
                    float(val)
                except OverflowError:
                    raise ValidationError(f"{kind} spec: parameter {key.strip()!r} is an integer of "
                                          f"{len(str(abs(val)))} digits, beyond the float range") from None
            elif isinstance(val, float) and not math.isfinite(val):
                raise ValidationError(f"{kind} spec: parameter {key.strip()!r} must be a finite number, "
                                      f"got {val}")
        if key.strip() in params:
            raise ValidationError(f"{where}: parameter {key.strip()!r} given twice")
        params[key.strip()] = val
    return params


__all__ = ["parse_params", "parse_items", "Registry", "declared_params"]
