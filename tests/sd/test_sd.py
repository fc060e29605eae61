"""Real speculative decoding: losslessness (greedy on real prompts, sampling on a toy pair),
one target pass per round, teacher-forced acceptance vs the engine, bit accounting (the engine's
bits are spinlib.modes'), CLI."""
import json

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from spinlib.modes import feedback_bits, realised_bits
from spinlib.scenario import Payload
from spinlib.validation import ValidationError
from spinlib.sd.engine import RoundRecord, speculative_generate, target_generate
from spinlib.sd.measure import prefix_profile, teacher_forced_beta
from spinlib.sd.toy import BigramLM
from helpers import spinlib_cli

PAIR = "smollm2-rtn3g16"  # the lowest-alpha draft: most rejections, the strictest losslessness check


@pytest.fixture(scope="module")
def real_pair():
    from spinlib.sd.models import load_pair
    from spinlib.sd.prompts import encode, load_spec_bench

    torch.manual_seed(0)
    target, draft, tok = load_pair(PAIR)
    prompts = [encode(tok, r["prompt"], chat=True) for t in ("qa", "math_reasoning", "translation")
               for r in load_spec_bench(t, 1)]
    return target, draft, tok, prompts


@pytest.mark.real_models
def test_greedy_is_lossless_on_real_prompts(real_pair):
    target, draft, tok, prompts = real_pair
    stop = (tok.eos_token_id,)
    for ids in prompts:
        ref = target_generate(target, ids, max_new_tokens=24, stop_ids=stop)
        for L in (1, 4, 7):
            out, rounds = speculative_generate(target, draft, ids, max_new_tokens=24, draft_length=L, stop_ids=stop)
            assert out == ref, (L, tok.decode(out), tok.decode(ref))
            assert sum(r.tokens for r in rounds) == len(out)


def test_one_target_pass_per_round(real_pair):
    """KV caches are reused: a round costs exactly one target forward (plus the prefill)."""
    target, draft, tok, prompts = real_pair
    calls = []
    handle = target.register_forward_hook(lambda m, i, o: calls.append(1))
    try:
        _, rounds = speculative_generate(target, draft, prompts[0], max_new_tokens=20, draft_length=4)
    finally:
        handle.remove()
    assert len(calls) == len(rounds) + 1


def test_release_models_forgets_what_was_loaded(real_pair):
    """A loaded pair is kept for the process (a second load is the same objects) until release_models,
    after which the next load builds new objects from the checked cache with the same weights
    (the target's and the low-bit draft's)."""
    from spinlib.sd.models import load_pair, release_models

    target, draft, _, _ = real_pair
    assert load_pair(PAIR)[0] is target and load_pair(PAIR)[1] is draft
    assert release_models() >= 2
    t2, d2, _ = load_pair(PAIR)
    assert t2 is not target and d2 is not draft
    for old, new in ((target, t2), (draft, d2)):
        a, b = old.state_dict(), new.state_dict()
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert release_models() >= 2 and release_models() == 0


def _rounds_from_beta(beta, L, n):
    """Greedy rounds implied by teacher-forced beta (1 = the draft agrees with the target's argmax)."""
    pos, tokens = 0, []
    while pos < n:
        Lr = min(L, n - pos - 1)
        a = 0
        while a < Lr and beta[pos + a] == 1:
            a += 1
        tokens.append(min(a + 1, n - pos))
        pos += a + 1
    return tokens


@pytest.mark.real_models
def test_teacher_forced_beta_predicts_the_greedy_engine_exactly(real_pair):
    target, draft, tok, prompts = real_pair
    for ids in prompts[:2]:
        beta = teacher_forced_beta(target, draft, ids, max_new_tokens=20, temperature=0.0)
        for L in (2, 5):
            _, rounds = speculative_generate(target, draft, ids, max_new_tokens=20, draft_length=L)
            assert [r.tokens for r in rounds] == _rounds_from_beta(beta, L, len(beta))


