"""The decision seam (spinlib.decision): any decider drives real speculative decoding (issue 23, item 1).

Checked on random toy pairs (bigram LMs, so every case is fresh and fast): a fixed length given as
an int and as a decider give the same bytes; every registered online controller drives the engine
losslessly; its stop rule is causal (the length it gets equals the one it would choose with any
values at the positions the engine never observed); the outcome it learns from is the round's
measured clock; bad deciders and clock inputs are one line.
"""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from spinlib.decision import FixedLength, Outcome, RoundContext, check_lengths
from spinlib.online import Env, energy_preset, make_controller
from spinlib.online.deciders import playable
from spinlib.validation import ValidationError
from spinlib.sd.engine import speculative_generate, target_generate
from spinlib.sd.toy import BigramLM


def _env(L_max=6, K=1, survival=None, seed=0):
    return Env(K=K, L_max=L_max, t_d=0.01, t0=0.03, t1=0.002, mean_delay_s=0.1, bits_per_token=16.0,
               energy=energy_preset("phone-soc", 0.01), energy_budget_j=0.5, rng=np.random.default_rng(seed),
               survival=survival)


def _pair(seed, V=16):
    rng = np.random.default_rng(seed)
    # a sharper target than draft: both accepted and rejected drafts, a spread of confidences
    return BigramLM.random(V, rng, concentration=0.3), BigramLM.random(V, rng, concentration=0.5)


def _controller(name, L_max, seed):
    survival = np.linspace(1.0, 0.2, L_max + 1)[None, :]
    return make_controller(name, _env(L_max, survival=survival, seed=seed))


class Spy:
    """Passes every call through to ``inner`` and keeps, per round, the rows the last stop call saw,
    the positions observed and the outcome."""

    def __init__(self, inner, rng=None):
        self.inner, self.env = inner, inner.env
        self.rounds, self.outcomes = [], []
        self.rng = rng

    def choose(self, ctx):
        L = self.inner.choose(ctx)
        self.rounds.append({"L_ref": int(L[0]), "seen": 0, "top": None, "ent": None, "stop_ref": None})
        return L

    def stop(self, ctx, L_ref):
        r = self.rounds[-1]
        r["seen"] += 1
        r["top"], r["ent"], r["stop_ref"] = ctx.top_prob.copy(), ctx.entropy.copy(), L_ref.copy()
        r["ctx"] = ctx
        if self.rng is not None:
            # causality, asked now (a stop rule may read what choose set for this round, e.g. a learner's
            # threshold): the same call with other values at the positions not yet observed
            r["alts"] = []
            n_seen, L_max = r["seen"], ctx.top_prob.shape[1]
            for _ in range(3):
                alt = copy.copy(ctx)
                alt.top_prob, alt.entropy = ctx.top_prob.copy(), ctx.entropy.copy()
                alt.top_prob[0, n_seen:] = self.rng.uniform(1e-6, 1.0, L_max - n_seen)
                alt.entropy[0, n_seen:] = self.rng.uniform(0.0, 3.0, L_max - n_seen)
                r["alts"].append(int(self.inner.stop(alt, L_ref)[0]))
        return self.inner.stop(ctx, L_ref)

    def update(self, out):
        self.outcomes.append(out)
        self.inner.update(out)


@pytest.mark.parametrize("seed", range(6))
def test_fixed_length_decider_gives_the_int_paths_bytes(seed):
    target, draft = _pair(seed)
    rng = np.random.default_rng(100 + seed)
    L = int(rng.integers(0, 7))
    for temperature in (0.0, 1.0):
        a = speculative_generate(target, draft, [0, 1], max_new_tokens=40, draft_length=L, temperature=temperature,
                                 generator=torch.Generator().manual_seed(seed))
        b = speculative_generate(target, draft, [0, 1], max_new_tokens=40, draft_length=FixedLength(L),
                                 temperature=temperature, generator=torch.Generator().manual_seed(seed))
        assert a[0] == b[0]
        key = [(r.drafted, r.accepted, r.tokens, r.bits_up, r.bits_down) for r in a[1]]
        assert key == [(r.drafted, r.accepted, r.tokens, r.bits_up, r.bits_down) for r in b[1]]


