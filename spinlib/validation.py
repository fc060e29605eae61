"""Validation, the ground floor: the one error type of the library and the checks every module uses.

Every check returns the checked value or raises one :class:`ValidationError` whose message names the
field and the allowed range (one line; the command lines print it and exit non-zero).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np


class ValidationError(ValueError):
    """A configuration value is outside its allowed range (message names the field)."""


def check_real(name: str, value: Any) -> float:
    """``float(value)``, or one line naming ``name`` when it is not a finite real number (bools refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValidationError(f"{name} must be a real number, got {value!r}")
    try:
        value = float(value)
    except OverflowError:  # an integer beyond the float range
        raise ValidationError(f"{name} must be finite, got an integer of {int(value).bit_length()} bits") from None
    if not math.isfinite(value):
        raise ValidationError(f"{name} must be finite, got {value!r}")
    return value


def check_positive(name: str, value: Any) -> float:
    """Return ``float(value)`` or raise if it is not a finite number > 0."""
    v = check_real(name, value)
    if v <= 0:
        raise ValidationError(f"{name} must be > 0, got {v!r}")
    return v


def check_nonnegative(name: str, value: Any) -> float:
    """Return ``float(value)`` or raise if it is not a finite number >= 0."""
    v = check_real(name, value)
    if v < 0:
        raise ValidationError(f"{name} must be >= 0, got {v!r}")
    return v


# Physical ranges [lo, hi] of the scenario's fields (SI units). Values outside them are refused at
# construction with one line: inside them the rate models and solvers stay finite (the extremes of
# every range are checked in tests/test_hardening.py); outside, they produce overflow and NaN long
# after the cause. Generous on purpose: a thermal noise floor is ~4e-21 W/Hz, a macro cell transmits
# ~40 W, a path gain is below 1.
PHYSICAL_RANGES = {
    "draft_time_s": (1e-9, 1e3), "channel_gain": (1e-30, 1.0), "tx_power_w": (1e-9, 1e3),
    "bandwidth_hz": (1.0, 1e12), "noise_psd_w_per_hz": (1e-25, 1e-12), "access_latency_s": (0.0, 1e3),
    "downlink_rate_bps": (1.0, 1e15), "t0_s": (0.0, 1e3), "t1_s_per_token": (0.0, 1e3),
    "power_w": (1e-9, 1e6), "correction_time_s": (0.0, 1e3),
}


def check_physical(name: str, value: Any, field: str | None = None) -> float:
    """``float(value)`` inside :data:`PHYSICAL_RANGES` ``[field or name]``, else one line naming the range."""
    v = check_real(name, value)
    lo, hi = PHYSICAL_RANGES[field or name]
    if not lo <= v <= hi:
        raise ValidationError(f"{name} must be in [{lo:g}, {hi:g}] (physical range), got {v!r}")
    return v


def count_text(n: int) -> str:
    """An integer count for a message: ``1,234,567`` up to 10^18, else ``about 10^k`` (an exact
    decimal of a huge count can exceed Python's integer-string limit and fail while formatting)."""
    n = int(n)
    return f"{n:,}" if abs(n) < 10**18 else f"about 10^{int(n.bit_length() * math.log10(2))}"


def check_bool(name: str, value: Any) -> bool:
    """Return ``value`` if it is ``True`` or ``False`` (a flag), else one line: ``"false"``, ``0`` or ``None`` is
    not read as a flag (a truthy string would switch it on)."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValidationError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_int_range(name: str, value: Any, lo: int, hi: int | None = None) -> int:
    """Return ``int(value)`` or raise if it is not an integer in ``[lo, hi]``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValidationError(f"{name} must be an integer, got {value!r}")
    v = int(value)
    if v < lo or (hi is not None and v > hi):
        rng = f"[{lo}, {hi}]" if hi is not None else f"[{lo}, inf)"
        shown = f"an integer of {v.bit_length()} bits" if abs(v) > 10**18 else str(v)
        raise ValidationError(f"{name} must be an integer in {rng}, got {shown}")
    return v


def check_keys(where: str, d: Any, allowed, required=()) -> dict:
    """``d`` as a dict whose keys are all in ``allowed`` (and include ``required``), or one
    :class:`ValidationError` naming the unknown key and the closest known one."""
    import difflib

    if not isinstance(d, dict):
        raise ValidationError(f"{where} must be a JSON object, got {type(d).__name__}")
    allowed = list(allowed)
    for key in d:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(allowed)})"
            raise ValidationError(f"{where} has an unknown field {key!r}{hint}")
    for key in required:
        if key not in d:
            raise ValidationError(f"{where} is missing the field {key!r}")
    return d


def field_names(cls) -> list[str]:
    """The field names of dataclass ``cls`` (the keys its JSON form may have)."""
    return [f.name for f in dataclasses.fields(cls)]


def required_fields(cls) -> list[str]:
    """The fields of dataclass ``cls`` without a default (the keys its JSON form must have)."""
    return [f.name for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]


def check_alpha(name: str, value: Any) -> float:
    """Acceptance rates live in [0, 1): alpha = 1 would make every draft free and infinite."""
    v = check_real(name, value)
    if not 0.0 <= v < 1.0:
        raise ValidationError(f"{name} must be in [0, 1), got {v!r}")
    return v


__all__ = ["ValidationError", "check_bool", "check_real", "check_positive", "check_nonnegative", "PHYSICAL_RANGES", "check_physical",
           "count_text", "check_int_range", "check_keys", "field_names", "required_fields", "check_alpha"]
