"""UCB-SpecStop's regimes (issue 25): moving delays, channel state, discounting, the state-dependent
oracle and the regret's growth exponent."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from spinlib.emulator.fading import Fading
from spinlib.online.arena import ArenaConfig, Delay, Stream, run_arena
from spinlib.online.specstop import _ArmStats
from spinlib.validation import ValidationError
from helpers import spinlib_cli


# ---------------------------------------------------------------- the delay processes
def test_iid_kinds_draw_what_they_drew_before():
    # the i.i.d. kinds keep their stream of random numbers (committed arena runs stay comparable)
    for kind, ref in (("exponential", lambda g: g.exponential(0.1, (50, 3))),
                      ("uniform", lambda g: g.uniform(0.0, 0.2, (50, 3)))):
        D, m, s = Delay(kind, 0.1).draw_with_state(50, 3, np.random.default_rng(7))
        np.testing.assert_array_equal(D, ref(np.random.default_rng(7)))
        assert (m == 0.1).all() and (s == 0).all()
    assert Delay().mean_s == 0.05 and Delay().levels == (0.05,)


def test_piecewise_steps_through_its_levels_every_period():
    d = Delay("piecewise", levels_s=(0.05, 1.0, 0.3), period=10)
    assert math.isclose(d.mean_s, (0.05 + 1.0 + 0.3) / 3)
    D, m, s = d.draw_with_state(65, 4, np.random.default_rng(0))
    assert D.shape == m.shape == s.shape == (65, 4)
    expect = np.array([0.05, 1.0, 0.3])[(np.arange(65) // 10) % 3]
    np.testing.assert_array_equal(m, np.repeat(expect[:, None], 4, axis=1))
    np.testing.assert_array_equal(np.array(d.levels)[s], m)
    assert (D >= 0).all()


def test_sinusoidal_mean_moves_between_its_two_levels():
    d = Delay("sinusoidal", levels_s=(0.1, 0.9), period=100)
    _, m, s = d.draw_with_state(200, 2, np.random.default_rng(0))
    assert m.min() >= 0.1 - 1e-12 and m.max() <= 0.9 + 1e-12
    assert math.isclose(m[0, 0], 0.1) and math.isclose(m[50, 0], 0.9)
    np.testing.assert_array_equal(s, (np.abs(m - 0.9) < np.abs(m - 0.1)).astype(int))


def test_markov_delay_is_a_chain_with_the_stated_stay_probability():
    d = Delay("markov", levels_s=(0.05, 1.0), stay=0.9)
    D, m, s = d.draw_with_state(20000, 3, np.random.default_rng(1))
    stays = (s[1:] == s[:-1]).mean()
    assert abs(stays - 0.9) < 0.01  # 60,000 transitions: the standard error is 0.0012
    assert abs(s.mean() - 0.5) < 0.05  # uniform stationary law
    np.testing.assert_array_equal(np.array(d.levels)[s], m)
    # exponential around the current mean: E[D / m] = 1
    assert abs((D / m).mean() - 1) < 0.02


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([
    dict(kind="exponential", levels_s=(0.1, 0.2)), dict(kind="constant", period=5), dict(kind="uniform", stay=0.5),
    dict(kind="piecewise"), dict(kind="piecewise", levels_s=(0.1,)), dict(kind="markov", levels_s=(0.1, -1.0)),
    dict(kind="markov", levels_s=(0.1, float("nan"))), dict(kind="markov", levels_s=(0.1, 0.2), stay=1.0),
    dict(kind="markov", levels_s=(0.1, 0.2), period=3), dict(kind="piecewise", levels_s=(0.1, 0.2), stay=0.5),
    dict(kind="piecewise", levels_s=(0.1, 0.2), period=0), dict(kind="sinusoidal", levels_s=(0.1, 0.2, 0.3)),
    dict(kind="piecewise", levels_s=(0.1, 0.3), mean_s=0.5), dict(kind="markov", levels_s=(0.1, 0.2), stay=True),
    dict(kind="drift"), dict(kind="markov", levels_s="0.1,0.2")]))
def test_a_bad_delay_is_one_line_naming_its_field(kw):
    with pytest.raises(ValidationError) as e:
        Delay(**kw)
    msg = str(e.value)
    assert "\n" not in msg and any(f in msg for f in ("levels_s", "period", "stay", "mean_s", "kind"))


# ---------------------------------------------------------------- the learners and the oracle
def _streams():
    rng = np.random.default_rng(3)
    return [Stream.synthetic(0.75, 600, rng), Stream.synthetic(0.55, 500, rng)]


def test_the_contextual_variant_is_plain_ucb_when_the_channel_has_one_state():
    cfg = ArenaConfig(rounds=300, users=3, delay=Delay("exponential", 0.1))
    r = run_arena(["ucb-specstop", "ucb-specstop-csi"], _streams(), cfg, seed=2, n_seeds=2, oracles=False)
    a = [row["user_goodput_tokens_per_s"] for row in r.rows if row["controller"] == "ucb-specstop"]
    b = [row["user_goodput_tokens_per_s"] for row in r.rows if row["controller"] == "ucb-specstop-csi"]
    assert a == b


def test_the_contextual_variant_learns_per_state():
    cfg = ArenaConfig(rounds=400, users=2, delay=Delay("markov", levels_s=(0.01, 2.0), stay=0.95),
                      fading=Fading("markov"))
    r = run_arena(["ucb-specstop", "ucb-specstop-csi"], _streams(), cfg, seed=0, n_seeds=1, oracles=False,
                  keep_lengths=True)
    assert not np.array_equal(r.lengths["ucb-specstop"], r.lengths["ucb-specstop-csi"])


def test_discounted_statistics_are_geometric_sums():
    g = 0.9
    s = _ArmStats(K=1, L_max=3, gamma=g)
    for _ in range(50):
        s.add(np.array([2]), np.array([3.0]), np.array([0.5]))
    n = s.at(0)["n"][0]
    assert n[0] == 0 and n[2] == 0
    assert math.isclose(n[1], (1 - g**50) / (1 - g), rel_tol=1e-12)
    assert math.isclose(s.at(0)["sN"][0, 1], 3 * n[1], rel_tol=1e-12)
    plain = _ArmStats(K=1, L_max=3)
    for _ in range(50):
        plain.add(np.array([2]), np.array([3.0]), np.array([0.5]))
    assert plain.at(0)["n"][0, 1] == 50


@pytest.mark.parametrize("bad", ["ucb-specstop:gamma=0", "ucb-specstop:gamma=1.5", "ucb-specstop:c=-1",
                                 "ucb-specstop-csi:gamma=2", "specstop-known:csi=maybe"])
def test_bad_learner_parameters_are_refused(bad):
    cfg = ArenaConfig(rounds=5, users=1)
    with pytest.raises(ValidationError):
        run_arena([bad], _streams(), cfg, oracles=False)


def test_the_state_dependent_threshold_drafts_less_in_a_fade():
    # the rule drafts token i + 1 while lambda S(i+1) > s_t: a fade raises the upload cost s_t
    cfg = ArenaConfig(rounds=600, users=2, fading=Fading("markov", bad_db=15.0), bits_per_token=2048.0,
                      bandwidth_hz=5e4, snr_db=5.0, delay=Delay("exponential", 0.2))
    r = run_arena(["specstop-known:csi=state", "specstop-known"], _streams(), cfg, seed=1, n_seeds=1, oracles=False,
                  keep_lengths=True)
    from spinlib.online.arena import _inputs
    inp = _inputs(_streams(), cfg, np.random.default_rng(1).spawn(1)[0])
    bad = inp.rate < cfg.rate(1.0) * (1 - 1e-9)
    L = r.lengths["specstop-known:csi=state"][0]
    assert bad.any() and (~bad).any()
    assert L[bad].mean() < L[~bad].mean()
    # without channel state the oracle drafts one length per user whatever the round
    L0 = r.lengths["specstop-known"][0]
    assert (L0 == L0[0]).all()


def test_the_state_threshold_ignores_a_delay_state():
    # the delay is a fixed cost per round: with a static uplink the state rule drafts the same length in both
    # delay states of a round (it may change between rounds as its running latency estimate moves)
    cfg = ArenaConfig(rounds=400, users=2, delay=Delay("markov", levels_s=(0.01, 3.0), stay=0.9))
    r = run_arena(["specstop-known:csi=state"], _streams(), cfg, seed=4, n_seeds=1, oracles=False, keep_lengths=True)
    from spinlib.online.arena import _inputs
    inp = _inputs(_streams(), cfg, np.random.default_rng(4).spawn(1)[0])
    L = r.lengths["specstop-known:csi=state"][0]
    late = slice(200, None)  # once the running estimate has settled
    for k in range(2):
        s = inp.state[late, k]
        assert abs(L[late, k][s == 0].mean() - L[late, k][s == 1].mean()) < 0.5


def _arena_cli(*args):
    return spinlib_cli("arena", "--synthetic-alpha", "0.7", "--rounds", "60", "--users", "2", "--seeds", "1", *args)


def test_arena_cli_runs_a_moving_delay_and_refuses_what_it_would_ignore():
    import json as _json

    r = _arena_cli("--delay", "markov", "--delay-levels-ms", "50,1000", "--delay-stay", "0.9", "--json",
                   "--controllers", "ucb-specstop,ucb-specstop-csi,specstop-known:csi=state")
    assert r.returncode == 0, r.stderr
    out = _json.loads(r.stdout)
    assert out["delay"]["levels_s"] == [0.05, 1.0] and out["delay"]["stay"] == 0.9 and len(out["controllers"]) == 3
    for bad, says in ((["--delay", "markov"], "levels_s"), (["--delay-levels-ms", "5,6"], "levels_s applies"),
                      (["--delay", "piecewise", "--delay-levels-ms", "5,x"], "--delay-levels-ms"),
                      (["--delay", "sinusoidal", "--delay-levels-ms", "5,60", "--delay-stay", "0.5"], "stay"),
                      (["--delay", "exponential", "--delay-period", "9"], "period")):
        r = _arena_cli(*bad)
        assert r.returncode == 2 and says in r.stderr and len(r.stderr.strip().splitlines()) == 1, (bad, r.stderr)


def test_arena_takes_a_controller_from_a_plugin_file(tmp_path):
    plugin = tmp_path / "always_two.py"
    plugin.write_text("import numpy as np\n"
                      "from spinlib.online import Controller, register_controller\n\n"
                      "@register_controller('always-two-test', 'drafts 2 tokens every round')\n"
                      "class AlwaysTwo(Controller):\n"
                      "    def choose(self, ctx):\n"
                      "        return np.full(self.env.K, 2)\n")
    r = _arena_cli("--plugin", str(plugin), "--controllers", "always-two-test,fixed:L=2", "--json")
    assert r.returncode == 0, r.stderr
    import json as _json

    rows = {c["controller"]: c for c in _json.loads(r.stdout)["controllers"]}
    assert rows["always-two-test"]["user_goodput_tokens_per_s"] == rows["fixed:L=2"]["user_goodput_tokens_per_s"]  # the same decisions
    r = _arena_cli("--plugin", str(tmp_path / "missing.py"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


# ---------------------------------------------------------------- the per-token-aware variant (our construction)
def test_the_per_token_variant_with_one_arm_is_specdecpp():
    cfg = ArenaConfig(rounds=300, users=3, delay=Delay("exponential", 0.1))
    r = run_arena(["ucb-specstop-token:h_min=0.7,h_max=0.7,arms=1", "specdec++:h=0.7"], _streams(), cfg, seed=4,
                  n_seeds=2, oracles=False)
    a = [row["user_goodput_tokens_per_s"] for row in r.rows if row["controller"].startswith("ucb-specstop-token")]
    b = [row["user_goodput_tokens_per_s"] for row in r.rows if row["controller"] == "specdec++:h=0.7"]
    assert len(a) == 2 and a == b


@pytest.mark.campaign
@pytest.mark.parametrize("delay_s", [0.05, 2.0])
def test_the_per_token_variant_learns_a_good_threshold(delay_s):
    # on real traces its throughput lies within 10 % of the best of its arms run as fixed SpecDec++ thresholds
    # (in hindsight), above their worst, and the arms' outcomes differ (the test can fail)
    from spinlib.online.measured import pair_streams, pair_timings
    from spinlib.online.specstop import UCBSpecStopToken

    hs = UCBSpecStopToken.thresholds(0.1, 0.9, 9)
    specs = ["ucb-specstop-token"] + [f"specdec++:h={h:g}" for h in hs]
    cfg = ArenaConfig(rounds=3000, users=2, L_max=8, delay=Delay("exponential", delay_s), **pair_timings("qwen-coder"))
    s = run_arena(specs, pair_streams("qwen-coder"), cfg, seed=1, n_seeds=2, oracles=False).summary()["user_goodput_tokens_per_s"]
    arms = s[specs[1:]]
    assert arms.max() > 1.05 * arms.min()
    assert arms.min() < s["ucb-specstop-token"] and s["ucb-specstop-token"] >= 0.9 * arms.max()


@pytest.mark.parametrize("bad", ["ucb-specstop-token:" + p for p in (
    "h_min=0", "h_max=1", "arms=0", "arms=2.5", "h_min=0.8,h_max=0.2", "h_min=0.5,h_max=0.5,arms=3", "gamma=0",
    "arms=65", "c=-1")])
def test_bad_per_token_variant_parameters_are_one_line(bad):
    cfg = ArenaConfig(rounds=5, users=1)
    with pytest.raises(ValidationError) as e:
        run_arena([bad], _streams(), cfg, oracles=False)
    assert "\n" not in str(e.value) and any(k in str(e.value) for k in ("h_min", "h_max", "arms", "gamma", "c must"))
