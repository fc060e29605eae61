"""Multi-user controllers that re-plan every round on the current channel (spinlib.online.multiuser, the
per-round problem of spinlib.online.round_problem, the simulator of spinlib.online.replan).

Checks: a fixed plan played by the round-by-round simulator is the testbed's emulation bit for
bit; the per-round maximiser of replan-dinkelbach / energy-queue equals exhaustive search (fresh
random instances); determinism; the energy queue meets its budget with a bounded debt;
re-planning beats the average plan under Rayleigh fading; one-line errors; the CLI.
"""
import json

import numpy as np
import pytest

from spinlib.acceptance import tokens_table
from spinlib.control.heterogeneous import solve_heterogeneous_sync
from spinlib.emulator import EmulatorConfig, Fading, emulate
from spinlib.online import energy as en, multiuser as mu, replan as rep, round_problem as rp
from spinlib.studies import replanning
from spinlib.decision import Plan
from spinlib.presets import random_scenario
from spinlib.validation import ValidationError
from helpers import spinlib_cli, tiny_qwen_pair


def _objective(s, rng, L_max, kind):
    """A random instance of the per-round objective J: Dinkelbach or energy queue (module docstring)."""
    K = s.num_users
    tab = tokens_table(s, L_max)
    Ls = np.arange(L_max + 1)[None, :]
    t1 = s.server.t1_s_per_token
    lam = float(rng.uniform(10.0, 300.0))
    if kind == "dinkelbach":
        return tab - lam * t1 * Ls, np.zeros(K), lam
    e, p_tx, p_idle = en._energy_arrays(en.device_energy(s, "phone-soc"))
    Q = rng.exponential(rng.choice([0.05, 1.0, 20.0]), K)
    V = float(rng.choice([0.01, 0.1, 1.0]))
    price = V * lam + float(p_idle @ Q)
    u = V * tab - (Q * (e - p_tx * s.tau))[:, None] * Ls - price * t1 * Ls
    return u, Q * (p_tx - p_idle), price


# ---------------------------------------------------------------------------------------------
# the simulator is the testbed
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fading", ["static", "rayleigh", "markov"])
def test_fixed_plan_is_the_testbeds_emulation_bit_for_bit(fading):
    """plan-on-average replays emulate(): same acceptance and fading draws, same clock, same bytes."""
    s = random_scenario(3, 21)
    cfg = rep.ReplanConfig(rounds=300, seed=7, fading=Fading(fading))
    (res,) = rep.run_replan(s, ["plan-on-average"], cfg)
    plan = solve_heterogeneous_sync(s, cfg.L_max)
    em = emulate(s, plan, EmulatorConfig(rounds=300, seed=7, fading=Fading(fading)))
    assert (res.goodput_tokens_per_s, res.ci_low, res.ci_high) == (em.goodput_tokens_per_s, em.ci_low, em.ci_high)
    assert np.array_equal(res.round_times_s, em.round_time_s)
    assert np.array_equal(res.tokens.mean(axis=0), em.tokens_per_round)
    if fading == "static":  # and the analytic model is inside the testbed's interval
        assert res.ci_low <= em.predicted_tokens_per_s <= res.ci_high


def test_outcomes_the_controllers_learn_from_match_the_clock():
    """The per-round T and E a controller sees are the clock's (and the energy model's) values."""
    seen = []

    @mu.register_multiuser_controller("test-recorder", "replan-coordinate that records its outcomes", replace=True)
    class Recorder(mu.ReplanCoordinate):
        def update(self, out):
            super().update(out)
            seen.append(out)

    try:
        s = random_scenario(3, 4)
        (res,) = rep.run_replan(s, ["test-recorder"], rep.ReplanConfig(rounds=60, seed=2, fading=Fading("rayleigh")))
    finally:
        mu.REGISTRY.remove("test-recorder")
    T = np.array([o.T for o in seen])  # [R, K]: every user's round is the synchronous round
    np.testing.assert_allclose(T, np.repeat(res.round_times_s[:, None], s.num_users, axis=1), rtol=1e-12)
    np.testing.assert_array_equal(np.array([o.E for o in seen]), res.energy_j)
    np.testing.assert_array_equal(np.array([o.b for o in seen]), res.bandwidth_hz)
    np.testing.assert_array_equal(np.array([o.N for o in seen]), res.tokens)
    up, rate, L = np.array([o.upload_s for o in seen]), np.array([o.rate for o in seen]), res.draft_lengths
    on = L > 0  # a silent user uploads nothing (and may have no bandwidth, so no rate)
    assert on.any() and (~on).any() and np.all(up[~on] == 0)
    np.testing.assert_allclose(up[on], L[on] * s.payload.bits_per_token / rate[on], rtol=1e-12)
    assert np.all(res.bandwidth_hz.sum(axis=1) <= s.radio.bandwidth_hz * (1 + 1e-12))


