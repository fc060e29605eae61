"""What a reader sees (the README, every notebook's cells and the library's docstrings) carries no development history and no link outside
the repository: no issue numbers, no session wording, no ``../shared`` paths, no status columns."""
import json
import re

import pytest

from spinlib.paths import NOTEBOOKS, ROOT

#: the patterns a reader-facing text may not contain, each with why
FORBIDDEN = {
    r"\b[Ii]ssue\s+#?\d+": "an issue number (cite the paper's section, figure or table instead)",
    r"\.\./shared\b": "a path outside the repository (a clone does not have it)",
    r"\bearlier version\b|\bonce changed\b|\bper issue\b": "development history",
    r"\|\s*done\s*\|": "a status column",
}


def _texts():
    yield "README.md", (ROOT / "README.md").read_text(encoding="utf-8")
    for mod in sorted((ROOT / "spinlib").rglob("*.py")):  # the library's docstrings and comments (help() shows them)
        yield str(mod.relative_to(ROOT)), mod.read_text(encoding="utf-8")
    for nb in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        for i, cell in enumerate(json.loads(nb.read_text(encoding="utf-8"))["cells"]):
            yield f"{nb.name} cell {i}", "".join(cell["source"])


@pytest.mark.parametrize("pattern", sorted(FORBIDDEN))
def test_reader_facing_text_has_no_history_and_no_outside_links(pattern):
    hits = [f"{where}: {m.group(0)!r}" for where, text in _texts() for m in re.finditer(pattern, text)]
    assert not hits, f"{FORBIDDEN[pattern]}: {hits[:10]}"


def test_the_check_can_fail():
    assert re.search(next(p for p in FORBIDDEN if "ssue" in p), "as issue 25 says")
    assert re.search(r"\.\./shared\b", "see ../shared/design/model.md")
