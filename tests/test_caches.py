"""Caches are verified before they are trusted (issue 12): model caches carry size + sha256 and the
expected tensors, measurement JSONL lines are validated, summaries of another configuration or
unreadable ones are recomputed, and new measurements go to an untracked folder by default."""
import json
import warnings

import numpy as np
import pytest

from spinlib.paths import ROOT
from spinlib.validation import ValidationError
from spinlib.sd import measure as M
from spinlib.sd import models as MD


def make_cache(folder):
    folder.mkdir()
    (folder / "config.json").write_text('{"a": 1}')
    (folder / "model.safetensors").write_bytes(b"x" * 1000)
    MD.write_manifest(folder)
    return folder


def test_target_cache_manifest_detects_truncation_emptiness_and_tampering(tmp_path):
    f = make_cache(tmp_path / "m")
    assert MD.cache_problem(f) is None
    (f / "model.safetensors").write_bytes(b"x" * 10)  # truncated
    assert "bytes" in MD.cache_problem(f)
    (f / "model.safetensors").write_bytes(b"y" * 1000)  # same size, other content
    assert "sha256" in MD.cache_problem(f)
    (f / "model.safetensors").write_bytes(b"")  # empty
    assert MD.cache_problem(f) is not None
    (f / "model.safetensors").unlink()
    assert "missing" in MD.cache_problem(f)
    g = make_cache(tmp_path / "g")
    (g / MD.MANIFEST).unlink()  # an interrupted conversion leaves no manifest
    assert "manifest" in MD.cache_problem(g)
    (g / MD.MANIFEST).write_text("[1, 2]")
    assert MD.cache_problem(g) is not None


def test_target_cache_manifest_covers_every_file_and_is_itself_hashed(tmp_path):
    """Issue 24: a file outside the manifest, a trimmed or edited manifest, or a duplicate key in it,
    is a fault (the cache is rebuilt), never loaded."""
    f = make_cache(tmp_path / "m")
    (f / "extra.safetensors").write_bytes(b"z" * 8)  # a file the conversion did not write
    assert "not in its manifest" in MD.cache_problem(f)
    (f / "extra.safetensors").unlink()
    doc = json.loads((f / MD.MANIFEST).read_text())
    trimmed = {"files": {"config.json": doc["files"]["config.json"]}, "sha256": doc["sha256"]}
    (f / MD.MANIFEST).write_text(json.dumps(trimmed))  # trimmed manifest, its digest not updated
    assert MD.cache_problem(f) is not None
    doc2 = {"files": {**doc["files"], "model.safetensors": {"size": 1000, "sha256": "0" * 64}}, "sha256": doc["sha256"]}
    (f / MD.MANIFEST).write_text(json.dumps(doc2))  # an edited entry
    assert "own sha256" in MD.cache_problem(f)
    text = json.dumps(doc)
    (f / MD.MANIFEST).write_text(text[:-1] + ', "sha256": "x"}')  # a repeated key
    assert "manifest" in MD.cache_problem(f)
    (f / MD.MANIFEST).write_text(json.dumps(doc))
    assert MD.cache_problem(f) is None


def test_draft_cache_record_detects_every_fault(tmp_path):
    import torch
    from safetensors.torch import save_file

    path = tmp_path / "d.safetensors"
    record = tmp_path / "d.safetensors.json"
    expected = {"layers.0.mlp.w": (2, 3), "layers.0.self_attn.q": (4,)}
    save_file({"layers.0.mlp.w": torch.zeros(2, 3), "layers.0.self_attn.q": torch.ones(4)}, str(path))
    made = {"draft": "x@rtn3g16", "target": "x", "bits": 3, "group_size": 16}
    record.write_text(json.dumps({**MD.file_record(path), "made_from": made, "tensors": {}}))
    assert MD._draft_problem(path, record, expected, made) is None
    other = {**made, "draft": "x@rtn6g16", "bits": 6}  # a draft cache copied from another pair, with its record
    assert "made from" in MD._draft_problem(path, record, expected, other)
    assert "missing" in MD._draft_problem(path, record, {**expected, "layers.1.mlp.w": (2, 3)}, made)
    assert "shapes" in MD._draft_problem(path, record, {**expected, "layers.0.mlp.w": (3, 2)}, made)
    save_file({"layers.0.mlp.w": torch.zeros(2, 3)}, str(path))  # a file missing a tensor, stale record
    assert "bytes" in MD._draft_problem(path, record, expected, made) or "sha256" in MD._draft_problem(path, record, expected, made)
    record.write_text(json.dumps({**MD.file_record(path), "made_from": made}))  # record matches, tensors do not
    assert "missing" in MD._draft_problem(path, record, expected, made)
    path.write_bytes(b"")  # the issue's empty .safetensors
    assert MD._draft_problem(path, record, expected, made) is not None
    record.write_text(json.dumps({**MD.file_record(path), "made_from": made}))
    assert "unreadable" in MD._draft_problem(path, record, expected, made)
    record.unlink()
    assert "record" in MD._draft_problem(path, record, expected, made)