@pytest.mark.parametrize("name", sorted(playable("engine-with-survival")))
def test_every_registered_controller_drives_the_real_engine_losslessly_and_causally(name):
    L_max = 6
    seen_stop_before = seen_full = 0
    for seed in range(4):
        target, draft = _pair(seed)
        rng = np.random.default_rng(seed)
        spy = Spy(_controller(name, L_max, seed), rng=np.random.default_rng([seed, 1]))
        delays = rng.exponential(0.1, 60)
        out, recs = speculative_generate(target, draft, [seed % 16, 1], max_new_tokens=60, draft_length=spy,
                                         delay_s=delays, uplink_bps=2e5)
        # lossless: greedy speculative decoding returns the target's own greedy output
        assert out == target_generate(target, [seed % 16, 1], max_new_tokens=60)
        assert len(spy.rounds) == len(recs) == len(spy.outcomes)
        for k, (r, rec, o) in enumerate(zip(spy.rounds, recs, spy.outcomes)):
            assert 0 <= rec.drafted <= min(r["L_ref"], L_max)
            # the outcome is the round's measured clock
            assert (o.L[0], o.A[0], o.N[0]) == (rec.drafted, rec.accepted, rec.tokens)
            assert o.D[0] == delays[k]
            assert o.T[0] == pytest.approx(rec.draft_s + rec.bits_up / 2e5 + delays[k] + rec.verify_s, rel=1e-12)
            assert o.E[0] > 0
            if r["seen"] == 0:
                continue
            # causal: any values at the positions never observed give the same length (the round's last stop call)
            assert r["alts"] == [rec.drafted] * 3, (name, k, r["alts"])
            seen_stop_before += rec.drafted < r["stop_ref"][0]
            seen_full += rec.drafted == r["stop_ref"][0]
    # the runs covered rounds ended by the rule and rounds drafted to the reference (for rules that stop)
    if name in ("specdec++", "hf-confidence", "gelato", "entropy-only", "ucb-specstop-token"):
        assert seen_stop_before > 0 and seen_full > 0


def test_the_engine_drafts_what_the_rule_answers_and_observes_no_position_past_it():
    """A rule answering ``j`` is asked after positions 0..j-1 (position 0 when j = 0) and the round
    drafts ``j`` tokens: it ends after token ``j - 1`` without the draft pass of position ``j``."""
    class StopAt:
        def __init__(self, j):
            self.j, self.calls, self.per_round, self.env = j, 0, [], _env(5)

        def choose(self, ctx):
            return np.array([5])

        def stop(self, ctx, L_ref):
            self.calls += 1
            return np.minimum(self.j, L_ref)

        def update(self, out):
            self.per_round.append(self.calls)
            self.calls = 0

    target, draft = _pair(3)
    for j in range(0, 6):
        d = StopAt(j)
        _, recs = speculative_generate(target, draft, [0], max_new_tokens=8, draft_length=d)
        assert recs[0].drafted == j
        assert d.per_round[0] == max(j, 1)


def _bad(**kw):
    target, draft = _pair(0)
    args = dict(max_new_tokens=5, draft_length=make_controller("fixed", _env()))
    args.update(kw)
    with pytest.raises(ValidationError) as e:
        speculative_generate(target, draft, [0], **args)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_bad_deciders_and_clock_inputs_are_one_line():
    assert "K = 1" in _bad(draft_length=make_controller("fixed", _env(K=3)))
    assert "lacks stop, update" in _bad(draft_length=type("C", (), {"choose": lambda self, c: np.array([1])})())
    assert "energy model" in _bad(draft_length=type("C", (), {"choose": lambda s, c: np.array([1]),
                                                              "stop": lambda s, c, L: L,
                                                              "update": lambda s, o: None})(), L_max=4)
    assert "L_max" in _bad(draft_length=type("C", (), {"choose": lambda s, c: np.array([1]),
                                                       "stop": lambda s, c, L: L,
                                                       "update": lambda s, o: None})(), energy=energy_preset("phone-soc", 0.01))
    assert "delay_s has 2" in _bad(delay_s=[0.1, 0.2])
    assert "delay_s must be finite" in _bad(delay_s=-1.0)
    assert "delay_s must be finite" in _bad(delay_s=[0.1, float("nan"), 0, 0, 0])
    assert "uplink_bps" in _bad(uplink_bps=0.0)
    assert "uplink_bps" in _bad(uplink_bps=float("nan"))
    assert "draft_length must be >= 0" in _bad(draft_length=-1)

    class Wrong:
        env = _env()

        def __init__(self, L):
            self.L = L

        def choose(self, ctx):
            return self.L

        def stop(self, ctx, L_ref):
            return L_ref

        def update(self, out):
            pass

    assert "outside 0..6" in _bad(draft_length=Wrong(np.array([7])))
    assert "integer length" in _bad(draft_length=Wrong(np.array([1.5])))
    assert "integer length" in _bad(draft_length=Wrong(np.array([1, 2])))


