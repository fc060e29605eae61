"""Caps by projected cost on the commands that run real models: the testbed's real mode counts model
steps (rounds x (1 + drafted tokens)) and a measurement counts the tokens it generates or scores; past
their budgets both refuse in one line before any model loads, and allow_long lifts the cap without
entering a cache key."""
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spinlib import random_scenario
from spinlib.control.registry import solve
from spinlib.emulator import EmulatorConfig, emulate
from spinlib.emulator import testbed as TB
from spinlib.sd import measure as M
from spinlib.validation import ValidationError


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 6), st.integers(1, 8), st.integers(2, 400_000))
def test_real_mode_refuses_past_its_step_budget_before_loading_a_model(K, L, rounds):
    s = random_scenario(K, 0)
    alloc = solve(s, "optimal-bandwidth-fixed-length", draft_length=L)
    steps = TB.real_steps(alloc, rounds)
    assert steps == rounds * (1 + sum(alloc.draft_lengths))
    cfg = EmulatorConfig(rounds=rounds, real_models="no-such-pair-loaded-here")
    if steps > TB.REAL_STEP_BUDGET:
        with pytest.raises(ValidationError) as e:
            emulate(s, alloc, cfg)
        msg = str(e.value)
        assert "\n" not in msg and f"{steps:,} model steps" in msg and "allow_long" in msg
    else:  # under the budget the run goes on to load the pair (which does not exist): a different refusal
        with pytest.raises(Exception) as e:
            emulate(s, alloc, cfg)
        assert "budget" not in str(e.value)


def test_allow_long_is_a_flag_outside_the_key():
    assert EmulatorConfig(allow_long=True) == EmulatorConfig()  # compare=False: not part of a cache key
    for bad in (1, "yes", None):
        with pytest.raises(ValidationError, match="allow_long must be True or False"):
            EmulatorConfig(allow_long=bad)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 300), st.integers(1, 4096))
def test_a_measurement_refuses_past_its_token_budget(n_prompts, new_tokens):
    work = M.measure_tokens(n_prompts, new_tokens)
    assert work == min(2, n_prompts) * 8 * 2 * new_tokens + n_prompts * 2 * new_tokens
    if work <= M.MEASURE_TOKEN_BUDGET:
        return
    with pytest.raises(ValidationError) as e:
        M.measure_pair("smollm2-rtn6", "qa", n_prompts=n_prompts, max_new_tokens=new_tokens)
    assert "\n" not in str(e.value) and f"{work:,} tokens" in str(e.value) and "allow_long" in str(e.value)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "spinlib", *args], capture_output=True, text=True, timeout=300)


def test_the_cli_refuses_in_one_line_and_allow_long_without_real_models(tmp_path):
    scen = tmp_path / "s.json"
    assert _cli("scenario", "--users", "3", "-o", str(scen)).returncode == 0
    r = _cli("emulate", str(scen), "--policy", "homogeneous", "--allow-long")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--allow-long needs --real-models" in r.stderr
    r = _cli("measure", "--pair", "smollm2-rtn6", "--task", "qa", "--prompts", "10", "--max-new-tokens", "4096")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "past the budget" in r.stderr, r.stderr


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 6), st.integers(1, 8), st.integers(2, 60_000), st.integers(1, 4), st.booleans())
def test_replan_refuses_past_its_projected_work_before_any(K, L_max, rounds, n_ctrl, real):
    """replan projects rounds x controllers per-round solves (and, with real models, model steps) from its arguments
    and refuses past the budget in one line before a model loads or a round is played; allow_long lifts it."""
    from spinlib.emulator.testbed import REAL_STEP_BUDGET
    from spinlib.online import replan as R

    s = random_scenario(K, 0)
    ctrls = ["plan-on-average"] * n_ctrl
    cfg = R.ReplanConfig(rounds=rounds, L_max=L_max)
    pair = "no-such-pair-loaded-here" if real else None
    solves = rounds * n_ctrl
    over = solves > R.REPLAN_ROUND_BUDGET or (real and solves * (1 + K * L_max) > REAL_STEP_BUDGET)
    if over:
        with pytest.raises(ValidationError) as e:
            R.run_replan(s, ctrls, cfg, real_models=pair)
        assert "\n" not in str(e.value) and "budget" in str(e.value) and "allow_long" in str(e.value)
    R.check_replan_work(K, n_ctrl, R.ReplanConfig(rounds=rounds, L_max=L_max, allow_long=True), pair)  # lifted
    if not over:
        R.check_replan_work(K, n_ctrl, cfg, pair)  # under the budget: no refusal


#: every command and what bounds its work, by the library constant that sets the bound (module, name) and why that
#: bounds it; a command missing here (or a constant that is gone) fails the test below, so a new command declares
#: its cap or why it needs none
WORK_CAPS = {
    "scenario": [("spinlib.scenario", "MAX_USERS", "users a scenario holds; writing it is linear in them")],
    "evaluate": [("spinlib.scenario", "MAX_USERS", "closed-form evaluation, linear in the users")],
    "solve": [("spinlib.scenario", "MAX_USERS", "users; each policy refuses past its own max_users"),
              ("spinlib.control.exhaustive", "MAX_VECTORS", "the exhaustive reference's length vectors")],
    "emulate": [("spinlib.cli", "MAX_ROUNDS", "rounds"),
                ("spinlib.emulator.testbed", "MAX_ROUND_USER_CELLS", "rounds x users (memory)"),
                ("spinlib.emulator.testbed", "REAL_STEP_BUDGET", "model steps of the real mode (allow_long)")],
    "pairs": [],  # a listing of the packaged pairs: no work to bound
    "generate": [("spinlib.cli", "MAX_NEW_TOKENS", "new tokens"), ("spinlib.cli", "MAX_PROMPT_TOKENS", "prompt tokens")],
    "measure": [("spinlib.sd.measure", "MEASURE_TOKEN_BUDGET", "tokens generated or scored (allow_long)"),
                ("spinlib.cli", "MAX_NEW_TOKENS", "new tokens per prompt")],
    "balance": [("spinlib.balance.model", "MAX_USERS", "users of an instance (and --random K)"),
                ("spinlib.balance.solvers", "MAX_PHI_STEPS", "compute shares the algorithm and the MILP enumerate")],
    "arena": [("spinlib.online.arena", "ARENA_WORK_LIMIT", "user-rounds x seeds x controllers (allow_long)")],
    "replan": [("spinlib.online.replan", "REPLAN_ROUND_BUDGET", "rounds x controllers per-round solves (allow_long)"),
               ("spinlib.online.replan", "REPLAN_NODE_BUDGET", "certified search nodes (allow_long)"),
               ("spinlib.emulator.testbed", "REAL_STEP_BUDGET", "model steps with --real-models (allow_long)")],
}


def test_every_command_declares_what_bounds_its_work():
    import argparse
    import importlib
    import math

    from spinlib.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) == set(WORK_CAPS), (sorted(set(sub.choices) - set(WORK_CAPS)),
                                                sorted(set(WORK_CAPS) - set(sub.choices)))
    for cmd, caps in WORK_CAPS.items():
        for module, name, _ in caps:
            value = getattr(importlib.import_module(module), name)
            assert isinstance(value, int) and 0 < value < math.inf, (cmd, module, name, value)
