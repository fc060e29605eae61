"""What a reader sees (the README, every notebook's cells and the library's docstrings) carries no development history and no link outside
the repository: no issue numbers, no session wording, no ``../shared`` paths, no status columns."""
import json
import re

import pytest

from spinlib.paths import NOTEBOOKS, ROOT

#: the patterns a reader-facing text may not contain, each with why
FORBIDDEN = {
    r"\b[Ii]ssue\s+#?\d+": "an issue number (cite the paper's section, figure or table instead)",
    r"\.\./shared\b|(?<![\w./-])shared/(?:design|probes|papers|data|hooks)\b": "a path outside the repository (a clone "
                                                                          "does not have it)",
    r"\bearlier version\b|\bonce changed\b|\bper issue\b|\bbefore we read\b|\bsessions?\b(?! *=)":
        "development history",
    r"\|\s*done\s*\|": "a status column",
}


def _texts():
    yield "README.md", (ROOT / "README.md").read_text(encoding="utf-8")
    for folder in ("spinlib", "benchmarks"):  # the docstrings and comments of the library and of its benchmarks
        for mod in sorted((ROOT / folder).rglob("*.py")):
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
    outside = next(p for p in FORBIDDEN if "shared" in p)
    assert re.search(outside, "see `shared/design/controllers.md`") and not re.search(outside, "spinlib/shared/x")
    history = next(p for p in FORBIDDEN if "earlier" in p)
    assert re.search(history, "lent to this project's sessions so far") and re.search(history, "before we read them")


#: a number with a unit (a result's shape) in prose a reader sees
_NUMBER = re.compile(r"(?<![\w.$\\{`/-])[-+]?\d+(?:[.,]\d+)?\s?(?:%|x\b|ms\b|s\b|min\b|GB\b|MB\b|tokens?\b|MHz\b|dBm?\b|J\b|W\b)")
#: where such a number is not a result of ours: the paper's own figures cited to their place, an interval's level,
#: a parameter table's row (configuration)
_CITED = re.compile(r"Fig\.|Table|Sec\.|eq\.|[Pp]aper|abstract|Theorem|Lemma|[Ss]tatement|arXiv|\breports?\b")
_LEVEL = re.compile(r"\d+(?:\.\d+)? ?% (?:bootstrap|t-|interval|delta|binomial|confidence)|2\.5-97\.5 %|\b9[059] % |\b9[059] %$")
#: configuration values stated in prose (the settings a study runs with), each with where it is set
CONFIGURATION = {
    ("09_balance.ipynb", "64-2,048 tokens"): "the default instance generator's ranges (spinlib.balance.generator)",
    ("09_balance.ipynb", "8-40 ms"): "the default instance generator's per-token budgets (spinlib.balance.generator)",
    ("09_balance.ipynb", "32-220 tokens"): "the slice region's ranges (REGIME_SLICE in the notebook)",
    ("09_balance.ipynb", "11x"): "the slice region's budget spread (REGIME_SLICE in the notebook)",
    ("11_papers_as_written.ipynb", "64 x"): "the grid size of our run of paper 1's algorithm (multispin.GRID)",
    ("README.md", "floored at -20 dB"): "the Rayleigh model's floor (spinlib.emulator.fading)",
    ("03_heterogeneous_draft_control.ipynb", "20 MHz uplink"): "the measured preset's band (spinlib.presets)",
    ("06_uplink_vs_downlink.ipynb", "above 0 dB"): "the map's threshold (the claim's test)",
    ("07_testbed_validation.ipynb", "10 dB fades"): "the two-state Markov channel's fade (spinlib.emulator.fading)",
    ("README.md", "2 GB"): "the install's size: the packaged models' wheels (pyproject.toml pins)",
    ("README.md", "9 GB"): "the converted models' cache (spinlib.sd.models writes it)",
    ("README.md", "2 min"): "the GGUF conversion, once per machine",
    ("README.md", "1 ms"): "a campaign's range of access latencies (benchmarks/certified_optimality.py)",
    ("README.md", "1 s"): "a campaign's range of access latencies (benchmarks/certified_optimality.py)",
    ("README.md", "10 s"): "the campaign's timeout (benchmarks/certified_optimality.py)",
}


def _prose():
    """(where, file, line) of the prose a reader sees: the README outside its generated blocks and code, and
    every notebook's Markdown cells."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    text = re.sub(r"<!-- (\w+):begin -->.*?<!-- \1:end -->", "", text, flags=re.S)
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    for line in text.splitlines():
        yield "README.md", line
    for nb in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        for cell in json.loads(nb.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "markdown":
                for line in "".join(cell["source"]).splitlines():
                    yield nb.name, line


def _typed_numbers():
    before = ("", "")
    for where, line in _prose():
        context, before = (before[1] if before[0] == where else "") + " " + line, (where, line)
        if _CITED.search(context) or line.lstrip().startswith("| `"):  # a citation on this line or the one before
            continue
        for m in _NUMBER.finditer(_LEVEL.sub(" ", line)):
            if not any(w == where and snippet in line for (w, snippet) in CONFIGURATION):
                yield f"{where}: {m.group(0)!r} in {line.strip()[:100]!r}"


def test_no_hand_typed_result_in_reader_facing_prose():
    """A number with a unit in prose is a claim (rendered from computed values), the paper's own figure cited to
    its section, figure or table, an interval's level, or a configuration value listed above with where it is
    set; a hand-typed result (e.g. a speed ratio typed into a parameter's description) fails."""
    hits = list(_typed_numbers())
    assert not hits, "hand-typed numbers in reader-facing prose:\n" + "\n".join(hits)
    stale = [k for k in CONFIGURATION if not any(w == k[0] and k[1] in line for w, line in _prose())]
    assert not stale, f"CONFIGURATION lists text that is gone: {stale}"


def test_the_number_check_can_fail():
    line = "the pair is about 3x slower here and gains 76 % on the map"
    assert [m.group(0) for m in _NUMBER.finditer(line)] == ["3x", "76 %"]
    assert not _CITED.search(line) and _LEVEL.sub(" ", "a 95 % bootstrap interval") .count("95") == 0
