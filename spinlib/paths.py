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
