"""Online controllers (issue 14): stopping theory, exact replay, learners, the Lyapunov budget, bad input."""
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spinlib.online import (ArenaConfig, Controller, Delay, EnergyModel, RoundCosts, Stream, brute_force_length,
                            critical_delay, critical_delay_iid, cspec, energy_queue, iid_survival,
                            large_delay_length, optimal_stopping, per_token_latency, register_controller, run_arena)
from spinlib.online.registry import CONTROLLERS, parse_spec
from spinlib.online.traces import (PromptTrace, check_trace_record, load_pair_traces, load_traces, replay_prompt,
                                   run_lengths, trace_files)
from spinlib.validation import ValidationError
from helpers import spinlib_cli

costs_st = st.builds(RoundCosts, t_d=st.floats(1e-4, 0.2), t0=st.floats(0, 0.2), t1=st.floats(0, 0.02),
                     D=st.floats(0, 2.0), t_up=st.floats(0, 0.02))


# ---------------------------------------------------------------------------------------------
# stopping theory
# ---------------------------------------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(alpha=st.floats(0.0, 0.99), L_max=st.integers(1, 40), costs=costs_st)
def test_stopping_rule_equals_brute_force_iid(alpha, L_max, costs):
    S = iid_survival(alpha, L_max)
    L_b, J_b = brute_force_length(S, costs)
    L_r, lam = optimal_stopping(S, costs)
    J = per_token_latency(S, costs)
    assert J[L_r] == pytest.approx(J_b, rel=1e-12)
    assert lam == pytest.approx(J_b, rel=1e-12)
    # the same length unless two lengths tie to rounding
    assert L_r == L_b or abs(J[L_r] - J[L_b]) <= 1e-12 * J_b


@settings(max_examples=300, deadline=None)
@given(h=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=30), costs=costs_st)
def test_stopping_rule_equals_brute_force_monotone_profiles(h, costs):
    S = np.concatenate([[1.0], np.cumprod(h)])  # any prefix survival: conditional acceptances h_i
    L_b, J_b = brute_force_length(S, costs)
    L_r, lam = optimal_stopping(S, costs)
    assert per_token_latency(S, costs)[L_r] == pytest.approx(J_b, rel=1e-12)
    assert lam == pytest.approx(J_b, rel=1e-12)


def test_stopping_rule_on_measured_profiles():
    """The empirical-prefix variant on our recorded traces (every pair and task that has them)."""
    files = [f for pair in ("smollm2-rtn4g16", "smollm2-rtn3g16", "smollm2-rtn6") for f in trace_files(pair)]
    assert files, "no recorded traces under data/traces"
    for f in files:
        S = Stream.from_traces(load_traces(f)).survival(12)
        for D in (0.0, 0.05, 0.2, 1.0):
            c = RoundCosts(0.02, 0.03, 0.002, D, 1e-4)
            L_b, J_b = brute_force_length(S, c)
            L_r, lam = optimal_stopping(S, c)
            assert lam == pytest.approx(J_b, rel=1e-12), (f, D)


def _flip_by_bisection(S, costs, hi=100.0):
    """The smallest delay at which the brute-force optimum leaves L = 1 (bisection on D)."""
    def L_at(D):
        return brute_force_length(S, RoundCosts(costs.t_d, costs.t0, costs.t1, D, costs.t_up))[0]
    lo = 0.0
    if L_at(lo) > 1:
        return None
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if L_at(mid) == 1 else (lo, mid)
    return hi


@settings(max_examples=60, deadline=None)
@given(alpha=st.floats(0.2, 0.95), costs=costs_st)
def test_critical_delay_closed_form_is_the_flip_point(alpha, costs):
    S = iid_survival(alpha, 30)
    Dc = critical_delay_iid(alpha, costs)
    assert Dc == pytest.approx(critical_delay(S, costs), rel=1e-9, abs=1e-12)
    flip = _flip_by_bisection(S, costs, hi=max(4 * Dc, 1.0))
    if Dc < 0:
        assert flip is None  # L* >= 2 already at D = 0
    else:
        assert flip == pytest.approx(Dc, rel=1e-7, abs=1e-10)


def test_critical_delay_of_a_measured_profile_is_the_flip_point():
    f = trace_files("smollm2-rtn4g16")[0]
    S = Stream.from_traces(load_traces(f)).survival(10)
    c = RoundCosts(0.01, 0.0, 0.0005, 0.0, 1e-5)
    Dc = critical_delay(S, c)
    assert Dc > 0
    assert _flip_by_bisection(S, c, hi=4 * Dc) == pytest.approx(Dc, rel=1e-7)


