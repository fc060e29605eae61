"""spinlib.measurements: the one reader of the committed measurement summaries."""
import json
import shutil

import numpy as np
import pytest

from spinlib.measurements import MeasurementSummary, measured_pairs, read_summaries, summary_task
from spinlib.paths import DATA
from spinlib.presets import MEASURED_PRESETS, measured_acceptance
from spinlib.validation import ValidationError

ROOT = DATA / "measurements"


def test_every_committed_summary_is_read_and_typed():
    pairs = measured_pairs()
    on_disk = sorted({f.parent.name for f in ROOT.glob("*/*.summary.json")})
    assert pairs == on_disk and len(pairs) >= 5
    for pair in pairs:
        got = read_summaries(pair)
        files = sorted((ROOT / pair).glob("*.summary.json"))
        assert [m.path for m in got] == files
        for m in got:
            assert isinstance(m, MeasurementSummary) and m.pair == pair
            assert m.path.name.startswith(m.task + "-") and "-" not in m.path.name[len(m.task) + 1:-len(".summary.json")]
            raw = json.loads(m.path.read_text())
            for T, bt in raw["by_temperature"].items():
                alpha, profile = m.acceptance(float(T))
                assert alpha == bt["alpha"] and list(profile) == bt["prefix_profile"] or np.allclose(
                    profile, bt["prefix_profile"], equal_nan=True)
            fit = m.verify_fit
            want = raw["timing"]["verify_grid"]["fit"] if "verify_grid" in raw["timing"] else {
                "t0_s": raw["timing"]["verify_t0_s"], "t1_s": raw["timing"]["verify_t1_s"]}
            assert fit["t0_s"] == want["t0_s"] and fit["t1_s"] == want["t1_s"]
            assert m.kernel == raw.get("kernel", {}).get("kernel", "fp32")
            assert [x.path for x in read_summaries(pair, m.task)] == [m.path]
            assert m.acceptance(0.5) is None  # never measured at T = 0.5


def test_measured_presets_name_pairs_that_are_measured():
    for pairs, _ in MEASURED_PRESETS.values():
        assert set(pairs) <= set(measured_pairs())


def test_measured_acceptance_is_the_summary_and_a_missing_task_is_one_line():
    raw = json.loads(next((ROOT / "qwen-coder").glob("qa-*.summary.json")).read_text())
    alpha, profile = measured_acceptance("qwen-coder", "qa", 1.0)
    assert alpha == raw["by_temperature"]["1.0"]["alpha"] and list(profile) == raw["by_temperature"]["1.0"]["prefix_profile"]
    with pytest.raises(ValidationError, match="no measurement of pair 'qwen-coder' on task 'nope'"):
        measured_acceptance("qwen-coder", "nope", 1.0)
    assert summary_task("math_reasoning-8a68d86a5d08.summary.json") == "math_reasoning"


@pytest.mark.parametrize("bad", ["", "../qwen-coder", "qwen*", "a/b", "q?", "[q]", ".hidden", 3, None])
def test_a_pair_or_task_that_is_not_a_plain_name_is_one_line(bad):
    with pytest.raises(ValidationError, match="must be a plain name"):
        read_summaries(bad)
    if bad is not None:  # (task None means every task)
        with pytest.raises(ValidationError, match="must be a plain name"):
            read_summaries("qwen-coder", bad)


def test_a_torn_or_edited_summary_is_one_line_naming_the_file(tmp_path):
    # generated cases: every committed summary of a pair, torn at a random byte or with a field edited
    rng = np.random.default_rng(np.random.SeedSequence().entropy)
    src = sorted((ROOT / "qwen-coder").glob("*.summary.json"))
    for f in src:
        for how in ("torn", "alpha", "timing"):
            root = tmp_path / f"{f.stem}-{how}"
            (root / "p").mkdir(parents=True)
            text = f.read_text()
            if how == "torn":
                text = text[: int(rng.integers(1, len(text) - 1))]
            else:
                d = json.loads(text)
                if how == "alpha":
                    d["by_temperature"][next(iter(d["by_temperature"]))]["alpha"] = float(rng.choice([1.5, -0.1]))
                else:
                    del d["timing"]["draft_s_per_token"]
                text = json.dumps(d)
            (root / "p" / f.name).write_text(text)
            with pytest.raises(ValidationError) as e:
                read_summaries("p", root=root)
            assert "\n" not in str(e.value) and f.name in str(e.value), (how, str(e.value))


