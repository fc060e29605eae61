"""The testbed: agreement with the closed form where the analysis is exact, the gaps where it is not.

Tolerances: with synthetic i.i.d. acceptances and static channels, the emulated goodput must lie
within its own 99.9 % confidence interval of the closed form (independent rounds; a false alarm
per check has probability 1e-3, and the seeds are fixed, so the test is deterministic).
"""
import dataclasses
import json

import numpy as np
import pytest

from spinlib import random_scenario
from spinlib.control import solve, declared_subset
from spinlib.acceptance import sample_accepted
from spinlib.emulator import (ClockResult, EmulationResult, EmulatorConfig, Fading, async_clock, emulate,
                              synthetic_trace, sync_clock)
from spinlib.modes import mode_payload, parse_modes
from spinlib.scenario import Payload, User
from spinlib.validation import ValidationError
from spinlib.presets import random_uldl_scenario

SYNC_POLICIES = ("homogeneous", "heterogeneous-sync", "agnostic", "server-only", "optimal-length-equal-bandwidth")


def within(r, x):
    """``x`` in the emulator's interval (widened by 1e-12 relative for deterministic cases, L = 0)."""
    return r.ci_low * (1 - 1e-12) <= x <= r.ci_high * (1 + 1e-12)


def test_sync_matches_closed_form_within_ci():
    rng = np.random.default_rng(0)
    for i in range(12):
        s = random_scenario(int(rng.integers(1, 12)), int(rng.integers(1 << 30)))
        pol = SYNC_POLICIES[i % len(SYNC_POLICIES)]
        a = solve(s, pol, **declared_subset(pol, {"L_max": 10}))
        r = emulate(s, a, EmulatorConfig(rounds=4000, seed=i), confidence=0.999)
        assert within(r, r.predicted_tokens_per_s), (pol, r.goodput_tokens_per_s, r.predicted_tokens_per_s)
        assert r.ci_high - r.ci_low < 0.05 * r.predicted_tokens_per_s  # and the check is not vacuous


@pytest.mark.campaign
def test_uldl_matches_closed_form_within_ci_and_round_time_model():
    """UL/DL rounds: the uplink is deterministic; the DL phase of one round is the max over DL
    devices of the *realised* payloads, so E[max] >= max E: the emulated goodput is at most the
    analysis (which uses expected bits), and equal within the CI when at most one device is in DL."""
    rng = np.random.default_rng(1)
    n_single = 0
    for i in range(10):
        s = random_uldl_scenario(int(rng.integers(1, 7)), rng)
        a = solve(s, "uldl-optimal", L_max=8)
        r = emulate(s, a, EmulatorConfig(rounds=4000, seed=i), confidence=0.999)
        n_dl = sum(m == "DL" and L > 0 for m, L in zip(a.modes, a.draft_lengths))
        assert r.ci_low <= r.predicted_tokens_per_s * (1 + 1e-12)
        if n_dl <= 1:
            n_single += 1
            # one DL device: T is linear in its random payload, so E[T] is the analysis' T
            assert within(r, r.predicted_tokens_per_s)
    assert n_single >= 1


def test_async_ideal_server_matches_closed_form_and_batch_server_shows_queueing():
    rng = np.random.default_rng(2)
    for i in range(8):
        s = random_scenario(int(rng.integers(2, 12)), int(rng.integers(1 << 30)))
        a = solve(s, "heterogeneous-async", L_max=10)
        ideal = emulate(s, a, EmulatorConfig(rounds=3000, seed=i, server="ideal"), confidence=0.999)
        assert within(ideal, ideal.predicted_tokens_per_s)
        batch = emulate(s, a, EmulatorConfig(rounds=3000, seed=i, server="batch"))
        # one server cannot beat the no-queueing bound by more than the batching saving of t0
        assert batch.server_utilisation <= 1 + 1e-9
        assert batch.phase_shares["queue"] >= 0
        # and when the analysis' own utilisation is above 1, the single server loses goodput
        from spinlib import evaluate
        if evaluate(s, a).server_utilisation > 1.5:
            assert batch.goodput_tokens_per_s < ideal.goodput_tokens_per_s


