"""One registry of deciders, one spec type, and the capabilities that decide who plays where.

A *decider* (:mod:`spinlib.decision`) is anything with ``choose``, ``stop`` and ``update``. The
registered ones are classes built on what a player knows before the first round, and each entry
declares what it needs from the player (:data:`CAPABILITIES`):

=====================  ======================================================================
capability             what the player provides
=====================  ======================================================================
``per-user-env``       a :class:`spinlib.online.Env`: one user's draft and verification times,
                       the mean delay, bits per token, an energy model and budget (the
                       per-user controllers: UCB-SpecStop, GELATO, SpecDec++, HF's rules)
``cell-env``           a :class:`spinlib.online.multiuser.MultiUserEnv`: the whole cell (a
                       :class:`~spinlib.scenario.Scenario`), its average-channel plan, the
                       shared band the plan splits (the re-planners, static policies)
``draft-observables``  the draft's confidence and entropy at every position, while drafting
                       (a ``stop`` not marked :func:`spinlib.decision.never_stops`)
``true-survival``      the streams' true prefix survival ``S_k(i)`` (oracle controllers)
=====================  ======================================================================

Every player states what it provides (:data:`PLAYERS`) and refuses an entry by capability in one
line, before any work: the arena (:func:`spinlib.online.run_arena`) provides a per-user
environment, draft observables and the streams' survival; re-planning
(:func:`spinlib.online.replan.run_replan`) provides both environments (a per-user controller plays
there on an :class:`~spinlib.online.Env` built from the cell, its lengths getting paper 1's
bandwidth split) and the acceptance law's survival, but no draft observables; the real engine
provides a per-user environment and draft observables.

The one spec type is :class:`Spec`, ``name`` plus sorted ``params`` plus a ``label``: controllers,
multi-user controllers and paper 1/2 policies (:func:`spinlib.experiments.spec`) are all specs,
written ``name:key=value,...`` on the command line (:func:`spinlib.registry.parse_params`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from ..decision import reads_confidence
from ..registry import Registry, declared_params, parse_params
from ..validation import ValidationError

#: capability -> what it means (module docstring)
CAPABILITIES = {
    "per-user-env": "a per-user environment (spinlib.online.Env)",
    "cell-env": "the whole cell and its shared band (spinlib.online.multiuser.MultiUserEnv)",
    "draft-observables": "the draft's per-position confidence and entropy while drafting",
    "true-survival": "the streams' true prefix survival (an oracle's knowledge)",
}

#: player -> the capabilities it provides (module docstring)
PLAYERS = {
    "arena": frozenset({"per-user-env", "draft-observables", "true-survival"}),
    "replan": frozenset({"per-user-env", "cell-env", "true-survival"}),
    "engine": frozenset({"per-user-env", "draft-observables"}),
    "engine-with-survival": frozenset({"per-user-env", "draft-observables", "true-survival"}),
}

#: players that play each kind of environment (for the refusal's hint)
_WHERE = {"cell-env": "replan", "per-user-env": "arena or replan", "draft-observables": "the arena or the real engine",
          "true-survival": "the arena or replan"}

FAMILIES = ("specstop", "anchor", "gelato", "oracle", "multi-user", "user")


@dataclass(frozen=True)
class Spec:
    """A registered entry to run: its name, parameters (sorted ``(key, value)`` pairs) and label.

    ``kind`` says which registry the name is in (``"controller"``: :data:`DECIDERS`; ``"policy"``:
    :mod:`spinlib.control.registry`). ``title`` is the label, else ``name:key=value,...``.
    """

    name: str
    params: tuple = ()
    label: str = ""
    kind: str = "controller"

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", tuple(sorted(dict(self.params).items())))

    @property
    def kwargs(self) -> dict:
        return dict(self.params)

    @property
    def policy(self) -> str:
        """The name, under the word a policy's records use."""
        return self.name

    @property
    def title(self) -> str:
        if self.label:
            return self.label
        if not self.params:
            return self.name
        return self.name + ":" + ",".join(f"{k}={v}" for k, v in self.params)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "name": self.name, "params": dict(self.params), "label": self.label}

    def cache_key_form(self) -> dict:
        """How the results cache keys a spec (:func:`spinlib.cache.key_form`): the form of the two spec
        types this one replaced (``ControllerSpec`` and ``PolicySpec``), so that results cached
        before the merge stay valid (the same name, parameters and label give the same key)."""
        if self.kind == "policy":
            return {"__type__": "PolicySpec", "policy": self.name, "params": self.params, "label": self.label}
        return {"__type__": "ControllerSpec", "name": self.name, "params": self.params, "label": self.label}


