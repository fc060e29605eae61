"""Helpers shared by the test modules (pytest puts ``tests/`` on ``sys.path``; import as ``helpers``)."""
import contextlib
import io
import os
import subprocess
import sys
import warnings

import numpy as np


def fresh_seed() -> int:
    """A fresh seed for a campaign on random instances (tests print it on failure), or
    ``$SPINLIB_TEST_SEED`` to replay one."""
    return int(os.environ.get("SPINLIB_TEST_SEED", np.random.SeedSequence().entropy % (1 << 63)))


def spinlib_cli(*args, cwd=None, env=None, timeout=600, fresh=False):
    """``python -m spinlib ARGS``: its ``CompletedProcess`` (stdout and stderr as text).

    Without ``cwd``, ``env`` or ``fresh`` the command runs in this process (:func:`spinlib.cli.main`,
    the entry point ``python -m spinlib`` calls, with stdout and stderr captured and argparse's exit
    caught): the same exit code and output without an interpreter start, which is most of a refusal
    test's time. ``fresh=True`` (or a ``cwd``/``env``) runs a new process, for what needs one: plugins
    loaded from files, environment variables, threads, real models.
    """
    if fresh or cwd is not None or env is not None or "--plugin" in args:  # a plugin registers process-wide
        return subprocess.run([sys.executable, "-m", "spinlib", *args], capture_output=True, text=True, cwd=cwd,
                              env=env, timeout=timeout)
    from spinlib.cli import main

    out, err = io.StringIO(), io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as e:  # argparse's own refusals (exit 2) and --help (exit 0)
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return subprocess.CompletedProcess([sys.executable, "-m", "spinlib", *args], code, out.getvalue(), err.getvalue())


def tiny_qwen_pair():
    """A tiny random Qwen2 target (float64, sharpened head: no greedy ties) and its draft, the same network with
    every weight perturbed (some drafts accepted, some rejected): a Hugging Face pair with a KV cache, built
    offline, for the batched engine."""
    import copy

    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=48, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    target = Qwen2ForCausalLM(cfg).double().eval()
    draft = copy.deepcopy(target)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        target.lm_head.weight.mul_(40.0)
        for p in draft.parameters():
            p.add_(0.3 * p.std() * torch.randn(p.shape, generator=g, dtype=p.dtype))
        draft.lm_head.weight.mul_(40.0)
    return target, draft