def test_profile_acceptance_and_draws():
    rng = np.random.default_rng(3)
    L = np.array([0, 1, 4, 8])
    pi = np.array([[1, 0.9, 0.6, 0.3, 0.2, 0.1, 0.05, 0.02, 0.01]] * 4)
    A = sample_accepted(L, pi, 200_000, rng)
    assert A.max(axis=0).tolist() == [0, 1, 4, 8]
    for i in range(1, 5):
        assert np.mean(A[:, 2] >= i) == pytest.approx(pi[2, i], abs=4e-3)
    # a user with a measured profile: "profile" acceptance follows it, "iid" follows alpha
    s = random_scenario(1, 0)
    u = s.users[0]
    prof = (0.9, 0.5, 0.45, 0.44)
    s = s.replace(users=(User(u.draft_time_s, 0.9, u.channel_gain, u.tx_power_w, prof),))
    a = solve(s, "optimal-bandwidth-fixed-length", draft_length=4)
    r_prof = emulate(s, a, EmulatorConfig(rounds=20000, seed=1, acceptance="profile"))
    r_iid = emulate(s, a, EmulatorConfig(rounds=20000, seed=1, acceptance="iid"))
    assert r_prof.tokens_per_round[0] == pytest.approx(1 + sum(prof), abs=0.03)
    assert r_iid.tokens_per_round[0] == pytest.approx(sum(0.9 ** i for i in range(5)), abs=0.03)


def test_fading_draws():
    rng = np.random.default_rng(4)
    h = Fading("rayleigh").draw(100_000, 2, rng)
    assert h.mean() == pytest.approx(1.0, abs=0.01)
    assert h.min() == pytest.approx(0.01) and np.mean(h == 0.01) == pytest.approx(1 - np.exp(-0.01), abs=2e-3)
    f = Fading("markov", bad_db=10, p_good_to_bad=0.2, p_bad_to_good=0.4)
    h = f.draw(50_000, 3, rng)
    bad = h < 1
    assert bad.mean() == pytest.approx(0.2 / 0.6, abs=0.01)
    # persistence: P(bad | bad before) = 1 - p_bad_to_good
    assert np.mean(bad[1:][bad[:-1]]) == pytest.approx(0.6, abs=0.01)
    # fading slows the static-channel policy down (Jensen: E[1/R] > 1/E[R])
    s = random_scenario(6, 5)
    a = solve(s, "heterogeneous-sync")
    st = emulate(s, a, EmulatorConfig(rounds=3000, seed=0))
    ray = emulate(s, a, EmulatorConfig(rounds=3000, seed=0, fading=Fading("rayleigh")))
    assert ray.goodput_tokens_per_s < st.goodput_tokens_per_s


def test_reproducible_and_errors():
    s = random_scenario(4, 6)
    a = solve(s, "heterogeneous-async")
    r1 = emulate(s, a, EmulatorConfig(rounds=200, seed=9, fading=Fading("markov")))
    r2 = emulate(s, a, EmulatorConfig(rounds=200, seed=9, fading=Fading("markov")))
    assert r1.goodput_tokens_per_s == r2.goodput_tokens_per_s
    with pytest.raises(ValidationError, match="fading must be one of"):
        Fading("nakagami")
    with pytest.raises(ValidationError, match="rounds"):
        EmulatorConfig(rounds=1)
    with pytest.raises(ValidationError, match="compute='measured' needs real_models"):
        EmulatorConfig(compute="measured")
    with pytest.raises(ValidationError, match="p_bad_to_good"):
        Fading("markov", p_bad_to_good=0)


def test_timeline_is_consistent():
    s = random_scenario(3, 7)
    a = solve(s, "heterogeneous-sync")
    r = emulate(s, a, EmulatorConfig(rounds=50, seed=0, timeline_rounds=5))
    assert {e["phase"] for e in r.timeline} >= {"draft", "uplink", "verify"}
    assert all(e["end"] >= e["start"] for e in r.timeline)
    sa = solve(s, "heterogeneous-async")
    r = emulate(s, sa, EmulatorConfig(rounds=50, seed=0, timeline_rounds=5))
    assert "queue" in {e["phase"] for e in r.timeline}