def test_any_decider_of_the_seam_plays_on_the_multi_user_player():
    """The one decision seam: a plain FixedLength decider (lengths only, no bandwidth) gets paper 1's
    split on every round's channel, which is exactly what replan-bandwidth plans; a decider that
    stops on the draft's confidence, which this player does not observe, is refused in one line."""
    from spinlib.decision import FixedLength

    class Stopper(FixedLength):  # a stop rule on the draft's confidence (not marked never_stops)
        def stop(self, ctx, L_ref):
            return np.minimum(L_ref, (ctx.top_prob > 0.5).sum(axis=1))

    s = random_scenario(3, 17)
    cfg = rep.ReplanConfig(rounds=80, seed=3, fading=Fading("rayleigh"))
    (ref,) = rep.run_replan(s, ["replan-bandwidth"], cfg)
    avg = solve_heterogeneous_sync(s, cfg.L_max)
    got = rep.play(s, FixedLength(avg.L), rep.fading_draws(s, cfg), cfg)
    assert got.goodput_tokens_per_s == ref.goodput_tokens_per_s
    np.testing.assert_array_equal(got.bandwidth_hz, ref.bandwidth_hz)
    np.testing.assert_array_equal(got.energy_j, ref.energy_j)
    assert not np.all(got.bandwidth_hz == got.bandwidth_hz[0])  # the split follows the fading
    _one_line(lambda: rep.play(s, Stopper([2, 2, 2]), rep.fading_draws(s, cfg), cfg), "confidence", "never_stops")
    _one_line(lambda: rep.play(s, FixedLength([cfg.L_max + 1] * 3), rep.fading_draws(s, cfg), cfg), "round 0", "lengths")
    _one_line(lambda: rep.play(s, FixedLength([1, 1]), rep.fading_draws(s, cfg), cfg), "3 integer length")
    _one_line(lambda: rep.play(s, object(), rep.fading_draws(s, cfg), cfg), "choose(ctx)")


def test_static_policies_are_deciders_on_the_multi_user_player():
    """Any registered static policy plays as ``static-policy``: its allocation on the average channel,
    every round. heterogeneous-sync's is plan-on-average and server-only's is server-only, bit for
    bit; every other paper-1 policy and baseline (fresh random cells, the entropy in the message)
    plays exactly the lengths and bandwidth ``control.solve`` gives it; paper 2's mode choosers and
    bad parameters are one line."""
    from spinlib.control import get_policy, policy_names, solve

    s = random_scenario(3, 17)
    cfg = rep.ReplanConfig(rounds=60, seed=3, fading=Fading("rayleigh"))
    runs = rep.run_replan(s, ["plan-on-average", "static-policy", "server-only", "static-policy:policy=server-only"], cfg)
    for a, b in (runs[:2], runs[2:]):
        assert a.goodput_tokens_per_s == b.goodput_tokens_per_s
        np.testing.assert_array_equal(a.draft_lengths, b.draft_lengths)
        np.testing.assert_array_equal(a.bandwidth_hz, b.bandwidth_hz)
        np.testing.assert_array_equal(a.energy_j, b.energy_j)
    entropy = np.random.SeedSequence().entropy
    rng = np.random.default_rng(entropy)
    names = [n for f in ("paper1", "baseline") for n in policy_names(f)]
    for name in names:
        K = int(rng.integers(2, 5))
        cell = random_scenario(K, int(rng.integers(1 << 30)))
        c = rep.ReplanConfig(rounds=12, seed=int(rng.integers(1000)), L_max=6, fading=Fading("rayleigh"))
        params = {"L_max": c.L_max} if "L_max" in get_policy(name).params else {}
        a = solve(cell, name, **params)
        (r,) = rep.run_replan(cell, [f"static-policy:policy={name}"], c)
        assert r.info == {"policy": name}
        np.testing.assert_array_equal(r.draft_lengths, np.tile(a.draft_lengths, (c.rounds, 1)), err_msg=f"{name} {entropy}")
        np.testing.assert_array_equal(r.bandwidth_hz, np.tile(np.asarray(a.bandwidth_hz), (c.rounds, 1)),
                                      err_msg=f"{name} {entropy}")
    (r,) = rep.run_replan(s, ["static-policy:policy=equal,draft_length=2"], cfg)
    assert np.all(r.draft_lengths == 2)
    for spec, words in [("static-policy:policy=uldl-optimal", ("UL/DL modes",)),
                        ("static-policy:policy=nope", ("nope",)),
                        ("static-policy:policy=homogeneous,draft_length=2", ("takes no draft_length",)),
                        ("static-policy:policy=equal,draft_length=99", ("draft_length",))]:
        _one_line(lambda: rep.run_replan(s, [spec], cfg), *words)


