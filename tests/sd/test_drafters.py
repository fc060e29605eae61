"""The drafter seam (spinlib.sd.drafters): any drafter drives the single-user and the batched engine.

Checked on fresh random instances: prompt lookup against a brute-force reference; greedy output of
every drafter (model, n-gram, hybrid, and one written here as a user would) equal to the target's
own greedy output on toy pairs; sampling with point-mass proposals against the target's exact
two-token law (chi-square); the batched engine on a tiny Hugging Face model built offline, with
fixed lengths, per-user drafters and every registered controller as a K-user decider; bad drafters
are one line.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare

from spinlib.decision import FixedLength
from spinlib.online import Env, controller_names, energy_preset, make_controller
from spinlib.sd.batched import batched_sync_generate
from spinlib.sd.drafters import Drafter, HybridDrafter, ModelDrafter, NgramDrafter, as_drafter
from spinlib.sd.engine import speculative_generate, target_generate
from spinlib.sd.toy import BigramLM
from spinlib.validation import ValidationError
from helpers import tiny_qwen_pair


def _lookup_reference(seq, L, max_n, min_n):
    """Prompt lookup written the slow way: the earliest earlier occurrence of the longest suffix n-gram."""
    for n in range(min(max_n, len(seq) - 1), min_n - 1, -1):
        for i in range(len(seq) - n):
            if seq[i:i + n] == seq[len(seq) - n:]:
                return seq[i + n:i + n + L]
    return []


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=0, max_size=40), st.integers(0, 6), st.integers(1, 4),
       st.integers(1, 4))
def test_ngram_lookup_is_the_earliest_longest_match(seq, L, a, b):
    max_n, min_n = max(a, b), min(a, b)
    got = NgramDrafter(max_n, min_n).lookup(seq, L)
    assert got == _lookup_reference(seq, L, max_n, min_n)
    assert len(got) <= L


class Echo:
    """A drafter written outside the library (three methods, no edit inside it): it proposes the
    last committed token again, ``L`` times, as point masses."""

    def start(self, prompt_ids):
        self.started = True

    def propose(self, seq, L, greedy, temperature, g, rule=None):
        tokens = [seq[-1]] * L
        return tokens, ([] if greedy else [None] * L)

    def crop(self, n):
        pass


def _pair(seed, V=12):
    rng = np.random.default_rng(seed)
    return BigramLM.random(V, rng, concentration=0.3), BigramLM.random(V, rng, concentration=0.5)


@pytest.mark.parametrize("seed", range(5))
def test_every_drafter_is_lossless_greedy_on_toy_pairs(seed):
    target, draft = _pair(seed)
    rng = np.random.default_rng(100 + seed)
    prompt = rng.integers(0, 12, 8).tolist()
    ref = target_generate(target, prompt, max_new_tokens=30)
    made = {"model": lambda: draft, "model-drafter": lambda: ModelDrafter(draft), "ngram": NgramDrafter,
            "ngram-3": lambda: NgramDrafter(3, 2), "hybrid": lambda: HybridDrafter(draft), "echo": Echo}
    for name, make in made.items():
        for L in (1, 4):
            out, recs = speculative_generate(target, make(), prompt, max_new_tokens=30, draft_length=L)
            assert out == ref, (name, L)
            assert all(r.drafted <= L and r.accepted <= r.drafted for r in recs)
    assert isinstance(Echo(), Drafter) and as_drafter(draft).__class__ is ModelDrafter


def test_a_hybrid_uses_the_lookup_when_it_matches_and_the_model_otherwise():
    target, draft = _pair(1)
    h = HybridDrafter(draft)
    speculative_generate(target, h, [1, 2, 3, 1, 2], max_new_tokens=20, draft_length=3)
    assert h.ngram_rounds >= 1  # "1 2" recurs in the prompt
    h2 = HybridDrafter(draft)
    speculative_generate(target, h2, [5, 7], max_new_tokens=3, draft_length=2)
    assert h2.model_rounds >= 1  # nothing to look up in the first round


@pytest.mark.parametrize("drafter", ["ngram", "echo"])
def test_point_mass_proposals_sample_the_target_law(drafter):
    """Speculative sampling with deterministic proposals (q = a point mass): the first two tokens
    follow the target's exact law (chi-square, level 0.001); the proposals alone do not."""
    rng = np.random.default_rng(3)
    V = 5
    target = BigramLM.random(V, rng)
    prompt = [0, 1, 0]  # the lookup proposes "1 0 ..." after the final 0
    exact = target.two_token_law(0)
    n, g = 2500, torch.Generator().manual_seed(5)
    counts = np.zeros(V * V)
    for _ in range(n):
        d = NgramDrafter() if drafter == "ngram" else Echo()
        out, recs = speculative_generate(target, d, prompt, max_new_tokens=2, draft_length=2, temperature=1.0,
                                         generator=g)
        counts[out[0] * V + out[1]] += 1
    assert recs[0].drafted >= 1  # a proposal was made and tested
    keep = exact * n >= 5
    assert chisquare(np.append(counts[keep], counts[~keep].sum()),
                     np.append(exact[keep], exact[~keep].sum()) * n).pvalue > 1e-3
    always = (1 * V + 0) if drafter == "ngram" else 0  # what the proposals alone would always emit
    assert exact[always] < 0.5  # so accepting every proposal would fail the test above