def test_results_are_frozen_dataclasses():
    s = random_scenario(3, 8)
    for pol in ("heterogeneous-sync", "heterogeneous-async"):
        a = solve(s, pol)
        r = emulate(s, a, EmulatorConfig(rounds=30, seed=0, timeline_rounds=2))
        assert isinstance(r, EmulationResult) and dataclasses.is_dataclass(r)
        d = r.to_dict()
        json.dumps(d)  # JSON-ready
        assert d["relative_error"] == r.relative_error and d["goodput_tokens_per_s"] == r.goodput_tokens_per_s
        with pytest.raises(dataclasses.FrozenInstanceError):
            r.rounds = 1
        # the clocks directly: frozen ClockResults, the same numbers as emulate
        rng = np.random.default_rng(0)
        tr = synthetic_trace(s, a, 30, "iid", rng)
        h = Fading().draw(30, 3, rng)
        clock = async_clock if a.round_model == "async" else sync_clock
        c = clock(s, a, tr, h, timeline_rounds=2)
        assert isinstance(c, ClockResult) and dataclasses.is_dataclass(c)
        with pytest.raises(dataclasses.FrozenInstanceError):
            c.goodput_tokens_per_s = 0.0
        assert c.goodput_tokens_per_s == r.goodput_tokens_per_s and c.ci_low == r.ci_low
        # one result type: the testbed's result is the clock's, every field equal, plus what the run adds
        assert isinstance(r, ClockResult)
        for f in dataclasses.fields(ClockResult):
            a_, b_ = getattr(c, f.name), getattr(r, f.name)
            assert (np.array_equal(a_, b_) if isinstance(a_, np.ndarray) else a_ == b_), f.name


def test_synthetic_trace_bits():
    """The trace's bits (spinlib.modes.realised_bits): uplink ``L S``, S of the device's mode;
    downlink D_dist on a DL rejection (variant "reject") or (L + 1) D_dist ("all"); 0 for UL."""
    rng = np.random.default_rng(5)
    n_checked = 0
    for i in range(12):
        s = random_uldl_scenario(int(rng.integers(2, 6)), rng)
        a = solve(s, "uldl-fixed-length", draft_length=3)
        tr = synthetic_trace(s, a, 200, "iid", np.random.default_rng(i))
        ul = parse_modes(a.modes, s.num_users)
        S, _, _ = mode_payload(s, a.L, ul, None if ul.all() else np.ones((s.num_users, 4)))
        np.testing.assert_array_equal(tr.bits_up, tr.drafted * S)
        dist = s.payload.distribution_bits
        if s.downlink.variant == "reject":
            down = np.where(tr.accepted < tr.drafted, dist, 0.0)
        else:
            down = (tr.drafted + 1.0) * dist
        np.testing.assert_array_equal(tr.bits_down, np.where(ul | (tr.drafted == 0), 0.0, down))
        n_checked += int(np.any(tr.bits_down > 0))
    assert n_checked >= 3
    # paper-1 allocations (no modes), payload "ids": the payload's bits per token, nothing down
    s = random_scenario(3, 1, payload=Payload(32000, "ids"))
    a = solve(s, "heterogeneous-sync", L_max=6)
    tr = synthetic_trace(s, a, 50, "iid", np.random.default_rng(0))
    np.testing.assert_array_equal(tr.bits_up, tr.drafted * s.payload.bits_per_token)
    assert not tr.bits_down.any()


