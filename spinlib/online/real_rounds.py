"""Online controllers on the real engine, round by round against the arena's trace replay.

The arena (:mod:`spinlib.online.arena`) does not run models: it replays a prompt's recorded
greedy trace (per position: accepted or not, the draft's top probability and entropy on the
target's path). Through the decision seam (:mod:`spinlib.decision`) the same controller object
also drives the real engine (:func:`spinlib.sd.engine.speculative_generate`). This module plays
both on the same prompts and compares their rounds:

* :func:`replay_decider` plays a decider over one :class:`~spinlib.online.traces.PromptTrace` as
  the arena does (the round starting at position ``p`` sees the trace's observables at
  ``p .. p + L_max - 1``; ``A = min(run[p], L)``; a modelled clock
  ``T = L t_d + L S / R + t0 + t1 (L + 1) + D`` for its update);
* :func:`real_vs_replay` runs the pair's real models greedily on the prompts the traces were
  recorded from, with each rule, and returns one JSON record per (rule, prompt): the real
  rounds ``(L, A)``, the replayed ones, whether the output is the target's greedy output, and
  wall-clock times.

What must agree and what need not: token counts agree for any sequence of lengths, and a rule
that reads only the round's first positions (a fixed length, or a stop that triggers at or
before the first rejected draft) gets the same lengths. After a rejected draft the real draft
continues on its own (rejected) prefix, whose confidence no trace records: a stop rule that
triggers there can draft a different length in the real engine. The records show how often.
Learning controllers see the measured clock in the real engine and the modelled one in the
replay, so their lengths may differ from the first round on; only their losslessness is
compared.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..decision import Outcome, RoundContext, certain_rows, check_lengths
from ..roundcost import user_round_time
from .player import play_rounds
from .registry import Env, make_controller, parse_params
from .traces import PromptTrace, load_pair_traces, run_lengths


def one_user_env(pair: str, *, L_max: int, delay_s: float, bits_per_token: float, energy_budget_j: float,
                 rng: np.random.Generator, survival=None) -> Env:
    """What a controller knows driving the real engine for one user of ``pair``: the pair's measured
    timings (:func:`spinlib.online.measured.pair_timings`), the phone-SoC energy preset at its
    drafting time, the mean delay [s], the uplink bits per drafted token, the energy budget [J/round]
    and (oracles only) the prefix survival ``[1, L_max + 1]``."""
    from .energy import energy_preset
    from .measured import pair_timings

    tim = pair_timings(pair)
    return Env(K=1, L_max=L_max, mean_delay_s=delay_s, bits_per_token=bits_per_token,
               energy=energy_preset("phone-soc", tim["t_d"]), energy_budget_j=energy_budget_j, rng=rng,
               survival=survival, **tim)


class PromptReplay:
    """One prompt's trace as a round model (:class:`spinlib.online.player.RoundModel`, ``K = 1``): the
    round starting at position ``p`` sees the trace's observables at ``p .. p + L_max - 1``, drafts at
    most ``cap_end - p - 1`` tokens (the engine's cap), accepts ``A = min(run[p], L)`` and commits
    ``N = min(A + 1, limit - p)``; its modelled clock ``T = L t_d + L S / R + t0 + t1 (L + 1) + D``
    and energy go to the decider's update. ``rounds`` holds ``(L, A, N)`` of the rounds played."""

    K = 1

    def __init__(self, trace: PromptTrace, env: Env, *, delay_s: float, uplink_bps: float,
                 max_new_tokens: int | None = None):
        n = trace.n
        self.trace, self.env, self.delay_s, self.uplink_bps = trace, env, float(delay_s), float(uplink_bps)
        self.limit = n if max_new_tokens is None else min(n, max_new_tokens)
        self.cap_end = n if max_new_tokens is None else max_new_tokens  # the engine caps by max_new_tokens, not by a stop
        self.run = run_lengths(trace.accept)
        self.rate = np.array([self.uplink_bps])
        self.p, self.rounds = 0, []

    def done(self, t: int) -> bool:
        return self.p >= self.limit

    def context(self, t: int) -> RoundContext:
        L_max, p, tr = self.env.L_max, self.p, self.trace
        top, ent = certain_rows(1, L_max)
        m = min(L_max, tr.n - p)
        top[0, :m], ent[0, :m] = tr.top_prob[p:p + m], tr.entropy[p:p + m]
        return RoundContext(t, self.rate, self.rate, np.zeros(1, np.int64), np.array([self.delay_s]), top, ent)

    def reference(self, choice, t: int, who: str) -> np.ndarray:
        L_ref = min(int(check_lengths(choice, 1, self.env.L_max, who)[0]), self.cap_end - self.p - 1)
        return np.array([L_ref])

    def realise(self, t: int, L: np.ndarray) -> Outcome:
        env, p, L = self.env, self.p, int(L[0])
        A = min(int(self.run[p]), L)
        N = min(A + 1, self.limit - p)
        up = L * env.bits_per_token / self.uplink_bps
        wait = env.t0 + env.t1 * (L + 1) + self.delay_s
        T = float(user_round_time(L * env.t_d, up, wait))
        E = float(np.asarray(env.energy.round_energy(L, up, wait)))
        self.rounds.append((L, A, N))
        self.p = p + N
        return Outcome(np.array([L]), np.array([A]), np.array([N]), np.array([T]), np.array([E]),
                       np.array([self.delay_s]), self.rate)


def replay_decider(decider, trace: PromptTrace, env: Env, *, delay_s: float, uplink_bps: float,
                   max_new_tokens: int | None = None) -> list[tuple[int, int, int]]:
    """Rounds ``[(L, A, N), ...]`` of ``decider`` replayed over ``trace`` (module docstring; :class:`PromptReplay`
    played by :func:`spinlib.online.player.play_rounds`), with the engine's cap: at most
    ``max_new_tokens - p - 1`` drafts in the round starting at ``p`` (a trace that ends on a stop token
    does not shorten the last round's drafts: the engine cannot see the stop coming). ``A`` counts
    accepted drafts within the trace."""
    model = PromptReplay(trace, env, delay_s=delay_s, uplink_bps=uplink_bps, max_new_tokens=max_new_tokens)
    play_rounds(decider, model)
    return model.rounds


@dataclass(frozen=True)
class RealReplayPoint:
    """One (rule, task, prompt) of :func:`real_vs_replay`: the rule's real rounds on prompt
    ``params["prompt"]`` of ``params["task"]`` and its rounds replayed over the prompt's committed trace,
    each with a fresh controller whose generator is child 0 (real) or 1 (replay) of ``SeedSequence(seed)``;
    no record when the pair has no trace of the prompt."""

    pair: str
    n_prompts: int
    max_new_tokens: int
    L_max: int
    delay_s: float
    uplink_bps: float
    energy_budget_j: float
    kernel: str

    def __call__(self, params: dict, seed: int) -> list[dict]:
        import torch

        from ..sd.engine import speculative_generate
        from ..sd.models import PACKAGED, get_pair, load_pair
        from ..sd.prompts import encode, encode_for_pair, load_prompts

        rule, task, j = params["rule"], params["task"], int(params["prompt"])
        prompt = load_prompts(task, self.n_prompts)[j]
        trace = {t.question_id: t for t in load_pair_traces(self.pair, tasks=[task])[task]}.get(prompt["question_id"])
        if trace is None:
            return []
        target, draft, tok = load_pair(self.pair, self.kernel)
        spec = PACKAGED[get_pair(self.pair).target]
        stop = (tok.eos_token_id,) if tok.eos_token_id is not None else ()
        ids = encode_for_pair(get_pair(self.pair), tok, prompt["prompt"]) if spec.chat \
            else encode(tok, prompt["prompt"], False)
        name, kw = parse_params(rule)
        children = np.random.SeedSequence(seed).spawn(2)

        def fresh(k):
            env = one_user_env(self.pair, L_max=self.L_max, delay_s=self.delay_s, bits_per_token=16.0,
                               energy_budget_j=self.energy_budget_j, rng=np.random.default_rng(children[k]))
            return make_controller(name, env, **kw)

        t0 = time.perf_counter()
        new, recs = speculative_generate(target, draft, ids, max_new_tokens=self.max_new_tokens, stop_ids=stop,
                                         draft_length=fresh(0), delay_s=self.delay_s, uplink_bps=self.uplink_bps,
                                         generator=torch.Generator().manual_seed(0))
        wall = time.perf_counter() - t0
        twin = fresh(1)
        replay = replay_decider(twin, trace, twin.env, delay_s=self.delay_s, uplink_bps=self.uplink_bps,
                                max_new_tokens=self.max_new_tokens)
        return [{"question_id": int(prompt["question_id"]),
                 "lossless": [int(x) for x in new] == trace.tokens[:self.max_new_tokens].tolist(),
                 "tokens": len(new), "replay_tokens": min(trace.n, self.max_new_tokens),
                 "real": [[r.drafted, r.accepted, r.tokens] for r in recs], "replay": [list(r) for r in replay],
                 "wall_s": wall, "draft_s": float(sum(r.draft_s for r in recs)),
                 "verify_s": float(sum(r.verify_s for r in recs))}]


def real_vs_replay(pair: str, rules, *, tasks, n_prompts: int, max_new_tokens: int, L_max: int,
                   delay_s: float, uplink_bps: float, energy_budget_j: float, seed: int = 0,
                   kernel: str, n_jobs: int | None = 1) -> list[dict]:
    """One record per (rule, prompt): real rounds, replayed rounds, losslessness, times (module docstring),
    on ``kernel``, which must be this machine's for the pair (:func:`spinlib.sd.models.check_kernel`).

    A :class:`~spinlib.study.Study` over (rule, task, prompt) (:class:`RealReplayPoint`; one seed common to
    every point; resumable; one worker by default, as each worker loads the pair). ``rules`` are controller
    specs (``"name"`` or ``"name:key=value"``); each (rule, prompt) gets a fresh controller for the real
    rounds and another for the replay. The timings of the controllers' :class:`Env` are the pair's measured
    ones (:func:`spinlib.online.measured.pair_timings`). A prompt the pair has no trace of gives no record.
    """
    from ..sd.models import check_kernel
    from ..sd.prompts import load_prompts
    from ..study import Study

    for rule in rules:
        parse_params(rule)  # a bad spec fails here, before any model loads
    point = RealReplayPoint(pair, int(n_prompts), int(max_new_tokens), int(L_max), float(delay_s), float(uplink_bps),
                            float(energy_budget_j), check_kernel(pair, kernel))
    points = [{"rule": rule, "task": task, "prompt": j} for rule in rules for task in tasks
              for j in range(len(load_prompts(task, n_prompts)))]
    return Study(f"real-vs-replay-{pair}", point, points, 1, seed).run(n_jobs=n_jobs)


def _key(rounds) -> list[tuple[int, int]]:
    return [(int(r[0]), int(r[2])) for r in rounds]  # (drafted, committed): accepted counts past a stop differ


def parting(real, replay) -> tuple[int | None, bool]:
    """The first round whose (drafted, committed) differ, and whether the trace explains it: both
    rounds rejected a draft at the same position ``A`` before either stopped (``A < min(L)``), so
    the rule read positions after the rejection, which the real draft sees on its own prefix and
    the trace on the target's. ``(None, True)`` when the rounds are identical."""
    a, b = _key(real), _key(replay)
    if a == b:
        return None, True
    i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    if i >= min(len(a), len(b)):
        return i, False
    A_real, A_rep = int(real[i][1]), int(replay[i][1])
    return i, A_real == A_rep and A_real < min(int(real[i][0]), int(replay[i][0]))


def agreement(records: list[dict]) -> list[dict]:
    """Per rule: prompts whose real and replayed rounds are identical (drafted and committed tokens
    of every round), those whose first difference the trace explains (:func:`parting`), rounds,
    tokens and drafts per round in both, and the lossless runs."""
    rows = []
    for rule in dict.fromkeys(r["rule"] for r in records):
        rs = [r for r in records if r["rule"] == rule]
        parts = [parting(r["real"], r["replay"]) for r in rs]
        n_real = sum(len(r["real"]) for r in rs)
        n_rep = sum(len(r["replay"]) for r in rs)
        rows.append({"rule": rule, "prompts": len(rs), "lossless": int(sum(r["lossless"] for r in rs)),
                     "identical rounds": int(sum(i is None for i, _ in parts)),
                     "parting explained": int(sum(i is not None and ok for i, ok in parts)),
                     "parting unexplained": int(sum(i is not None and not ok for i, ok in parts)),
                     "first parting round (median)": float(np.median([i for i, _ in parts if i is not None]))
                     if any(i is not None for i, _ in parts) else None,
                     "rounds real": n_real, "rounds replay": n_rep,
                     "tokens/round real": sum(r["tokens"] for r in rs) / n_real,
                     "tokens/round replay": sum(r["replay_tokens"] for r in rs) / n_rep,
                     "drafts/round real": sum(x[0] for r in rs for x in r["real"]) / n_real,
                     "drafts/round replay": sum(x[0] for r in rs for x in r["replay"]) / n_rep})
    return rows


__all__ = ["one_user_env", "PromptReplay", "replay_decider", "real_vs_replay", "parting", "agreement"]
