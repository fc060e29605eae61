"""The README's "Add your own policy" and "Run sweeps on a cluster" snippets run as written."""
import re
import subprocess
import sys

import pytest

from spinlib.paths import ROOT


def _python_blocks(section: str) -> list[str]:
    text = (ROOT / "README.md").read_text()
    m = re.search(rf"^## {re.escape(section)}\n(.*?)(?=^## )", text, flags=re.M | re.S)
    assert m, f"README has no section {section!r}"
    blocks = re.findall(r"```python\n(.*?)```", m.group(1), flags=re.S)
    assert blocks, f"section {section!r} has no python snippet"
    return blocks


@pytest.mark.parametrize("section", ["Add your own policy", "Run sweeps on a cluster"])
def test_readme_snippet_runs(section, tmp_path):
    code = "\n".join(_python_blocks(section))
    script = tmp_path / "snippet.py"
    script.write_text(code)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    if section == "Add your own policy":
        assert "(2, 2, 2, 0, 0, 0)" in r.stdout  # the value its comment states
        assert "first-half-drafts" in r.stdout
    else:
        assert re.search(r"^\d+ records$", r.stdout, flags=re.M)


def test_readme_bash_examples_use_declared_options():
    """Every `solve`/`emulate` example in the README parses with today's command line."""
    import shlex

    from spinlib.cli import build_parser

    text = (ROOT / "README.md").read_text().replace("\\\n", " ")
    lines = re.findall(r"^python -m spinlib (?:solve|emulate) .*$", text, flags=re.M)
    assert len(lines) >= 5
    parser = build_parser()
    for ln in lines:
        tokens = shlex.split(ln.split("#")[0])[3:]
        if ">" in tokens:
            tokens = tokens[:tokens.index(">")]
        parser.parse_args(tokens)