def test_replan_ratio_solves_the_faded_scenario():
    """Solving with the faded rate model is solving the scenario whose gains are g_k h_k."""
    s = random_scenario(3, 9)
    h = np.array([0.3, 2.0, 0.05])
    faded = s.replace(users=tuple(u.__class__(u.draft_time_s, u.alpha, u.channel_gain * hk, u.tx_power_w)
                                  for u, hk in zip(s.users, h)))
    a = solve_heterogeneous_sync(s, 6, rates=rp.faded_rates(s, h))
    b = solve_heterogeneous_sync(faded, 6)
    assert a.draft_lengths == b.draft_lengths
    assert a.goodput_tokens_per_s == pytest.approx(b.goodput_tokens_per_s, rel=1e-12)


# ---------------------------------------------------------------------------------------------
# the per-round maximiser is exact
# ---------------------------------------------------------------------------------------------
def test_round_maximiser_equals_exhaustive_search():
    """Fresh random instances (the entropy is in the message): K = 2-3, L_max 1-5, both objectives,
    with and without enumeration of small boxes, Shannon and linear rates, deep fades included."""
    entropy = np.random.SeedSequence().entropy
    rng = np.random.default_rng(entropy)
    for trial in range(60):
        K, L_max = int(rng.integers(2, 4)), int(rng.integers(1, 6))
        s = random_scenario(K, int(rng.integers(2**31)), rate_model=str(rng.choice(["shannon", "linear"])))
        h = np.maximum(rng.exponential(1.0, K), 0.01)
        rates = rp.faded_rates(s, h)
        u, w, price = _objective(s, rng, L_max, ["dinkelbach", "energy"][trial % 2])
        ref = rp.exhaustive_round(s, rates, u, w, price)
        tol = 1e-9 * max(abs(ref.value), price * rp.round_constant_s(s))
        for enum_max in (1, 64):
            sol = rp.maximise_round(s, rates, u, w, price, enum_max=enum_max, batch=int(rng.integers(1, 64)),
                                    exhaustive_max=0)  # the branch-and-bound (by default these are enumerated)
            msg = f"entropy {entropy}, trial {trial}, enum_max {enum_max}: {sol} vs {ref}"
            assert sol.status == "optimal", msg
            assert sol.value >= ref.value - tol, msg
            assert sol.upper_bound >= ref.value - tol, msg
            J, _, _ = rp.round_objective(s, rates, u, w, price, sol.L)
            assert float(J) == sol.value, msg
            assert sol.b.sum() <= s.radio.bandwidth_hz * (1 + 1e-12), msg
        # a node budget that binds still certifies a bound on the optimum
        cut = rp.maximise_round(s, rates, u, w, price, enum_max=1, max_nodes=1, exhaustive_max=0)
        assert cut.upper_bound >= ref.value - tol and cut.value <= ref.value + tol, msg
        # the default enumerates these tiny rounds: the same optimum, certified with a zero gap
        tiny = rp.maximise_round(s, rates, u, w, price)
        assert tiny.status == "optimal" and tiny.nodes == 0 and tiny.upper_bound == tiny.value, msg
        assert abs(tiny.value - ref.value) <= tol, msg