@pytest.mark.parametrize("seed", range(20))
def test_check_lengths_on_generated_inputs(seed):
    rng = np.random.default_rng(seed)
    K = int(rng.integers(1, 6))
    hi = int(rng.integers(1, 9))
    L = rng.integers(-2, hi + 3, K)
    ok = L.min() >= 0 and L.max() <= hi
    if ok:
        assert check_lengths(L, K, hi, "x").tolist() == L.tolist()
        assert check_lengths(L.astype(float), K, hi, "x").tolist() == L.tolist()
    else:
        with pytest.raises(ValidationError, match="outside"):
            check_lengths(L, K, hi, "x")


def test_outcome_and_context_are_the_arenas():
    """The arena and the real engine build the same Outcome type: one seam."""
    import spinlib.online.arena as arena

    assert arena.Outcome is Outcome
    assert {"t", "rate", "rate_mean", "state", "delay_mean", "top_prob", "entropy"} <= set(RoundContext.__dataclass_fields__)


@pytest.mark.parametrize("name", ["fixed", "specdec++", "hf-confidence", "entropy-only", "gelato"])
def test_the_arenas_trace_replay_matches_the_real_engine_until_a_rule_reads_past_a_rejection(name):
    """real_rounds.replay_decider against the real engine on generated toy pairs: a fixed length gives
    identical rounds; a stop rule's rounds are identical or first part where the trace says they may
    (the rule read a position after the round's first rejected draft); tokens always agree."""
    from spinlib.online.real_rounds import parting, replay_decider
    from spinlib.online.traces import to_prompt_trace, trace_record

    parted = 0
    for seed in range(8):
        target, draft = _pair(seed)
        prompt = [seed % 16, 3]
        tr = to_prompt_trace({**trace_record(target, draft, prompt, max_new_tokens=50), "question_id": seed})
        real_c, replay_c = _controller(name, 6, seed), _controller(name, 6, seed)
        new, recs = speculative_generate(target, draft, prompt, max_new_tokens=50, draft_length=real_c,
                                         delay_s=0.1, uplink_bps=2e5)
        assert new == tr.tokens.tolist()
        rep = replay_decider(replay_c, tr, replay_c.env, delay_s=0.1, uplink_bps=2e5, max_new_tokens=50)
        i, ok = parting([[r.drafted, r.accepted, r.tokens] for r in recs], rep)
        assert ok, (name, seed, i)
        parted += i is not None
        if name == "fixed":
            assert i is None
    if name == "entropy-only":
        assert parted > 0  # the comparison can part: the check is not vacuous


def test_a_never_stopping_decider_skips_the_confidence_and_gives_the_same_output(monkeypatch):
    """Deciders whose stop is the base class's (marked never_stops) do not pay a softmax per drafted position;
    the output equals the integer-length run; an override without the mark is asked (and pays)."""
    from spinlib.decision import FixedLength, reads_confidence
    from spinlib.sd import engine
    from spinlib.sd.toy import BigramLM

    rng = np.random.default_rng(7)
    target, draft = BigramLM.random(6, rng), BigramLM.random(6, rng)
    base = engine.speculative_generate(target, draft, [0], max_new_tokens=12, draft_length=3, temperature=0.0)
    assert not reads_confidence(FixedLength(3))
    calls = []
    real = engine.draft_confidence
    monkeypatch.setattr(engine, "draft_confidence", lambda logits: calls.append(1) or real(logits))
    out = engine.speculative_generate(target, draft, [0], max_new_tokens=12, draft_length=FixedLength(3), L_max=3,
                                      temperature=0.0)
    assert out[0] == base[0] and not calls
    # the registry's learners keep the base class's (marked) stop; the stop rules read the confidence
    assert not any(reads_confidence(make_controller(n, _env())) for n in ("fixed", "ucb-specstop", "naive-ucb"))
    assert all(reads_confidence(make_controller(n, _env())) for n in ("specdec++", "gelato", "entropy-only",
                                                                      "ucb-specstop-token"))

    class Asks(FixedLength):
        def stop(self, ctx, L_ref):
            return L_ref

    assert reads_confidence(Asks(3))
    out2 = engine.speculative_generate(target, draft, [0], max_new_tokens=12, draft_length=Asks(3), L_max=3,
                                       temperature=0.0)
    assert out2[0] == base[0] and calls
