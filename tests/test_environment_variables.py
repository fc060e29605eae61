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