# ---------------------------------------------------------------------------------------------
# determinism, energy, gains
# ---------------------------------------------------------------------------------------------
def test_same_seed_same_bytes():
    kw = dict(n_cells=1, num_users=2, rounds=40, seed=3, fadings=("rayleigh",),
              controllers=("plan-on-average", "replan-dinkelbach", "replan-coordinate", "energy-queue"), L_max=4)
    a, b = replanning.replan_under_fading(**kw), replanning.replan_under_fading(**kw)
    assert json.dumps(a, sort_keys=True).encode() == json.dumps(b, sort_keys=True).encode()
    c = replanning.replan_under_fading(**{**kw, "seed": 4})
    assert json.dumps(a, sort_keys=True) != json.dumps(c, sort_keys=True)


@pytest.mark.campaign
def test_energy_queue_meets_its_budget_with_a_bounded_debt():
    """Over 1000 Rayleigh rounds every device's mean energy per round is within 3 % of its budget
    (the excess is final debt / rounds, Lindley), the debt does not grow (its peak over the second
    half is at most 1.25x the first half's) and stays under 50 rounds of budget, while the average
    plan overspends (its energy is 1 / budget_scale of the budget on the average channel)."""
    s = random_scenario(2, 5)
    cfg = rep.ReplanConfig(rounds=1000, seed=1, fading=Fading("rayleigh"), L_max=6)
    eq, avg = rep.run_replan(s, [mu.mspec("energy-queue", V=0.05, budget_scale=0.7), "plan-on-average"], cfg)
    budget = eq.info["budget_j"]
    assert np.all(eq.energy_per_round_j <= budget * 1.03), (eq.energy_per_round_j, budget)
    assert np.any(avg.energy_per_round_j > budget * 1.2)
    S = np.cumsum(eq.energy_j - budget, axis=0)
    Q = S - np.minimum(np.minimum.accumulate(S, axis=0), 0.0)  # the controller's queue, from its energies
    np.testing.assert_allclose(Q[-1], eq.info["debt_j"], rtol=1e-9, atol=1e-12)
    half = cfg.rounds // 2
    assert np.all(Q[half:].max(axis=0) <= 1.25 * Q[:half].max(axis=0) + 1e-12)
    assert np.all(Q.max(axis=0) <= 50 * budget)
    assert eq.energy_per_token_j < avg.energy_per_token_j


@pytest.mark.campaign
def test_replanning_beats_the_average_plan_under_rayleigh_fading():
    """On three random cells the re-planners' 99 % intervals lie above the average plan's and above
    server-only's goodput (the testbed's finding that the average plan can lose to it)."""
    for seed in (0, 1, 2):
        s = random_scenario(3, 100 + seed)
        res = rep.run_replan(s, ["plan-on-average", "server-only", "replan-dinkelbach", "replan-coordinate"],
                            rep.ReplanConfig(rounds=200, seed=seed, fading=Fading("rayleigh"), L_max=6))
        avg, server, dink, coord = res
        for r in (dink, coord):
            assert r.ci_low > avg.ci_high, (seed, r.controller, r.ci_low, avg.ci_high)
            assert r.ci_low > server.goodput_tokens_per_s, (seed, r.controller)
        assert coord.expected_goodput_tokens_per_s <= dink.expected_goodput_tokens_per_s * 1.02


# ---------------------------------------------------------------------------------------------
# bad input: one line naming the field and its range
# ---------------------------------------------------------------------------------------------
def _one_line(fn, *words):
    with pytest.raises(ValidationError) as e:
        fn()
    msg = str(e.value)
    assert "\n" not in msg and all(w in msg for w in words), msg


