"""Repository paths, resolved from the package location (never from the working directory)."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"
RESULTS = ROOT / "results"
FIGURES = RESULTS / "figures"
CACHE = RESULTS / "cache"
NOTEBOOKS = ROOT / "notebooks"
