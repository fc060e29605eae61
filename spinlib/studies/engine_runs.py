"""Real speculative decoding runs of notebook 04, as cacheable studies.

A run drafts with the pair's draft model and verifies with its target (:func:`spinlib.sd.engine.speculative_generate`)
on the notebook's Spec-Bench prompts (:func:`notebook_prompts`). The two studies here are the
notebook's expensive cells:

* :func:`greedy_lossless_runs` -- at temperature 0, each prompt's speculative output against the
  target's own greedy output (:func:`spinlib.sd.lossless.compare_greedy`: identical, or a near-tie
  within the kernel's rounding noise);
* :func:`ul_dl_runs` -- at temperature 1, each prompt in UL and DL mode at several draft lengths: the
  generated tokens and every round's drafted / accepted counts and bits up / down.

Both are :class:`spinlib.study.Study` instances over their prompts (records first, resumable: an interrupted
real-model run keeps what it finished). Their outputs are plain records (JSON), so
:func:`spinlib.cache.cached_call` keeps them. The torch
kernel a run computes with depends on the machine (:func:`spinlib.sd.models.pair_kernel`), so each
study takes the kernel's name as an argument, part of its cache key, and refuses to run under a
different one: a result computed with one kernel is never served for another.

torch and the models are imported inside the functions.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..study import Study

#: the key of these studies in the results cache (:func:`spinlib.cache.cache_name`): their own module, where
#: they were first cached
CACHE_NAMESPACE = "spinlib.studies.engine_runs"

TASKS = ("qa", "math_reasoning", "translation", "summarization")


def notebook_prompts(n_prompts: int) -> list[dict]:
    """The first Spec-Bench prompt of each task in :data:`TASKS`, the first ``n_prompts`` of them."""
    from ..sd.prompts import load_spec_bench

    return [r for t in TASKS for r in load_spec_bench(t, 1)][:n_prompts]


def _setup(pair: str, kernel: str, n_prompts: int):
    """The pair's models on this machine's kernel (refused otherwise), the payload, and the notebook's
    prompts with their ids (:func:`spinlib.sd.prompts.encode_for_pair`, as every measurement takes them)."""
    from ..scenario import Payload
    from ..sd.models import PACKAGED, check_kernel, get_pair, load_pair
    from ..sd.prompts import encode_for_pair

    target, draft, tok = load_pair(pair, check_kernel(pair, kernel))
    spec = get_pair(pair)
    payload = Payload(PACKAGED[spec.target].vocab_size, "full", 16)
    prompts = [(p, encode_for_pair(spec, tok, p["prompt"])) for p in notebook_prompts(n_prompts)]
    return target, draft, tok, payload, prompts


@dataclass(frozen=True)
class GreedyRun:
    """One prompt of :func:`greedy_lossless_runs` (``params["prompt"]``, an index into
    :func:`notebook_prompts`): speculative decoding at temperature 0 at every draft length in ``Ls``
    against the target's greedy output. Deterministic: the task's seed is not used."""

    pair: str
    kernel: str
    n_prompts: int
    max_new_tokens: int
    Ls: tuple

    def __call__(self, params: dict, seed: int) -> list[dict]:
        from ..sd.lossless import greedy_checks

        target, draft, tok, _, prompts = _setup(self.pair, self.kernel, self.n_prompts)
        p, ids = prompts[int(params["prompt"])]
        return [{"task": p["task"], "L": L, "tokens": len(out), "identical to target greedy": chk.identical,
                 "first difference": chk.first_divergence, "margin m": chk.margin, "noise tau": chk.tau,
                 "explained": chk.explained}
                for L, (out, chk) in zip(self.Ls, greedy_checks(target, draft, ids, draft_lengths=self.Ls,
                                                                max_new_tokens=self.max_new_tokens,
                                                                stop_ids=(tok.eos_token_id,)))]


def greedy_lossless_runs(pair: str, n_prompts: int, max_new_tokens: int, *, kernel: str,
                         Ls: tuple[int, ...] = (1, 4, 8), n_jobs: int | None = 1) -> list[dict]:
    """Temperature 0: per prompt and draft length ``L``, speculative decoding against the target's greedy output.
    A :class:`~spinlib.study.Study` over the prompts (:class:`GreedyRun`; resumable: an interrupted run keeps
    the prompts it finished; one worker by default, as each worker loads the pair).

    Returns
    -------
    list of dict
        One record per (prompt, L), in prompt order: ``task``, ``L``, ``tokens`` (generated), ``identical to
        target greedy``, ``first difference`` (index, ``None`` when identical), ``margin m`` (the reference
        logit margin there), ``noise tau`` (the kernel's rounding noise on the sequence) and
        ``explained`` (identical, or ``m <= 2 tau``), as :class:`spinlib.sd.lossless.GreedyCheck`.
    """
    from ..sd.models import check_kernel

    point = GreedyRun(pair, check_kernel(pair, kernel), int(n_prompts), int(max_new_tokens), tuple(int(L) for L in Ls))
    points = [{"prompt": i} for i in range(len(notebook_prompts(n_prompts)))]
    # the records as they were before this was a Study: the task names the prompt, and the seed is unused
    return [{k: v for k, v in r.items() if k not in ("prompt", "seed")}
            for r in Study(f"greedy-lossless-{pair}", point, points, 1, 0).run(n_jobs=n_jobs)]


@dataclass(frozen=True)
class UlDlRun:
    """One (mode, draft length, prompt) of :func:`ul_dl_runs`: speculative sampling at temperature 1 with
    ``torch.Generator().manual_seed(seed)``, the study's one seed (so UL and DL draw the same tokens)."""

    pair: str
    kernel: str
    n_prompts: int
    max_new_tokens: int

    def __call__(self, params: dict, seed: int) -> dict:
        import torch

        from ..sd.engine import speculative_generate

        target, draft, _, payload, prompts = _setup(self.pair, self.kernel, self.n_prompts)
        ids = prompts[int(params["prompt"])][1]
        out, rr = speculative_generate(target, draft, ids, max_new_tokens=self.max_new_tokens,
                                       draft_length=int(params["L"]), temperature=1.0,
                                       generator=torch.Generator().manual_seed(int(seed)), mode=params["mode"],
                                       payload=payload)
        return {"tokens": list(out), "rounds": [{"drafted": r.drafted, "accepted": r.accepted, "bits_up": r.bits_up,
                                                 "bits_down": r.bits_down} for r in rr]}


def ul_dl_runs(pair: str, n_prompts: int, max_new_tokens: int, seed: int, *, kernel: str,
               Ls: tuple[int, ...] = (1, 2, 4, 8), modes: tuple[str, ...] = ("UL", "DL"),
               n_jobs: int | None = 1) -> list[dict]:
    """Temperature 1: every prompt in each mode at each draft length: a :class:`~spinlib.study.Study`
    (:class:`UlDlRun`, one seed common to every point, so UL and DL draw the same tokens; resumable; one
    worker by default, as each worker loads the pair).

    Returns
    -------
    list of dict
        One record per (mode, L, prompt): ``mode``, ``L``, ``prompt`` (index), ``seed`` (the sampler's),
        ``tokens`` (the generated ids) and ``rounds``: per round ``drafted``, ``accepted``, ``bits_up`` and
        ``bits_down`` [bit].
    """
    from ..sd.models import check_kernel

    point = UlDlRun(pair, check_kernel(pair, kernel), int(n_prompts), int(max_new_tokens))
    n = len(notebook_prompts(n_prompts))
    points = [{"mode": m, "L": int(L), "prompt": i} for m in modes for L in Ls for i in range(n)]
    return Study(f"ul-dl-{pair}", point, points, 1, seed).run(n_jobs=n_jobs)


__all__ = ["TASKS", "notebook_prompts", "greedy_lossless_runs", "GreedyRun", "ul_dl_runs", "UlDlRun"]
