"""The one round loop of the online players (spinlib.online.player): the arena's links, one prompt's
replay and the shared band are round models played by the same loop.

Checks: the loop's order (choose, stop, realise, update) and its end; any decider plays on a model of
the user's own; every bad decision (wrong shape, non-integer, out of range, a stop past its reference)
is one line on each of the three library models, on generated cases.
"""
import numpy as np
import pytest

from spinlib.decision import FixedLength, Outcome, RoundContext, never_stops
from spinlib.emulator import Fading
from spinlib.online import ArenaConfig, Delay, Stream
from spinlib.online import replan as rep
from spinlib.online.arena import TraceLinks
from spinlib.online.player import RoundModel, play_rounds
from spinlib.online.real_rounds import PromptReplay
from spinlib.online.registry import Env
from spinlib.online.energy import energy_preset
from spinlib.online.traces import PromptTrace
from spinlib.presets import random_scenario
from spinlib.validation import ValidationError
from helpers import fresh_seed


class Counter:
    """A model of one's own: K users, ``R`` rounds, every drafted token accepted, ``T = 1 + L``."""

    def __init__(self, K, R, L_max, log):
        self.K, self.R, self.L_max, self.log = K, R, L_max, log

    def done(self, t):
        return t >= self.R

    def context(self, t):
        self.log.append(("context", t))
        z = np.zeros(self.K)
        return RoundContext(t, z + 1.0, z + 1.0, z.astype(int), z, None, None)

    def reference(self, choice, t, who):
        self.log.append(("reference", t))
        return np.minimum(np.asarray(choice), self.L_max)

    def realise(self, t, L):
        self.log.append(("realise", t))
        z = np.zeros(self.K)
        return Outcome(L, L, L + 1, 1.0 + L, z, z, z + 1.0)


class Logged(FixedLength):
    def __init__(self, L, log):
        super().__init__(L)
        self.log = log

    def choose(self, ctx):
        self.log.append(("choose", ctx.t))
        return super().choose(ctx)

    @never_stops
    def stop(self, ctx, L_ref):
        self.log.append(("stop", ctx.t))
        return L_ref

    def update(self, out):
        self.log.append(("update", int(out.N.sum())))


def test_the_loop_asks_in_order_until_the_model_is_done():
    log = []
    model = Counter(2, 3, 4, log)
    assert isinstance(model, RoundModel)
    assert play_rounds(Logged([1, 5], log), model) == 3
    one = [("context", 0), ("choose", 0), ("reference", 0), ("stop", 0), ("realise", 0), ("update", 1 + 1 + 4 + 1)]
    assert log[:6] == one and len(log) == 18 and log[-1][0] == "update"
    assert play_rounds(Logged([1], []), Counter(1, 0, 4, [])) == 0


def _trace(rng, n):
    acc = (rng.random(n) < 0.7).astype(np.int8)
    return PromptTrace(question_id=0, accept=acc, top_prob=rng.uniform(0.05, 1.0, n), entropy=rng.uniform(0, 3, n),
                       accept_prob=rng.uniform(0, 1, n), tokens=np.arange(n))


def _models(rng, K, L_max):
    """The three library models, fresh: the arena's links, one prompt's replay (K = 1), the shared band."""
    streams = [Stream.synthetic(0.7, 400, rng)]
    links = TraceLinks.draw(streams, ArenaConfig(rounds=5, users=K, L_max=L_max, delay=Delay("exponential", 0.1)), rng)
    env = Env(K=1, L_max=L_max, t_d=0.02, t0=0.03, t1=0.002, mean_delay_s=0.1, bits_per_token=16.0,
              energy=energy_preset("phone-soc", 0.02), energy_budget_j=1.0, rng=rng)
    replay = PromptReplay(_trace(rng, 60), env, delay_s=0.1, uplink_bps=1e6)
    s = random_scenario(K, int(rng.integers(1 << 30)))
    cfg = rep.ReplanConfig(rounds=5, seed=1, fading=Fading("rayleigh"), L_max=L_max)
    band = rep.SharedBand(s, rep.fading_draws(s, cfg), cfg, rep.device_energy(s, cfg.energy_preset))
    return {"arena": (links, K), "replay": (replay, 1), "band": (band, K)}


class Bad(FixedLength):
    """A decider that answers ``choice`` and stops at ``stop_at`` (None: at its reference)."""

    def __init__(self, choice, stop_at=None):
        self.choice, self.stop_at = choice, stop_at

    def choose(self, ctx):
        return self.choice

    @never_stops
    def stop(self, ctx, L_ref):
        return L_ref if self.stop_at is None else self.stop_at(L_ref)