@pytest.mark.real_models
def test_broken_draft_cache_is_rebuilt_not_trusted(tmp_path, monkeypatch):
    """The issue's finding: an empty draft .safetensors made the draft equal the target (alpha = 1).
    Now the cache fails its check, is rebuilt with a warning, and the draft differs from the target."""
    import torch

    real = MD.cache_dir()
    MD.load_target("smollm2-135m-instruct")  # build/verify the real target cache first
    monkeypatch.setenv("SPINLIB_MODEL_CACHE", str(tmp_path))
    (tmp_path / "smollm2-135m-instruct").symlink_to(real / "smollm2-135m-instruct")
    (tmp_path / "drafts").mkdir()
    pair = MD.get_pair("smollm2-rtn3g16")
    bad = tmp_path / "drafts" / f"{pair.draft}.safetensors"
    bad.write_bytes(b"")
    MD._LOADED.pop(("draft", pair.draft), None)
    with pytest.warns(UserWarning, match="failed its check"):
        target, draft, _ = MD.load_pair(pair.name)
    MD._LOADED.pop(("draft", pair.draft), None)
    t = dict(target.named_parameters())
    changed = [k for k, v in draft.named_parameters() if MD._quantised(k) and not torch.equal(v, t[k])]
    assert len(changed) > 10
    assert MD._draft_problem(bad, bad.with_name(bad.name + ".json"),
                             {k: tuple(v.shape) for k, v in draft.state_dict().items() if MD._quantised(k)},
                             {"draft": pair.draft, "target": pair.target, "bits": pair.draft_bits,
                              "group_size": pair.group_size}) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a verified cache loads without a warning
        MD.load_pair(pair.name)
    MD._LOADED.pop(("draft", pair.draft), None)


# the configuration measure_pair("smollm2-rtn6", "qa", n_prompts=1, max_new_tokens=4) keys its files by
MEASURE_CFG = {"pair": "smollm2-rtn6", "task": "qa", "n_prompts": 1, "max_new_tokens": 4, "seed": 0,
               "temperatures": [0.0, 1.0], "L_values": [1, 2, 3, 4, 5, 6, 7, 8], "engine_prompts": 2, "version": 1}
GOOD_BETA = {"kind": "beta", "question_id": 3, "temperature": 0.0, "L": None, "beta": [1.0, 0.5]}
GOOD_ENGINE = {"kind": "engine", "question_id": 3, "temperature": 1.0, "L": 2, "tokens_per_round": 1.5,
               "rounds": [[2, 1, 100, 10]]}


@pytest.mark.parametrize("line,field", [
    ("{}", "kind"),
    ("[]", "<line>"),
    ('"text"', "<line>"),
    (json.dumps({**GOOD_BETA, "kind": "bta"}), "kind"),
    (json.dumps({**GOOD_BETA, "question_id": "3"}), "question_id"),
    (json.dumps({**GOOD_BETA, "temperature": float("nan")}).replace("NaN", "NaN"), "temperature"),
    (json.dumps({**GOOD_BETA, "beta": [1.5]}), "beta"),
    (json.dumps({**GOOD_BETA, "beta": "0.5"}), "beta"),
    (json.dumps({**GOOD_ENGINE, "L": 0}), "L"),
    (json.dumps({**GOOD_ENGINE, "tokens_per_round": None}), "tokens_per_round"),
    (json.dumps({**GOOD_ENGINE, "rounds": [[1, 2]]}), "rounds"),
    ("not json", "<line>"),
])
def test_measurement_jsonl_bad_lines_are_one_line_errors(tmp_path, line, field):
    p = tmp_path / "m.jsonl"
    p.write_text(json.dumps(GOOD_BETA) + "\n" + line + "\n" + json.dumps(GOOD_ENGINE) + "\n")
    with pytest.raises(ValidationError) as e:
        M.read_records(p)
    msg = str(e.value)
    assert "\n" not in msg and f"{p}:2" in msg and repr(field) in msg


