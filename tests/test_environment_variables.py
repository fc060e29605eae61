"""The library's directory variables: one reader, and an empty or wrong value is one line, never the working directory."""
import pytest
from hypothesis import given, settings, strategies as hs

from spinlib import cache
from spinlib.paths import env_dir
from spinlib.sd import models
from spinlib.validation import ValidationError

VARIABLES = {"SPINLIB_CACHE_DIR": lambda: cache.cached("x", {"a": 1}, lambda: 1),
             "SPINLIB_MODEL_CACHE": models.cache_dir}


@pytest.mark.parametrize("name", sorted(VARIABLES))
@settings(max_examples=20, deadline=None)
@given(blank=hs.text(alphabet=" \t", max_size=4))
def test_an_empty_directory_variable_is_one_line(name, blank):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(name, blank)
        with pytest.raises(ValidationError) as e:
            VARIABLES[name]()
        assert name in str(e.value) and "empty" in str(e.value) and "\n" not in str(e.value)


def test_a_file_is_not_a_directory(tmp_path, monkeypatch):
    f = tmp_path / "f"
    f.write_text("x")
    monkeypatch.setenv("SPINLIB_MODEL_CACHE", str(f))
    with pytest.raises(ValidationError, match="must name a directory"):
        models.cache_dir()
    monkeypatch.delenv("SPINLIB_MODEL_CACHE")
    assert env_dir("SPINLIB_MODEL_CACHE", tmp_path / "d") == tmp_path / "d"
    monkeypatch.setenv("SPINLIB_CACHE_DIR", str(tmp_path / "c"))
    assert cache.cached("x", {"a": 1}, lambda: 7) == 7 and list((tmp_path / "c").glob("x-*.json"))


@settings(max_examples=40, deadline=None)
@given(value=hs.text(hs.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)
             | hs.sampled_from(["fp32", "bf16", "fp32-prepacked", "", " "]))
def test_a_kernel_variable_naming_no_kernel_is_one_line_for_every_pair(value):
    """$SPINLIB_KERNEL is read in one place (spinlib.sd.kernels.forced_kernel) for every pair: a value
    that names no kernel is one line whether the pair measures its kernel or has a fixed one, and a
    valid value that a fixed-kernel pair would ignore is refused too."""
    from spinlib.sd.kernels import CANDIDATES

    fixed = [n for n, p in models.PAIRS.items() if p.kernel != "auto"]
    assert fixed  # the pairs that once ignored the variable
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SPINLIB_KERNEL", value)
        for name in fixed:
            kernel = models.PAIRS[name].kernel
            if value == kernel:
                assert models.pair_kernel(name).kernel == kernel
                continue
            with pytest.raises(ValidationError) as e:
                models.pair_kernel(name)
            msg = str(e.value)
            assert "SPINLIB_KERNEL" in msg and "\n" not in msg
            assert ("must be one of" in msg) == (value not in CANDIDATES)


# ----------------------------------------------------------------- every variable, by declaration

def _probe_subprocess(name):
    """Import the library with ``$name`` set, in a fresh process (it is read when spinlib is imported)."""
    def probe(value):
        import os
        import subprocess
        import sys

        r = subprocess.run([sys.executable, "-c", "import spinlib"], capture_output=True, text=True,
                           env={**os.environ, name: value})
        if r.returncode:
            assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and name in r.stderr, r.stderr
            raise ValidationError(r.stderr.strip())
    return probe


def _figure_check(value):
    import matplotlib

    matplotlib.use("agg")
    import matplotlib.pyplot as plt

    from spinlib.plotting import save_figure
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SPINLIB_FIGURE_CHECK", value)
        fig = plt.figure()
        try:
            save_figure(fig, "x", directory=__import__("tempfile").mkdtemp())
        finally:
            plt.close(fig)


def _with(name, fn):
    def probe(value):
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv(name, value)
            fn()
    return probe


def _scheduler():
    from spinlib.study import scheduler_address
    scheduler_address()