def test_bad_drafters_are_one_line():
    target, _ = _pair(0)

    class Greedy(Echo):
        def propose(self, seq, L, greedy, temperature, g, rule=None):
            return [0] * (L + 1), []

    for bad, needle in ((object(), "model or a drafter"), (Greedy(), "proposed")):
        with pytest.raises(ValidationError) as e:
            speculative_generate(target, bad, [0, 1], max_new_tokens=5, draft_length=2)
        assert "\n" not in str(e.value) and needle in str(e.value)
    for kw in ({"max_ngram": 0}, {"max_ngram": 2, "min_ngram": 3}, {"max_ngram": True}):
        with pytest.raises(ValidationError):
            NgramDrafter(**kw)


# the batched engine needs a Hugging Face model with a KV cache: a tiny random Qwen2, built offline

@pytest.fixture(scope="module")
def tiny():
    """The tiny offline Qwen2 pair of :func:`helpers.tiny_qwen_pair`."""
    return tiny_qwen_pair()


def test_a_cropped_cache_catches_up_to_the_fresh_logits(tiny):
    """CachedLM's rollback: feed, crop back, catch up on another continuation; the logits equal
    those of a fresh cache fed the same sequence (what every rejected round relies on)."""
    from spinlib.sd.cachedlm import CachedLM

    target, _ = tiny
    lm = CachedLM(target)
    lm.feed([1, 2, 3, 4, 5, 6], keep=1)
    lm.crop(3)
    assert lm.ids == [1, 2, 3]
    got = lm.catch_up([1, 2, 3, 9, 8])
    fresh = CachedLM(target).feed([1, 2, 3, 9, 8], keep=1)[-1]
    assert torch.allclose(got, fresh, rtol=0, atol=1e-9) and lm.ids == [1, 2, 3, 9, 8]


def _prompts(K, seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 48, int(rng.integers(3, 9))).tolist() for _ in range(K)]


def _env(K, L_max=5, seed=0):
    survival = np.linspace(1.0, 0.2, L_max + 1)[None, :]
    return Env(K=K, L_max=L_max, t_d=0.01, t0=0.03, t1=0.002, mean_delay_s=0.1, bits_per_token=16.0,
               energy=energy_preset("phone-soc", 0.01), energy_budget_j=0.5, rng=np.random.default_rng(seed),
               survival=np.repeat(survival, K, axis=0))


def _check_lossless(target, prompts, outs, recs, batch_s, rounds):
    assert len(batch_s) == rounds
    for p, out, rr in zip(prompts, outs, recs):
        assert len(rr) == rounds and len(out) == sum(r.tokens for r in rr)
        assert out == target_generate(target, p, max_new_tokens=len(out))