@dataclass(frozen=True)
class DeciderEntry:
    """A registered decider: its class, description, declared parameters, family and needs."""

    name: str
    cls: type
    description: str
    params: dict
    family: str = "user"
    needs: frozenset = field(default_factory=frozenset)


DECIDERS: Registry[DeciderEntry] = Registry("controller", FAMILIES, forbidden=":,=")


def register_decider(name: str, description: str, *, env: str, family: str = "user", needs: Iterable[str] = (),
                     base: type | None = None, replace: bool = False):
    """Class decorator: register a decider class built on ``env`` (``"per-user-env"`` or ``"cell-env"``)
    as ``name``. Its parameters are the keyword arguments (with defaults) of ``__init__(self, env, ...)``;
    its needs are ``env``, ``needs`` and ``draft-observables`` when its ``stop`` reads them. ``base``:
    the class it must subclass. The front doors are :func:`spinlib.online.register_controller` and
    :func:`spinlib.online.multiuser.register_multiuser_controller`."""
    DECIDERS.check_new(name, family)
    if env not in ("per-user-env", "cell-env"):
        raise ValidationError(f"env must be 'per-user-env' or 'cell-env', got {env!r}")
    extra = frozenset(needs)
    unknown = sorted(extra - set(CAPABILITIES))
    if unknown:
        raise ValidationError(f"needs must be among {sorted(CAPABILITIES)}, got {unknown}")

    def deco(cls):
        if base is not None and not (isinstance(cls, type) and issubclass(cls, base)):
            raise TypeError(f"controller {name!r} must be a subclass of {base.__module__}.{base.__qualname__}")
        params = declared_params(name, cls.__init__, skip=2, kind="controller")  # after self, env
        need = {env} | extra | ({"draft-observables"} if reads_confidence(cls) else set())
        DECIDERS.add(DeciderEntry(name, cls, description, params, family, frozenset(need)), cls, replace)
        return cls

    return deco


def check_playable(name: str, player: str) -> DeciderEntry:
    """The entry ``name`` if ``player`` (:data:`PLAYERS`) provides all it needs, else one line naming the
    missing capability and where the entry plays."""
    if player not in PLAYERS:
        raise ValidationError(f"player must be one of {sorted(PLAYERS)}, got {player!r}")
    entry = DECIDERS.get(name)
    missing = sorted(entry.needs - PLAYERS[player])
    if missing:
        what = "; ".join(CAPABILITIES[m] for m in missing)
        raise ValidationError(f"controller {name!r} needs {what}, which {player} does not provide "
                              f"(play it in {_WHERE[missing[0]]})")
    return entry


def playable(player: str, family: str | None = None) -> list[str]:
    """Registered names ``player`` can play (of one family), in registration order."""
    have = PLAYERS[player]
    return [n for n in DECIDERS.names(family) if DECIDERS.entries[n].needs <= have]


def decider_spec(name: str, label: str = "", **params) -> Spec:
    """A checked :class:`Spec` of a registered decider (unknown names and parameters: one line)."""
    DECIDERS.check_params(name, params)
    return Spec(name, tuple(params.items()), label)


def as_spec(x) -> Spec:
    """A spec (checked again) or ``"name"`` / ``"name:key=value,..."`` (:func:`spinlib.registry.parse_params`)."""
    if isinstance(x, Spec):
        if x.kind != "controller":
            raise ValidationError(f"a controller spec is needed, got a {x.kind} spec {x.title!r}")
        DECIDERS.check_params(x.name, x.kwargs)
        return x
    name, params = parse_params(x)
    return decider_spec(name, **params)


__all__ = ["CAPABILITIES", "PLAYERS", "FAMILIES", "Spec", "DeciderEntry", "DECIDERS", "register_decider",
           "check_playable", "playable", "decider_spec", "as_spec"]
