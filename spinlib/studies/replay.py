"""The replayed real rounds against the analysis (notebook 07).

:func:`prompt_betas`, :func:`acceptance_scenarios` and :func:`real_rounds_vs_models` compare the
rounds of real speculative decoding (:mod:`spinlib.emulator.real_traces`, replayed by the testbed)
with three analytical predictions of the same allocations.

torch and the models are imported inside the functions that need them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import t as student_t

from ..rounds import Allocation, evaluate
from ..scenario import Scenario, User
from ..validation import ValidationError
from ..emulator.config import EmulatorConfig
from ..emulator.real_traces import REAL_TASKS, real_prompts
from ..emulator.testbed import emulate
from ..study import Study

#: the key of these studies in the results cache (:func:`spinlib.cache.cache_name`): the module they were
#: first cached under, kept when they moved here
CACHE_NAMESPACE = "spinlib.emulator.replay"

PREDICTIONS = ("task average, i.i.d.", "this prompt, i.i.d.", "this prompt, profile")


@dataclass(frozen=True)
class BetaPoint:
    """One user of :func:`prompt_betas`: teacher-forced ``beta_t`` on prompt ``params["user"]`` of
    :func:`real_prompts` (deterministic: the task's seed is not used)."""

    pair: str
    num_users: int
    max_new_tokens: int
    temperature: float
    kernel: str

    def __call__(self, params: dict, seed: int) -> dict:
        from ..sd.measure import teacher_forced_beta
        from ..sd.models import get_pair, load_pair
        from ..sd.prompts import encode_for_pair

        target, draft, tok = load_pair(self.pair, self.kernel)
        ids = encode_for_pair(get_pair(self.pair), tok, real_prompts(self.num_users)[int(params["user"])])
        beta = teacher_forced_beta(target, draft, ids, max_new_tokens=self.max_new_tokens, temperature=self.temperature)
        return {"beta": np.asarray(beta, dtype=float).tolist()}


def prompt_betas(pair: str, num_users: int, max_new_tokens: int, temperature: float = 0.0, *,
                 kernel: str, n_jobs: int | None = 1) -> list[np.ndarray]:
    """Teacher-forced ``beta_t`` on each user's real prompt (:func:`real_prompts`), ``[n_k]`` each, on
    ``kernel``, which must be this machine's for the pair (:func:`spinlib.sd.models.check_kernel`).

    ``beta_t`` is the probability that a draft token at position t is accepted
    (:func:`spinlib.sd.measure.teacher_forced_beta`); at temperature 0 the target's greedy
    trajectory is the one the real rounds produce, so ``beta`` covers exactly their tokens. A
    :class:`~spinlib.study.Study` over the users (:class:`BetaPoint`; resumable; one worker by default, as
    each worker loads the pair).
    """
    from ..sd.models import check_kernel

    point = BetaPoint(pair, int(num_users), int(max_new_tokens), float(temperature), check_kernel(pair, kernel))
    recs = Study(f"prompt-betas-{pair}", point, [{"user": k} for k in range(len(real_prompts(num_users)))], 1,
                 0).run(n_jobs=n_jobs)
    return [np.asarray(r["beta"], dtype=float) for r in recs]


def _windowed_acceptance(beta, L_max: int) -> tuple[float, tuple[float, ...]]:
    """``alpha = min(mean beta, 0.99)`` and the non-increasing prefix profile ``pi_1..pi_L_max``
    of one window (positions a window is too short for count as 0)."""
    from ..sd.measure import prefix_profile

    b = np.asarray(beta, dtype=float)
    alpha = float(min(b.mean(), 0.99))
    prof = np.nan_to_num(prefix_profile([b], L_max), nan=0.0)
    return alpha, tuple(float(x) for x in np.minimum.accumulate(prof))


def acceptance_scenarios(base: Scenario, pair: str, betas, L_max: int, n_tokens=None,
                         temperature: float = 0.0) -> dict[str, Scenario]:
    """``base`` with three acceptance models of its users (user k holds prompt k of :func:`real_prompts`).

    * ``"task average, i.i.d."``: ``alpha`` measured for user k's task on other prompts
      (:func:`spinlib.presets.measured_acceptance`, notebook 05);
    * ``"this prompt, i.i.d."``: ``alpha_k = min(mean_t beta_kt, 0.99)`` over the user's own tokens;
    * ``"this prompt, profile"``: the same ``alpha_k`` and the prefix profile ``pi_i`` of those tokens
      (made non-increasing).

    Parameters
    ----------
    betas : list of float arrays [n_k]
        :func:`prompt_betas` of the users.
    L_max : int
        Profile length.
    n_tokens : int array [K], optional
        Use only each user's first ``max(n_k, 2)`` positions (the tokens the real rounds
        produced); all of them if omitted.
    """
    from ..presets import measured_acceptance

    if len(betas) != base.num_users:
        raise ValidationError(f"betas has {len(betas)} entries, the scenario has {base.num_users} users")
    users = {name: [] for name in PREDICTIONS}
    for k, u in enumerate(base.users):
        task = REAL_TASKS[k % len(REAL_TASKS)]
        alpha_task, _ = measured_acceptance(pair, task, temperature)
        b = np.asarray(betas[k], dtype=float)
        if n_tokens is not None:
            b = b[: max(int(n_tokens[k]), 2)]
        alpha_k, prof = _windowed_acceptance(b, L_max)
        for name, a, pr in ((PREDICTIONS[0], alpha_task, None), (PREDICTIONS[1], alpha_k, None),
                            (PREDICTIONS[2], alpha_k, prof)):
            users[name].append(User(u.draft_time_s, a, u.channel_gain, u.tx_power_w, pr, name=task))
    return {name: base.replace(users=tuple(us)) for name, us in users.items()}


@dataclass(frozen=True)
class RealRoundsPoint:
    """One allocation of :func:`real_rounds_vs_models` (``params["allocation"]``, a name of ``allocations``):
    played on the testbed with real models (emulator seed: the task's), against the three predictions."""

    base: Scenario
    allocations: tuple  # (name, Allocation) pairs
    pair: str
    betas: tuple  # per user, a tuple of floats
    rounds: int
    L_max: int
    temperature: float

    def __call__(self, params: dict, seed: int) -> dict:
        a = dict(self.allocations)[params["allocation"]]
        betas = [np.asarray(b, dtype=float) for b in self.betas]
        full = acceptance_scenarios(self.base, self.pair, betas, self.L_max, temperature=self.temperature)
        r = emulate(full[PREDICTIONS[2]], a, EmulatorConfig(rounds=self.rounds, seed=seed, real_models=self.pair,
                                                            temperature=self.temperature))
        n_tok = np.rint(r.tokens_per_round * r.rounds)
        window = acceptance_scenarios(self.base, self.pair, betas, self.L_max, n_tokens=n_tok,
                                      temperature=self.temperature)
        row = {"L": list(a.draft_lengths), "testbed, real models": r.goodput_tokens_per_s,
               "ci": [r.ci_low, r.ci_high], "tokens/round: testbed": r.tokens_per_round.tolist(),
               "tokens/round: testbed, 95% half-width": (student_t.ppf(0.975, max(r.rounds - 1, 1))
                                                          * r.tokens_per_round_sd / math.sqrt(r.rounds)).tolist(),
               "rounds": r.rounds}
        for sname in PREDICTIONS:
            sc = full[sname] if sname == PREDICTIONS[0] else window[sname]
            ev = evaluate(sc, a)
            row[sname] = ev.goodput_tokens_per_s
            row[f"tokens/round: {sname}"] = ev.expected_tokens.tolist()
        return row


def real_rounds_vs_models(base: Scenario, allocations: dict[str, Allocation], pair: str, betas, *, rounds: int,
                          L_max: int, seed: int = 0, temperature: float = 0.0, kernel: str,
                          n_jobs: int | None = 1) -> list[dict]:
    """Each allocation played with real models (on ``kernel``, which must be this machine's for the pair:
    :func:`spinlib.sd.models.check_kernel`), against three analytical predictions: a
    :class:`~spinlib.study.Study` over the allocations (:class:`RealRoundsPoint`; one emulator seed common to
    every allocation; resumable; one worker by default, as each worker loads the pair).

    For every allocation: the testbed's goodput [token/s] with real rounds (``rounds`` rounds,
    ``pair``, ``temperature``; timings and radio from ``base``) and :func:`spinlib.rounds.evaluate`
    of the allocation under each acceptance model of :func:`acceptance_scenarios`, the per-prompt
    ones measured over exactly the tokens the real rounds produced (``n_k = round(mean tokens per
    round x rounds)``). The difference between "this prompt, i.i.d." and "this prompt, profile"
    is then the i.i.d. assumption alone.

    Returns
    -------
    list of dict, one per allocation
        ``"allocation"``, ``"seed"``, ``"L"``, ``"testbed, real models"``, ``"ci"``, ``"tokens/round: testbed"``,
        ``"tokens/round: testbed, 95% half-width"`` (Student t over the rounds, ``[K]``), ``"rounds"``,
        and for each prediction ``name`` in :data:`PREDICTIONS`: ``name`` (goodput) and
        ``"tokens/round: name"`` (expected tokens per round, ``[K]``).
    """
    from ..sd.models import check_kernel

    check_kernel(pair, kernel)
    if len(betas) != base.num_users:
        raise ValidationError(f"betas has {len(betas)} entries, the scenario has {base.num_users} users")
    point = RealRoundsPoint(base, tuple(allocations.items()), pair,
                            tuple(tuple(float(x) for x in np.asarray(b, dtype=float)) for b in betas), int(rounds),
                            int(L_max), float(temperature))
    return Study(f"real-rounds-{pair}", point, [{"allocation": name} for name in allocations], 1, seed).run(
        n_jobs=n_jobs)


__all__ = ["REAL_TASKS", "PREDICTIONS", "real_prompts", "prompt_betas", "BetaPoint", "acceptance_scenarios",
           "real_rounds_vs_models", "RealRoundsPoint"]
