"""Every notebook runs end to end through papermill with SMOKE=True and writes its results.

Results go to a temporary directory ($SPINLIB_RESULTS), never over the committed full run.
"""
import json
import subprocess
import sys

import pytest

from spinlib.paths import NOTEBOOKS

NOTEBOOK_FILES = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
# what each notebook must write (summaries under summaries/, figures under figures/)
EXPECTED = {
    "00_overview": ([], []),
    "01_system_model": (["01_system_model"], ["01_goodput_mc_vs_closed_form", "01_speculation_boundary"]),
    "02_homogeneous_draft_control": (["02_homogeneous_draft_control"], ["02_share_vs_draft_time_and_path_loss",
                                                                         "02_sweeps_homogeneous"]),
    "03_heterogeneous_draft_control": (["03_heterogeneous_draft_control"], ["03_share_vs_alpha", "03_sweeps_sync"]),
    "04_speculative_decoding": (["04_speculative_decoding"], ["04_toy_losslessness", "04_ul_dl_bits_per_token"]),
    "05_acceptance_measurement": (["05_acceptance_measurement"], ["05_qwen_alpha_by_task", "05_qwen_verification",
                                                                  "05_alpha_by_task", "05_tokens_per_round"]),
    "06_uplink_vs_downlink": (["06_uplink_vs_downlink"], ["06_mode_regions", "06_goodput_sweeps",
                                                          "06_engine_bits_vs_model"]),
    "07_testbed_validation": (["07_testbed_validation"], ["07_agreement", "07_async_queueing", "07_iid_vs_profile",
                                                          "07_fading", "07_timeline"]),
    "08_extending": (["08_extending"], ["08_user_policy_sweep", "08_alpha_spread_sweep", "08_acceptance_profile",
                                        "08_explorer"]),
    "09_balance": (["09_balance"], ["09_served_sweeps", "09_who_gets_sd", "09_radio", "09_solve_times", "09_ratio",
                                  "09_claim_map_hybrid"]),
    "10_online_controllers": (["10_online_controllers"], ["10_critical_delay", "10_log_growth", "10_regret",
                                                          "10_gelato_v_sweep", "10_energy_front", "10_claim_map_margins",
                                                          "10_claim_map_gelato"]),
    "11_papers_as_written": (["11_papers_as_written"], ["11_p1_fig4_closed_form", "11_p1_figs7_8", "11_p2_figs7_8",
                                                        "11_p2_figs9_11"]),
    "12_real_models": (["12_real_models"], ["12_breakeven"]),
}


@pytest.fixture(scope="session")
def kernel():
    from jupyter_client.kernelspec import KernelSpecManager

    if "spinlib" not in KernelSpecManager().find_kernel_specs():
        subprocess.run([sys.executable, "-m", "ipykernel", "install", "--sys-prefix", "--name", "spinlib"],
                       check=True, capture_output=True)
    return "spinlib"


def _data_state() -> str:
    """``git status`` of ``data/`` with untracked files: what a run added or changed there."""
    root = NOTEBOOKS.parent
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all", "--", "data"], cwd=root,
                          capture_output=True, text=True, check=True).stdout


def _displayed_values(source: str) -> list[str]:
    """Names of the calls whose value a code cell displays: its last statement is a bare call and the
    cell does not end with ``;`` (IPython shows that value, e.g. a ``Claim(...)`` repr)."""
    import ast

    text = "\n".join(l for l in source.splitlines() if not l.lstrip().startswith(("%", "!")))
    tree = ast.parse(text)
    if not tree.body or text.rstrip().endswith(";"):
        return []
    last = tree.body[-1]
    if isinstance(last, ast.Expr) and isinstance(last.value, ast.Call):
        f = last.value.func
        return [f.id if isinstance(f, ast.Name) else getattr(f, "attr", "?")]
    return []


@pytest.mark.parametrize("path", NOTEBOOK_FILES, ids=lambda p: p.stem)
def test_no_cell_displays_a_library_object(path):
    # a cell ending in claim(...) / write_summary(...) / finish() without ';' shows an object repr to the reader
    nb = json.loads(path.read_text(encoding="utf-8"))
    bad = [(i, name) for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
           for name in _displayed_values("".join(c["source"]))
           if name in {"claim", "finish", "write_summary"}]  # calls that return an object
    assert not bad, f"{path.name}: cells (index, call) that display the call's value: {bad}"


def test_the_display_check_sees_a_bare_claim():
    assert _displayed_values('x = 1\nclaim("a", "b",\n      holds=True)') == ["claim"]
    assert _displayed_values('claim("a", "b", holds=True);') == []
    assert _displayed_values('df.round(3)') == ["round"]
    assert _displayed_values('y = claim("a", "b", holds=True)') == []


def test_every_notebook_is_listed():
    assert [p.stem for p in NOTEBOOK_FILES] == sorted(EXPECTED)


