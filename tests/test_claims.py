"""Claims as code and provenance (issue 13): the claim helper renders and records computed values
only; the README's results table is exactly the one generated from results/claims.json; every
committed executed notebook is current (its recorded inputs equal the work tree's files) and was
produced from committed sources; run_all.sh's --stale and -p options behave as documented."""
import json
import os
import sys
import subprocess

import numpy as np
import pytest

from spinlib import claims as C
from spinlib import notebook as N
from spinlib.cache import sha256_file
from spinlib.paths import NOTEBOOKS, RESULTS, ROOT
from spinlib.validation import ValidationError


def test_claim_renders_records_and_refuses_what_is_not_computed(tmp_path):
    C.begin("99_test", tmp_path / "claims")
    c = C.claim("gain", "gain {mean:.0%}, up to {max:.0%}", mean=np.float64(0.26), max=3.88, holds=True,
                scope="6 sweeps", paper="up to 88 %", display=False)
    assert c.sentence == "gain 26%, up to 388%" and c.holds
    bad = C.claim("inside", "{n} of {m} inside", n=np.int64(8), m=9, holds=False, where="for L >= 1", display=False)
    assert bad.markdown().startswith("**does not hold here:**") and "(holds for L >= 1)" in bad.markdown()
    assert isinstance(bad.values["n"], int)
    with pytest.raises(ValidationError, match="not finite"):
        C.claim("nan", "{x}", x=float("nan"), holds=True, display=False)
    with pytest.raises(ValidationError, match="stated twice"):
        C.claim("gain", "{x}", x=1, holds=True, display=False)
    with pytest.raises(ValidationError, match="does not fit"):
        C.claim("tpl", "{y}", x=1, holds=True, display=False)
    with pytest.raises(ValidationError, match="must be a number"):
        C.claim("obj", "{x}", x=[1, 2], holds=True, display=False)
    assert not (tmp_path / "claims" / "99_test.json").exists()  # replaced only when the notebook completes
    C.complete()
    recs = C.load(tmp_path / "claims" / "99_test.json")
    assert [r["id"] for r in recs] == ["gain", "inside"]
    out = C.merge(tmp_path / "claims", tmp_path / "claims.json", commit="abc")
    table = C.readme_table(out)
    assert "| gain 26%, up to 388%; 6 sweeps; paper: up to 88 % | yes | at its scope | 99 |" in table
    assert "| **no** |" in table
    (tmp_path / "claims" / "bad.json").write_text("{}")
    with pytest.raises(ValidationError, match="list of claim records"):
        C.merge(tmp_path / "claims", tmp_path / "x.json")


@pytest.mark.parametrize("seed", range(12))
def test_a_map_claim_carries_its_region_share_into_the_results_table(tmp_path, seed):
    """region_text's shares travel with the claim and render as the table's region column; malformed
    regions (generated) are one line."""
    import pandas as pd

    from spinlib.maps import region_text

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 30))
    ver = pd.DataFrame({"x": np.arange(n), "mean": rng.normal(size=n), "lo": 0.0, "hi": 0.0, "n": 4,
                        "verdict": rng.choice(["holds", "undecided", "fails"], n)})
    reg = region_text(ver, "x")
    C.begin("98_map", tmp_path / "claims")
    c = C.claim("m", "holds at {s:.0%}", s=reg["shares"]["holds"], holds=True, region=reg, display=False)
    assert c.region["cells"] == n and c.region["holds"] == pytest.approx((ver["verdict"] == "holds").mean())
    C.complete()
    table = C.readme_table(C.merge(tmp_path / "claims", tmp_path / "claims.json"))
    cell = f"{c.region['holds']:.0%} of {n} points"
    assert f"| {cell}" in table
    assert ("undecided)" in table) == bool((ver["verdict"] == "undecided").any())
    every = bool((ver["verdict"] == "holds").all())
    assert (f"| {'yes' if every else 'in part'} | {cell}" in table)  # "yes" only where it holds at every point
    assert C.holds_cell(False, c.region) == "**no**" and C.holds_cell(True, None) == "yes"
    bad = [{"cells": 0, "shares": reg["shares"]}, {"cells": n, "shares": {"holds": 0.7, "undecided": 0.7, "fails": 0}},
           {"cells": n}, {"cells": n, "shares": {"holds": -0.1, "undecided": 0.6, "fails": 0.5}}, "87%"]
    C.begin("97_bad", tmp_path / "claims")
    for i, b in enumerate(bad):
        with pytest.raises(ValidationError, match="region") as e:
            C.claim(f"b{i}", "x", holds=True, region=b, display=False)
        assert "\n" not in str(e.value)