@pytest.mark.real_models
def test_real_models_greedy_outputs_equal_target_greedy():
    """With real models at temperature 0, every user's emitted tokens are the target's greedy ones."""
    from spinlib.emulator import real_prompts
    from spinlib.sd.engine import target_generate
    from spinlib.sd.models import get_pair, load_pair
    from spinlib.sd.prompts import encode

    pair = "smollm2-rtn4g16"
    if not get_pair(pair).installed():
        pytest.fail("the packaged SmolLM2 model is not installed (run_all.sh installs it)")
    s = random_scenario(3, 2)
    a = solve(s, "heterogeneous-sync", L_max=6)
    R = 5
    r = emulate(s, a, EmulatorConfig(rounds=R, real_models=pair))
    target, _, tok = load_pair(pair)
    for k, text in enumerate(real_prompts(3)):
        ids = encode(tok, text, chat=True)
        assert len(r.outputs[k]) >= R  # R rounds, at least one token each
        ref = target_generate(target, ids, max_new_tokens=len(r.outputs[k]))
        assert r.outputs[k] == ref
    # the replayed rounds are the engine's: tokens per round between 1 and L + 1
    assert np.all(r.tokens_per_round >= 1) and np.all(r.tokens_per_round <= np.array(a.draft_lengths) + 1)
    # asynchronous policies: each user's own engine, same guarantee
    aa = solve(s, "heterogeneous-async", L_max=6)
    ra = emulate(s, aa, EmulatorConfig(rounds=3, real_models=pair))
    for k, text in enumerate(real_prompts(3)):
        ids = encode(tok, text, chat=True)
        assert ra.outputs[k] == target_generate(target, ids, max_new_tokens=len(ra.outputs[k]))


@pytest.mark.real_models
def test_batched_sync_engine_is_lossless_and_one_pass_per_round():
    """The batched synchronous engine: greedy outputs equal the target's, one target call per round (after
    one prefill per user), no position scored twice."""
    from spinlib.emulator import real_prompts
    from spinlib.sd.batched import batched_sync_generate
    from spinlib.sd.engine import target_generate
    from spinlib.sd.models import load_pair
    from spinlib.sd.prompts import encode

    target, draft, tok = load_pair("smollm2-rtn4g16")
    calls = []
    orig = target.forward

    def counting(*args, **kw):
        calls.append(tuple(kw["input_ids"].shape))
        return orig(*args, **kw)

    target.forward = counting
    try:
        prompts = [encode(tok, t, chat=True) for t in real_prompts(3)]
        outs, recs, batch_s = batched_sync_generate(target, draft, prompts, [3, 0, 5], 4, pad_id=tok.pad_token_id or 0)
    finally:
        target.forward = orig
    assert len(calls) == 3 + 4 and len(batch_s) == 4  # one prefill per user, then one batched pass per round
    assert calls[:3] == [(1, len(p) - 1) for p in prompts]  # each prompt once
    assert calls[3:] == [(3, 5 + 1)] * 4  # each round: the last committed token + at most L_max drafts per user
    for k in range(3):
        assert outs[k] == target_generate(target, prompts[k], max_new_tokens=len(outs[k]))
        assert [r.drafted for r in recs[k]] == [[3, 0, 5][k]] * 4
    assert all(r.tokens == 1 for r in recs[1])  # L = 0: plain decoding inside the batch


def test_tokens_per_round_spread_matches_the_iid_law():
    # N = sum_{i=0}^{L} 1{first i drafts accepted}: E[N^2] = sum_m (2 m + 1) alpha^m, m = 0..L (i.i.d.)
    s = random_scenario(4, 5)
    a = solve(s, "optimal-bandwidth-fixed-length", draft_length=4)
    r = emulate(s, a, EmulatorConfig(rounds=20000, seed=3))
    m = np.arange(5)
    for k, u in enumerate(s.users):
        mean = np.sum(u.alpha ** m)
        sd = np.sqrt(np.sum((2 * m + 1) * u.alpha ** m) - mean ** 2)
        assert r.tokens_per_round_sd[k] == pytest.approx(sd, rel=0.03)
        assert r.tokens_per_round[k] == pytest.approx(mean, rel=0.02)
    r0 = emulate(s, solve(s, "server-only"), EmulatorConfig(rounds=50, seed=3))
    assert (r0.tokens_per_round_sd == 0).all() and (r0.tokens_per_round == 1).all()
