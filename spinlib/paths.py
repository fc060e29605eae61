"""Repository paths, resolved from the package location (never from the working directory)."""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"
# smoke runs (run_all.sh --smoke, the notebook tests) redirect results with $SPINLIB_RESULTS
RESULTS = Path(os.environ.get("SPINLIB_RESULTS", ROOT / "results"))
FIGURES = RESULTS / "figures"
CACHE = RESULTS / "cache"
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
