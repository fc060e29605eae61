"""Repository paths, resolved from the package location (never from the working directory)."""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"
NOTEBOOKS = ROOT / "notebooks"


def env_dir(name: str, default: Path) -> Path:
    """The directory ``$name`` names, else ``default``: the one reader of the library's directory variables.

    Set but empty (or blank), or naming something that is not a directory, is refused in one line (an empty value
    once meant the working directory: a run wrote a 517 MB model folder there)."""
    from .validation import ValidationError

    value = os.environ.get(name)
    if value is None:
        return Path(default)
    if not value.strip():
        raise ValidationError(f"${name} is set but empty: unset it (default {default}) or name a directory")
    path = Path(value).expanduser()
    if path.exists() and not path.is_dir():
        raise ValidationError(f"${name} must name a directory, got {value!r} (an existing file)")
    return path


#: the values ``$SPINLIB_NO_PROGRESS`` may take (unset: progress bars where a person waits)
FLAG_VALUES = ("0", "1")


def env_flag(name: str) -> bool:
    """``$name`` as a flag: unset or ``0`` is off, ``1`` is on; any other value (an empty one included) is refused in
    one line, never read as on or off by its truthiness. The one reader of the library's flag variables."""
    from .validation import ValidationError

    value = os.environ.get(name)
    if value is None:
        return False
    if value not in FLAG_VALUES:
        raise ValidationError(f"${name} must be 0 or 1 (or unset), got {value!r}")
    return value == "1"


def quiet() -> bool:
    """``$SPINLIB_NO_PROGRESS``: no progress bars (``run_all.sh`` sets it under papermill)."""
    return env_flag("SPINLIB_NO_PROGRESS")


def _results() -> Path:
    """``$SPINLIB_RESULTS`` (smoke runs, the notebook tests and ``run_all.sh -p`` redirect results with it), else
    ``results/``. An empty value once meant the working directory (under papermill: ``notebooks/``). Every command
    and notebook writes under this folder and there is no safe folder to go on with, so a bad value ends the process
    on import with one line and exit 2 (a library user who catches :class:`SystemExit` sees the same line)."""
    from .validation import ValidationError

    try:
        return env_dir("SPINLIB_RESULTS", ROOT / "results")
    except ValidationError as e:
        import sys

        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None


RESULTS = _results()
FIGURES = RESULTS / "figures"
CACHE = RESULTS / "cache"
