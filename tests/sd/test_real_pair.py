"""The Qwen2.5-Coder pair (0.5B draft, 1.5B target) and the machinery that makes it trustworthy:
chunk assembly with size and sha256 checks, the measured kernel choice, and losslessness stated for
the precision used (greedy against the target's own greedy decoding on the same kernel; the first
committed token's law by chi-square on the real 151,936-token distributions).

The chunk and kernel tests run in the fast tier on generated inputs; the tests that load the real
pair are marked ``real_models`` (about a minute once the model cache is built)."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from spinlib.validation import ValidationError
from spinlib.sd import kernels as KN
from spinlib.sd import models as MD


# ------------------------------------------------------------------ chunk assembly (fast, generated)
def _fake_model(monkeypatch, tmp_path, parts: list[bytes], sha: str | None = None, size: int | None = None):
    import hashlib

    files = []
    for i, b in enumerate(parts, 1):
        f = tmp_path / f"chunk{i:02d}.bin"
        f.write_bytes(b)
        files.append(f)
    blob = b"".join(parts)
    spec = MD.PackagedModel("fake", "fake-part1", "", "pip install fake", True, 10, "none",
                            tuple(f"fake-part{i}" for i in range(1, len(parts) + 1)),
                            len(blob) if size is None else size,
                            hashlib.sha256(blob).hexdigest() if sha is None else sha)
    monkeypatch.setitem(MD.PACKAGED, "fake", spec)
    monkeypatch.setattr(MD, "chunk_files", lambda model: files)
    return blob


@settings(max_examples=25, deadline=None)
@given(st.lists(st.binary(min_size=0, max_size=300), min_size=1, max_size=6))
def test_assembly_concatenates_in_part_order_and_checks(parts):
    import tempfile

    with tempfile.TemporaryDirectory() as d, pytest.MonkeyPatch.context() as mp:
        d = __import__("pathlib").Path(d)
        blob = _fake_model(mp, d, parts)
        out = MD.assemble_chunks("fake", d / "gguf" / "fake.gguf")
        assert out.read_bytes() == blob
        # a second call trusts the verified file (same inode, not rewritten)
        ino = out.stat().st_ino
        assert MD.assemble_chunks("fake", out).stat().st_ino == ino


@settings(max_examples=25, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=200), min_size=1, max_size=5), st.sampled_from(["sha", "size"]))
def test_a_mismatch_is_one_line_and_leaves_nothing(parts, which):
    import tempfile

    with tempfile.TemporaryDirectory() as d, pytest.MonkeyPatch.context() as mp:
        d = __import__("pathlib").Path(d)
        _fake_model(mp, d, parts, **({"sha": "0" * 64} if which == "sha" else {"size": sum(map(len, parts)) + 1}))
        target = d / "gguf" / "fake.gguf"
        with pytest.raises(ValidationError, match=r"expected .*\(reinstall: pip install fake\)") as e:
            MD.assemble_chunks("fake", target)
        assert "\n" not in str(e.value)
        assert not target.exists() and list(target.parent.iterdir()) == []


def test_a_corrupt_or_linked_assembly_is_rebuilt_never_followed(monkeypatch, tmp_path):
    blob = _fake_model(monkeypatch, tmp_path, [b"abc" * 50, b"xyz" * 7])
    target = tmp_path / "gguf" / "fake.gguf"
    MD.assemble_chunks("fake", target)
    target.write_bytes(b"abc" * 50 + b"xyZ" * 7)  # same size, one byte flipped
    with pytest.warns(UserWarning, match="failed its check"):
        MD.assemble_chunks("fake", target)
    assert target.read_bytes() == blob
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    target.unlink()
    target.symlink_to(victim)
    with pytest.warns(UserWarning, match="failed its check"):
        MD.assemble_chunks("fake", target)
    assert victim.read_text() == "keep me" and not target.is_symlink() and target.read_bytes() == blob


def test_the_pinned_packages_are_the_ones_bootstrap_installs():
    """run_all.sh installs exactly the chunk packages PACKAGED names, at the pinned versions."""
    import re
    import subprocess

    script = (MD.ROOT / "run_all.sh").read_text()
    block = script[script.index("MODEL_PACKAGES="):script.index("stamp_of()")]
    out = subprocess.run(["bash", "-c", block + '\necho "$MODEL_PACKAGES"'], capture_output=True,
                         text=True, check=True).stdout.split()
    for model in ("qwen2.5-coder-1.5b-instruct", "qwen2.5-coder-0.5b-instruct"):
        spec = MD.PACKAGED[model]
        pinned = [p for p in spec.install.split() if "==" in p]
        assert [p.split("==")[0] for p in pinned] == list(spec.chunks)
        assert set(pinned) <= set(out)
        assert re.fullmatch(r"[0-9a-f]{64}", spec.sha256) and spec.size > 0


# ------------------------------------------------------------------ kernels (fast)
def test_kernel_names_are_checked():
    for bad in ("fp16", "", "BF16"):
        with pytest.raises(ValidationError, match="kernel must be one of"):
            KN.check_kernel(bad)


def test_every_kernel_computes_the_same_linear_map():
    torch.manual_seed(0)
    base = torch.nn.Sequential(torch.nn.Linear(24, 40), torch.nn.SiLU(), torch.nn.Linear(40, 8, bias=False))
    x = torch.randn(3, 5, 24)
    ref = base(x)
    import copy

    for k, tol in (("fp32", 0.0), ("fp32-prepacked", 1e-5), ("bf16", 5e-2)):
        m = KN.apply_kernel(copy.deepcopy(base), k)
        y = m(x.to(KN.dtype_of(k))).float()
        ref = ref.detach()
        assert y.shape == ref.shape and float((y.detach() - ref).abs().max()) <= tol, k
    pre = KN.apply_kernel(copy.deepcopy(base), "fp32-prepacked")
    assert sum(isinstance(c, KN.PrepackedLinear) for c in pre.modules()) == 2


def test_choose_kernel_measures_caches_and_can_be_forced(tmp_path, monkeypatch):
    monkeypatch.delenv("SPINLIB_KERNEL", raising=False)
    c = KN.choose_kernel(64, 128, cache_dir=tmp_path)
    assert c.how == "measured" and c.kernel in KN.CANDIDATES
    # the choice is the fastest of the correct candidates, by the recorded timings
    assert all(sum(c.timings[c.kernel]["ms"].values()) <= sum(t["ms"].values()) for t in c.timings.values())
    assert set(c.timings[c.kernel]["ms"]) == {"1", "5"} and c.describe().startswith(c.kernel)
    files = list(tmp_path.glob("*.json"))
    assert len(files) == 1
    again = KN.choose_kernel(64, 128, cache_dir=tmp_path)
    assert again.kernel == c.kernel and again.timings == c.timings
    files[0].write_text('{"kernel": "fp64"}')  # a damaged cache is re-measured, not trusted
    assert KN.choose_kernel(64, 128, cache_dir=tmp_path).kernel in KN.CANDIDATES
    monkeypatch.setenv("SPINLIB_KERNEL", "fp32-prepacked")
    f = KN.choose_kernel(64, 128, cache_dir=tmp_path)
    assert (f.kernel, f.how) == ("fp32-prepacked", "forced")
    monkeypatch.setenv("SPINLIB_KERNEL", "int8")
    with pytest.raises(ValidationError, match="SPINLIB_KERNEL must be one of"):
        KN.choose_kernel(64, 128, cache_dir=tmp_path)


def test_prompts_keep_their_template_when_cut():
    from spinlib.sd.prompts import encode, encode_intact

    class Tok:  # a character tokenizer with a chat template
        def apply_chat_template(self, msgs, add_generation_prompt, tokenize):
            return [ord(c) for c in "<user>" + msgs[0]["content"] + "</user><assistant>"]

    tok = Tok()
    text = "Summarize: " + "x" * 500 + " What is the gist?"
    ids, cut = encode_intact(tok, text, True, 200)
    s = "".join(map(chr, ids))
    assert len(ids) <= 200 and cut > 0
    assert s.startswith("<user>Summarize: ") and s.endswith(" What is the gist?</user><assistant>") and "[...]" in s
    assert encode_intact(tok, "short", True, 200) == (encode(tok, "short", True, None), 0)
    with pytest.raises(ValidationError, match="cannot fit"):
        encode_intact(tok, text, True, 10)


# ------------------------------------------------ the real pair: integration test (load, lossless greedy on one
# prompt, one batched pass) in run_all.sh test, the chi-square law in the slow tier (--all)
PAIR = MD.REAL_PAIR


@pytest.fixture(scope="module")
def qwen():
    if not MD.get_pair(PAIR).installed():
        pytest.fail(f"the Qwen pair is not installed: {MD.PACKAGED[MD.get_pair(PAIR).target].install}")
    from spinlib.sd.prompts import encode, load_prompts

    target, draft, tok = MD.load_pair(PAIR)
    ids = encode(tok, load_prompts("humaneval", 1)[0]["prompt"], True)
    return target, draft, tok, ids


@pytest.mark.real_models
def test_the_pair_loads_on_the_measured_kernel(qwen):
    target, draft, tok, _ = qwen
    choice = MD.pair_kernel(PAIR)
    assert choice.kernel in KN.CANDIDATES and choice.how in ("measured", "forced")
    assert next(target.parameters()).dtype == next(draft.parameters()).dtype == choice.dtype
    assert target.config.num_hidden_layers == 28 and draft.config.num_hidden_layers == 24
    assert target.config.vocab_size == draft.config.vocab_size == 151_936
    assert MD.cache_problem(MD.cache_dir() / MD.get_pair(PAIR).target) is None


@pytest.mark.real_models
def test_greedy_is_lossless_on_the_kernel_used(qwen):
    """Identical to the target's own greedy decoding on the same kernel, or a counted tie-break."""
    from spinlib.sd.lossless import greedy_check

    target, draft, tok, ids = qwen
    c = greedy_check(target, draft, ids, draft_length=4, max_new_tokens=24, stop_ids=(tok.eos_token_id,))
    assert c.explained, c
    assert 0 <= c.tau < 5.0  # the kernel's rounding noise is small on the logit scale