def test_large_delay_law():
    """L* + 1 follows ln((c/s) ln(1/alpha)) / ln(1/alpha) up to the neglected ln(1 + s L / c) / ln(1/alpha)
    and one token of rounding, and grows by ln(10)/ln(1/alpha) per decade of delay."""
    for alpha in (0.6, 0.8, 0.9):
        S = iid_survival(alpha, 400)
        prev = None
        for D in (10.0, 100.0, 1000.0):
            c = RoundCosts(0.02, 0.03, 0.002, D)
            L = optimal_stopping(S, c)[0]
            neglected = math.log(1 + c.s * L / c.c) / math.log(1 / alpha)
            assert abs(L - large_delay_length(alpha, c.c, c.s)) <= 1.0 + neglected
            if prev is not None:
                assert L - prev == pytest.approx(math.log(10) / math.log(1 / alpha), abs=1.5)
            prev = L


# ---------------------------------------------------------------------------------------------
# traces and exact replay
# ---------------------------------------------------------------------------------------------
def test_run_lengths_and_replay_by_hand():
    acc = np.array([1, 1, 0, 1, 1, 1, 0, 0])
    assert run_lengths(acc).tolist() == [2, 1, 0, 3, 2, 1, 0, 0]
    tr = PromptTrace(0, acc.astype(np.int8), np.ones(8), np.zeros(8), np.ones(8), np.arange(8))
    toks, rounds = replay_prompt(tr, 2)
    # p=0: A=2 -> p=3: A=2 -> p=6: L capped at 8-6-1 = 1, A=0 -> p=7: L capped at 0 (the last token)
    assert rounds == [(2, 2), (2, 2), (1, 0), (0, 0)]
    assert toks == list(range(8))


def test_committed_traces_are_valid_and_summarised():
    for pair in ("smollm2-rtn4g16",):
        by_task = load_pair_traces(pair)
        assert len(by_task) >= 1
        for task, traces in by_task.items():
            for t in traces:
                assert t.n >= 1 and set(np.unique(t.accept)) <= {0, 1}
                # Shannon entropy >= min-entropy -ln max q (rounding of the stored values aside)
                assert np.all(t.entropy >= -np.log(t.top_prob) - 1e-4)
                assert t.entropy.max() > 0
            prov = json.loads(next(trace_files(pair)[0].parent.glob(f"{task}-*.provenance.json")).read_text())
            assert prov["pair"] == pair and prov["config"]["task"] == task


@pytest.mark.real_models
def test_replay_equals_live_engine():
    """A fixed-L greedy run of the real engine gives exactly the tokens and rounds its trace predicts."""
    from spinlib.sd.engine import speculative_generate
    from spinlib.sd.models import PAIRS, load_pair
    from spinlib.sd.prompts import encode, load_prompts
    from spinlib.online.traces import trace_record, to_prompt_trace

    pair = "smollm2-rtn4g16"
    if not PAIRS[pair].installed():
        pytest.fail("packaged SmolLM2 not installed (run_all.sh installs it)")
    target, draft, tok = load_pair(pair)
    for p in load_prompts("qa", 1):
        ids = encode(tok, p["prompt"], True)
        tr = to_prompt_trace({**trace_record(target, draft, ids, max_new_tokens=24, stop_ids=(tok.eos_token_id,)),
                              "question_id": p["question_id"]})
        for L in (1, 4):
            new, rr = speculative_generate(target, draft, ids, max_new_tokens=24, draft_length=L, temperature=0.0,
                                           stop_ids=(tok.eos_token_id,))
            toks, rounds = replay_prompt(tr, L, 24)
            assert new == toks
            assert [(r.drafted, r.accepted) for r in rr] == rounds


def test_committed_trace_replays_the_engine_tokens():
    """The committed record's tokens are the target's greedy output: replay at any L emits them all."""
    tr = load_traces(trace_files("smollm2-rtn4g16")[0])[0]
    for L in (1, 3, 8):
        toks, rounds = replay_prompt(tr, L)
        assert toks == tr.tokens.tolist()
        assert sum(a + 1 for _, a in rounds) == tr.n


# ---------------------------------------------------------------------------------------------
# learners and the Lyapunov controller
# ---------------------------------------------------------------------------------------------
def _stationary(alpha=0.85, D=0.3, L_max=4, rounds=6000, users=8):
    streams = [Stream.synthetic(alpha, 50_000, np.random.default_rng(5))]
    cfg = ArenaConfig(rounds=rounds, users=users, delay=Delay("exponential", D), L_max=L_max)
    return streams, cfg


