"""Real-model traces: every user runs real speculative decoding; the emulator replays its rounds.

Every user runs the packaged draft and target of a same-tokenizer pair on its own Spec-Bench
prompt (:func:`real_prompts`) with the engine of :mod:`spinlib.sd`. Synchronous allocations run
:func:`spinlib.sd.batched.batched_sync_generate`: every round, each user drafts with its own
cached draft model and the target verifies all users' drafts in **one batched forward pass**;
asynchronous ones run each user's own :func:`spinlib.sd.engine.speculative_generate` (one cached
target pass per draft, as the server verifies drafts on arrival). Round contents do not depend on
timing for a fixed allocation, so replaying each user's trace is the same as interleaving the
users' rounds.

What is taken from the engine: drafted and accepted counts (and the emitted tokens). The bits of
each round follow from those counts and the device's mode (:func:`spinlib.emulator.traces.trace_bits`,
i.e. :func:`spinlib.modes.realised_bits`, greedy at temperature 0). Compute times come from the
latency model (``L tau_k``, ``T_ver``) or, with ``compute="measured"``, from the engine's
measured times on this machine, the draft time scaled by each device's speed factor
``tau_k / min_j tau_j`` (the fastest device drafts at this machine's speed) and a synchronous
batch's verification as the measured batched pass.

:func:`prompt_betas`, :func:`acceptance_scenarios` and :func:`real_rounds_vs_models` compare the
replayed rounds with three analytical predictions of the same allocations (notebook 07).

torch and the models are imported inside the functions that need them.
"""
from __future__ import annotations

import numpy as np

from ..rounds import Allocation, evaluate
from ..scenario import Scenario, User, ValidationError
from .config import EmulatorConfig
from .testbed import emulate
from .traces import Trace, trace_bits

REAL_TASKS = ("qa", "math_reasoning", "translation", "summarization", "mt_bench", "rag")
PREDICTIONS = ("task average, i.i.d.", "this prompt, i.i.d.", "this prompt, profile")