def test_an_untouched_copy_reads_the_same(tmp_path):
    shutil.copytree(ROOT / "qwen-coder", tmp_path / "qwen-coder")
    a = [m.data for m in read_summaries("qwen-coder")]
    b = [m.data for m in read_summaries("qwen-coder", root=tmp_path)]
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _edits():
    """(name, edit, field named in the refusal): values of the right JSON shape and the wrong meaning."""
    def bt(d):
        return d["by_temperature"][next(iter(d["by_temperature"]))]

    def fit(d):
        tm = d["timing"]
        return tm["verify_grid"]["fit"] if "verify_grid" in tm else tm

    t0 = lambda d: "t0_s" if "verify_grid" in d["timing"] else "verify_t0_s"  # noqa: E731
    t1 = lambda d: "t1_s" if "verify_grid" in d["timing"] else "verify_t1_s"  # noqa: E731
    return [
        ("reliable-as-text", lambda d: d["timing"].__setitem__("reliable", "false"), "timing.reliable"),
        ("reliable-as-number", lambda d: d["timing"].__setitem__("reliable", 0), "timing.reliable"),
        ("t0-as-boolean", lambda d: fit(d).__setitem__(t0(d), True), "t0"),
        ("t0-zero", lambda d: fit(d).__setitem__(t0(d), 0.0), "t0"),
        ("t1-negative", lambda d: fit(d).__setitem__(t1(d), -0.001), "t1"),
        ("t1-infinite", lambda d: fit(d).__setitem__(t1(d), float("inf")), "t1"),
        ("draft-negative", lambda d: d["timing"].__setitem__("draft_s_per_token", -0.05), "draft_s_per_token"),
        ("draft-nan", lambda d: d["timing"].__setitem__("draft_s_per_token", float("nan")), "draft_s_per_token"),
        ("draft-boolean", lambda d: d["timing"].__setitem__("draft_s_per_token", True), "draft_s_per_token"),
        ("profile-nan-first", lambda d: bt(d)["prefix_profile"].__setitem__(0, float("nan")), "prefix_profile"),
        ("profile-above-one", lambda d: bt(d)["prefix_profile"].__setitem__(1, 1.2), "prefix_profile"),
        ("profile-grows", lambda d: bt(d)["prefix_profile"].__setitem__(-1, 0.999), "prefix_profile"),
        ("alpha-boolean", lambda d: bt(d).__setitem__("alpha", True), "alpha"),
        ("ci-outside", lambda d: bt(d).__setitem__("alpha_ci95", [0.0, 0.01]), "alpha_ci95"),
        ("temperature-key", lambda d: d["by_temperature"].__setitem__("hot", bt(d)), "temperatures"),
        ("profile-all-nan", lambda d: bt(d).__setitem__("prefix_profile", [float("nan")] * 3), "prefix_profile"),
        ("profile-empty", lambda d: bt(d).__setitem__("prefix_profile", []), "prefix_profile"),
        ("kernel-not-object", lambda d: d.__setitem__("kernel", "bf16"), "kernel"),
        ("config-edited", lambda d: d["config"].__setitem__("n_prompts", d["config"]["n_prompts"] + 1), "key"),
        ("config-other-task", lambda d: d["config"].__setitem__("task", "other"), "config"),
        ("config-other-pair", lambda d: d["config"].__setitem__("pair", "other"), "config"),
        ("config-missing", lambda d: d.pop("config"), "config"),
    ]


@pytest.mark.parametrize("name, edit, field", _edits(), ids=[e[0] for e in _edits()])
def test_a_summary_of_the_right_shape_and_wrong_meaning_is_one_line(tmp_path, name, edit, field):
    """Committed data is checked for meaning: booleans are booleans, times finite and > 0, profiles
    probabilities that do not grow, intervals around their estimate; every committed summary of
    every measured pair, edited one field at a time, is refused in one line naming the file and field."""
    for pair in measured_pairs():
        for f in sorted((ROOT / pair).glob("*.summary.json")):
            d = json.loads(f.read_text())
            edit(d)
            (tmp_path / pair).mkdir(exist_ok=True)
            (tmp_path / pair / f.name).write_text(json.dumps(d))
            with pytest.raises(ValidationError) as e:
                read_summaries(pair, summary_task(f), root=tmp_path)
            msg = str(e.value)
            assert "\n" not in msg and f.name in msg and field in msg, (name, msg)
            (tmp_path / pair / f.name).unlink()


def test_two_summaries_of_one_task_are_one_line_not_pooled(tmp_path):
    """A second configuration of a task would be pooled into the pair's measured preset: refused."""
    shutil.copytree(ROOT / "qwen-coder", tmp_path / "qwen-coder")
    f = sorted((tmp_path / "qwen-coder").glob("*.summary.json"))[0]
    task = summary_task(f)
    d = json.loads(f.read_text())  # a second, genuine configuration of the task (its own content address)
    d["config"]["n_prompts"] += 1
    from spinlib.cache import config_key
    f.with_name(f"{task}-{config_key(d['config'], 12)}.summary.json").write_text(json.dumps(d))
    for args in (("qwen-coder",), ("qwen-coder", task)):
        with pytest.raises(ValidationError) as e:
            read_summaries(*args, root=tmp_path)
        assert "two measurement summaries" in str(e.value) and task in str(e.value) and "\n" not in str(e.value)