# notebooks whose default pair is the Qwen2.5-Coder pair (1.5B target): run_all.sh test runs them on the
# SmolLM2 pair (same code paths, seconds to load), the slow tier on their own pair (run_all.sh test --all)
QWEN_PARAMETER = {"04_speculative_decoding": "PAIR", "06_uplink_vs_downlink": "PAIR",
                  "07_testbed_validation": "REAL_PAIR"}
FAST_PAIR = "smollm2-rtn4g16"


def _smoke_cases():
    for path in NOTEBOOK_FILES:
        name = QWEN_PARAMETER.get(path.stem)
        if name is None:
            yield pytest.param(path, {}, id=path.stem)
        else:
            yield pytest.param(path, {name: FAST_PAIR}, id=f"{path.stem}-{FAST_PAIR}")
            yield pytest.param(path, {}, id=path.stem, marks=[pytest.mark.slow, pytest.mark.real_models])


def test_the_qwen_notebooks_take_the_pair_parameter():
    # the fast-tier substitution only means something if the parameter exists and defaults to the Qwen pair
    for stem, name in QWEN_PARAMETER.items():
        nb = json.loads((NOTEBOOKS / f"{stem}.ipynb").read_text(encoding="utf-8"))
        params = ["".join(c["source"]) for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert len(params) == 1 and f'{name} = "qwen-coder"' in params[0], stem


@pytest.mark.notebooks
@pytest.mark.parametrize(("path", "pair"), list(_smoke_cases()))
def test_notebook_smoke(path, pair, tmp_path, kernel, monkeypatch):
    import papermill as pm

    monkeypatch.setenv("SPINLIB_RESULTS", str(tmp_path))
    # smoke data (a few points, fewer seeds) draw figures no reader sees: their faults (a legend over one of a
    # handful of points) are listed in FAULTS.jsonl, not raised; the full run (run_all.sh), whose figures are
    # committed, refuses any (spinlib.plotting.figure_faults)
    monkeypatch.setenv("SPINLIB_FIGURE_CHECK", "record")
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel's inline backend: figures in the outputs
    before = path.read_bytes()
    data_before = _data_state()
    out = tmp_path / path.name
    pm.execute_notebook(str(path), str(out), parameters={"SMOKE": True, **pair}, kernel_name=kernel,
                        cwd=str(NOTEBOOKS), progress_bar=False, execution_timeout=600)
    assert path.read_bytes() == before, "the source notebook must not be modified"
    assert _data_state() == data_before, "a smoke run must not add or change anything under data/"
    summaries, figures = EXPECTED[path.stem]
    for name in summaries:
        data = json.loads((tmp_path / "summaries" / f"{name}.json").read_text())
        assert isinstance(data, dict) and data, name
    for name in figures:
        for ext in ("pdf", "png"):
            f = tmp_path / "figures" / f"{name}.{ext}"
            assert f.exists() and f.stat().st_size > 1000, f
    executed = json.loads(out.read_text())
    outputs = [o for c in executed["cells"] for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= len(figures), f"{len(images)} inline figures for {len(figures)} saved ones"
    reprs = [t for o in outputs for t in [o.get("data", {}).get("text/plain", "")]
             if "PosixPath(" in "".join(t) or "<Axes" in "".join(t) or "Claim(" in "".join(t)]
    assert not reprs, reprs[:2]
    # claims and provenance of the run
    claims = json.loads((tmp_path / "claims" / f"{path.stem}.json").read_text())
    # every claim is a rendered sentence with a verdict (a claims file of failing claims still has them)
    assert all(isinstance(c.get("holds"), bool) and isinstance(c.get("sentence"), str) and c["sentence"]
               for c in claims), path.stem
    prov = json.loads((tmp_path / "provenance" / f"{path.stem}.json").read_text())
    assert prov["parameters"]["SMOKE"] is True and f"notebooks/{path.name}" in prov["inputs"]


@pytest.mark.parametrize("path", NOTEBOOK_FILES, ids=lambda p: p.stem)
def test_every_name_a_notebook_imports_from_spinlib_exists(path):
    # a fast check that a library edit did not drop a function a notebook imports (the smoke runs find it too,
    # minutes later, in a marked tier)
    import ast
    import importlib
    import importlib.util

    nb = json.loads(path.read_text(encoding="utf-8"))
    missing = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        try:
            tree = ast.parse("".join(cell["source"]))
        except SyntaxError:
            continue  # IPython syntax (magics): not ours to check here
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("spinlib"):
                mod = importlib.import_module(node.module)
                missing += [f"{node.module}.{a.name}" for a in node.names if not hasattr(mod, a.name)
                            and importlib.util.find_spec(f"{node.module}.{a.name}") is None]
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("spinlib"):
                        importlib.import_module(a.name)
    assert not missing, f"{path.name} imports names the library does not have: {missing}"