@pytest.mark.campaign
def test_sampling_is_lossless_on_a_toy_pair():
    """Chi-square of the first two sampled tokens against the target's exact law (level 0.001)."""
    rng = np.random.default_rng(0)
    V = 5
    target = BigramLM.random(V, rng)
    draft = BigramLM.random(V, rng)  # a poor draft: many rejections and residual samples
    exact = target.two_token_law(0)
    n = 4000
    for L in (1, 3):
        g = torch.Generator().manual_seed(L)
        counts = np.zeros(V * V)
        for _ in range(n):
            out, _ = speculative_generate(target, draft, [0], max_new_tokens=2, draft_length=L, temperature=1.0,
                                          generator=g)
            counts[out[0] * V + out[1]] += 1
        keep = exact * n >= 5
        obs = np.append(counts[keep], counts[~keep].sum())
        exp = np.append(exact[keep], exact[~keep].sum()) * n
        assert chisquare(obs, exp).pvalue > 1e-3, (L, obs, exp)
    # and the toy draft alone is measurably different (the test can fail)
    g = torch.Generator().manual_seed(9)
    counts = np.zeros(V * V)
    for _ in range(n):
        out = target_generate(draft, [0], max_new_tokens=2, temperature=1.0, generator=g)
        counts[out[0] * V + out[1]] += 1
    keep = exact * n >= 5
    assert chisquare(np.append(counts[keep], counts[~keep].sum()),
                     np.append(exact[keep], exact[~keep].sum()) * n).pvalue < 1e-6


def test_round_record_bits_keep_their_values():
    """The engine's bits per round (now from spinlib.modes) keep the values of the engine's own
    accounting: greedy -> ids only; UL -> L S up; DL -> L (id + Q) up, p down on a rejection."""
    p = Payload(49152, "full", 16)

    def bits(mode, L, A, pay, greedy):
        r = RoundRecord.from_round(L, A, A + 1, mode, pay, greedy, 0.0, 0.0)
        return r.bits_up, r.bits_down

    assert bits("UL", 4, 2, p, greedy=True) == (4 * 16, 8 + 16)
    assert bits("DL", 4, 2, p, greedy=True) == (4 * 16, 8 + 16)
    assert bits("UL", 4, 2, p, greedy=False) == (4 * p.bits_per_token, 8 + 16)
    assert bits("DL", 4, 2, p, greedy=False) == (4 * (16 + 16), 8 + 49152 * 16)  # rejection: p goes down
    assert bits("DL", 4, 4, p, greedy=False) == (4 * (16 + 16), 8 + 16)  # all accepted: bonus id
    assert bits("DL", 0, 0, p, greedy=False) == (0, 8 + 16)  # L = 0: plain decoding on the server
    pk = Payload(49152, "topk", 16, 128)  # top-k: the same distribution bits as the UL/DL model
    assert bits("DL", 4, 1, pk, greedy=False) == (4 * (16 + 16), 8 + pk.distribution_bits)
    pi = Payload(49152, "ids", 16, 1)  # an ids payload that samples sends the full distribution
    assert bits("UL", 4, 1, pi, greedy=False) == (4 * 16, 8 + 16)
    assert bits("DL", 4, 1, pi, greedy=False) == (4 * (16 + 16), 8 + 49152 * 16)


@pytest.mark.parametrize("payload", [Payload(5, "full", 16, 5), Payload(5, "topk", 8, 2), Payload(5, "ids", 16, 1)],
                         ids=["full", "topk", "ids"])
def test_engine_bits_are_the_modes_realised_bits(payload):
    """Every round of the engine (toy pair): bits_up = realised_bits' uplink and
    bits_down = the distribution bits + feedback_bits, in UL and DL mode, greedy and sampled."""
    rng = np.random.default_rng(1)
    target, draft = BigramLM.random(5, rng), BigramLM.random(5, rng)
    seen = set()
    for mode in ("UL", "DL"):
        for temperature in (0.0, 1.0):
            for L in (0, 1, 3):
                g = torch.Generator().manual_seed(L)
                _, rounds = speculative_generate(target, draft, [0, 1], max_new_tokens=40, draft_length=L,
                                                 temperature=temperature, generator=g, mode=mode, payload=payload)
                for r in rounds:
                    assert r.mode == mode
                    up, dist = realised_bits(payload, r.drafted, r.accepted, mode == "UL", greedy=temperature == 0)
                    assert r.bits_up == float(up)
                    assert r.bits_down == float(dist + feedback_bits(payload, dist))
                    seen.add((mode, temperature, r.accepted < r.drafted, r.drafted > 0))
    # both outcomes (a rejection, all accepted) occurred in every mode when sampling
    assert {(m, 1.0, rej, True) for m in ("UL", "DL") for rej in (True, False)} <= seen