@pytest.mark.parametrize("i", range(12))
def test_every_bad_decision_is_one_line_on_every_model(i):
    seed = fresh_seed() + i
    rng = np.random.default_rng(seed)
    L_max = int(rng.integers(1, 9))
    for name, (model, K) in _models(rng, int(rng.integers(2, 5)), L_max).items():
        good = rng.integers(0, L_max + 1, K)
        kind = ["shape", "fraction", "negative", "too long", "stop past reference", "stop shape"][int(rng.integers(6))]
        if kind == "shape":
            dec = Bad(np.ones(K + 1, dtype=int))
        elif kind == "fraction":
            dec = Bad(good + 0.5)
        elif kind == "negative":
            dec = Bad(np.where(np.arange(K) == 0, -1, good))
        elif kind == "too long":
            dec = Bad(np.where(np.arange(K) == K - 1, L_max + 1 + int(rng.integers(0, 5)), good))
        elif kind == "stop past reference":
            dec = Bad(np.minimum(good, L_max - 1), stop_at=lambda L_ref: L_ref + 1)
        else:
            dec = Bad(good, stop_at=lambda L_ref: np.append(L_ref, 0))
        with pytest.raises(ValidationError) as e:
            play_rounds(dec, model, "the decider")
        msg = str(e.value)
        assert "\n" not in msg and "the decider" in msg, (seed, name, kind, msg)
        assert any(w in msg for w in ("integer length", "outside", "lengths")), (seed, name, kind, msg)


def test_a_good_decider_plays_every_model_to_its_end():
    rng = np.random.default_rng(5)
    for name, (model, K) in _models(rng, 3, 6).items():
        played = play_rounds(FixedLength([2] * K), model)
        assert model.done(played) and played >= 1, name


class RandomLengths(FixedLength):
    """Fresh random lengths in ``0..L_max`` every round from its own generator (no early stop)."""

    def __init__(self, K, L_max, rng):
        super().__init__([0] * K)
        self.K, self.L_max, self.rng = K, L_max, rng

    def choose(self, ctx):
        return self.rng.integers(0, self.L_max + 1, self.K)


@pytest.mark.parametrize("i", range(6))
def test_the_arena_links_play_the_stated_round(i):
    """An independent recomputation of the arena's round (module docstring of spinlib.online.arena) from the
    raw streams: A = min(consecutive accepts from p, L), p <- p + A + 1 on the cyclic stream, T and E by
    their formulas on the drawn delays and rates, for random lengths."""
    seed = fresh_seed() + i
    rng = np.random.default_rng(seed)
    K, L_max, R = int(rng.integers(1, 5)), int(rng.integers(1, 9)), int(rng.integers(5, 60))
    streams = [Stream.synthetic(float(rng.uniform(0.2, 0.95)), int(rng.integers(3, 80)), rng)
               for _ in range(int(rng.integers(1, 4)))]
    cfg = ArenaConfig(rounds=R, users=K, L_max=L_max, delay=Delay("exponential", float(rng.uniform(0, 0.3))),
                      fading=Fading("rayleigh"), t_d=float(rng.uniform(0.001, 0.05)))
    links = TraceLinks.draw(streams, cfg, np.random.default_rng(seed))
    inp = links.inp
    pos = inp.offset.copy()
    dec = RandomLengths(K, L_max, np.random.default_rng(seed + 1))
    assert play_rounds(dec, links) == R
    Ls = links.history["L"].astype(int)
    en = cfg.energy_model
    for t in range(R):
        for k in range(K):
            acc = np.asarray(streams[k % len(streams)].accept)
            L = Ls[t, k]
            A = 0
            while A < L and acc[(pos[k] + A) % acc.size]:
                A += 1
            up = L * cfg.bits_per_token / inp.rate[t, k]
            wait = cfg.t0 + cfg.t1 * (L + 1) + inp.D[t, k]
            assert links.history["N"][t, k] == A + 1, (seed, t, k)
            assert links.history["T"][t, k] == pytest.approx(L * cfg.t_d + up + wait, rel=1e-12)
            assert links.history["E"][t, k] == pytest.approx(
                L * en.draft_j_per_token + en.tx_power_w * up + en.idle_power_w * wait, rel=1e-12)
            pos[k] += A + 1


@pytest.mark.parametrize("i", range(6))
def test_one_prompts_replay_plays_the_trace_with_the_engines_cap(i):
    """PromptReplay against a direct walk of the trace: each round drafts at most max_new_tokens - p - 1,
    accepts the consecutive accepts from p up to L, commits no token past the trace's (capped) end."""
    seed = fresh_seed() + i
    rng = np.random.default_rng(seed)
    n, L_max = int(rng.integers(1, 120)), int(rng.integers(1, 9))
    cap = None if rng.random() < 0.3 else int(rng.integers(1, 2 * n))
    tr = _trace(rng, n)
    env = Env(K=1, L_max=L_max, t_d=0.02, t0=0.03, t1=0.002, mean_delay_s=0.1, bits_per_token=16.0,
              energy=energy_preset("phone-soc", 0.02), energy_budget_j=1.0, rng=rng)
    model = PromptReplay(tr, env, delay_s=0.1, uplink_bps=1e6, max_new_tokens=cap)
    play_rounds(RandomLengths(1, L_max, np.random.default_rng(seed + 1)), model)
    limit, end = (n, n) if cap is None else (min(n, cap), cap)
    p = 0
    for L, A, N in model.rounds:
        assert 0 <= L <= min(L_max, end - p - 1)
        a = 0
        while a < L and p + a < n and tr.accept[p + a]:
            a += 1
        assert (A, N) == (a, min(a + 1, limit - p)), (seed, p, L)
        p += N
    assert p == limit