def _quiet():
    from spinlib.paths import quiet
    quiet()


#: every SPINLIB_* variable the library or run_all.sh reads: how a bad value is probed (None: why it is not), and
#: values that must be refused in one line naming the variable. A variable found in the sources and not declared here
#: fails the test below.
DECLARED = {
    "SPINLIB_RESULTS": (_probe_subprocess("SPINLIB_RESULTS"), ["", " ", "README.md"]),
    "SPINLIB_CACHE_DIR": (_with("SPINLIB_CACHE_DIR", VARIABLES["SPINLIB_CACHE_DIR"]), ["", "\t"]),
    "SPINLIB_MODEL_CACHE": (_with("SPINLIB_MODEL_CACHE", VARIABLES["SPINLIB_MODEL_CACHE"]), ["", " "]),
    "SPINLIB_NO_PROGRESS": (_with("SPINLIB_NO_PROGRESS", _quiet), ["", "yes", "true", "2", " 1"]),
    "SPINLIB_DASK_SCHEDULER": (_with("SPINLIB_DASK_SCHEDULER", _scheduler), ["", " ", "localhost", "tcp://", "x y:1"]),
    "SPINLIB_FIGURE_CHECK": (_figure_check, ["", "off", "RAISE"]),
    "SPINLIB_KERNEL": (None, "test_a_kernel_variable_naming_no_kernel_is_one_line_for_every_pair"),
    "SPINLIB_PLUGINS": (None, "a path list: empty items name no file (an empty value loads none); a named file that "
                              "is not a .py file is one line (tests/test_cli.py)"),
    "SPINLIB_NO_LOCK": (None, "run_all.sh's own: a value other than 1 is refused (test_run_all_refuses_bad_variables)"),
    "SPINLIB_RUN_LOCK_HELD": (None, "set by run_all.sh for the runs it starts itself, never by a user"),
}


def test_every_variable_the_sources_read_is_declared():
    import re

    from spinlib.paths import ROOT
    text = "\n".join(p.read_text() for p in (ROOT / "spinlib").rglob("*.py")) + (ROOT / "run_all.sh").read_text()
    found = set(re.findall(r"SPINLIB_[A-Z_]+[A-Z]", text))
    assert found == set(DECLARED), (sorted(found - set(DECLARED)), sorted(set(DECLARED) - found))


@pytest.mark.parametrize("name", sorted(n for n, (probe, _) in DECLARED.items() if probe is not None))
def test_a_bad_value_of_every_declared_variable_is_one_line(name):
    probe, bad = DECLARED[name]
    for value in bad:
        with pytest.raises(ValidationError) as e:
            probe(value)
        assert name in str(e.value) and "\n" not in str(e.value).strip(), (value, str(e.value))


def test_good_values_still_read():
    from spinlib.paths import quiet
    from spinlib.study import scheduler_address
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SPINLIB_NO_PROGRESS", "1")
        assert quiet()
        mp.setenv("SPINLIB_NO_PROGRESS", "0")
        assert not quiet()
        mp.delenv("SPINLIB_NO_PROGRESS")
        assert not quiet()
        for v in ("tcp://127.0.0.1:8786", "scheduler.local:8786", "tls://[::1]:8786"):
            mp.setenv("SPINLIB_DASK_SCHEDULER", v)
            assert scheduler_address() == v
        mp.delenv("SPINLIB_DASK_SCHEDULER")
        assert scheduler_address() is None


@pytest.mark.parametrize("name,value", [("SPINLIB_RESULTS", ""), ("SPINLIB_RESULTS", "  "), ("SPINLIB_NO_LOCK", "0"),
                                        ("SPINLIB_NO_LOCK", "")])
def test_run_all_refuses_bad_variables(name, value):
    import os
    import subprocess

    from spinlib.paths import ROOT
    r = subprocess.run(["bash", str(ROOT / "run_all.sh"), "--only", "00"], capture_output=True, text=True,
                       env={**os.environ, name: value}, timeout=60)
    assert r.returncode == 2 and name in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
