"""Per-position traces of a real draft/target pair: what makes every online controller's replay exact.

Under greedy decoding one teacher-forced pass gives the outcome of *every* round for *every* draft
length. Along the target's greedy output ``y_1..y_n`` (the tokens speculative decoding emits, since
greedy speculative decoding is lossless), position ``t`` records

* ``accept[t]``: ``1[argmax q_t = argmax p_t]``, the greedy teacher-forced outcome (``q_t`` the
  draft's and ``p_t`` the target's next-token distribution after ``y_<t``);
* ``top_prob[t]``: ``max_x q_t(x)`` at temperature 1, the draft's own confidence (the predictor of
  SpecDec++-style stops and of Hugging Face's confidence threshold);
* ``entropy[t]``: ``H(q_t) = -sum_x q_t(x) ln q_t(x)`` [nat] at temperature 1 (GELATO's early exit);
* ``accept_prob[t]``: ``min(1, p_t(x) / q_t(x))`` at temperature 1 for the draft's greedy token
  ``x = argmax q_t``, the target's acceptance probability of that token under speculative sampling;
* ``tokens[t]``: ``y_t`` (for the live-engine exactness check).

A round that starts after ``p`` committed tokens and drafts ``L`` tokens accepts
``A = min(run[p], L)`` drafts, ``run[p]`` the number of consecutive ones of ``accept`` from ``p``,
and commits ``A + 1`` tokens (the target's correction or bonus token): :func:`replay_prompt`.
The engine's own caps (at most ``max_new_tokens - n - 1`` drafts, a stop token) are reproduced.

Records are JSONL lines (one per prompt), validated by :func:`check_trace_record` like
:func:`spinlib.sd.measure.check_record`: a bad field is one line naming the file, the line and the
field. :func:`record_traces` writes ``data/traces/<pair>/<task>-<key>.jsonl`` (resumable: finished
lines are kept, a torn last line is measured again; a ``provenance`` JSON beside it).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..jsonio import exclusive_lock, loads_json, open_append, resume_jsonl
from ..validation import ValidationError

TRACE_VERSION = 1
FIELDS = ("accept", "top_prob", "entropy", "accept_prob")


def traces_dir() -> Path:
    """``<repo>/data/traces`` (committed traces)."""
    from ..paths import DATA

    return DATA / "traces"


@dataclass(frozen=True)
class PromptTrace:
    """The per-position record of one prompt (module docstring); every array has shape ``[n]``."""

    question_id: int
    accept: np.ndarray  # int8, 0/1
    top_prob: np.ndarray  # float, (0, 1]
    entropy: np.ndarray  # float, >= 0 [nat]
    accept_prob: np.ndarray  # float, [0, 1]
    tokens: np.ndarray  # int64 token ids

    @property
    def n(self) -> int:
        return int(self.accept.size)


def run_lengths(accept) -> np.ndarray:
    """``run[p]`` = number of consecutive ones of ``accept`` starting at ``p`` (shape ``[n]``)."""
    a = np.asarray(accept, dtype=np.int64)
    run = np.zeros(a.size + 1, dtype=np.int64)
    for p in range(a.size - 1, -1, -1):
        run[p] = run[p + 1] + 1 if a[p] else 0
    return run[:-1]


def replay_prompt(trace: PromptTrace, lengths, max_new_tokens: int | None = None):
    """Rounds of greedy speculative decoding on one prompt, predicted from its trace.

    ``lengths`` is an int (fixed L) or a callable ``f(round_index, position) -> L``. The engine's
    caps apply (:func:`spinlib.sd.engine.speculative_generate`): at most ``max_new_tokens - n - 1``
    drafts in a round (``max_new_tokens`` when given, else the trace's length), and the last
    position of the trace is a stop (the trace ends where the target stopped or hit
    ``max_new_tokens``; the drafts of a last round that ends on a stop token are capped by
    ``max_new_tokens`` as in the engine, not by the stop). Returns ``(tokens, rounds)`` with ``rounds`` a list
    of ``(drafted, accepted)``.
    """
    n = trace.n
    limit = n if max_new_tokens is None else min(n, max_new_tokens)
    cap_end = n if max_new_tokens is None else max_new_tokens  # the engine cannot see a stop token coming
    run = run_lengths(trace.accept)
    f = lengths if callable(lengths) else (lambda r, p, _L=int(lengths): _L)
    p, rounds = 0, []
    while p < limit:
        L = max(0, min(int(f(len(rounds), p)), cap_end - p - 1))
        A = min(int(run[p]), L)
        rounds.append((L, A))
        p += A + 1
    return trace.tokens[:limit].tolist(), rounds


# ----------------------------------------------------------------------------------------------
# JSONL records
# ----------------------------------------------------------------------------------------------
def _error(path, lineno: int, field: str, allowed: str) -> ValidationError:
    return ValidationError(f"{path}:{lineno}: field {field!r} must be {allowed}; delete the line (it is then "
                           "recorded again) or record again with recompute=True")


def _is_num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def check_trace_record(r, path="<record>", lineno: int = 0) -> int:
    """Validate one trace JSONL record; returns its ``question_id``.

    ``kind`` is ``"trace"``, ``question_id`` an int, ``tokens`` a non-empty list of ints >= 0,
    ``accept`` a list of 0/1, ``top_prob`` in (0, 1], ``entropy`` >= 0, ``accept_prob`` in [0, 1],
    all of the length of ``tokens``. Anything else is one :class:`ValidationError` line naming the
    file, the line and the field.
    """
    if not isinstance(r, dict):
        raise _error(path, lineno, "<line>", "a JSON object")
    if r.get("kind") != "trace":
        raise _error(path, lineno, "kind", "'trace'")
    if "kernel" in r and not isinstance(r["kernel"], str):
        raise _error(path, lineno, "kernel", "the name of a torch kernel (a string)")
    qid = r.get("question_id")
    if not isinstance(qid, int) or isinstance(qid, bool):
        raise _error(path, lineno, "question_id", "an integer")
    tok = r.get("tokens")
    if not isinstance(tok, list) or not tok or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0
                                                       for x in tok):
        raise _error(path, lineno, "tokens", "a non-empty list of token ids (integers >= 0)")
    n = len(tok)
    checks = {"accept": (lambda x: x in (0, 1) and not isinstance(x, bool), "a list of 0/1"),
              "top_prob": (lambda x: _is_num(x) and 0.0 < x <= 1.0, "a list of probabilities in (0, 1]"),
              "entropy": (lambda x: _is_num(x) and x >= 0.0, "a list of entropies >= 0 [nat]"),
              "accept_prob": (lambda x: _is_num(x) and 0.0 <= x <= 1.0, "a list of probabilities in [0, 1]")}
    for field, (ok, allowed) in checks.items():
        v = r.get(field)
        if not isinstance(v, list) or len(v) != n or not all(ok(x) for x in v):
            raise _error(path, lineno, field, f"{allowed} with one entry per token ({n})")
    return qid


def to_prompt_trace(r: dict) -> PromptTrace:
    """A validated record as a :class:`PromptTrace`."""
    check_trace_record(r)
    return PromptTrace(int(r["question_id"]), np.asarray(r["accept"], dtype=np.int8),
                       np.asarray(r["top_prob"], float), np.asarray(r["entropy"], float),
                       np.asarray(r["accept_prob"], float), np.asarray(r["tokens"], dtype=np.int64))


def read_traces(path, same: dict | None = None, kept: list | None = None) -> dict[int, dict]:
    """The finished records of a trace JSONL, keyed by question id.

    A torn *last* line (an interrupted recording) is dropped; any other line that is not a valid
    record is refused with one line naming the file, the line and the field. A file without records
    gives an empty dict (a recording resumes from it; :func:`verified_traces` refuses a committed file
    that lacks a prompt its provenance lists).
    """
    from ..jsonio import read_jsonl_records

    path = Path(path)
    if not path.is_file():
        raise ValidationError(f"trace file {str(path)!r} does not exist")
    return read_jsonl_records(path, "trace", check_trace_record, _error, "a prompt not recorded before (id {key} repeats)",
                              same, good_lines=kept)


def _strict_json(text: str, path) -> Any:
    """:func:`spinlib.jsonio.loads_json` (duplicate keys, non-finite numbers, depth refused)."""
    return loads_json(text, str(path))


def verified_traces(path) -> list[PromptTrace]:
    """The traces of a *committed* file, checked against its provenance record before use.

    ``<task>-<key>.jsonl`` must have ``<task>-<key>.provenance.json`` beside it (written only once a
    recording completed), which matches its own sha256 (``record_sha256``) and the sha256 of the
    trace file (``sha256``), whose configuration hashes to ``key`` and names this task and the pair of
    the folder; the file holds exactly the prompts the record lists (no torn line, no repeated or
    foreign prompt) and no prompt is longer than the configured number of new tokens. Any mismatch
    is one :class:`ValidationError` line naming the file and what differs.
    """
    from ..cache import config_key, sha256_file, value_digest
    from ..jsonio import read_text_checked

    path = Path(path)
    task, key = task_of(path), path.stem.rpartition("-")[2]
    prov_path = path.with_name(f"{path.stem}.provenance.json")
    if not prov_path.is_file() or prov_path.is_symlink():
        raise ValidationError(f"trace file {str(path)!r} has no provenance record {prov_path.name!r} (an "
                              "interrupted or foreign recording: record it again with record_traces)")
    prov = _strict_json(read_text_checked(prov_path, "trace provenance"), prov_path)
    cfg = prov.get("config") if isinstance(prov, dict) else None
    ids = prov.get("question_ids") if isinstance(prov, dict) else None
    if not isinstance(cfg, dict) or not isinstance(ids, list):
        raise ValidationError(f"{prov_path}: 'config' (an object) and 'question_ids' (a list) are required")
    # content-addressed: the record hashes itself and the trace file it describes
    body = {k: v for k, v in prov.items() if k != "record_sha256"}
    if prov.get("record_sha256") != value_digest(body):
        raise ValidationError(f"{prov_path}: the record does not match its own sha256 (edited, or written by an "
                              "older version: record the traces again with record_traces)")
    text = read_text_checked(path, "trace")
    if path.is_symlink() or prov.get("sha256") != sha256_file(path):
        raise ValidationError(f"{path}: its content does not match the sha256 in {prov_path.name} (edited, torn or "
                              "replaced after the recording)")
    pair = path.parent.name
    for field, have, want in (("pair", prov.get("pair"), pair), ("config.pair", cfg.get("pair"), pair),
                              ("config.task", cfg.get("task"), task), ("config hash", config_key(cfg, 12), key)):
        if have != want:
            raise ValidationError(f"{prov_path}: {field} is {have!r}, but the file {path.name!r} in folder "
                                  f"{pair!r} needs {want!r}")
    lines = text.splitlines()
    recs = {}
    for i, line in enumerate(lines, 1):
        r = _strict_json(line, f"{path}:{i}")
        qid = check_trace_record(r, path, i)
        if qid in recs:
            raise _error(path, i, "question_id", f"a prompt not recorded before (id {qid} repeats)")
        if len(r["tokens"]) > cfg.get("max_new_tokens", 0):
            raise _error(path, i, "tokens", f"at most max_new_tokens = {cfg.get('max_new_tokens')} tokens")
        recs[qid] = r
    if sorted(recs) != sorted(ids) or len(ids) != len(set(ids)):
        extra, missing = sorted(set(recs) - set(ids)), sorted(set(ids) - set(recs))
        raise ValidationError(f"{path}: its prompts differ from its provenance record (not listed there: {extra[:5]}, "
                              f"listed but missing: {missing[:5]})")
    return [to_prompt_trace(r) for r in recs.values()]  # in recording order (the replayed stream's order)


def load_traces(path) -> list[PromptTrace]:
    """Every prompt trace of a JSONL file (refused with one line when it holds none)."""
    recs = read_traces(path)
    if not recs:
        raise ValidationError(f"trace file {str(path)!r} holds no trace records (an empty trace cannot be replayed)")
    return [to_prompt_trace(r) for r in recs.values()]


def trace_files(pair: str, directory=None) -> list[Path]:
    """The committed trace files of a pair (sorted by name)."""
    d = Path(directory or traces_dir()) / pair
    return sorted(d.glob("*.jsonl"))


def task_of(path) -> str:
    """The task group a trace file ``<task>-<key>.jsonl`` holds (the one place its name is parsed)."""
    return Path(path).name.rsplit("-", 1)[0]


def task_files(pair: str, directory=None) -> dict[str, Path]:
    """``{task: file}`` of a pair's committed traces; one line when a task has two recordings (two
    ``<task>-<key>.jsonl`` files, e.g. a second recording with another configuration): which one a reader
    would use is then a guess, never a silent choice."""
    out: dict[str, Path] = {}
    for f in trace_files(pair, directory):
        task = task_of(f)
        if task in out:
            raise ValidationError(f"pair {pair!r} has two trace recordings of task {task!r}: {out[task].name} and "
                                  f"{f.name}; keep one (delete the other file and its provenance record)")
        out[task] = f
    return out


def pair_tasks(pair: str, directory=None) -> list[str]:
    """The task groups with committed traces for ``pair`` (sorted; one recording each: :func:`task_files`)."""
    return sorted(task_files(pair, directory))


def load_pair_traces(pair: str, directory=None, tasks=None) -> dict[str, list[PromptTrace]]:
    """``{task: [PromptTrace, ...]}`` of a pair's committed traces, each file checked against its
    provenance (:func:`verified_traces`). ``tasks`` (default: every recorded one) must name
    recorded tasks, each once: an unknown task is refused with the closest recorded name, never
    dropped; one line as well when the pair has no traces."""
    import difflib

    have = pair_tasks(pair, directory)
    if not have:
        raise ValidationError(f"no traces recorded for pair {pair!r} under {Path(directory or traces_dir())}")
    if tasks is not None:
        tasks = list(tasks)
        for t in tasks:
            if t not in have:
                near = difflib.get_close_matches(str(t), have, n=1)
                raise ValidationError(f"tasks: pair {pair!r} has no traces of task {t!r}"
                                      + (f" (did you mean {near[0]!r}?)" if near else "")
                                      + f"; recorded: {', '.join(have)}")
        if len(set(tasks)) != len(tasks):
            raise ValidationError(f"tasks: a task is listed twice in {tasks}")
    return {task: verified_traces(f) for task, f in task_files(pair, directory).items()
            if tasks is None or task in tasks}


def trace_summary(traces: list[PromptTrace], L_max: int = 8) -> dict:
    """Serving-engine vocabulary of the greedy rounds at each fixed L (replayed): drafts, draft
    tokens, accepted tokens, accepted per position, mean acceptance length (accepted + 1 per draft)."""
    out = {"positions": int(sum(t.n for t in traces)),
           "greedy_acceptance": float(np.concatenate([t.accept for t in traces]).mean()),
           "by_L": {}}
    for L in range(1, L_max + 1):
        drafts = draft_tokens = accepted = 0
        per_pos = np.zeros(L, dtype=np.int64)
        for t in traces:
            _, rounds = replay_prompt(t, L)
            for d, a in rounds:
                if d == 0:
                    continue
                drafts += 1
                draft_tokens += d
                accepted += a
                per_pos[:a] += 1
        out["by_L"][str(L)] = {"drafts": drafts, "draft_tokens": draft_tokens, "accepted_tokens": accepted,
                               "accepted_per_position": per_pos.tolist(),
                               "mean_acceptance_length": (accepted + drafts) / max(drafts, 1)}
    return out


# ----------------------------------------------------------------------------------------------
# recording with the packaged models
# ----------------------------------------------------------------------------------------------
def trace_record(target, draft, prompt_ids: list[int], *, max_new_tokens: int, stop_ids=()) -> dict:
    """One prompt's record: the target's greedy decode with its logits, one draft pass over the
    sequence (the teacher-forcing path of :func:`spinlib.sd.measure.teacher_forced_beta`)."""
    import torch

    from ..sd.engine import CachedLM, target_generate

    with torch.no_grad():
        gen, p_logits = target_generate(target, prompt_ids, max_new_tokens=max_new_tokens, temperature=0.0,
                                        stop_ids=stop_ids, return_logits=True)
        full = list(prompt_ids) + gen
        q_logits = CachedLM(draft).feed(full[:-1], keep=len(gen))
        p = torch.softmax(p_logits.double(), -1)
        logq = torch.log_softmax(q_logits.double(), -1)
        q = logq.exp()
        x = q_logits.argmax(-1)
        accept = (p_logits.argmax(-1) == x).to(torch.int64)
        top = q.gather(-1, x[:, None])[:, 0]
        ent = (-(q * logq)).nan_to_num(0.0).sum(-1).clamp(min=0.0)
        acc_p = torch.clamp(p.gather(-1, x[:, None])[:, 0] / top, max=1.0)
    return {"kind": "trace", "tokens": [int(v) for v in gen], "accept": [int(v) for v in accept],
            "top_prob": [min(1.0, max(round(float(v), 6), 1e-6)) for v in top],
            "entropy": [round(float(v), 6) for v in ent], "accept_prob": [round(float(v), 6) for v in acc_p]}


def record_traces(pair_name: str, task: str, *, n_prompts: int, max_new_tokens: int, out_dir=None,
                  recompute: bool = False, progress: bool = False) -> Path:
    """Record (or finish recording) the traces of ``pair_name`` on ``task``; returns the JSONL path.

    The file is ``<out_dir>/<pair>/<task>-<key>.jsonl`` with ``key`` a hash of the configuration;
    every finished prompt is one line (flushed), so an interrupted run resumes where it stopped.
    ``<task>-<key>.provenance.json`` beside it records the models, the configuration, the commit
    and the library versions (written atomically once the file is complete).
    """
    import platform
    import subprocess

    import torch
    import transformers

    from ..cache import atomic_write_text, config_key
    from ..paths import ROOT
    from ..sd.models import PACKAGED, get_pair, load_pair, pair_kernel
    from ..sd.prompts import MAX_PROMPT_TOKENS, encode, encode_for_pair, load_prompts

    pair = get_pair(pair_name)
    cfg = {"pair": pair_name, "task": task, "n_prompts": n_prompts, "max_new_tokens": max_new_tokens,
           "temperature": 0.0, "version": TRACE_VERSION}
    key = config_key(cfg, 12)
    out_dir = Path(out_dir or traces_dir())
    raw = out_dir / pair_name / f"{task}-{key}.jsonl"
    prov = raw.with_name(f"{task}-{key}.provenance.json")
    raw.parent.mkdir(parents=True, exist_ok=True)
    kernel = pair_kernel(pair_name).kernel  # every record names it; a resumed file must hold this kernel's only
    # one writer per output folder (a second recording of this pair is refused in one line); recompute starts
    # over only once the lock is held, never under a running writer
    with exclusive_lock(raw, f"the trace recordings of {pair_name} in {raw.parent}", scope="folder"):
        if recompute:
            raw.unlink(missing_ok=True)
        # a torn last line (an interrupted run) is dropped from the file before anything is appended
        done = resume_jsonl(raw, lambda kept: read_traces(raw, same={"kernel": kernel}, kept=kept))
        target, draft, tok = load_pair(pair_name, kernel)
        spec = PACKAGED[pair.target]
        stop = (tok.eos_token_id,) if tok.eos_token_id is not None else ()
        prompts = load_prompts(task, n_prompts)
        with open_append(raw) as f:
            for p in prompts:
                if p["question_id"] in done:
                    continue
                # as every measurement of the pair takes it (a distinct-draft pair keeps its chat template intact)
                ids = encode_for_pair(pair, tok, p["prompt"]) if spec.chat else encode(tok, p["prompt"], False)
                rec = {"kind": "trace", "question_id": p["question_id"],
                       **{k: v for k, v in trace_record(target, draft, ids, max_new_tokens=max_new_tokens,
                                                        stop_ids=stop).items() if k != "kind"}, "kernel": kernel}
                check_trace_record(rec, raw, len(done) + 1)
                f.write(json.dumps(rec) + "\n")
                f.flush()
                done[p["question_id"]] = rec
                if progress:
                    print(f"{pair_name}/{task}: prompt {p['question_id']} ({len(rec['tokens'])} tokens)", flush=True)
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
        atomic_write_text(prov, provenance_text({
            "config": cfg, "pair": pair_name, "target": pair.target, "draft": pair.draft,
            "target_package": spec.install, "draft_recipe": pair.draft_recipe if pair.draft_model else
            f"round-to-nearest {pair.draft_bits}-bit, groups of {pair.group_size} (spinlib.sd.models.quantize_rtn_)",
            "prompts": ("Spec-Bench question.jsonl (data/spec_bench), first turn, raw text" if not spec.chat else
                        f"Spec-Bench question.jsonl (data/spec_bench), first turn, chat template kept intact, "
                        f"middle of the text cut beyond {MAX_PROMPT_TOKENS} tokens (spinlib.sd.prompts.encode_intact)"
                        if pair.draft_model is not None else
                        "Spec-Bench question.jsonl (data/spec_bench), first turn, chat template"),
            "question_ids": sorted(done), "commit": commit or None, "kernel": pair_kernel(pair_name).to_dict(),
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                         "python": platform.python_version()},
            "fields": {"accept": "greedy teacher-forced outcome 1[argmax q = argmax p]",
                       "top_prob": "max_x q(x), T = 1", "entropy": "H(q) [nat], T = 1",
                       "accept_prob": "min(1, p(x)/q(x)) for x = argmax q, T = 1",
                       "tokens": "the target's greedy output"}}, raw))
        return raw


def provenance_text(record: dict, trace_path) -> str:
    """A trace provenance record as written: ``record`` with the sha256 of the trace file (``sha256``)
    and of the record itself (``record_sha256``, over every other field), checked by
    :func:`verified_traces`."""
    from ..cache import sha256_file, value_digest

    body = {k: v for k, v in record.items() if k not in ("sha256", "record_sha256")}
    body["sha256"] = sha256_file(trace_path)
    body = json.loads(json.dumps(body))
    return json.dumps({**body, "record_sha256": value_digest(body)}, indent=1) + "\n"


__all__ = ["TRACE_VERSION", "PromptTrace", "run_lengths", "replay_prompt", "check_trace_record", "to_prompt_trace",
           "read_traces", "load_traces", "verified_traces", "provenance_text", "trace_files", "task_files", "pair_tasks", "load_pair_traces", "trace_summary", "trace_record",
           "record_traces", "traces_dir"]
