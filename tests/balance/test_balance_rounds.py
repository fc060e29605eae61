"""BALANCE's schedules played round by round (:mod:`spinlib.balance.rounds`) against the analysis
(:func:`spinlib.balance.model.feasible`), on fresh random instances (seed printed on failure;
``SPINLIB_TEST_SEED`` replays one):

* AD users complete exactly at the analysis's time (batch sizes of the plan, ``shrink=False``);
* SD users' mean completion over many plays lies within Wald's bounds, between the analysis's
  ``c + n R / N`` and ``c + (n + L) R / N`` (5 standard errors of slack for the sampling), and within
  4.5 standard errors of the exact expectation ``c + R E[rho]`` (:func:`expected_rounds`) on mixed plans
  with an AD share ``0 < phi < 1`` (a wrong round time, acceptance law or cap moves it);
* letting finished users leave the batch (``shrink=True``) never completes anyone later on the same draws,
  and some users earlier;
* a schedule that serves nobody plays no round, and a tiny AD share does not stretch the run;
* every registered BALANCE policy is a decider that plays, the same seed gives the same run, and a plan
  that is not a schedule, or that the server cannot run, is one line.
"""
from __future__ import annotations

import numpy as np
import pytest

from spinlib.balance import BALANCE_POLICIES, Schedule, feasible, random_instance
from spinlib.balance.rounds import PolicyDecider, ServerRounds, expected_rounds, play_balance
from spinlib.decision import never_stops
from spinlib.online.player import play_rounds
from spinlib.validation import ValidationError
from helpers import fresh_seed


class Plan:
    """A fixed schedule as a decider (the server's full draft length, no early stop)."""

    def __init__(self, schedule):
        self.schedule = schedule

    def choose(self, ctx):
        return self.schedule

    @never_stops
    def stop(self, ctx, L_ref):
        return L_ref

    def update(self, out):
        pass


class Halves(Plan):
    """Drafts half the server's length: the stop rule of any decider is played as given."""

    @never_stops
    def stop(self, ctx, L_ref):
        return L_ref // 2


def draw(rng):
    return random_instance(int(rng.integers(3, 25)), int(rng.integers(1 << 31)),
                           alpha_range=(0.2, float(rng.uniform(0.5, 0.95))), output_tokens=(16, 200))


def test_ad_users_complete_at_the_analysis_time():
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    checked = 0
    for i in range(8):
        inst = draw(rng)
        for policy in ("ad-only", "greedy", "balance"):
            d = PolicyDecider(inst, policy)
            run = play_balance(inst, d, seed=[seed % (1 << 32), i])
            ana = np.array(feasible(inst, d.schedule).completion_s)
            ad = np.array(d.schedule.modes) == "AD"
            got = np.array(run.completion_s)
            assert np.allclose(got[ad], ana[ad], rtol=1e-12, atol=0), f"seed {seed}, instance {i}, {policy}"
            assert all(run.met[k] for k in np.flatnonzero(ad)), f"seed {seed}, instance {i}, {policy}"
            checked += int(ad.sum())
    assert checked >= 20, f"seed {seed}: only {checked} AD users checked"


def test_sd_users_mean_completion_lies_within_walds_bounds():
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    checked = 0
    for i in range(3):
        inst = draw(rng)
        d = PolicyDecider(inst, "sd-only")
        sd = np.array(d.schedule.modes) == "SD"
        if not sd.any():
            continue
        plays = np.array([play_balance(inst, d, seed=[seed % (1 << 32), i, r]).completion_s for r in range(300)])
        mean, se = plays.mean(axis=0), plays.std(axis=0, ddof=1) / np.sqrt(len(plays))
        srv, phi = inst.server, d.schedule.phi
        R = float(srv.sd_round_time(int(sd.sum()))) / (1 - phi)
        low = np.array(feasible(inst, d.schedule).completion_s)
        high = inst.comm + (inst.n + srv.draft_length) * R / inst.tokens_per_round
        where = f"seed {seed}, instance {i}"
        assert np.all(mean[sd] >= low[sd] - 5 * se[sd] - 1e-12), where
        assert np.all(mean[sd] <= high[sd] + 5 * se[sd]), where
        assert np.all(np.isnan(mean[~sd])), where
        checked += int(sd.sum())
    assert checked >= 5, f"seed {seed}: only {checked} SD users checked"