def test_readme_results_table_is_generated_from_the_run():
    claims_json = RESULTS / "claims.json"
    if not claims_json.is_file():
        pytest.fail("no run of the claims pipeline committed (results/claims.json): run bash run_all.sh")
    doc = json.loads(claims_json.read_text())
    assert doc["claims"], "the run stated no claim"
    readme = (ROOT / "README.md").read_text()
    assert C.replace_readme_table(ROOT / "README.md", claims_json) == readme, \
        "README results table differs from results/claims.json: python -m spinlib.claims readme"
    notebooks = {p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")}
    assert {r["notebook"] for r in doc["claims"]} <= notebooks


def test_committed_executed_notebooks_are_current_and_from_committed_sources():
    """Fails when a committed executed notebook is stale against the work tree (bash run_all.sh
    --stale re-runs those) or was produced from uncommitted changes."""
    if not (RESULTS / "provenance").is_dir():
        pytest.fail("no run with provenance committed: run bash run_all.sh")
    for nb in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        rec = RESULTS / "provenance" / f"{nb.stem}.json"
        assert rec.is_file(), f"{nb.stem}: no provenance record; run bash run_all.sh --stale"
        data = json.loads(rec.read_text())
        assert not data["uncommitted_changes"], f"{nb.stem} was executed from uncommitted changes"
        changed = N.stale(rec)
        assert not changed, f"{nb.stem} is stale (changed since its run: {changed[:5]}); run bash run_all.sh --stale"
        assert (RESULTS / "executed" / nb.name).is_file()
        assert f"notebooks/{nb.name}" in data["inputs"] and any(k.startswith("spinlib/") for k in data["inputs"])


def test_stale_detects_a_changed_input(tmp_path, monkeypatch):
    monkeypatch.setenv("SPINLIB_RESULTS", str(tmp_path))
    f = ROOT / "notebooks" / "00_overview.ipynb"
    lib = {"spinlib/claims.py": sha256_file(ROOT / "spinlib" / "claims.py")}  # a record lists its library modules too
    rec = tmp_path / "00_overview.json"
    rec.write_text(json.dumps({"notebook": "00_overview", "inputs": {"notebooks/00_overview.ipynb": "0" * 64, **lib}}))
    assert N.stale(rec) == ["notebooks/00_overview.ipynb"]
    rec.write_text(json.dumps({"notebook": "00_overview", "inputs": {"notebooks/00_overview.ipynb": sha256_file(f),
                                                                    **lib}}))
    assert N.stale(rec) == []


@pytest.mark.parametrize("args,match", [
    (["-p", "SEED", "1"], "-p needs --only NN"),
    (["--only", "00", "-p", "seed", "1"], "must be a parameter name"),
    (["--only", "00", "-p", "SMOKE", "True"], "use --smoke"),
    (["--only", "00", "-p", "SEED"], "-p needs NAME VALUE"),
    (["--stale", "--only", "00"], "do not combine"),
    (["--only", "../../evil"], "two-digit notebook number"),
    (["--only", "06,3"], "two-digit notebook number"),
    (["--only", "06,"], "two-digit notebook number"),
    (["--only", "00,98"], "no notebook matches 98"),
    (["--only", "00,01", "-p", "SEED", "1"], "-p needs --only NN, one notebook"),
    (["--only", "00", "--only", "01", "-p", "SEED", "1"], "-p needs --only NN, one notebook"),  # both kept
    (["--only", "00", "-p", "NUM_USERZ", "3"], "has no parameter NUM_USERZ (did you mean NUM_USERS?)"),
    (["--only", "00", "-p", "SEED", "1", "-p", "SEED", "2"], "-p SEED is given twice"),
    (["--only", "00", "-p", "NUM_USERS", "abc"], "-p NUM_USERS must be an integer"),
    (["--smoke", "--only", "10", "-p", "ROUNDS", "5"], "-p ROUNDS has no effect under --smoke"),
])
def test_run_all_refuses_bad_parameter_options(args, match):
    r = subprocess.run(["bash", str(ROOT / "run_all.sh"), *args], capture_output=True, text=True, cwd=ROOT,
                       timeout=600)
    assert r.returncode == 2 and match in r.stderr, (r.returncode, r.stderr[-500:])


@pytest.mark.campaign
def test_run_all_parameters_go_to_their_own_folder():
    """A run with -p writes under results/runs/<NN>-<key>/ and leaves the committed run untouched."""
    committed = sorted(p for p in (RESULTS).rglob("*") if p.is_file() and "runs" not in p.parts)
    stamp = {p: p.stat().st_mtime_ns for p in committed}
    r = subprocess.run(["bash", str(ROOT / "run_all.sh"), "--smoke", "--only", "00", "-p", "SEED", "3"],
                       capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    runs = [p for p in (RESULTS / "runs").glob("00-*") if (p / "executed" / "00_overview.ipynb").is_file()]
    assert runs
    prov = json.loads((runs[0] / "provenance" / "00_overview.json").read_text())
    assert prov["parameters"]["SEED"] == 3
    assert all(p.stat().st_mtime_ns == stamp[p] for p in committed if p.exists())


def test_an_interrupted_notebook_never_erases_the_claims_of_its_last_complete_run(tmp_path):
    """Issue 24: claims are replaced only when their notebook completes (kill -9 mid-run keeps them)."""
    d = tmp_path / "claims"
    C.begin("98_test", d)
    C.claim("a", "{x} of {y}", x=9, y=9, holds=True, display=False)
    C.complete()
    before = (d / "98_test.json").read_bytes()
    C.begin("98_test", d)  # a second run that is interrupted after one claim
    C.claim("a", "{x} of {y}", x=0, y=9, holds=False, display=False)
    assert (d / "98_test.json").read_bytes() == before
    doc = json.loads(C.merge(d, tmp_path / "c.json").read_text())
    assert [r["values"]["x"] for r in doc["claims"]] == [9]
    C.complete()
    doc = json.loads(C.merge(d, tmp_path / "c.json").read_text())
    assert [r["values"]["x"] for r in doc["claims"]] == [0]


def test_a_declared_claim_records_that_it_is_expected_not_to_hold(tmp_path):
    C.begin("99_declared", directory=tmp_path, not_holding=["b"])
    a = C.claim("a", "x = {x}", x=1, holds=True, display=False)
    b = C.claim("b", "y = {y}", y=2, holds=False, display=False)
    assert a.expected and not b.expected
    C.complete()
    recs = {r["id"]: r for r in json.loads((tmp_path / "99_declared.json").read_text())}
    assert recs["a"]["expected"] is True and recs["b"]["expected"] is False
    for bad in ("b", ["Not An Id"], [3]):
        with pytest.raises(ValidationError, match="not_holding"):
            C.begin("99_declared", directory=tmp_path, not_holding=bad)


def _declared_not_holding(nb_path) -> tuple:
    """The ``NOT_HOLDING`` tuple a notebook passes to ``start`` (empty when it declares none)."""
    import ast

    for cell in json.loads(nb_path.read_text(encoding="utf-8"))["cells"]:
        src = "".join(cell["source"])
        if cell["cell_type"] != "code" or "NOT_HOLDING" not in src:
            continue
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "NOT_HOLDING" for t in node.targets):
                return tuple(ast.literal_eval(node.value))
    return ()


@pytest.mark.parametrize("nb", sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")), ids=lambda p: p.stem)
def test_every_committed_verdict_is_the_declared_one(nb):
    """Each claim of the committed run holds, or its notebook declared that it does not (NOT_HOLDING,
    passed to ``start``); every declared id is a claim of that run."""
    recs = C.load(RESULTS / "claims" / f"{nb.stem}.json")
    declared = set(_declared_not_holding(nb))
    ids = {r["id"] for r in recs}
    assert declared <= ids, f"{nb.stem} declares claims its run does not state: {sorted(declared - ids)}"
    surprise = [r["id"] for r in recs if r["holds"] != (r["id"] not in declared)]
    assert not surprise, f"{nb.stem}: verdicts that differ from the declaration (holds vs NOT_HOLDING): {surprise}"
    assert all(r.get("expected", True) == (r["id"] not in declared) for r in recs), \
        f"{nb.stem}: the committed run was made with another declaration; re-run it"


def _edited_record(change):
    rec = json.loads((RESULTS / "provenance" / "01_system_model.json").read_text())
    change(rec)
    return json.dumps(rec)


_DIGEST = "0" * 64


@pytest.mark.parametrize("bad", ["", "{", '{"inputs": 3}', '{"nope": {}}', '{"inputs": {"a": 1}}', "\udcff",
                                 # records that read but mean nothing: each would say "current" forever
                                 _edited_record(lambda r: r.update(inputs={})),
                                 _edited_record(lambda r: r.update(notebook="02_homogeneous_draft_control")),
                                 _edited_record(lambda r: r["inputs"].pop("notebooks/01_system_model.ipynb")),
                                 _edited_record(lambda r: r.update(inputs={"notebooks/01_system_model.ipynb": _DIGEST})),
                                 _edited_record(lambda r: r["inputs"].update({"../outside.py": _DIGEST})),
                                 _edited_record(lambda r: r["inputs"].update({"spinlib/x.py": "not-a-digest"}))])
def test_stale_detection_fails_closed_on_an_unreadable_record(tmp_path, monkeypatch, bad):
    """One unreadable provenance record: ``stale`` names it and exits 2 (no partial list), and ``run_all.sh --stale``
    refuses in one line instead of saying nothing is stale."""
    import shutil

    shutil.copytree(RESULTS / "provenance", tmp_path / "provenance")
    rec = tmp_path / "provenance" / "01_system_model.json"
    rec.write_bytes(bad.encode("utf-8", "surrogateescape"))
    r = subprocess.run([sys.executable, "-m", "spinlib.notebook", "stale"], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "SPINLIB_RESULTS": str(tmp_path)}, timeout=120)
    assert r.returncode == 2 and "01_system_model.json" in r.stderr and r.stdout == "", (r.stdout, r.stderr)
    if bad == "{":
        r = subprocess.run(["bash", str(ROOT / "run_all.sh"), "--stale"], capture_output=True, text=True, cwd=ROOT,
                           env={**os.environ, "SPINLIB_RESULTS": str(tmp_path)}, timeout=600)
        assert r.returncode == 2 and "cannot tell which notebooks are stale" in r.stderr, r.stderr[-500:]
        assert "no notebook is stale" not in r.stdout


def test_the_readme_real_models_section_is_generated_from_notebook_12s_claims(tmp_path):
    """Every claim of notebook 12 appears in the README's real-models section with its verdict; the
    section is refused without its markers, and without any claim of notebook 12."""
    doc = json.loads((RESULTS / "claims.json").read_text(encoding="utf-8"))
    text = C.real_models_text(RESULTS / "claims.json")
    ours = [r for r in doc["claims"] if r["notebook"] == C.REAL_MODELS_NOTEBOOK]
    assert ours and all(r["sentence"].replace("\n", " ") in text for r in ours)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert text in readme and readme.index(C.REAL_BEGIN) < readme.index("## Results of the last full run")
    broken = tmp_path / "README.md"
    broken.write_text(readme.replace(C.REAL_BEGIN, ""), encoding="utf-8")
    with pytest.raises(ValidationError, match="realmodels"):
        C.replace_readme_table(broken, RESULTS / "claims.json")
    other = tmp_path / "claims.json"
    other.write_text(json.dumps({"commit": None, "claims": [r for r in doc["claims"] if r not in ours]}), encoding="utf-8")
    with pytest.raises(ValidationError, match="no claims of 12_real_models"):
        C.real_models_text(other)
    flipped = tmp_path / "flipped.json"
    flipped.write_text(json.dumps({"commit": "abc", "claims": [{**ours[0], "holds": False, "verdict": "fails"}]}),
                       encoding="utf-8")
    assert "**(does not hold here)**" in C.real_models_text(flipped)


def _committed_records():
    out = []
    for f in sorted((RESULTS / "claims").glob("*.json")):
        out += json.loads(f.read_text())
    assert out, "no committed claims (run bash run_all.sh)"
    return out


def _edits(r):
    """One edit a careless or hostile hand could make to a claim record, each a meaning the reader must refuse."""
    yield "holds flipped", {**r, "holds": not r["holds"]}
    yield "holds as a string", {**r, "holds": "false" if not r["holds"] else "true"}
    yield "verdict flipped", {**r, "verdict": "fails" if r["verdict"] != "fails" else "holds"}
    yield "verdict unknown", {**r, "verdict": "mostly"}
    yield "sentence edited", {**r, "sentence": r["sentence"] + " (edited)"}
    if r["values"]:
        k, v = next(iter(r["values"].items()))
        bumped = (not v) if isinstance(v, bool) else (v + "x" if isinstance(v, str) else v * 1.5 + 1)
        yield "value edited", {**r, "values": {**r["values"], k: bumped}}
        yield "value NaN", {**r, "values": {**r["values"], k: float("nan")}}
    yield "unknown field", {**r, "note": "by hand"}
    yield "field missing", {k: v for k, v in r.items() if k != "scope"}
    yield "readme as a number", {**r, "readme": 1}
    if r["tests"]:
        yield "a test flipped", {**r, "tests": [{**t, "holds": not t["holds"]} for t in r["tests"]]}
    if r["region"]:
        yield "region shares", {**r, "region": {**r["region"], "holds": 1.5}}


def test_every_committed_claim_record_reads_and_every_edit_of_its_meaning_is_refused(tmp_path):
    """Each committed claim is checked for meaning by the one reader (claims.load / load_merged, behind claims merge
    and the README): each edit of every committed record is refused in one line naming the file and the claim,
    except where the edit keeps the record's meaning (a test flipped on a claim that already does not hold)."""
    records = _committed_records()
    refused = kept = 0
    for r in records:
        for what, edited in _edits(r):
            f = tmp_path / f"{r['notebook']}.json"
            f.write_text(json.dumps([edited], allow_nan=True))
            try:
                C.load(f)
            except ValidationError as e:
                assert "\n" not in str(e) and str(f) in str(e), (what, str(e))
                refused += 1
                continue
            # the only edits that keep a meaning: failing tests on a claim that does not hold, a holds/verdict pair
            # flipped together is not generated here
            assert what == "a test flipped" and not edited["holds"], (r["id"], what)
            kept += 1
    assert refused > 10 * len(records)


def test_claims_merge_refuses_a_hand_flipped_verdict_in_one_line(tmp_path):
    records = [r for r in _committed_records() if r["notebook"] == "00_overview"]
    d = tmp_path / "claims"
    d.mkdir()
    (d / "00_overview.json").write_text(json.dumps([{**records[0], "holds": not records[0]["holds"]}] + records[1:]))
    env = dict(os.environ, SPINLIB_RESULTS=str(tmp_path))
    r = subprocess.run([sys.executable, "-m", "spinlib.claims", "merge"], capture_output=True, text=True, env=env)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and records[0]["id"] in r.stderr, r.stderr
    assert not (tmp_path / "claims.json").exists()
    for bad in ({**records[0], "notebook": "01_system_model"}, records[0]):  # another notebook's, an id twice
        (d / "00_overview.json").write_text(json.dumps([records[0], bad]))
        with pytest.raises(ValidationError, match="names notebook|twice"):
            C.merge(d, tmp_path / "claims.json")
