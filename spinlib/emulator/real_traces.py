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

This module is a trace source of the testbed (:func:`spinlib.emulator.testbed.emulate` with
``cfg.real_models``); the study that compares replayed rounds with the analysis is
:mod:`spinlib.studies.replay`. torch and the models are imported inside the functions that need them.
"""

from __future__ import annotations

import numpy as np

from ..rounds import Allocation
from ..scenario import Scenario
from ..validation import ValidationError
from .config import EmulatorConfig
from .traces import Trace, trace_bits

REAL_TASKS = ("qa", "math_reasoning", "translation", "summarization", "mt_bench", "rag")


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