def mixed_plan(rng, K):
    """Half the users (at random) in SD, the rest in AD, an AD share in (0.1, 0.9)."""
    modes = np.where(rng.permutation(K) < K // 2, "SD", "AD")
    return Schedule(tuple(modes.tolist()), float(rng.uniform(0.1, 0.9)), "mixed")


def test_sd_users_mean_completion_is_the_exact_expectation_on_mixed_plans():
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    checked = 0
    for i in range(3):
        inst = draw(rng)
        plan = mixed_plan(rng, inst.num_users)
        modes = np.array(plan.modes)
        sd, ad = modes == "SD", modes == "AD"
        plays = np.array([play_balance(inst, Plan(plan), seed=[seed % (1 << 32), i, r]).completion_s
                          for r in range(300)])
        srv = inst.server
        R = float(srv.sd_round_time(int(sd.sum()))) / (1 - plan.phi)
        tau = float(srv.ad_step_time(int(ad.sum()))) / plan.phi
        pi = [u.prefix_probabilities(srv.draft_length) for u in inst.users]
        exact = np.array([inst.comm[k] + R * expected_rounds(pi[k], int(inst.n[k])) for k in range(inst.num_users)])
        mean, se = plays.mean(axis=0), plays.std(axis=0, ddof=1) / np.sqrt(len(plays))
        where = f"seed {seed}, instance {i}"
        assert np.all(np.abs(mean[sd] - exact[sd]) <= 4.5 * se[sd] + 1e-9 * exact[sd]), where
        assert np.allclose(plays[:, ad], inst.comm[ad] + inst.n[ad] * tau, rtol=1e-12, atol=0), where
        checked += int(sd.sum())
    assert checked >= 5, f"seed {seed}: only {checked} SD users checked"


def test_a_plan_serving_nobody_plays_no_round_and_a_tiny_ad_share_stays_short():
    inst = random_instance(5, 0)
    run = play_balance(inst, Plan(Schedule(("off",) * 5, 0.5)))
    assert run.served_in_time == 0 and run.rounds <= 1 and all(np.isnan(run.completion_s))
    K = inst.num_users
    plan = Schedule(("SD", "AD", "SD", "AD", "AD"), 0.001, "tiny AD share")
    run = play_balance(inst, Plan(plan), seed=1)
    sd_rounds_bound = int(inst.n.max())  # an SD round commits at least one token
    assert run.rounds <= sd_rounds_bound + K, run.rounds  # AD stretches: one per AD user at most, once SD is done


def test_shrinking_batches_never_complete_anyone_later():
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for i in range(6):
        inst = draw(rng)
        for policy in ("balance", "greedy", "ad-only"):
            d = PolicyDecider(inst, policy)
            plan = play_balance(inst, d, seed=[seed % (1 << 32), i])
            shrunk = play_balance(inst, d, seed=[seed % (1 << 32), i], shrink=True)
            a, b = np.array(shrunk.completion_s), np.array(plan.completion_s)
            served = ~np.isnan(b)
            assert np.all(a[served] <= b[served] * (1 + 1e-12)), f"seed {seed}, instance {i}, {policy}"
            assert shrunk.served_in_time >= plan.served_in_time, f"seed {seed}, instance {i}, {policy}"
        plan = mixed_plan(rng, inst.num_users)
        a = np.array(play_balance(inst, Plan(plan), seed=[seed % (1 << 32), i], shrink=True).completion_s)
        b = np.array(play_balance(inst, Plan(plan), seed=[seed % (1 << 32), i]).completion_s)
        assert np.all(a <= b * (1 + 1e-12)) and np.any(a < b * (1 - 1e-9)), f"seed {seed}, instance {i}, mixed"


def test_every_registered_policy_is_a_decider_and_a_seed_gives_one_run():
    inst = random_instance(8, 5)
    for name, pol in BALANCE_POLICIES.items():
        if pol.max_users is not None and inst.num_users > pol.max_users:
            continue
        d = PolicyDecider(inst, name)
        a, b = play_balance(inst, d, seed=7), play_balance(inst, d, seed=7)
        assert a == b and a.rounds >= 1, name
        served = np.array([m != "off" for m in d.schedule.modes])
        assert np.all(np.isfinite(np.array(a.completion_s)[served])), name


def test_a_decider_that_stops_early_drafts_what_it_says():
    """A decider that drafts half the server's length: its lengths are played, no more than that many
    drafts are accepted, and the round costs half-length drafting and verification."""
    inst = random_instance(6, 2)
    sched = Schedule(("SD",) * 6, 0.25, "all-sd")
    d = Halves(sched)
    outs = []
    d.update = outs.append
    play_rounds(d, ServerRounds(inst, np.random.default_rng(0)))
    srv, h = inst.server, inst.server.draft_length // 2
    first = outs[0]
    assert np.all(first.L == h) and np.all(first.A <= h) and first.A.max() >= 1
    R = (h * (srv.small_t0_s + srv.small_t1_s_per_token * 6) + srv.large_t0_s
         + srv.large_t1_s_per_token * 6 * (h + 1)) / (1 - 0.25)
    assert np.allclose(first.T, R, rtol=1e-12)


@pytest.mark.parametrize("choice, message", [
    (np.zeros(4, dtype=int), "must plan a BALANCE Schedule"),
    (Schedule(("AD",) * 3, 0.5), r"one mode per user \(4\), got 3"),
    (Schedule(("AD",) * 4, 0.0), "AD users need phi > 0"),
    (Schedule(("SD",) * 4, 1.0), "SD users need phi < 1"),
])
def test_a_plan_the_server_cannot_run_is_one_line(choice, message):
    with pytest.raises(ValidationError, match=message):
        play_balance(random_instance(4, 1), Plan(choice))