def test_bad_input_is_one_line():
    s = random_scenario(2, 1)
    cfg = rep.ReplanConfig(rounds=5)
    _one_line(lambda: rep.ReplanConfig(rounds=0), "rounds", "[2, 100000]")
    _one_line(lambda: rep.ReplanConfig(rounds=rep.MAX_ROUNDS + 1), "rounds", "[2, 100000]")
    _one_line(lambda: rep.ReplanConfig(seed=-1), "seed")
    _one_line(lambda: rep.ReplanConfig(L_max=0), "L_max")
    _one_line(lambda: rep.ReplanConfig(acceptance="x"), "acceptance")
    _one_line(lambda: rep.ReplanConfig(energy_preset="x"), "energy_preset")
    _one_line(lambda: rep.ReplanConfig(fading="rayleigh"), "fading")
    _one_line(lambda: rep.run_replan(s, ["nope"], cfg), "controller must be one of")
    _one_line(lambda: rep.run_replan(s, ["replan-ratio:bogus=1"], cfg), "bogus", "max_nodes")
    _one_line(lambda: rep.run_replan(s, ["replan-ratio:max_nodes"], cfg), "key=value")
    _one_line(lambda: rep.run_replan(s, [], cfg), "at least one")
    for V in (0, -1.0, float("inf")):
        _one_line(lambda: rep.run_replan(s, [mu.mspec("energy-queue", V=V)], cfg), "V", "> 0")
    _one_line(lambda: rep.run_replan(s, ["energy-queue:budget_j=-0.1"], cfg), "budget_j", ">= 0")
    _one_line(lambda: rep.run_replan(s, [mu.mspec("energy-queue", budget_j=(0.1, -0.1))], cfg), "budget_j[1]", ">= 0")
    _one_line(lambda: rep.run_replan(s, [mu.mspec("energy-queue", budget_j=(0.1, 0.1, 0.1))], cfg), "budget_j", "2")
    _one_line(lambda: rep.run_replan(s, ["energy-queue:budget_scale=-1"], cfg), "budget_scale", ">= 0")
    _one_line(lambda: rep.run_replan(s, ["replan-dinkelbach:gap=2"], cfg), "gap", "[0, 1)")
    _one_line(lambda: rep.run_replan(s, ["replan-ratio:max_nodes=0"], cfg), "max_nodes", "[1,")
    _one_line(lambda: rep.multiuser_env(random_scenario(rep.MAX_USERS + 1, 0), cfg), "num_users", str(rep.MAX_USERS))
    _one_line(lambda: replanning.replan_under_fading(fadings=("fast",)), "fadings")
    _one_line(lambda: replanning.replan_under_fading(num_users=0), "num_users")

    @mu.register_multiuser_controller("test-greedy", "asks for more than the band", replace=True)
    class Greedy(mu.MultiUserController):
        def choose(self, ctx):
            return Plan(np.ones(self.env.K, dtype=int), np.full(self.env.K, self.env.scenario.radio.bandwidth_hz))

    try:
        _one_line(lambda: rep.run_replan(s, ["test-greedy"], cfg), "test-greedy", "round 0", "bandwidth")
    finally:
        mu.REGISTRY.remove("test-greedy")


# ---------------------------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------------------------
_cli = spinlib_cli


