"""Argument types shared by the command lines (``spinlib.cli`` and ``spinlib.online.cli``).

A module of its own so that neither command line imports the other for them.
"""
from __future__ import annotations

import argparse

SEED_MAX = 2**63 - 1  # numpy, torch and the JSON records all take a seed in 0..2**63 - 1


def seed_arg(name: str = "--seed"):
    """An ``argparse`` type: an integer seed in ``0..SEED_MAX`` (one line naming ``name`` otherwise)."""
    def parse(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {text!r}") from None
        if not 0 <= v <= SEED_MAX:
            raise argparse.ArgumentTypeError(f"{name} must be in 0..2**63-1, got {text if len(text) < 40 else text[:37] + '...'}")
        return v
    return parse


def load_plugins(args) -> None:
    """Load the plugin files of a command: those named in ``$SPINLIB_PLUGINS``, then every ``--plugin``
    (:func:`spinlib.control.registry.load_plugin`: a file registers policies, controllers, pairs or
    presets; a missing or failing file is one line)."""
    from .control.registry import load_env_plugins, load_plugin

    load_env_plugins()
    for path in getattr(args, "plugin", None) or ():
        load_plugin(path)


def only_with(args, owner: str, present: bool, options: dict[str, tuple[str, object]]) -> None:
    """Options that act only together with ``owner``: refused in one line when given without it, set to
    their defaults otherwise (``options``: dest -> (flag, default); the parser's default is ``None``,
    so that "given" is known).

    An option that would do nothing in its combination is an error, never silently ignored.
    """
    from .validation import ValidationError

    given = [flag for dest, (flag, _) in options.items() if getattr(args, dest, None) not in (None, [], ())]
    if given and not present:
        raise ValidationError(f"{', '.join(given)} only act(s) with {owner}: give {owner} or drop "
                              f"{'it' if len(given) == 1 else 'them'}")
    for dest, (_, default) in options.items():
        if getattr(args, dest, None) is None:
            setattr(args, dest, default)
