"""Packaging hygiene: pins in sync, notebooks stored stripped, the two commands documented."""
import json
import re
import tomllib

from spinlib.paths import NOTEBOOKS, ROOT


def _pyproject_pins():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return sorted(deps)


def test_every_dependency_is_pinned():
    for d in _pyproject_pins():
        assert re.fullmatch(r"[A-Za-z0-9_.\-]+==[0-9][0-9A-Za-z.]*", d), d
    assert "torch==2.13.0" in _pyproject_pins()


def test_environment_yml_matches_pyproject():
    text = (ROOT / "environment.yml").read_text()
    pip_lines = re.findall(r"^\s+- ([^\s#]+==[^\s#]+)\s*$", text, flags=re.M)
    assert sorted(pip_lines) == _pyproject_pins()
    assert re.search(r"^\s+- python=3\.11\s*$", text, flags=re.M)
    assert re.search(r"^\s+- -e \.\s*$", text, flags=re.M)


def test_notebooks_are_stripped_with_a_parameters_cell():
    nbs = sorted(NOTEBOOKS.glob("*.ipynb"))
    assert nbs
    for nb in nbs:
        cells = json.loads(nb.read_text())["cells"]
        code = [c for c in cells if c["cell_type"] == "code"]
        assert all(not c.get("outputs") and c.get("execution_count") is None for c in code), nb.name
        params = [c for c in code if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert len(params) == 1, nb.name
        src = "".join(params[0]["source"])
        assert "SMOKE" in src and "SEED" in src, nb.name
        # literals only, each documented: NAME = literal  # meaning [unit], range
        for line in src.strip().splitlines():
            assert re.fullmatch(r"[A-Z_][A-Z0-9_]* = (True|False|-?[0-9.e]+|\"[^\"]*\"|'[^']*')\s+#\s[^=]{8,}",
                                line.strip()), f"{nb.name}: undocumented or non-literal parameter line: {line}"


def test_readme_names_the_two_commands_and_ci_calls_the_test_command():
    readme = (ROOT / "README.md").read_text()
    assert "bash run_all.sh" in readme and "bash run_all.sh test" in readme
    ci = (ROOT / ".ci" / "run").read_text()
    assert "run_all.sh test" in ci
