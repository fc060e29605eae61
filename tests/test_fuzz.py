"""Property-based fuzzing of the CLI boundary (issue 12): mutated scenarios and allocations
(dropped, renamed, retyped fields, extreme numbers, random bytes) make every command either succeed
with finite JSON output or fail with one line and exit 2 -- never a traceback (``tests/fuzz_tools.py``).

CI runs ``$SPINLIB_FUZZ_EXAMPLES`` examples per property (default 60); the long campaign,
``benchmarks/fuzz_campaign.py``, runs the same properties with more and records the count.
"""
import pytest
import json
import os
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spinlib import random_scenario
from spinlib.cli import EXIT_INFEASIBLE
from fuzz_tools import EXTREMES, apply, check_outcome, mutations, run_cli
from spinlib.presets import random_uldl_scenario

EXAMPLES = int(os.environ.get("SPINLIB_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
SCENARIOS = [json.loads(random_scenario(3, seed=1).to_json()),
             json.loads(random_uldl_scenario(3, np.random.default_rng(2)).to_json())]
POLICIES = ["homogeneous", "heterogeneous-sync", "heterogeneous-async", "uldl-optimal", "agnostic"]
CASES = {"solve": 0, "evaluate": 0, "bytes": 0}  # examples run, per property (read by the campaign)


def write(d, name, doc):
    """Write a (mutated) JSON document; numbers beyond Python's integer-string limit are written too
    (the limit is lifted only while writing, so the command under test reads with the default)."""
    import sys

    p = Path(d) / name
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        p.write_text(json.dumps(doc))
    finally:
        sys.set_int_max_str_digits(old)
    return p


@FUZZ
@given(which=st.integers(0, 1), muts=mutations(), policy=st.sampled_from(POLICIES))
def test_solve_on_mutated_scenarios(which, muts, policy):
    CASES["solve"] += 1
    with tempfile.TemporaryDirectory() as d:
        p = write(d, "s.json", apply(SCENARIOS[which], muts))
        res = run_cli(["solve", str(p), "--policy", policy, "--L-max", "4", "--json"])
    assert check_outcome(*res) is None, (muts, policy, check_outcome(*res))


@pytest.mark.campaign
@FUZZ
@given(which=st.integers(0, 1), muts=mutations(), target=st.sampled_from(["scenario", "allocation"]))
def test_evaluate_on_mutated_inputs(which, muts, target):
    CASES["evaluate"] += 1
    s = SCENARIOS[which]
    policy = "heterogeneous-sync" if which == 0 else "uldl-optimal"
    with tempfile.TemporaryDirectory() as d:
        rc, out, _, _ = run_cli(["solve", str(write(d, "s0.json", s)), "--policy", policy, "--L-max", "4", "--json"])
        assert rc == 0
        alloc = json.loads(out)
        if target == "scenario":
            s = apply(s, muts)
        else:
            alloc = apply(alloc, muts)
        res = run_cli(["evaluate", str(write(d, "s.json", s)), "--allocation", str(write(d, "a.json", alloc)),
                       "--json"])
    assert check_outcome(*res) is None, (muts, target, check_outcome(*res))


@FUZZ
@given(blob=st.binary(max_size=300), cmd=st.sampled_from(["solve", "evaluate-scenario", "evaluate-allocation"]))
def test_random_bytes_are_one_line_errors(blob, cmd):
    CASES["bytes"] += 1
    with tempfile.TemporaryDirectory() as d:
        junk = Path(d) / "junk.json"
        junk.write_bytes(blob)
        good = write(d, "s.json", SCENARIOS[0])
        if cmd == "solve":
            argv = ["solve", str(junk), "--policy", "homogeneous", "--json"]
        elif cmd == "evaluate-scenario":
            argv = ["evaluate", str(junk), "--allocation", str(good), "--json"]
        else:
            argv = ["evaluate", str(good), "--allocation", str(junk), "--json"]
        res = run_cli(argv)
    assert check_outcome(*res) is None, (blob, cmd, check_outcome(*res))


def test_mutations_never_share_or_corrupt_their_templates():
    """Retyped values are copies: a later mutation cannot change the template list or build a cycle
    (the campaign once died of a RecursionError from a list nested into itself)."""
    import copy
    import json

    from fuzz_tools import RETYPES, apply

    before = copy.deepcopy(RETYPES)
    doc = {"a": [1, 2], "b": {"c": 3}}
    for vi in range(len(RETYPES)):
        for pi in range(6):
            out = apply(doc, [("retype", pi, vi), ("retype", pi + 1, vi), ("rename", pi + 2, 0), ("drop", pi, 0)])
            json.dumps(out)  # no cycle
    assert RETYPES == before and doc == {"a": [1, 2], "b": {"c": 3}}


# ---------------------------------------------------------------- BALANCE and the online arena
def _balance_doc(seed):
    from spinlib.balance import random_instance

    return json.loads(random_instance(4, seed=seed).to_json())


BALANCE_DOCS = [_balance_doc(1), _balance_doc(2)]
BALANCE_POLICIES = ["balance", "greedy", "ad-only", "sd-only", "milp"]
CASES.update({"balance": 0, "balance_check": 0, "arena": 0, "replan": 0})


@FUZZ
@given(which=st.integers(0, 1), muts=mutations(), policy=st.sampled_from(BALANCE_POLICIES))
def test_balance_on_mutated_instances(which, muts, policy):
    CASES["balance"] += 1
    with tempfile.TemporaryDirectory() as d:
        p = write(d, "b.json", apply(BALANCE_DOCS[which], muts))
        res = run_cli(["balance", str(p), "--policy", policy, "--set", "phi_steps=4", "--json"]
                      if policy == "milp" else ["balance", str(p), "--policy", policy, "--json"])
    assert check_outcome(*res) is None, (muts, policy, check_outcome(*res))


@FUZZ
@given(which=st.integers(0, 1), muts=mutations(), target=st.sampled_from(["instance", "schedule"]))
def test_balance_check_on_mutated_inputs(which, muts, target):
    """``--check`` exits 3 (with its JSON verdict) for an infeasible schedule; otherwise the contract (exit 1 is a
    bug and fails it)."""
    CASES["balance_check"] += 1
    doc, sched = BALANCE_DOCS[which], {"modes": ["SD", "AD", "SD", "AD"], "phi": 0.5}
    if target == "instance":
        doc = apply(doc, muts)
    else:
        sched = apply(sched, muts)
    with tempfile.TemporaryDirectory() as d:
        rc, out, err, exc = run_cli(["balance", str(write(d, "b.json", doc)), "--check",
                                     str(write(d, "c.json", sched)), "--json"])
    if rc == EXIT_INFEASIBLE and exc is None:
        verdict = json.loads(out)
        assert verdict["feasible"] is False and verdict["violations"], verdict
    else:
        assert check_outcome(rc, out, err, exc) is None, (muts, target, check_outcome(rc, out, err, exc))


def typed_options(command: str) -> list[str]:
    """Every option of ``command`` that takes a typed value (a number, a seed, a bounded integer), read from
    the command line's own parser: a new option joins the campaign below without an edit here."""
    import argparse

    from spinlib.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(a.option_strings[-1] for a in sub.choices[command]._actions
                  if a.option_strings and a.nargs != 0 and a.choices is None and a.type not in (None, str, Path))


#: every command with a typed option, declared once: a small valid invocation ("{scenario}": a scenario file)
#: that the extreme-argument campaign perturbs, one typed option at a time; or, in NOT_FUZZED, why not
FUZZED = {
    "scenario": {"--users": "3"},
    "solve": {"{scenario}": None, "--policy": "heterogeneous-sync", "--L-max": "6"},
    "emulate": {"{scenario}": None, "--policy": "homogeneous", "--rounds": "50", "--json": None},
    "arena": {"--synthetic-alpha": "0.8", "--rounds": "20", "--users": "2", "--seeds": "1", "--L-max": "6",
              "--controllers": "fixed:L=2,ucb-specstop", "--json": None},
    "replan": {"{scenario}": None, "--controllers": "replan-dinkelbach", "--rounds": "5", "--L-max": "4", "--json": None},
    "balance": {"--random": "4", "--json": None},
}
NOT_FUZZED = {
    "generate": "loads a real model pair for any valid value; its refusals before the load are tests/test_cli.py's",
    "measure": "loads a real model pair for any valid value; its refusals and caps are tests/test_work_caps.py's",
}
EXTREME_TEXT = [repr(v) for v in EXTREMES if not isinstance(v, int) or abs(v) < 10**300] + ["", "x", "1e6", "-5", "0",
                                                                                                "1" + "0" * 400]


def test_every_command_with_a_typed_option_is_in_the_campaign():
    import argparse

    from spinlib.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    typed = {c for c in sub.choices if typed_options(c)}
    assert typed <= set(FUZZED) | set(NOT_FUZZED), f"commands with typed options outside the campaign: {typed - set(FUZZED) - set(NOT_FUZZED)}"
    assert not set(FUZZED) & set(NOT_FUZZED) and set(FUZZED) | set(NOT_FUZZED) <= set(sub.choices)
    assert "--delay-stay" in typed_options("arena") and "--rounds" in typed_options("replan")


CASES["typed_options"] = 0


@FUZZ
@given(command=st.sampled_from(sorted(FUZZED)), pick=st.integers(0, 10**6),
       value=st.one_of(st.sampled_from(EXTREME_TEXT), st.text(max_size=12)))
def test_every_typed_option_on_extreme_values(command, pick, value):
    """Each command's typed options (from its parser) at extreme or junk values: success with finite JSON output,
    or one line and exit 2 -- never a traceback."""
    CASES["typed_options"] += 1
    options = typed_options(command)
    option = options[pick % len(options)]
    base = dict(FUZZED[command])
    base[option] = value
    with tempfile.TemporaryDirectory() as d:
        scen = str(write(d, "s.json", SCENARIOS[0]))
        argv = [command]
        for k, v in base.items():
            argv += [scen] if k == "{scenario}" else [k] if v is None else [k, v]
        res = run_cli(argv)
    assert check_outcome(*res) is None, (argv, check_outcome(*res))


ARENA_SPECS = ["fixed:L={}", "gelato:V={}", "specdec++:h={}", "ucb-specstop:c={}", "hf-confidence:threshold={}"]


@FUZZ
@given(option=st.sampled_from(["--controllers", "--delay", "--fading", "--pair", "--tasks"]),
       value=st.one_of(st.sampled_from(EXTREME_TEXT), st.text(max_size=12)),
       spec=st.sampled_from(ARENA_SPECS))
def test_arena_on_extreme_arguments(option, value, spec):
    """The arena's untyped options (controller specs, delay and fading models, pair and task names)."""
    CASES["arena"] += 1
    base = dict(FUZZED["arena"])
    base[option] = spec.format(value) if option == "--controllers" else value
    if option in ("--pair", "--tasks"):
        base.pop("--synthetic-alpha")
    argv = ["arena"] + [x for k, v in base.items() for x in ([k] if v is None else [k, v])]
    res = run_cli(argv)
    assert check_outcome(*res) is None, (argv, check_outcome(*res))


@FUZZ
@given(muts=mutations(), controllers=st.sampled_from(["plan-on-average,server-only", "replan-dinkelbach",
                                                      "replan-coordinate,energy-queue:V=0.1"]),
       fading=st.sampled_from(["static", "rayleigh", "markov"]))
def test_replan_on_mutated_scenarios(muts, controllers, fading):
    CASES["replan"] += 1
    with tempfile.TemporaryDirectory() as d:
        p = write(d, "s.json", apply(SCENARIOS[0], muts))
        res = run_cli(["replan", str(p), "--controllers", controllers, "--fading", fading, "--rounds", "5",
                       "--L-max", "4", "--json"])
    assert check_outcome(*res) is None, (muts, controllers, check_outcome(*res))