def test_measurement_jsonl_torn_last_line_is_redone(tmp_path):
    p = tmp_path / "m.jsonl"
    p.write_text(json.dumps(GOOD_BETA) + "\n" + json.dumps(GOOD_ENGINE)[:20])
    done = M.read_records(p)
    assert list(done) == [("beta", 3, 0.0, None)]


def test_committed_measurements_pass_the_checks():
    files = sorted((ROOT / "data" / "measurements").rglob("*.jsonl"))
    assert files
    for f in files:
        assert M.read_records(f)
        summ = M.read_summary(f.with_name(f.name.replace(".jsonl", ".summary.json")))
        assert summ is not None and summ["config"]["pair"] == f.parent.name


def test_summary_of_another_configuration_or_corrupt_is_not_trusted(tmp_path, monkeypatch):
    """measure_pair recomputes (warning) when the summary is corrupt or belongs to another config;
    stopped right after the check by a sentinel so that no model is loaded."""
    class Stop(Exception):
        pass

    def boom(*a, **k):
        raise Stop

    monkeypatch.setattr(MD, "load_pair", boom)
    from spinlib.cache import config_key
    cfg = MEASURE_CFG
    summ = tmp_path / "smollm2-rtn6" / f"qa-{config_key(cfg, 12)}.summary.json"
    summ.parent.mkdir()
    real = json.loads(next((ROOT / "data" / "measurements" / "smollm2-rtn6").glob("qa-*.summary.json")).read_text())
    no_timing = {k: v for k, v in real.items() if k != "timing"}
    # corrupt, another configuration, or this configuration without the fields every reader checks
    # (spinlib.measurements.read_measured_summary, the one check): recomputed
    for content in ("[1]", "{broken", json.dumps({**real, "config": {**cfg, "seed": 1}}),
                    json.dumps({"config": cfg, "ok": True}), json.dumps({**no_timing, "config": cfg})):
        summ.write_text(content)
        with pytest.warns(UserWarning, match="recomputing"), pytest.raises(Stop):
            M.measure_pair("smollm2-rtn6", "qa", n_prompts=1, max_new_tokens=4, out_dir=tmp_path)
    summ.write_text(json.dumps({**real, "config": cfg, "ok": True}))
    assert M.measure_pair("smollm2-rtn6", "qa", n_prompts=1, max_new_tokens=4, out_dir=tmp_path)["ok"]


def test_new_measurements_default_to_an_untracked_folder():
    d = M.default_measurement_dir()
    assert d == ROOT / ".cache" / "measurements"
    ignored = (ROOT / ".gitignore").read_text().split()
    assert ".cache/" in ignored


