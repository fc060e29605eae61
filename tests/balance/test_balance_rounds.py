"""BALANCE's schedules played round by round (:mod:`spinlib.balance.rounds`) against the analysis
(:func:`spinlib.balance.model.feasible`), on fresh random instances (seed printed on failure;
``SPINLIB_TEST_SEED`` replays one):

* AD users complete exactly at the analysis's time (batch sizes of the plan, ``shrink=False``);
* SD users' mean completion over many plays lies within Wald's bounds, between the analysis's
  ``c + n R / N`` and ``c + (n + L + 1) R / N`` (5 standard errors of slack for the sampling);
* letting finished users leave the batch (``shrink=True``) never completes anyone later on the same draws;
* every registered BALANCE policy is a decider that plays, the same seed gives the same run, and a plan
  that is not a schedule, or that the server cannot run, is one line.
"""
from __future__ import annotations

import numpy as np
import pytest

from spinlib.balance import BALANCE_POLICIES, Schedule, feasible, random_instance
from spinlib.balance.rounds import PolicyDecider, ServerRounds, play_balance
from spinlib.decision import never_stops
from spinlib.online.player import play_rounds
from spinlib.validation import ValidationError
from helpers import fresh_seed


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
        high = inst.comm + (inst.n + srv.draft_length + 1) * R / inst.tokens_per_round
        where = f"seed {seed}, instance {i}"
        assert np.all(mean[sd] >= low[sd] - 5 * se[sd] - 1e-12), where
        assert np.all(mean[sd] <= high[sd] + 5 * se[sd]), where
        assert np.all(np.isnan(mean[~sd])), where
        checked += int(sd.sum())
    assert checked >= 5, f"seed {seed}: only {checked} SD users checked"


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


class Halves:
    """Drafts half the server's length: the stop rule of any decider is played as given."""

    def __init__(self, schedule):
        self.schedule, self.seen = schedule, []

    def choose(self, ctx):
        return self.schedule

    @never_stops
    def stop(self, ctx, L_ref):
        return L_ref // 2

    def update(self, out):
        self.seen.append(out.L.copy())


def test_a_decider_that_stops_early_drafts_what_it_says():
    inst = random_instance(6, 2)
    sched = Schedule(("SD",) * 6, 0.0, "all-sd")
    d = Halves(sched)
    model = ServerRounds(inst, np.random.default_rng(0))
    play_rounds(d, model)
    assert all(np.all(L == inst.server.draft_length // 2) for L in d.seen[:1])


@pytest.mark.parametrize("choice, message", [
    (np.zeros(4, dtype=int), "must plan a BALANCE Schedule"),
    (Schedule(("AD",) * 3, 0.5), r"one mode per user \(4\), got 3"),
    (Schedule(("AD",) * 4, 0.0), "AD users need phi > 0"),
    (Schedule(("SD",) * 4, 1.0), "SD users need phi < 1"),
])
def test_a_plan_the_server_cannot_run_is_one_line(choice, message):
    inst = random_instance(4, 1)

    class Fixed:
        def choose(self, ctx):
            return choice

        def stop(self, ctx, L_ref):
            return L_ref

        def update(self, out):
            pass

    with pytest.raises(ValidationError, match=message):
        play_balance(inst, Fixed())