@pytest.mark.real_models
def test_greedy_checks_decode_the_reference_once_and_agree_with_greedy_check(qwen, monkeypatch):
    import spinlib.sd.lossless as LS

    target, draft, tok, ids = qwen
    stop = (tok.eos_token_id,)
    one = LS.greedy_check(target, draft, ids, draft_length=4, max_new_tokens=16, stop_ids=stop)
    calls = []
    real = LS.target_generate
    monkeypatch.setattr(LS, "target_generate", lambda *a, **k: calls.append(1) or real(*a, **k))
    many = LS.greedy_checks(target, draft, ids, draft_lengths=(1, 4), max_new_tokens=16, stop_ids=stop)
    assert len(calls) == 1 and len(many) == 2
    assert many[1][1] == one and all(c.explained and 0 < len(out) <= 16 for out, c in many)


@pytest.mark.slow
@pytest.mark.real_models
def test_first_token_law_by_chi_square_on_real_distributions(qwen):
    from spinlib.sd.lossless import chi_square_vs, first_position_laws, first_token_counts

    target, draft, _, ids = qwen
    p, q = first_position_laws(target, draft, ids)
    assert p.numel() == 151_936 and abs(float(p.sum()) - 1) < 1e-9
    counts = first_token_counts(p, q, 1200, seed=1)
    _, pv, bins = chi_square_vs(counts, p.numpy())
    assert pv > 1e-3 and bins >= 2
    tv = 0.5 * float((p - q).abs().sum())
    if tv > 0.2:  # the test can fail: the draft's own law is rejected
        assert chi_square_vs(counts, q.numpy())[1] < 1e-6