@pytest.mark.campaign
def test_retime_replaces_only_the_timing_block(tmp_path):
    """``measure --retime``: a committed summary gets a timing block with spread, load checks and the
    fit's residuals; its acceptance part and config are untouched."""
    import shutil
    import subprocess
    import sys

    src = sorted((ROOT / "data" / "measurements" / "smollm2-rtn6").glob("qa-*.summary.json"))[0]
    dst = tmp_path / "smollm2-rtn6" / src.name
    dst.parent.mkdir()
    shutil.copy(src, dst)
    before = json.loads(src.read_text())
    r = subprocess.run([sys.executable, "-m", "spinlib", "measure", "--retime", str(tmp_path), "--threads", "1",
                        "--allow-busy", "--json"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(r.stdout)["retimed"]
    after = json.loads(dst.read_text())
    assert {k: v for k, v in after.items() if k != "timing"} == {k: v for k, v in before.items() if k != "timing"}
    t = after["timing"]
    assert t["threads"] == 1 and row["verify_t0_s"] == t["verify_t0_s"]
    for key in ("draft_spread", "target_spread", "load_before", "load_after", "verify_fit", "reliable"):
        assert key in t, key
    assert t["draft_spread"]["q25_s"] <= t["draft_s_per_token"] <= t["draft_spread"]["q75_s"]
    assert t["verify_fit"]["rms_residual_s"] >= 0 and len(t["verify_fit"]["q25_s"]) == len(t["verify_sizes"])


@pytest.mark.campaign
@pytest.mark.parametrize("args,match", [
    (["--retime", "nowhere", "--allow-busy"], "neither a summary file nor a folder"),
    (["--retime", "data/measurements", "--pair", "smollm2-rtn6"], "--retime takes the pair and task from each summary"),
    (["--task", "qa"], "--pair is required"),
])
def test_measure_arguments_are_one_line_errors(args, match):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "spinlib", "measure", *args], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and match in r.stderr, r.stderr


def test_committed_results_cache_entries_are_whole_and_keyed():
    """The results cache is committed (results/cache/: a fresh clone's run reuses the studies of the committed
    run instead of recomputing them for hours). Every entry must be one ``cached`` would trust
    (:func:`spinlib.cache.read_entry`: the four fields, a file name that is its key and a value whose sha256
    is the recorded one), so an edited, torn or renamed entry cannot pass for a result."""
    from spinlib.cache import read_entry

    entries = sorted((ROOT / "results" / "cache").glob("*.json"))
    assert entries, "results/cache/ holds no entry"
    assert [p.name for p in entries if read_entry(p) is None] == []


def test_read_entry_refuses_edited_torn_and_renamed_entries(tmp_path):
    """read_entry, the trust rule of every cache hit: a whole entry passes; an edited value, a torn file, a
    renamed file and a missing field each fail (generated from one entry written by ``cached``)."""
    from spinlib.cache import cached, read_entry

    cached("study", {"x": 1}, lambda: {"a": [1, 2]}, cache_dir=tmp_path)
    (path,) = tmp_path.glob("*.json")
    good = path.read_text()
    assert read_entry(path)["value"] == {"a": [1, 2]}
    for bad in (good.replace("[1, 2]", "[1, 3]"), good[:-5], good.replace('"value_sha256"', '"digest"')):
        path.write_text(bad)
        assert read_entry(path) is None, bad
    path.write_text(good)
    renamed = path.rename(tmp_path / "study-0000000000000000.json")
    assert read_entry(renamed) is None


def test_cached_records_the_results_cache_entries_it_uses(tmp_path, monkeypatch):
    """used_entries: the entries of the results cache a process read or wrote (hits and misses), and
    nothing from another cache folder; notebook.finish writes them into the provenance."""
    import spinlib.cache as C

    monkeypatch.setattr(C, "CACHE", tmp_path / "results-cache")
    monkeypatch.setattr(C, "_USED", set())
    monkeypatch.delenv("SPINLIB_CACHE_DIR", raising=False)
    rng = np.random.default_rng(np.random.SeedSequence().entropy)
    xs = sorted(set(rng.integers(0, 10**6, 6).tolist()))
    for x in xs:
        C.cached("f", {"x": x}, lambda: x)  # miss
    C.cached("f", {"x": xs[0]}, lambda: xs[0])  # hit
    C.cached("g", {"x": 1}, lambda: 1, cache_dir=tmp_path / "elsewhere")  # another folder: not listed
    assert C.used_entries() == sorted(p.name for p in (tmp_path / "results-cache").glob("*.json"))
    assert len(C.used_entries()) == len(xs)


def test_the_committed_cache_holds_exactly_the_entries_the_committed_run_used():
    """Every committed cache entry is one that a notebook's committed run read or wrote (its provenance's
    cache_entries), and every entry a run used is committed: a fresh clone reruns every notebook from
    the cache, and nothing stale or orphaned (an old version's entry) rides along."""
    from spinlib.notebook import cache_entries_used

    committed = {p.name for p in (ROOT / "results" / "cache").glob("*.json")}
    used = cache_entries_used(ROOT / "results")
    assert not committed - used, sorted(committed - used)
    assert not used - committed, sorted(used - committed)


def test_prune_cache_removes_exactly_the_entries_no_run_used(tmp_path):
    from spinlib.notebook import prune_cache

    rng = np.random.default_rng(np.random.SeedSequence().entropy)
    (tmp_path / "cache").mkdir()
    (tmp_path / "provenance").mkdir()
    names = [f"e{i}-{rng.integers(1 << 40):x}.json" for i in range(12)]
    for n in names:
        (tmp_path / "cache" / n).write_text("{}")
    used = set(rng.choice(names, 7, replace=False).tolist())
    stems = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    with pytest.raises(ValidationError, match=f"notebook {stems[0]} has no provenance record"):
        prune_cache(tmp_path)
    for i, stem in enumerate(stems):  # the used entries spread over the notebooks' records
        (tmp_path / "provenance" / f"{stem}.json").write_text(json.dumps({"cache_entries": sorted(used)[i::len(stems)]}))
    assert prune_cache(tmp_path) == sorted(set(names) - used)
    assert {p.name for p in (tmp_path / "cache").glob("*.json")} == used
    assert prune_cache(tmp_path) == []


def test_retime_reads_a_summary_whose_timing_block_it_replaces_is_broken(tmp_path, monkeypatch):
    """retime_summary replaces the timing block, so a summary whose timing is missing or edited is
    retimed (it reaches the model load, stopped here by a sentinel); a file that is no summary is one line."""
    class Stop(Exception):
        pass

    def boom(*a, **k):
        raise Stop

    monkeypatch.setattr(MD, "load_pair", boom)
    real = json.loads(next((ROOT / "data" / "measurements" / "smollm2-rtn6").glob("qa-*.summary.json")).read_text())
    f = tmp_path / "qa-x.summary.json"
    for timing in (None, {"draft_s_per_token": "slow"}, []):
        doc = {k: v for k, v in real.items() if k != "timing"}
        if timing is not None:
            doc["timing"] = timing
        f.write_text(json.dumps(doc))
        with pytest.raises(Stop):
            M.retime_summary(f)
    for content in ("[1]", "{torn", json.dumps({"config": real["config"]})):
        f.write_text(content)
        with pytest.raises(ValidationError, match="not a measurement summary") as e:
            M.retime_summary(f)
        assert "\n" not in str(e.value)


def test_a_resumed_file_never_pools_two_kernels(tmp_path, monkeypatch):
    """A measurement (or trace) JSONL resumed by a run on another torch kernel than its records' is refused
    in one line naming the field, before any model loads; records of this kernel resume. Generated
    kernels and positions of the foreign record; both writers (measure_pair, record_traces) pass the
    same check to the one reader."""
    from spinlib.online import traces as TR
    from spinlib.sd.kernels import KernelChoice

    rng = np.random.default_rng(np.random.SeedSequence().entropy)
    names = ["fp32", "bf16", "fp32-prepacked"]
    for _ in range(5):
        here, other = rng.choice(names, 2, replace=False).tolist()
        p = tmp_path / f"m-{rng.integers(1 << 30)}.jsonl"
        recs = [dict(GOOD_BETA, question_id=q, kernel=here) for q in range(4)]
        bad = int(rng.integers(0, 4))
        recs[bad] = dict(recs[bad], kernel=other) if rng.random() < 0.5 else {k: v for k, v in recs[bad].items()
                                                                              if k != "kernel"}
        p.write_text("".join(json.dumps(r) + "\n" for r in recs))
        with pytest.raises(ValidationError, match=rf"{p}:{bad + 1}: field 'kernel' must be '{here}'") as e:
            M.read_records(p, same={"kernel": here})
        assert "\n" not in str(e.value)
        assert len(M.read_records(p)) == 4  # reading committed data names no kernel
    good = tmp_path / "good.jsonl"
    good.write_text("".join(json.dumps(dict(GOOD_BETA, question_id=q, kernel="bf16")) + "\n" for q in range(3)))
    assert len(M.read_records(good, same={"kernel": "bf16"})) == 3

    class Loaded(Exception):
        pass

    def sentinel(*a, **k):
        raise Loaded

    monkeypatch.setattr(MD, "load_pair", sentinel)
    monkeypatch.setitem(MD._CHOICES, "smollm2-rtn6", KernelChoice("fp32", "fixed", {}))
    from spinlib.cache import config_key

    m_cfg = MEASURE_CFG
    t_cfg = {"pair": "smollm2-rtn6", "task": "qa", "n_prompts": 1, "max_new_tokens": 4, "temperature": 0.0,
             "version": TR.TRACE_VERSION}
    from spinlib.sd.prompts import load_prompts

    qid = load_prompts("qa", 1)[0]["question_id"]
    trace_line = {"kind": "trace", "question_id": qid, "tokens": [1, 2], "accept": [1, 0], "top_prob": [0.9, 0.5],
                  "entropy": [0.1, 0.2], "accept_prob": [0.8, 0.3]}
    for writer, cfg, line in ((lambda d: M.measure_pair("smollm2-rtn6", "qa", n_prompts=1, max_new_tokens=4, out_dir=d),
                               m_cfg, dict(GOOD_BETA, question_id=qid)),
                              (lambda d: TR.record_traces("smollm2-rtn6", "qa", n_prompts=1, max_new_tokens=4, out_dir=d),
                               t_cfg, trace_line)):
        d = tmp_path / f"out-{rng.integers(1 << 30)}"
        raw = d / "smollm2-rtn6" / f"qa-{config_key(cfg, 12)}.jsonl"
        raw.parent.mkdir(parents=True)
        for kernel, outcome in (("bf16", ValidationError), ("fp32", Loaded)):  # another kernel: refused; this one resumes
            raw.write_text(json.dumps(dict(line, kernel=kernel)) + "\n")
            with pytest.raises(outcome, match=r"field 'kernel' must be 'fp32'" if outcome is ValidationError else None):
                writer(d)