@pytest.mark.campaign
def test_cli_replan(tmp_path):
    cell = tmp_path / "cell.json"
    random_scenario(2, 8).to_json(cell)
    plugin = tmp_path / "mine.py"
    plugin.write_text(
        "import numpy as np\n"
        "from spinlib.online.multiuser import MultiUserController, Plan, register_multiuser_controller\n\n"
        "@register_multiuser_controller('equal-split', 'L for everyone, equal bandwidth')\n"
        "class EqualSplit(MultiUserController):\n"
        "    def __init__(self, env, L: int = 4):\n"
        "        super().__init__(env)\n"
        "        self.L = L\n\n"
        "    def choose(self, ctx):\n"
        "        K, B = self.env.K, self.env.scenario.radio.bandwidth_hz\n"
        "        return Plan(np.full(K, self.L), np.full(K, B / K))\n")
    r = _cli("replan", str(cell), "--fading", "rayleigh", "--rounds", "30", "--seed", "1", "--L-max", "5", "--json",
             "--controllers", "plan-on-average,replan-coordinate:max_sweeps=2,equal-split:L=2", "--plugin", str(plugin))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["fading"] == "rayleigh" and doc["rounds"] == 30 and doc["users"] == 2
    labels = [c["controller"] for c in doc["controllers"]]
    assert labels == ["plan-on-average", "replan-coordinate:max_sweeps=2", "equal-split:L=2"]
    assert all(c["ci_low"] <= c["goodput_tokens_per_s"] <= c["ci_high"] for c in doc["controllers"])
    r = _cli("replan", str(cell), "--rounds", "20", "--controllers", "server-only")
    assert r.returncode == 0 and "server-only" in r.stdout, r.stderr
    for bad, word in ((("--rounds", "0"), "rounds"), (("--fading", "fast"), "fading"),
                      (("--controllers", "nope"), "controller"), (("--seed", "-1"), "seed"),
                      (("--controllers", "energy-queue:V=0"), "V")):
        r = _cli("replan", str(cell), *bad)
        assert r.returncode == 2 and r.stdout == "", (bad, r.stdout)
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("spinlib: error:") and word in r.stderr, r.stderr
    r = _cli("replan", str(tmp_path / "missing.json"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1


# ---------------------------------------------------------------------------------------------
# the run's budget of certified per-round search
# ---------------------------------------------------------------------------------------------
def test_certified_search_is_refused_once_it_projects_past_the_run_budget(monkeypatch):
    """A budget that does not bind changes nothing (bit for bit); one that does refuses in one line, from node
    counts (the same on every machine); allow_long lifts it."""
    s = random_scenario(7, 11)
    cfg = rep.ReplanConfig(rounds=40, seed=3, fading=Fading("rayleigh"))
    free = rep.run_replan(s, ["replan-dinkelbach", "energy-queue"], rep.ReplanConfig(**{**cfg.__dict__, "allow_long": True}))
    capped = rep.run_replan(s, ["replan-dinkelbach", "energy-queue"], cfg)
    for a, b in zip(free, capped):
        assert np.array_equal(a.draft_lengths, b.draft_lengths) and a.goodput_tokens_per_s == b.goodput_tokens_per_s
        assert 0 < a.info["search_nodes"] == b.info["search_nodes"] < rep.REPLAN_NODE_BUDGET
    used = free[0].info["search_nodes"]
    for name, r in zip(("replan-dinkelbach", "energy-queue"), free):  # a run that needs 60 % of the budget runs
        monkeypatch.setattr(rep, "REPLAN_NODE_BUDGET", int(r.info["search_nodes"] / 0.6))
        (fits,) = rep.run_replan(s, [name], cfg)
        assert np.array_equal(fits.draft_lengths, r.draft_lengths), name
    monkeypatch.setattr(rep, "REPLAN_NODE_BUDGET", used // 4)
    for name in ("replan-dinkelbach", "energy-queue"):
        with pytest.raises(ValidationError) as e:
            rep.run_replan(s, [name], cfg)
        msg = str(e.value)
        assert "\n" not in msg and name in msg and f"budget of {used // 4:,} nodes" in msg and "allow_long" in msg
    again = rep.run_replan(s, ["replan-dinkelbach"], rep.ReplanConfig(**{**cfg.__dict__, "allow_long": True}))
    assert np.array_equal(again[0].draft_lengths, free[0].draft_lengths)


def test_the_replanning_study_passes_allow_long_through_and_keys_without_it(monkeypatch, tmp_path):
    """The study of notebook 10 refuses a run past the search budget like run_replan, runs it with allow_long,
    and its cache entry is the same with or without the flag (it says where the work may run, not what it is)."""
    from spinlib.cache import cached_call
    from spinlib.studies.replanning import replan_under_fading

    kw = dict(n_cells=1, num_users=7, rounds=12, seed=5, fadings=("rayleigh",), controllers=("replan-dinkelbach",), n_jobs=1)
    monkeypatch.setattr(rep, "REPLAN_NODE_BUDGET", 1)
    with pytest.raises(ValidationError, match="allow_long"):
        replan_under_fading(**kw)
    long = cached_call(replan_under_fading, allow_long=True, cache_dir=tmp_path, **kw)
    monkeypatch.setattr(rep, "REPLAN_NODE_BUDGET", 10**12)
    assert replan_under_fading(**kw) == long
    calls = []
    monkeypatch.setattr("spinlib.studies.replanning.Study.run", lambda *a, **k: calls.append(1) or [])
    assert cached_call(replan_under_fading, cache_dir=tmp_path, **kw) == long and not calls  # read from the cache
    with pytest.raises(ValidationError, match="allow_long must be True or False"):
        replan_under_fading(allow_long="yes", **kw)


@pytest.mark.parametrize("flag", [0, 1, "true", "false", None, 1.0, [True]])
def test_allow_long_is_a_flag_not_a_truthy_value(flag):
    with pytest.raises(ValidationError, match="allow_long must be True or False"):
        rep.ReplanConfig(allow_long=flag)
    from spinlib.online import ArenaConfig, Stream, run_arena

    with pytest.raises(ValidationError, match="allow_long must be True or False"):
        run_arena(["fixed"], [Stream.synthetic(0.7, 20, np.random.default_rng(0))], ArenaConfig(rounds=5),
                  allow_long=flag)


# ---------------------------------------------------------------------------------------------
# re-planning with real models: the batched engine under a controller of the shared band
# ---------------------------------------------------------------------------------------------
def test_controllers_plan_real_rounds_losslessly_on_the_shared_band():
    """Every multi-user controller (and a per-user learner) plans real rounds: each user's tokens are the
    target's greedy decoding (lossless), the played lengths are the plan's, the accepted counts are the
    engine's, and the round's clock is the band's model on them."""
    from spinlib.decision import FixedLength
    from spinlib.sd.engine import target_generate

    target, draft = tiny_qwen_pair()
    K, R = 3, 6
    s = random_scenario(K, 4)
    cfg = rep.ReplanConfig(rounds=R, seed=2, fading=Fading("rayleigh"), L_max=4)
    prompts = [[1 + k, 5, 9, 2 + 3 * k] for k in range(K)]
    h = rep.fading_draws(s, cfg)
    env = rep.multiuser_env(s, cfg)
    for name in ("plan-on-average", "replan-dinkelbach", "replan-coordinate", "energy-queue"):
        ctrl = mu.get_multiuser_controller(name).cls(env)
        res = rep.play_real(s, ctrl, h, cfg, (target, draft, prompts, 0), name)
        assert res.draft_lengths.shape == (R, K) and res.draft_lengths.max() <= cfg.L_max, name
        assert np.all(res.tokens >= 1) and np.all(res.tokens <= res.draft_lengths + 1), name
        assert np.isfinite(res.goodput_tokens_per_s) and res.goodput_tokens_per_s > 0, name
        for k in range(K):  # lossless under every plan: the target's own greedy continuation
            n = len(res.outputs[k])
            assert n == int(res.tokens[:, k].sum()), name
            assert list(res.outputs[k]) == list(target_generate(target, prompts[k], max_new_tokens=n)), (name, k)
    # a fixed plan: the tokens each user committed are the target's own greedy continuation
    res = rep.play_real(s, FixedLength([2, 0, 3]), h, cfg, (target, draft, prompts, 0))
    assert np.all(res.draft_lengths == [2, 0, 3])
    drafting = res.draft_lengths > 0  # the engine's acceptance: some drafts rejected, some accepted
    assert np.any(res.tokens[drafting] < res.draft_lengths[drafting] + 1) and np.any(res.tokens[drafting] > 1)
    for k in range(K):
        n = int(res.tokens[:, k].sum())
        assert len(res.outputs[k]) == n and n >= R
        assert list(res.outputs[k]) == list(target_generate(target, prompts[k], max_new_tokens=n)), k
    # the clock is the band's: the same lengths and accepted counts on the sampler's band give the same time
    band = rep.SharedBand(s, h, cfg, en.device_energy(s))
    for t in range(R):
        band.context(t)
        band.reference(res.draft_lengths[t], t, "check")
        band.settle(t, res.draft_lengths[t], res.tokens[t] - 1)
    assert np.array_equal(band.E, res.energy_j)
    with pytest.raises(ValidationError, match="one prompt per user"):
        rep.play_real(s, FixedLength([1] * K), h, cfg, (target, draft, prompts[:2], 0))