def test_batched_engine_takes_fixed_lengths_and_per_user_drafters(tiny):
    target, draft = tiny
    prompts = _prompts(3, 0)
    outs, recs, batch_s = batched_sync_generate(target, draft, prompts, [3, 0, 2], rounds=4)
    _check_lossless(target, prompts, outs, recs, batch_s, 4)
    assert [r.drafted for r in recs[1]] == [0] * 4
    accepted = [r.accepted for rr in recs for r in rr]
    assert 0 < sum(accepted) < sum(r.drafted for rr in recs for r in rr)  # accepts and rejects both happen
    mixed = [NgramDrafter(), ModelDrafter(draft), HybridDrafter(draft)]
    outs2, recs2, b2 = batched_sync_generate(target, mixed, prompts, [4, 4, 4], rounds=4, temperature=0.0)
    _check_lossless(target, prompts, outs2, recs2, b2, 4)
    assert outs2[1] == outs[1][:len(outs2[1])] or outs[1] == outs2[1][:len(outs[1])]


@pytest.mark.parametrize("name", controller_names())
def test_every_controller_drives_the_batched_engine(tiny, name):
    """A K-user decider chooses every user's length each round, may stop on its draft's confidence,
    and learns from the synchronous round: every registered controller, lossless."""
    target, draft = tiny
    K = 3
    prompts = _prompts(K, 7)
    seen = []

    class Spy:
        def __init__(self, inner):
            self.inner, self.env = inner, inner.env

        def choose(self, ctx):
            assert ctx.rate.shape == (K,) and ctx.top_prob.shape == (K, 5)
            return self.inner.choose(ctx)

        def stop(self, ctx, L_ref):
            return self.inner.stop(ctx, L_ref)

        def update(self, out):
            seen.append(out)
            self.inner.update(out)

    spy = Spy(make_controller(name, _env(K)))
    outs, recs, batch_s = batched_sync_generate(target, draft, prompts, spy, rounds=5, delay_s=[0.05, 0.1, 0.2],
                                                uplink_bps=1e6)
    _check_lossless(target, prompts, outs, recs, batch_s, 5)
    assert len(seen) == 5
    for r, out in enumerate(seen):
        assert out.L.shape == (K,) and np.all(out.L == [recs[k][r].drafted for k in range(K)])
        assert np.all(out.N == [recs[k][r].tokens for k in range(K)])
        draft_s = np.array([recs[k][r].draft_s for k in range(K)])
        up = np.array([recs[k][r].bits_up for k in range(K)]) / 1e6
        T = np.max(draft_s + up + np.array([0.05, 0.1, 0.2])) + batch_s[r]
        assert np.allclose(out.T, T, rtol=0, atol=1e-12) and np.all(out.E >= 0) and np.all(np.isfinite(out.E))


def test_batched_engine_refuses_bad_deciders_and_clocks_in_one_line(tiny):
    target, draft = tiny
    prompts = _prompts(2, 1)
    cases = [(dict(draft_lengths=make_controller("fixed", _env(3))), "K = 3"),
             (dict(draft_lengths=FixedLength([2, 2]), delay_s=-1.0), "delay_s"),
             (dict(draft_lengths=FixedLength([2, 2]), uplink_bps=[1e6]), "uplink_bps"),
             (dict(draft_lengths=FixedLength([2, 9]), L_max=4), "choose"),
             (dict(draft_lengths=[1, 1], draft=[draft]), "2 prompts"),
             (dict(draft_lengths=[1, 1], draft=ModelDrafter(draft)), "one drafter per user")]  # one state, K users
    for kw, needle in cases:
        args = dict(draft=draft)
        args.update(kw)
        with pytest.raises(ValidationError) as e:
            batched_sync_generate(target, args.pop("draft"), prompts, args.pop("draft_lengths"), 2, **args)
        assert "\n" not in str(e.value) and needle in str(e.value), (kw, str(e.value))