def test_modes_are_UL_or_DL():
    from spinlib.sd.batched import batched_sync_generate

    t = BigramLM.random(3, np.random.default_rng(0))
    for bad in ("ul", "dl", "both"):
        with pytest.raises(ValidationError, match="mode must be 'UL' or 'DL'"):
            speculative_generate(t, t, [0], max_new_tokens=2, draft_length=1, mode=bad)
        with pytest.raises(ValidationError, match="must be 'UL' or 'DL'"):
            batched_sync_generate(t, t, [[0], [1]], [1, 1], 1, modes=["UL", bad])
    with pytest.raises(ValidationError, match="2 entries"):
        batched_sync_generate(t, t, [[0], [1], [2]], [1, 1, 1], 1, modes=["UL", "DL"])


def test_prefix_profile():
    b = [np.array([1.0, 0.5, 0.5, 1.0])]
    np.testing.assert_allclose(prefix_profile(b, 2), [0.75, np.mean([0.5, 0.25, 0.5])])


_cli = spinlib_cli


@pytest.mark.real_models
def test_cli_pairs_and_generate():
    r = _cli("pairs", "--json")
    rows = json.loads(r.stdout)
    assert {"name", "draft", "target", "tokenizer_shared", "installed"} <= set(rows[0])
    assert {row["target"] for row in rows} == {"qwen2.5-coder-1.5b-instruct", "smollm2-135m-instruct", "gemma-3-270m"}
    assert {row["kernel"] for row in rows if row["name"] == "qwen-coder"} == {"auto"}
    r = _cli("generate", "--pair", PAIR, "--prompt", "The capital of France is", "--draft-length", "3",
             "--max-new-tokens", "8", "--mode", "DL", "--temperature", "1", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert len(out["token_ids"]) == 8 and isinstance(out["text"], str)
    assert {"drafted", "accepted", "bits_up", "bits_down"} <= set(out["rounds"][0])
    assert {r["mode"] for r in out["rounds"]} == {"DL"}
    r = _cli("generate", "--pair", PAIR, "--prompt", "x", "--mode", "dl")
    assert r.returncode == 2 and "invalid choice: 'dl'" in r.stderr
    r = _cli("measure", "--pair", PAIR, "--task", "poetry")
    assert r.returncode == 2 and "--task must be one of" in r.stderr and "Traceback" not in r.stderr
    r = _cli("generate", "--pair", "nope", "--prompt", "x")
    assert r.returncode == 2 and "pair must be one of" in r.stderr


@pytest.mark.parametrize("name,vocab", [("qwen-coder-measured", 151_936), ("smollm2-measured", 49_152)])
def test_measured_preset_uses_the_committed_measurements(name, vocab):
    import json

    from spinlib import random_scenario
    from spinlib.paths import DATA
    from spinlib.presets import MEASURED_PRESET, MEASURED_PRESETS, get_preset

    assert MEASURED_PRESET == "qwen-coder-measured"
    p = get_preset(name)
    files = sorted(f for pair in MEASURED_PRESETS[name][0] for f in (DATA / "measurements" / pair).glob("*.summary.json"))
    assert p.vocab_size == vocab and len(p.alpha_choices) == len(files) >= 3
    docs = [json.loads(f.read_text()) for f in files]
    assert sorted(p.alpha_choices) == sorted(round(d["by_temperature"]["1.0"]["alpha"], 4) for d in docs)
    assert p.draft_time_s == float(np.median([d["timing"]["draft_s_per_token"] for d in docs]))
    if name == "qwen-coder-measured":  # the server is the batched verification fit (K users x N positions)
        assert p.server_t0_s == float(np.median([d["timing"]["verify_grid"]["fit"]["t0_s"] for d in docs]))
        assert all(d["kernel"]["kernel"] in ("fp32", "fp32-prepacked", "bf16") for d in docs)
    s = random_scenario(40, seed=1, preset=name)
    assert set(np.round(s.alpha, 4)) <= set(p.alpha_choices)
    assert np.all((s.tau >= p.draft_time_s * 0.999) & (s.tau <= 4.001 * p.draft_time_s))
    assert s.server.t0_s == p.server_t0_s and s.payload.vocab_size == vocab


@pytest.mark.real_models
def test_cross_tokenizer_greedy_is_lossless():
    """SmolLM2 drafting for Gemma-3-270M across tokenizers: greedy output = Gemma's greedy output."""
    from spinlib.sd.cross import cross_greedy_generate, intersection_beta, vocabulary_map
    from spinlib.sd.models import is_installed, load_target

    if not is_installed("gemma-3-270m"):
        pytest.fail("gemma-3-270m not installed (run_all.sh installs it)")
    target, ttok = load_target("gemma-3-270m")
    draft, dtok = load_target("smollm2-135m-instruct")
    prompt = "Question: What is the boiling point of water at sea level?\n\nAnswer:"
    ref = target_generate(target, list(ttok(prompt)["input_ids"]), max_new_tokens=16, stop_ids=(ttok.eos_token_id,))
    res = cross_greedy_generate(target, ttok, draft, dtok, prompt, max_new_tokens=16, draft_length=4)
    assert res.token_ids == ref
    assert res.target_calls <= len(ref)
    d, t = vocabulary_map(dtok, ttok)
    assert len(d) > 30_000 and len(set(t)) == len(t)
    beta = intersection_beta(target, ttok, draft, dtok, prompt, max_new_tokens=8, vocab_map=(d, t))
    assert beta.shape == (len(ref[:8]),) and np.all((beta >= 0) & (beta <= 1 + 1e-9))


def test_cached_only_reads_a_committed_measurement_or_refuses(tmp_path):
    """What notebook 05's smoke run does: the committed summary of a configuration, nothing loaded."""
    import json as _json

    from spinlib.paths import DATA
    from spinlib.validation import ValidationError
    from spinlib.sd.measure import measure_pair

    f = sorted((DATA / "measurements" / "qwen-coder").glob("humaneval-*.summary.json"))[0]
    cfg = _json.loads(f.read_text())["config"]
    kw = dict(n_prompts=cfg["n_prompts"], max_new_tokens=cfg["max_new_tokens"], seed=cfg["seed"],
              temperatures=tuple(cfg["temperatures"]), L_values=tuple(cfg["L_values"]),
              engine_prompts=cfg["engine_prompts"])
    s = measure_pair("qwen-coder", "humaneval", **kw, out_dir=DATA / "measurements", cached_only=True)
    assert s["config"] == cfg
    with pytest.raises(ValidationError) as e:
        measure_pair("qwen-coder", "humaneval", **kw, out_dir=tmp_path, cached_only=True)
    assert "\n" not in str(e.value) and "measure it first" in str(e.value)
    assert not any(tmp_path.iterdir())  # nothing written


@pytest.mark.real_models
def test_online_controllers_drive_the_real_pair_losslessly(real_pair):
    """The decision seam on real models: UCB-SpecStop, SpecDec++'s per-token rule and GELATO choose
    and stop the real draft's rounds; greedy output stays the target's own, token for token."""
    from spinlib.online import Env, energy_preset, make_controller

    target, draft, tok, prompts = real_pair
    stop = (tok.eos_token_id,)
    ref = target_generate(target, prompts[0], max_new_tokens=24, stop_ids=stop)
    for name in ("ucb-specstop", "specdec++", "gelato"):
        env = Env(K=1, L_max=6, t_d=0.01, t0=0.03, t1=0.002, mean_delay_s=0.1, bits_per_token=16.0,
                  energy=energy_preset("phone-soc", 0.01), energy_budget_j=0.5, rng=np.random.default_rng(0))
        out, rounds = speculative_generate(target, draft, prompts[0], max_new_tokens=24, stop_ids=stop,
                                           draft_length=make_controller(name, env), delay_s=0.1, uplink_bps=1e6)
        assert out == ref, name
        assert all(0 <= r.drafted <= 6 for r in rounds)
        assert len({r.drafted for r in rounds}) > 1 or name == "specdec++"  # the learners vary their length


def test_every_packaged_pair_has_a_distinct_legend_name():
    """Figures name pairs in words (issue 25, item 6): one distinct, non-key name per pair; unknown names pass through."""
    from spinlib.sd.models import PAIRS, pair_label

    labels = [pair_label(p) for p in PAIRS]
    assert len(set(labels)) == len(labels) and not set(labels) & set(PAIRS)
    assert pair_label("smollm2-rtn4g16") == "SmolLM2-135M + RTN-4 (g16) draft"
    assert pair_label("not-a-pair") == "not-a-pair"