def real_prompts(num_users: int) -> list[str]:
    """User k's prompt in real mode: Spec-Bench task ``REAL_TASKS[k % 6]``, its ``k // 6``-th prompt."""
    from ..sd.prompts import load_spec_bench

    out = []
    for k in range(num_users):
        recs = load_spec_bench(REAL_TASKS[k % len(REAL_TASKS)], k // len(REAL_TASKS) + 1)
        out.append(recs[k // len(REAL_TASKS)]["prompt"])
    return out


def real_trace(scenario: Scenario, alloc: Allocation, cfg: EmulatorConfig, progress: bool = False) -> Trace:
    """Run ``cfg.real_models`` for ``cfg.rounds`` rounds of every user's draft length; the trace.

    Returns a :class:`~spinlib.emulator.traces.Trace` of ``R' <= cfg.rounds`` rounds (the fewest
    any user completed; ``R' >= 2`` or :class:`ValidationError`), with the users' outputs.
    The payload is the scenario's with the pair's vocabulary ``V``; DL mode needs the variant
    "reject" (what the engine implements).
    """
    import torch
    from tqdm import tqdm

    from ..scenario import Payload
    from ..sd.engine import speculative_generate
    from ..sd.models import PACKAGED, get_pair, load_pair
    from ..sd.prompts import encode_for_pair

    pair = get_pair(cfg.real_models)
    if not pair.installed():
        raise ValidationError(f"pair {cfg.real_models!r} needs {PACKAGED[pair.target].install}")
    if alloc.modes is not None and scenario.downlink.variant != "reject":
        raise ValidationError("real mode implements the DL variant 'reject' only")
    V = PACKAGED[pair.target].vocab_size
    pay = scenario.payload
    payload = Payload(V, pay.mode, pay.bits_per_prob, min(pay.top_k, V))
    target, draft, tok = load_pair(pair.name)
    K, R = scenario.num_users, cfg.rounds
    cols = {n: np.zeros((R, K)) for n in ("drafted", "accepted", "draft_s", "verify_s")}
    outputs, done = [], np.full(K, R)
    modes = list(alloc.modes or ("UL",) * K)
    ids_all = [encode_for_pair(pair, tok, p) for p in real_prompts(K)]
    if alloc.round_model == "sync":  # one real batched target pass per round for all users
        from ..sd.batched import batched_sync_generate

        outputs, recs, _ = batched_sync_generate(
            target, draft, ids_all, [int(x) for x in alloc.draft_lengths], R, temperature=cfg.temperature,
            seed=cfg.seed, modes=modes, payload=payload,
            pad_id=tok.pad_token_id if tok.pad_token_id is not None else 0)
    else:  # asynchronous: each user's own rounds, verified one draft at a time
        recs = []
        for k in tqdm(range(K), desc="real users", disable=not progress, leave=False):
            L = int(alloc.draft_lengths[k])
            out, rr = speculative_generate(target, draft, ids_all[k], max_new_tokens=R * (L + 1), draft_length=L,
                                           temperature=cfg.temperature,
                                           generator=torch.Generator().manual_seed(cfg.seed + k),
                                           mode=modes[k], payload=payload)
            outputs.append(out)
            recs.append(rr)
    for k, rr in enumerate(recs):
        n = min(len(rr), R)
        done[k] = n
        for j, r in enumerate(rr[:n]):
            cols["drafted"][j, k] = r.drafted
            cols["accepted"][j, k] = r.accepted
            cols["draft_s"][j, k] = r.draft_s
            cols["verify_s"][j, k] = r.verify_s
    n_rounds = int(done.min())
    if n_rounds < 2:
        raise ValidationError("a real user finished in fewer than 2 rounds; raise rounds or change prompts")
    drafted = cols["drafted"][:n_rounds].astype(int)
    accepted = cols["accepted"][:n_rounds].astype(int)
    up, down = trace_bits(scenario, alloc, drafted, accepted, greedy=cfg.temperature == 0, payload=payload)
    if cfg.compute == "model":
        draft_s = drafted * scenario.tau
        verify_s = None
    else:  # measured on this machine, scaled by each device's speed factor tau_k / min_j tau_j
        draft_s = cols["draft_s"][:n_rounds] * (scenario.tau / scenario.tau.min())
        verify_s = cols["verify_s"][:n_rounds]
        if alloc.round_model == "sync":
            verify_s = verify_s / K  # every user's record holds the whole batch's time
    return Trace(drafted=drafted, accepted=accepted, bits_up=up, bits_down=down, draft_s=draft_s,
                 verify_s=verify_s, outputs=outputs)


# ----------------------------------------------------------------------------------------------
# Real rounds against the analysis: three acceptance models of the same users
# ----------------------------------------------------------------------------------------------
def prompt_betas(pair: str, num_users: int, max_new_tokens: int, temperature: float = 0.0) -> list[np.ndarray]:
    """Teacher-forced ``beta_t`` on each user's real prompt (:func:`real_prompts`), ``[n_k]`` each.

    ``beta_t`` is the probability that a draft token at position t is accepted
    (:func:`spinlib.sd.measure.teacher_forced_beta`); at temperature 0 the target's greedy
    trajectory is the one the real rounds produce, so ``beta`` covers exactly their tokens.
    """
    from ..sd.measure import teacher_forced_beta
    from ..sd.models import get_pair, load_pair
    from ..sd.prompts import encode_for_pair

    target, draft, tok = load_pair(pair)
    out = []
    for text in real_prompts(num_users):
        ids = encode_for_pair(get_pair(pair), tok, text)
        out.append(teacher_forced_beta(target, draft, ids, max_new_tokens=max_new_tokens, temperature=temperature))
    return out


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


def real_rounds_vs_models(base: Scenario, allocations: dict[str, Allocation], pair: str, betas, *, rounds: int,
                          L_max: int, seed: int = 0, temperature: float = 0.0) -> list[dict]:
    """Each allocation played with real models, against three analytical predictions.

    For every allocation: the testbed's goodput [token/s] with real rounds (``rounds`` rounds,
    ``pair``, ``temperature``; timings and radio from ``base``) and :func:`spinlib.rounds.evaluate`
    of the allocation under each acceptance model of :func:`acceptance_scenarios`, the per-prompt
    ones measured over exactly the tokens the real rounds produced (``n_k = round(mean tokens per
    round x rounds)``). The difference between "this prompt, i.i.d." and "this prompt, profile"
    is then the i.i.d. assumption alone.

    Returns
    -------
    list of dict, one per allocation
        ``"allocation"``, ``"L"``, ``"testbed, real models"``, ``"ci"``, ``"tokens/round: testbed"``,
        ``"rounds"``, and for each prediction ``name`` in :data:`PREDICTIONS`: ``name`` (goodput)
        and ``"tokens/round: name"`` (expected tokens per round, ``[K]``).
    """
    full = acceptance_scenarios(base, pair, betas, L_max, temperature=temperature)
    rows = []
    for name, a in allocations.items():
        r = emulate(full[PREDICTIONS[2]], a, EmulatorConfig(rounds=rounds, seed=seed, real_models=pair,
                                                            temperature=temperature))
        n_tok = np.rint(r.tokens_per_round * r.rounds)
        window = acceptance_scenarios(base, pair, betas, L_max, n_tokens=n_tok, temperature=temperature)
        row = {"allocation": name, "L": list(a.draft_lengths), "testbed, real models": r.goodput_tokens_per_s,
               "ci": [r.ci_low, r.ci_high], "tokens/round: testbed": r.tokens_per_round.tolist(), "rounds": r.rounds}
        for sname in PREDICTIONS:
            sc = full[sname] if sname == PREDICTIONS[0] else window[sname]
            ev = evaluate(sc, a)
            row[sname] = ev.goodput_tokens_per_s
            row[f"tokens/round: {sname}"] = ev.expected_tokens.tolist()
        rows.append(row)
    return rows


__all__ = ["REAL_TASKS", "PREDICTIONS", "real_prompts", "real_trace", "prompt_betas", "acceptance_scenarios",
           "real_rounds_vs_models"]
