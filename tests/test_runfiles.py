"""The run machinery's own files (spinlib.runfiles, run_all.sh): no write follows a link, no folder on
the way is a link, and a notebook an earlier run left unfinished is reported by every later run."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from spinlib import runfiles
from spinlib.validation import ValidationError

ROOT = Path(__file__).resolve().parents[1]


def test_write_replaces_a_planted_link_and_never_writes_through_it(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    out = tmp_path / "results"
    out.mkdir()
    (out / "ENVIRONMENT.txt").symlink_to(victim)
    runfiles.write(out, out / "ENVIRONMENT.txt", "new\n")
    assert victim.read_text() == "keep me\n"
    assert not (out / "ENVIRONMENT.txt").is_symlink() and (out / "ENVIRONMENT.txt").read_text() == "new\n"
    # a dangling link too: its target is never created
    (out / "x.log").symlink_to(tmp_path / "nowhere")
    runfiles.write(out, out / "x.log", "log\n")
    assert not (tmp_path / "nowhere").exists() and (out / "x.log").read_text() == "log\n"


def test_place_moves_a_file_over_a_link_and_refuses_folders_and_links_as_sources(tmp_path):
    out = tmp_path / "results"
    (out / "executed").mkdir(parents=True)
    victim = tmp_path / "victim.ipynb"
    victim.write_text("{}")
    (out / "executed" / "00.ipynb").symlink_to(victim)
    src = tmp_path / "src.ipynb"
    src.write_text('{"new": 1}')
    runfiles.place(out, src, out / "executed" / "00.ipynb")
    assert victim.read_text() == "{}" and (out / "executed" / "00.ipynb").read_text() == '{"new": 1}'
    (out / "executed" / "01.ipynb").mkdir()
    src.write_text("x")
    with pytest.raises(ValidationError, match="not a regular file"):
        runfiles.place(out, src, out / "executed" / "01.ipynb")
    link = tmp_path / "link"
    link.symlink_to(victim)
    with pytest.raises(ValidationError, match="not a regular file"):
        runfiles.place(out, link, out / "executed" / "02.ipynb")


@pytest.mark.parametrize("where", ["out", "sub", "deep"])
def test_a_folder_on_the_way_that_is_a_link_is_refused(tmp_path, where):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "results"
    if where == "out":
        out.symlink_to(elsewhere)
        dest = out / "ENVIRONMENT.txt"
    else:
        out.mkdir()
        (out / "executed").symlink_to(elsewhere) if where == "sub" else None
        if where == "deep":
            (out / "executed").mkdir()
            (out / "executed" / "logs").symlink_to(elsewhere)
            dest = out / "executed" / "logs" / "00.log"
        else:
            dest = out / "executed" / "00.log"
    with pytest.raises(ValidationError, match="symbolic link"):
        runfiles.write(out, dest, "x")
    assert list(elsewhere.iterdir()) == []


def test_a_path_outside_the_output_folder_is_refused(tmp_path):
    with pytest.raises(ValidationError, match="outside the run's output folder"):
        runfiles.write(tmp_path / "results", tmp_path / "other.txt", "x")


def test_markers_accumulate_and_a_notebook_leaves_when_it_completes(tmp_path):
    out = tmp_path / "results"
    out.mkdir()
    assert runfiles.unfinished(out) == []
    runfiles.mark(out, ["notebooks/01_a.ipynb", "notebooks/02_b.ipynb"])
    runfiles.mark(out, ["notebooks/03_c.ipynb"])  # a later run keeps what the first left unfinished
    assert runfiles.unfinished(out) == ["notebooks/01_a.ipynb", "notebooks/02_b.ipynb", "notebooks/03_c.ipynb"]
    runfiles.done(out, "notebooks/02_b.ipynb")
    assert runfiles.unfinished(out) == ["notebooks/01_a.ipynb", "notebooks/03_c.ipynb"]
    assert (out / runfiles.MARKER).read_text().startswith("run started ")
    runfiles.done(out, "notebooks/01_a.ipynb")
    runfiles.done(out, "notebooks/03_c.ipynb")
    assert not (out / runfiles.MARKER).exists()


@pytest.mark.parametrize("kind", ["link", "folder"])
def test_a_marker_that_is_not_a_regular_file_is_refused_in_one_line(tmp_path, kind):
    out = tmp_path / "results"
    out.mkdir()
    if kind == "link":
        (tmp_path / "victim").write_text("notebooks/00_x.ipynb\n")
        (out / runfiles.MARKER).symlink_to(tmp_path / "victim")
    else:
        (out / runfiles.MARKER).mkdir()
    r = subprocess.run([sys.executable, "-m", "spinlib.runfiles", "unfinished", str(out)], capture_output=True,
                       text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "not a regular file" in r.stderr


@pytest.mark.parametrize("argv", [[], ["bogus"], ["write", "only-one"], ["mark"], ["place", "a", "b"]])
def test_bad_command_lines_are_one_line_exit_2(argv):
    assert runfiles.main(argv) == 2


def test_environment_names_the_commit_and_every_recorded_package():
    text = runfiles.environment_text()
    assert text.splitlines()[0].startswith("python 3.")
    assert any(line.startswith("git commit ") for line in text.splitlines())
    for p in runfiles.RECORDED_PACKAGES:
        assert any(line.startswith(f"{p} ") for line in text.splitlines()), p


# ----------------------------------------------------------------- run_all.sh itself, on a tiny project

def _project(tmp_path, names):
    import nbformat

    proj = tmp_path / "proj"
    (proj / "notebooks").mkdir(parents=True)
    shutil.copy(ROOT / "run_all.sh", proj / "run_all.sh")
    for name, body in names.items():
        nb = nbformat.v4.new_notebook()
        params = nbformat.v4.new_code_cell("SMOKE = False\nRECOMPUTE = False")
        params.metadata["tags"] = ["parameters"]
        nb.cells = [params, nbformat.v4.new_code_cell(body)]
        nb.metadata["kernelspec"] = {"name": "spinlib", "display_name": "Python (spinlib)", "language": "python"}
        nbformat.write(nb, proj / "notebooks" / f"{name}.ipynb")
    env = dict(os.environ, SPINLIB_NO_LOCK="1", VIRTUAL_ENV=str(sys.prefix),
               PATH=f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}")
    env.pop("SPINLIB_RESULTS", None)
    return proj, env


def _run(proj, env, *args):
    return subprocess.run(["bash", "run_all.sh", "--smoke", *args], cwd=proj, env=env, capture_output=True,
                          text=True, timeout=600)


#: every file run_all.sh writes in a run's output folder, by pattern (a new one must be declared here: the
#: campaign below plants a link at each and fails on a file it does not know)
RUN_FILES = ("ENVIRONMENT.txt", "RUN_INCOMPLETE", "executed/{nb}.ipynb", "executed/{nb}.log",
             "executed/{nb}.failed.ipynb", "timings/notebooks.json", "claims.json")
#: those of them a run reads before it rewrites them
READ_FIRST = ("RUN_INCOMPLETE", "timings/notebooks.json")


@pytest.mark.campaign
def test_run_all_writes_none_of_its_files_through_a_planted_link(tmp_path):
    """A link planted at every file run_all.sh writes (a passing and a failing notebook): each target is
    left as it was, each file is a regular file afterwards, and nothing else appears in the output folder."""
    proj, env = _project(tmp_path, {"97_ok": "print('ok')", "98_fails": "raise RuntimeError('boom')"})
    out = proj / "results" / "smoke"
    (out / "executed").mkdir(parents=True)
    (out / "timings").mkdir()
    victims = {}
    for nb in ("97_ok", "98_fails"):
        for pattern in RUN_FILES:
            rel = pattern.format(nb=nb)
            victim = tmp_path / "victims" / rel.replace("/", "_")
            victim.parent.mkdir(exist_ok=True)
            victim.write_text("victim\n")
            if not (out / rel).is_symlink():
                (out / rel).symlink_to(victim)
            victims[rel] = victim
    # the files a run reads before it rewrites them (the marker, the run-time record) are refused as links: the
    # run stops in one line (fail closed), the target untouched; every other file's link is replaced
    for rel in READ_FIRST:
        others = [f for f in READ_FIRST if f != rel]
        for f in others:
            (out / f).rename(out / (f + ".aside"))
        r = _run(proj, env, "--only", "97")
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and rel in r.stderr, r.stderr[-2000:]
        for f in others:
            (out / (f + ".aside")).rename(out / f)
    for rel in READ_FIRST:
        (out / rel).unlink()
    r = _run(proj, env, "--only", "97")
    assert r.returncode == 0, r.stderr[-2000:]
    r = _run(proj, env, "--only", "98")
    assert r.returncode == 1 and "boom" in r.stderr, r.stderr[-2000:]
    for rel, victim in victims.items():
        assert victim.read_text() == "victim\n", f"{rel}: written through the planted link"
    for rel in ("ENVIRONMENT.txt", "RUN_INCOMPLETE", "executed/97_ok.ipynb", "executed/97_ok.log",
                "executed/98_fails.log", "executed/98_fails.failed.ipynb", "timings/notebooks.json", "claims.json"):
        assert (out / rel).is_file() and not (out / rel).is_symlink(), rel
    known = {p.format(nb=nb) for p in RUN_FILES for nb in ("97_ok", "98_fails")}
    made = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() or p.is_symlink()}
    assert made <= known, f"run_all.sh wrote files the campaign does not declare: {sorted(made - known)}"
    assert not [p for p in (out / "executed").iterdir() if p.name.startswith(".running-")]


@pytest.mark.campaign
def test_run_all_refuses_an_output_folder_below_a_link(tmp_path):
    proj, env = _project(tmp_path, {"97_ok": "print('ok')"})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = proj / "results" / "smoke"
    out.mkdir(parents=True)
    (out / "executed").symlink_to(elsewhere)
    r = _run(proj, env, "--only", "97")
    assert r.returncode == 2 and "symbolic link" in r.stderr, r.stderr[-2000:]
    assert list(elsewhere.iterdir()) == []


@pytest.mark.campaign
def test_an_unfinished_notebook_is_reported_at_the_start_and_end_of_every_later_run(tmp_path):
    proj, env = _project(tmp_path, {"97_ok": "print('ok')", "99_other": "print('other')"})
    out = proj / "results" / "smoke"
    out.mkdir(parents=True)
    runfiles.mark(out, ["notebooks/99_other.ipynb"])
    for _ in range(2):  # reported by each later run, not once
        r = _run(proj, env, "--only", "97")
        assert r.returncode == 0, r.stderr[-2000:]
        reports = [line for line in r.stderr.splitlines() if "left unfinished" in line]
        assert len(reports) == 2 and all("99_other" in line for line in reports), r.stderr
    r = _run(proj, env, "--only", "99")  # reported at its start, not at its end: it has completed
    assert r.returncode == 0 and len([line for line in r.stderr.splitlines() if "left unfinished" in line]) == 1
    r = _run(proj, env, "--only", "97")
    assert "left unfinished" not in r.stderr and not (out / runfiles.MARKER).exists()