@pytest.mark.campaign
@pytest.mark.parametrize("seed", [3, 11, 2024])
def test_ucb_specstop_converges_to_the_oracle_arm(seed):
    streams, cfg = _stationary()
    S = streams[0].survival(cfg.L_max)
    oracle = optimal_stopping(S, RoundCosts(cfg.t_d, cfg.t0, cfg.t1, cfg.delay.mean_s,
                                            cfg.bits_per_token / float(cfg.rate(1.0))))[0]
    J = per_token_latency(S, RoundCosts(cfg.t_d, cfg.t0, cfg.t1, cfg.delay.mean_s))[1:]
    assert np.sort(J)[1] / J.min() > 1.05  # a stationary instance with a clear best arm
    res = run_arena(["ucb-specstop"], streams, cfg, seed=seed, keep_lengths=True)
    late = res.lengths["ucb-specstop"][0][-cfg.rounds // 4:]  # [R/4, K]
    modes = [np.bincount(late[:, k]).argmax() for k in range(cfg.users)]
    assert modes == [oracle] * cfg.users
    assert np.mean(late == oracle) > 0.8
    assert res.best_fixed_L[0] == [oracle] * cfg.users  # the oracle's arm is the best fixed length in hindsight


def test_ucb_regret_is_sublinear():
    streams, cfg = _stationary(rounds=8000, users=8)
    res = run_arena(["ucb-specstop", "fixed:L=1"], streams, cfg, seed=1)
    r = res.regret_fixed["ucb-specstop"][0]
    # the second half adds less regret than the first; a wrong fixed arm grows linearly
    assert r[-1] - r[len(r) // 2] < 0.5 * r[len(r) // 2]
    w = res.regret_fixed["fixed:L=1"][0]
    assert w[-1] - w[len(w) // 2] == pytest.approx(w[len(w) // 2], rel=0.2)


@pytest.mark.campaign
@pytest.mark.parametrize("seed", [0, 7])
def test_lyapunov_meets_the_energy_budget_on_average(seed):
    streams = [Stream.synthetic(0.8, 20_000, np.random.default_rng(1))]
    energy = EnergyModel(0.06, 0.2, 0.3)
    probe = run_arena(["fixed:L=1", "fixed:L=6"], streams,
                      ArenaConfig(rounds=200, users=4, L_max=8, energy=energy), seed=seed, oracles=False).frame()
    e1, e6 = probe.groupby("controller")["energy_per_round_j"].mean()[["fixed:L=1", "fixed:L=6"]]
    budget = float(e1 + 0.3 * (e6 - e1))  # binding: the unconstrained throughput optimum spends more
    cfg = ArenaConfig(rounds=12_000, users=2, L_max=8, energy=energy, energy_budget_j=budget,
                      delay=Delay("exponential", 0.05))
    res = run_arena([cspec("lyapunov-only", V=1.0), cspec("gelato", V=1.0), cspec("gelato", V=0.2), "fixed:L=6"],
                    streams, cfg, seed=seed, oracles=False)
    df = res.frame().set_index("controller")
    for c in ("lyapunov-only:V=1.0", "gelato:V=1.0", "gelato:V=0.2"):
        assert df.loc[c, "energy_per_round_j"] <= budget * 1.01, c
    # the queue (energy debt) stays bounded at a level that grows with V: O(V)
    ratio = df.loc["gelato:V=1.0", "energy_debt_j"] / df.loc["gelato:V=0.2", "energy_debt_j"]
    assert 2 < ratio < 12
    assert df.loc["fixed:L=6", "energy_per_round_j"] > budget * 1.1  # the budget binds
    assert df.loc["fixed:L=6", "energy_debt_j"] > 0.1 * budget * cfg.rounds  # and its debt grows linearly


def test_energy_queue_is_lindley():
    rng = np.random.default_rng(0)
    E = rng.exponential(1.0, (300, 3))
    Z = np.zeros(3)
    ref = []
    for e in E:
        Z = np.maximum(Z + e - 1.1, 0)
        ref.append(Z.copy())
    assert np.allclose(energy_queue(E, 1.1), ref)


def test_same_inputs_for_every_controller():
    streams, cfg = _stationary(rounds=300, users=3)
    a = run_arena(["fixed:L=3", "ucb-specstop"], streams, cfg, seed=5).frame()
    b = run_arena(["fixed:L=3"], streams, cfg, seed=5).frame()
    assert a.iloc[0]["user_goodput_tokens_per_s"] == b.iloc[0]["user_goodput_tokens_per_s"]  # adding a controller changes nobody's inputs


def test_user_controller_in_one_class():
    @register_controller("test-always-two", "test: drafts 2 every round", replace=True)
    class AlwaysTwo(Controller):
        def __init__(self, env, L: int = 2):
            super().__init__(env)
            self.L = L

        def choose(self, ctx):
            return np.full(self.env.K, self.L)

    try:
        streams, cfg = _stationary(rounds=200, users=2)
        df = run_arena(["test-always-two", "fixed:L=2"], streams, cfg, seed=0).frame().set_index("controller")
        assert df.loc["test-always-two", "user_goodput_tokens_per_s"] == df.loc["fixed:L=2", "user_goodput_tokens_per_s"]
    finally:
        del CONTROLLERS["test-always-two"]


# ---------------------------------------------------------------------------------------------
# bad input: one clear line
# ---------------------------------------------------------------------------------------------
def _one_line(excinfo, *words):
    msg = str(excinfo.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg, msg


def test_bad_input_one_line(tmp_path):
    streams, cfg = _stationary(rounds=10, users=1)
    with pytest.raises(ValidationError) as e:
        run_arena(["no-such-controller"], streams, cfg)
    _one_line(e, "controller must be one of", "no-such-controller")
    with pytest.raises(ValidationError) as e:
        run_arena(["ucb-specstop:cc=2"], streams, cfg)
    _one_line(e, "takes no parameter 'cc'")
    with pytest.raises(ValidationError) as e:
        ArenaConfig(energy_budget_j=-1.0)
    _one_line(e, "energy_budget_j", ">= 0")
    for V in (0, -1.0):
        with pytest.raises(ValidationError) as e:
            run_arena([cspec("gelato", V=V)], streams, cfg)
        _one_line(e, "V must be")
    with pytest.raises(ValidationError) as e:
        Stream("empty", np.array([]), np.array([]), np.array([]))
    _one_line(e, "empty")
    with pytest.raises(ValidationError) as e:
        run_arena(["fixed"], [], cfg)
    _one_line(e, "empty")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(ValidationError) as e:
        load_traces(empty)
    _one_line(e, "no trace records")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"kind": "trace", "question_id": 1, "tokens": [1, 2], "accept": [1, 2],
                               "top_prob": [0.5, 0.5], "entropy": [0.1, 0.1], "accept_prob": [1, 1]}) + "\n")
    with pytest.raises(ValidationError) as e:
        load_traces(bad)
    _one_line(e, "bad.jsonl:1", "'accept'")
    with pytest.raises(ValidationError) as e:
        parse_spec("fixed:L")
    _one_line(e, "key=value")
    with pytest.raises(ValidationError) as e:
        check_trace_record({"kind": "trace", "question_id": 1, "tokens": []})
    _one_line(e, "tokens")


def test_cli_arena_json():
    r = spinlib_cli("arena", "--synthetic-alpha", "0.8", "--rounds", "300", "--users", "2", "--seeds", "3",
                    "--controllers", "ucb-specstop,fixed:L=2,gelato:V=5", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [r["controller"] for r in doc["controllers"]] == ["ucb-specstop", "fixed:L=2", "gelato:V=5"]
    r = doc["controllers"][0]
    assert r["user_goodput_tokens_per_s"]["ci95"][0] <= r["user_goodput_tokens_per_s"]["mean"] <= r["user_goodput_tokens_per_s"]["ci95"][1]


@pytest.mark.parametrize("argv,words", [
    (["--controllers", "nope", "--synthetic-alpha", "0.8"], "controller must be one of"),
    (["--controllers", "gelato:V=0", "--synthetic-alpha", "0.8"], "V must be"),
    (["--energy-budget", "-1", "--synthetic-alpha", "0.8"], "energy_budget_j"),
    (["--pair", "no-such-pair"], "no traces recorded"),
])
def test_cli_arena_bad_input(argv, words):
    r = spinlib_cli("arena", *argv, "--rounds", "10")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("spinlib: error:") and words in r.stderr, r.stderr


def test_controller_specs_refuse_integers_beyond_the_float_range():
    """Found by the fuzz campaign: gelato:V=10**400 reached the controller's check as an int and
    raised OverflowError there; it is one line at parse time, and the checks themselves take it too."""
    from spinlib.online.gelato import _check_V
    from spinlib.online.multiuser import parse_mspec
    from spinlib.online.registry import parse_params
    from spinlib.validation import ValidationError

    huge = "1" + "0" * 400
    for parse in (parse_spec, parse_mspec):
        with pytest.raises(ValidationError, match="beyond the float range"):
            parse(f"gelato:V={huge}" if parse is parse_spec else f"energy-queue:V={huge}")
    with pytest.raises(ValidationError, match="must be finite"):
        _check_V(10 ** 400)
    assert parse_params("fixed:L=3,x=None,y=0.5,z=abc") == ("fixed", {"L": 3, "x": None, "y": 0.5, "z": "abc"})


# ---- committed traces are checked against their provenance before any replay (issue 24)
def _copy_pair(tmp_path, pair="smollm2-rtn4g16"):
    import shutil

    src = trace_files(pair)[0].parent
    dst = tmp_path / pair
    shutil.copytree(src, dst)
    return dst


def _corruptions():
    """(name, edit) pairs: each turns a good committed trace folder into one that must be refused."""
    def lines(f):
        return f.read_text().splitlines(keepends=True)

    def torn(d, f, p):
        f.write_text("".join(lines(f)) + '{"kind": "trace", "question_id": 9')

    def duplicate(d, f, p):
        ls = lines(f)
        f.write_text("".join(ls + ls[:1]))

    def dropped(d, f, p):
        f.write_text("".join(lines(f)[:-1]))

    def foreign(d, f, p):
        rec = json.loads(lines(f)[0])
        rec["question_id"] = 10 ** 6
        f.write_text("".join(lines(f)) + json.dumps(rec) + "\n")

    def no_provenance(d, f, p):
        p.unlink()

    def other_pair(d, f, p):
        prov = json.loads(p.read_text())
        prov["pair"] = "smollm2-rtn6"
        p.write_text(json.dumps(prov))

    def other_task(d, f, p):
        f.rename(f.with_name("qa2-" + f.name.split("-", 1)[1]))
        p.rename(p.with_name("qa2-" + p.name.split("-", 1)[1]))

    def edited_config(d, f, p):
        prov = json.loads(p.read_text())
        prov["config"]["max_new_tokens"] += 1
        p.write_text(json.dumps(prov))

    def duplicate_key(d, f, p):
        text = p.read_text()
        p.write_text(text.replace('"pair":', '"pair": "x", "pair":', 1))

    def too_long(d, f, p):
        rec = json.loads(lines(f)[0])
        n = len(rec["tokens"]) + 60
        rec.update(tokens=[1] * n, accept=[1] * n, top_prob=[0.5] * n, entropy=[1.0] * n, accept_prob=[1.0] * n)
        f.write_text(json.dumps(rec) + "\n" + "".join(lines(f)[1:]))

    return [torn, duplicate, dropped, foreign, no_provenance, other_pair, other_task, edited_config, duplicate_key,
            too_long]


@pytest.mark.parametrize("corrupt", _corruptions(), ids=lambda f: f.__name__)
def test_a_committed_trace_that_disagrees_with_its_provenance_is_refused(tmp_path, corrupt):
    d = _copy_pair(tmp_path)
    assert load_pair_traces("smollm2-rtn4g16", directory=tmp_path)  # the copy as committed is accepted
    f = sorted(d.glob("qa-*.jsonl"))[0]
    corrupt(d, f, f.with_name(f.stem + ".provenance.json"))
    with pytest.raises(ValidationError) as e:
        load_pair_traces("smollm2-rtn4g16", directory=tmp_path)
    assert "\n" not in str(e.value) and "qa" in str(e.value), str(e.value)


@pytest.mark.parametrize("seed", range(20))
def test_random_byte_edits_of_a_committed_trace_are_refused_or_harmless(tmp_path, seed):
    """Generated damage: one random byte of the JSONL changed. Either one clear line, or a file that
    still satisfies every check (e.g. a digit of a probability changed): never a traceback."""
    d = _copy_pair(tmp_path)
    f = sorted(d.glob("qa-*.jsonl"))[0]
    data = bytearray(f.read_bytes())
    rng = np.random.default_rng(seed)
    i = int(rng.integers(len(data)))
    data[i] = int(rng.choice(list(b'0123456789{}[]",: x\n')))
    f.write_bytes(bytes(data))
    try:
        load_pair_traces("smollm2-rtn4g16", directory=tmp_path)
    except ValidationError as e:
        assert "\n" not in str(e)