@pytest.mark.real_models
def test_one_batched_pass_verifies_two_users(qwen):
    """Two users' drafts of ragged lengths in one target pass per round; each output is its user's
    greedy decoding on the same kernel, or a tie-break explained by the kernel's rounding noise."""
    from spinlib.sd.batched import batched_sync_generate
    from spinlib.sd.engine import target_generate
    from spinlib.sd.lossless import compare_greedy
    from spinlib.sd.prompts import encode, load_prompts

    target, draft, tok, ids = qwen
    ids2 = encode(tok, load_prompts("qa", 1)[0]["prompt"], True)
    calls = []
    h = target.register_forward_hook(lambda m, i, o: calls.append(i))
    try:
        outs, recs, batch_s = batched_sync_generate(target, draft, [ids, ids2], [3, 1], rounds=3,
                                                    pad_id=tok.pad_token_id or 0)
    finally:
        h.remove()
    assert len(calls) == 2 + 3 and len(batch_s) == 3  # one prefill per user, then one batched pass per round
    for prompt, out, rr in zip([ids, ids2], outs, recs):
        assert len(out) == sum(r.tokens for r in rr)
        ref, logits = target_generate(target, prompt, max_new_tokens=len(out), return_logits=True)
        assert compare_greedy(ref, logits, out, tau=0.5).explained


@pytest.mark.real_models
def test_verification_grid_is_a_curve_with_its_fits():
    """T_ver(N, K): one batched cached pass per cell, quartiles around the median, and both fits are the
    least-squares solutions of the medians (recomputed here)."""
    from spinlib.sd.measure import time_verification_grid

    target, _, tok = MD.load_pair("smollm2-rtn6")
    g = time_verification_grid(target, list(range(100, 140)), Ns=(1, 3), Ks=(1, 2, 3), repeats=3, prefix=16)
    med, q25, q75 = (np.array(g[k]) for k in ("median_s", "q25_s", "q75_s"))
    assert med.shape == (3, 2) and g["prefix_tokens"] == 16
    assert (med > 0).all() and (q25 <= med + 1e-12).all() and (med <= q75 + 1e-12).all()
    KN_ = np.array([K * N for K in g["K"] for N in g["N"]], float)
    A = np.vstack([np.ones(len(KN_)), KN_]).T
    coef, *_ = np.linalg.lstsq(A, med.ravel(), rcond=None)
    assert np.allclose(coef, [g["fit"]["t0_s"], g["fit"]["t1_s"]])
    res = A @ coef - med.ravel()
    assert np.isclose(g["fit"]["rms_residual_s"], np.sqrt(np.mean(res ** 2)))
    assert g["fit_per_user"]["rms_residual_s"] <= g["fit"]["rms_residual_s"] + 1e-12  # one more parameter
