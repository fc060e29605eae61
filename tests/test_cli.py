"""The command line: happy paths and one-line errors with a non-zero exit."""
import json

import pytest

from spinlib.control import POLICIES
from helpers import spinlib_cli


run = spinlib_cli


def test_scenario_evaluate_solve(tmp_path):
    s = tmp_path / "s.json"
    r = run("scenario", "--users", "4", "--seed", "7", "--preset", "qwen-7b-l4", "-o", str(s))
    assert r.returncode == 0, r.stderr
    assert len(json.loads(s.read_text())["users"]) == 4
    r = run("solve", str(s), "--policy", "equal", "--draft-length", "3", "--json")
    assert r.returncode == 0, r.stderr
    alloc = json.loads(r.stdout)
    assert alloc["draft_lengths"] == [3, 3, 3, 3] and alloc["round_model"] == "sync"
    assert sum(alloc["bandwidth_hz"]) == pytest.approx(json.loads(s.read_text())["radio"]["bandwidth_hz"])
    a = tmp_path / "a.json"
    a.write_text(json.dumps(alloc))
    r = run("evaluate", str(s), "--allocation", str(a), "--json")
    assert r.returncode == 0, r.stderr
    ev = json.loads(r.stdout)
    assert ev["goodput_tokens_per_s"] == pytest.approx(alloc["goodput_tokens_per_s"], rel=1e-12)
    assert len(ev["uplink_time_s"]) == 4 and ev["round_model"] == "sync"
    # evaluate honours the allocation's round model
    alloc["round_model"] = "async"
    a.write_text(json.dumps(alloc))
    ev2 = json.loads(run("evaluate", str(s), "--allocation", str(a), "--json").stdout)
    assert ev2["round_model"] == "async" and ev2["goodput_tokens_per_s"] != ev["goodput_tokens_per_s"]


@pytest.mark.parametrize("policy", ["equal", "heterogeneous-sync", "heterogeneous-async", "uldl-optimal"])
def test_solve_output_round_trips_into_every_command_that_reads_an_allocation(tmp_path, policy):
    """``solve -o a.json`` writes an allocation that ``evaluate --allocation`` and ``emulate --allocation`` take, and
    ``emulate --allocation`` plays what ``emulate --policy`` plays (``emulate --allocation`` once always failed)."""
    s, a = tmp_path / "s.json", tmp_path / "a.json"
    assert run("scenario", "--users", "3", "--seed", "2", "-o", str(s)).returncode == 0
    r = run("solve", str(s), "--policy", policy, "-o", str(a))
    assert r.returncode == 0 and a.is_file(), r.stderr
    ev = run("evaluate", str(s), "--allocation", str(a), "--json")
    assert ev.returncode == 0, ev.stderr
    alloc = json.loads(a.read_text())
    assert json.loads(ev.stdout)["goodput_tokens_per_s"] == pytest.approx(alloc["goodput_tokens_per_s"], rel=1e-12)
    by_file = run("emulate", str(s), "--allocation", str(a), "--rounds", "50", "--seed", "3", "--json")
    assert by_file.returncode == 0, by_file.stderr
    by_policy = run("emulate", str(s), "--policy", policy, "--rounds", "50", "--seed", "3", "--json")
    assert json.loads(by_file.stdout)["goodput_tokens_per_s"] == json.loads(by_policy.stdout)["goodput_tokens_per_s"]
    assert json.loads(by_file.stdout)["allocation"]["draft_lengths"] == alloc["draft_lengths"]


#: every document a command writes: its kind and a small invocation that writes it to {out} (reading {scenario} or
#: {instance} where it needs one)
PRODUCERS = {
    "scenario": ["scenario", "--users", "3", "--seed", "2", "-o", "{out}"],
    "allocation": ["solve", "{scenario}", "--policy", "heterogeneous-sync", "-o", "{out}"],
    "instance": ["balance", "--random", "6", "--seed", "1", "--write", "{out}"],
    "schedule": ["balance", "{instance}", "--policy", "balance", "-o", "{out}"],
}
#: every file argument of every command (spinlib.cli.INPUT_ARGS, read from the parser) and the document kind it
#: reads, with the rest of a small invocation; a command's file argument missing here fails the test
CONSUMERS = {
    ("evaluate", "scenario"): ("scenario", ["evaluate", "{file}", "--allocation", "{allocation}", "--json"]),
    ("evaluate", "allocation"): ("allocation", ["evaluate", "{scenario}", "--allocation", "{file}", "--json"]),
    ("solve", "scenario"): ("scenario", ["solve", "{file}", "--policy", "equal", "--json"]),
    ("emulate", "scenario"): ("scenario", ["emulate", "{file}", "--policy", "equal", "--rounds", "20", "--json"]),
    ("emulate", "allocation"): ("allocation", ["emulate", "{scenario}", "--allocation", "{file}", "--rounds", "20",
                                               "--json"]),
    ("replan", "scenario"): ("scenario", ["replan", "{file}", "--rounds", "5", "--controllers", "plan-on-average",
                                          "--json"]),
    ("balance", "instance"): ("instance", ["balance", "{file}", "--policy", "ad-only", "--json"]),
    ("balance", "check"): ("schedule", ["balance", "{instance}", "--check", "{file}", "--json"]),
}
#: plugins are Python files the user writes, not documents a command produces
NOT_PRODUCED = {"plugin"}


@pytest.mark.campaign
def test_every_commands_output_round_trips_into_every_command_that_reads_it(tmp_path):
    """Each document kind is written by its producer and read, as written, by every command argument that takes it
    (exit 0); the table is complete against the parser, so a new file argument or command joins by declaration."""
    import argparse

    from spinlib.cli import INPUT_ARGS, build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    wanted = {(cmd, a.dest) for cmd, sp in sub.choices.items() for a in sp._actions
              if a.dest in INPUT_ARGS and a.dest not in NOT_PRODUCED}
    assert wanted == set(CONSUMERS), (sorted(wanted - set(CONSUMERS)), sorted(set(CONSUMERS) - wanted))
    files = {}
    for kind in ("scenario", "instance", "allocation", "schedule"):  # producers read what comes before them
        files[kind] = tmp_path / f"{kind}.json"
        argv = [a.format(out=files[kind], scenario=files.get("scenario"), instance=files.get("instance"))
                for a in PRODUCERS[kind]]
        r = run(*argv)
        assert r.returncode == 0 and files[kind].is_file(), (kind, r.stderr)
    for (cmd, dest), (kind, argv) in CONSUMERS.items():
        r = run(*[a.format(file=files[kind], scenario=files["scenario"], instance=files["instance"],
                           allocation=files["allocation"]) for a in argv])
        assert r.returncode == 0, (cmd, dest, r.stderr)
    sched = json.loads(files["schedule"].read_text())
    checked = json.loads(run("balance", str(files["instance"]), "--check", str(files["schedule"]), "--json").stdout)
    assert checked["feasible"] and checked["served"] == sched["served"]
    # a copy whose derived count disagrees with its modes is refused, not believed
    files["schedule"].write_text(json.dumps({**sched, "served": sched["served"] + 1}))
    r = run("balance", str(files["instance"]), "--check", str(files["schedule"]))
    assert r.returncode == 2 and "served" in r.stderr and r.stderr.count("\n") == 1, r.stderr


@pytest.mark.campaign
def test_every_policy_runs(tmp_path):
    s = tmp_path / "s.json"
    assert run("scenario", "--users", "3", "--seed", "1", "-o", str(s)).returncode == 0
    listed = run("solve", "--list-policies").stdout
    builtin = {n: p for n, p in POLICIES.items() if p.fn.__module__.startswith("spinlib.")}  # not tests' own
    for name, pol in builtin.items():
        assert name in listed
        extra = ["--L-max", "4"] if "L_max" in pol.params else []
        r = run("solve", str(s), "--policy", name, *extra, "--json")
        assert r.returncode == 0, (name, r.stderr)
        assert json.loads(r.stdout)["goodput_tokens_per_s"] > 0


def test_solve_refuses_parameters_the_policy_does_not_declare(tmp_path):
    s = tmp_path / "s.json"
    assert run("scenario", "--users", "3", "--seed", "1", "-o", str(s)).returncode == 0
    r = run("solve", str(s), "--policy", "homogeneous", "--round-model", "async")
    assert r.returncode == 2 and "takes no parameter 'round_model'" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = run("solve", str(s), "--policy", "homogeneous", "--set", "L_maxx=3")
    assert r.returncode == 2 and "takes no parameter 'L_maxx'" in r.stderr
    r = run("solve", str(s), "--policy", "uldl-fixed-length", "--set", "exact_max_users=4", "--json")
    assert r.returncode == 0, r.stderr


def test_a_policy_spec_is_written_as_a_controller_spec(tmp_path):
    """``--policy NAME:key=value,...`` (the spec syntax of controllers) gives what ``--set`` gives; a
    parameter given in two places, or a malformed spec, is one line and exit 2."""
    s = tmp_path / "s.json"
    assert run("scenario", "--users", "3", "--seed", "1", "-o", str(s)).returncode == 0
    a = run("solve", str(s), "--policy", "equal:draft_length=2", "--json")
    b = run("solve", str(s), "--policy", "equal", "--set", "draft_length=2", "--json")
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert json.loads(a.stdout) == json.loads(b.stdout) and json.loads(a.stdout)["draft_lengths"] == [2, 2, 2]
    for args, msg in ((["equal:draft_length=2", "--draft-length", "3"], "given twice"),
                      (["equal:draft_length=2,draft_length=3"], "given twice"),
                      (["equal:draft_length"], "must be key=value"),
                      (["equal:draft_length=nan"], "finite"),
                      (["equal:lenght=2"], "takes no parameter 'lenght'")):
        r = run("solve", str(s), "--policy", *args)
        assert r.returncode == 2 and msg in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)
    r = run("emulate", str(s), "--policy", "equal:draft_length=2", "--rounds", "50", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["allocation"]["draft_lengths"] == [2, 2, 2], r.stderr


def test_a_plugin_policy_runs_from_the_command_line(tmp_path):
    plugin = tmp_path / "my_policies.py"
    plugin.write_text(
        "from spinlib.control import register_policy, solve\n"
        "@register_policy('cli-plugin-equal3', 'equal bandwidth, L = 3')\n"
        "def p(scenario, L: int = 3):\n"
        "    return solve(scenario, 'equal', draft_length=L)\n")
    s = tmp_path / "s.json"
    assert run("scenario", "--users", "3", "--seed", "1", "-o", str(s)).returncode == 0
    assert "cli-plugin-equal3" in run("solve", "--list-policies", "--plugin", str(plugin)).stdout
    r = run("solve", str(s), "--policy", "cli-plugin-equal3", "--set", "L=2", "--plugin", str(plugin), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["draft_lengths"] == [2, 2, 2]
    r = run("emulate", str(s), "--policy", "cli-plugin-equal3", "--rounds", "50", "--plugin", str(plugin), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["allocation"]["draft_lengths"] == [3, 3, 3]


@pytest.mark.campaign
@pytest.mark.parametrize(
    "args,content,match",
    [
        (["scenario", "--users", "0"], None, "--users must be >= 1"),
        (["scenario", "--users", "3", "--preset", "gpt-9"], None, "preset must be one of"),
        (["solve", "{s}", "--policy", "nope"], None, "policy must be one of"),
        (["solve", "{bad}", "--policy", "equal"], "{not json", "not valid JSON"),
        (["solve", "{bad}", "--policy", "equal"], '{"users": [], "radio": {"bandwidth_hz": 1e6}, '
         '"server": {"t0_s": 0.01, "t1_s_per_token": 0}, "payload": {"vocab_size": 100, "top_k": 8}}', "at least one user"),
        (["solve", "{bad}", "--policy", "equal"], '{"users": [], "radio": {"bandwidth_hz": 1e6}, '
         '"server": {"t0_s": 0.01, "t1_s_per_token": 0}, "payload": {"vocab_size": 100}}', "payload.top_k must be"),
        (["evaluate", "{s}", "--allocation", "{missing}"], None, "cannot read allocation file"),
        (["evaluate", "{s}", "--allocation", "{bad}"], '{"draft_lengths": [1, 1], "bandwidth_hz": [-1, 1]}',
         r"bandwidth_hz[0] must be a finite number >= 0"),
        (["solve", "{s}", "--policy", "equal", "--draft-length", "99"], None, "draft_length must be an integer in [0, 64]"),
    ],
)
def test_bad_input_is_one_line(tmp_path, args, content, match):
    s = tmp_path / "s.json"
    assert run("scenario", "--users", "2", "-o", str(s)).returncode == 0
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    args = [a.format(s=s, bad=bad, missing=tmp_path / "none.json") for a in args]
    r = run(*args)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert match in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.campaign
def test_uldl_policies_and_evaluate(tmp_path):
    s = tmp_path / "s.json"
    assert run("scenario", "--users", "5", "--seed", "3", "-o", str(s)).returncode == 0
    r = run("solve", str(s), "--policy", "uldl-optimal", "--L-max", "6", "--json")
    assert r.returncode == 0, r.stderr
    alloc = json.loads(r.stdout)
    assert len(alloc["modes"]) == 5 and set(alloc["modes"]) <= {"UL", "DL"}
    assert all(p == 0 for p, m in zip(alloc["dl_power_w"], alloc["modes"]) if m == "UL")
    a = tmp_path / "a.json"
    a.write_text(json.dumps(alloc))
    ev = json.loads(run("evaluate", str(s), "--allocation", str(a), "--json").stdout)
    assert ev["goodput_tokens_per_s"] == pytest.approx(alloc["goodput_tokens_per_s"], rel=1e-12)
    assert ev["modes"] == alloc["modes"] and len(ev["downlink_time_s"]) == 5
    # refuses 2^K search beyond K = 12, with one line
    big = tmp_path / "big.json"
    assert run("scenario", "--users", "13", "-o", str(big)).returncode == 0
    r = run("solve", str(big), "--policy", "uldl-exhaustive")
    assert r.returncode == 2 and "accepts at most" in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.campaign
def test_emulate(tmp_path):
    s = tmp_path / "s.json"
    assert run("scenario", "--users", "4", "--seed", "2", "-o", str(s)).returncode == 0
    r = run("emulate", str(s), "--policy", "heterogeneous-sync", "--rounds", "3000", "--seed", "1", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["ci_low"] <= out["predicted_tokens_per_s"] <= out["ci_high"]
    assert len(out["user_goodput"]) == 4 and sum(out["phase_shares"].values()) > 0
    assert out["goodput_tokens_per_s"] == pytest.approx(sum(out["user_goodput"]), rel=1e-9)
    r = run("emulate", str(s), "--policy", "heterogeneous-async", "--rounds", "200", "--fading", "markov", "--json")
    assert r.returncode == 0 and "queue" in json.loads(r.stdout)["phase_shares"]
    r = run("emulate", str(s), "--policy", "homogeneous", "--rounds", "1")
    assert r.returncode == 2 and "rounds" in r.stderr
    r = run("emulate", str(s), "--rounds", "10")
    assert r.returncode == 2 and "--policy" in r.stderr


@pytest.mark.campaign
def test_balance_random_instance_solve_and_check(tmp_path):
    inst = tmp_path / "b.json"
    r = run("balance", "--random", "12", "--seed", "4", "--write", str(inst))
    assert r.returncode == 0, r.stderr
    assert len(json.loads(inst.read_text())["users"]) == 12
    out = {}
    for pol in ("balance", "milp", "ad-only", "sd-only", "greedy", "exhaustive"):
        args = ["--set", "phi_steps=5"] if pol not in ("ad-only", "sd-only") else []
        if pol == "exhaustive":
            continue  # 12 users: above its limit (refused below)
        r = run("balance", str(inst), "--policy", pol, *args, "--json")
        assert r.returncode == 0, (pol, r.stderr)
        out[pol] = json.loads(r.stdout)
        assert out[pol]["feasible"] and len(out[pol]["modes"]) == 12
    assert out["balance"]["served"] == out["milp"]["served"] >= max(out["ad-only"]["served"], out["sd-only"]["served"])
    r = run("balance", str(inst), "--policy", "exhaustive")
    assert r.returncode == 2 and "at most 10 users" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    sched = tmp_path / "s.json"
    sched.write_text(json.dumps({"modes": out["balance"]["modes"], "phi": out["balance"]["phi"]}))
    r = run("balance", str(inst), "--check", str(sched), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["feasible"]
    sched.write_text(json.dumps({"modes": ["SD"] * 12, "phi": 1.0}))
    r = run("balance", str(inst), "--check", str(sched))
    assert r.returncode == 3 and r.stdout.startswith("infeasible")  # an answer: 1 is a bug, 2 bad input


@pytest.mark.campaign
@pytest.mark.parametrize("change, needle", [
    (lambda d: d["server"].update(memory_bytes=-1), "server.memory_bytes must be in [1, 1e+15]"),
    (lambda d: d["users"][1].update(deadline_s=0), "users[1].deadline_s must be in (0, 1e+06]"),
    (lambda d: d["users"][0].update(alpha=1.5), "users[0].alpha must be in [0, 1)"),
    (lambda d: d["users"][0].update(mode="AD"), "users[0] has an unknown field 'mode'"),
])
def test_balance_bad_instance_is_one_line(tmp_path, change, needle):
    inst = tmp_path / "b.json"
    assert run("balance", "--random", "3", "--write", str(inst)).returncode == 0
    d = json.loads(inst.read_text())
    change(d)
    inst.write_text(json.dumps(d))
    r = run("balance", str(inst), "--policy", "balance")
    assert r.returncode == 2 and needle in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


@pytest.mark.campaign
def test_balance_bad_arguments_are_one_line(tmp_path):
    inst = tmp_path / "b.json"
    assert run("balance", "--random", "3", "--write", str(inst)).returncode == 0
    sched = tmp_path / "s.json"
    sched.write_text(json.dumps({"modes": ["AD", "XD", "off"], "phi": 0.5}))
    for args, needle in [
        (["--check", str(sched)], "modes[1] must be one of ('off', 'AD', 'SD'), got 'XD'"),
        (["--policy", "balanse"], "policy must be one of"),
        (["--policy", "balance", "--set", "phi_step=4"], "takes no parameter 'phi_step'"),
        (["--policy", "balance", "--set", "phi_steps=0"], "phi_steps must be an integer in [1, 1000]"),
        (["--policy", "milp", "--set", "time_limit_s=-1"], "time_limit_s must be in (0, 1e6]"),
        ([], "--policy is required"),
    ]:
        r = run("balance", str(inst), *args)
        assert r.returncode == 2 and needle in r.stderr, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    for args, needle in [(["--random", "0"], "--random must be >= 1"), (["--random", "3", "--seed", "-1"], "--seed"),
                         ([str(tmp_path / "missing.json"), "--policy", "balance"], "cannot read instance file")]:
        r = run("balance", *args)
        assert r.returncode == 2 and needle in r.stderr, (args, r.stderr)


def test_arena_command_runs_and_refuses_bad_input(capsys):
    """``python -m spinlib arena`` (notebook 10): JSON per controller; bad input is one line, exit 2."""
    import json as _json

    from spinlib.cli import main

    assert main(["arena", "--rounds", "60", "--users", "2", "--seeds", "2", "--controllers",
                 "ucb-specstop,fixed:L=2", "--json"]) == 0
    raw = capsys.readouterr().out
    out = _json.loads(raw)
    assert "NaN" not in raw and "Infinity" not in raw  # two seeds: no interval, null rather than NaN
    text = _json.dumps(out)
    assert "ucb-specstop" in text and "fixed:L=2" in text and "user_goodput_tokens_per_s" in text
    assert all(r["user_goodput_tokens_per_s"]["ci95"] is None and r["user_goodput_tokens_per_s"]["mean"] > 0 for r in out["controllers"])
    for argv in (["arena", "--controllers", "nope"], ["arena", "--rounds", "-3"],
                 ["arena", "--controllers", "gelato:V=-1"], ["arena", "--controllers", "fixed:L=2,zzz=1"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, (argv, err)


def test_arena_refuses_work_past_its_budget_before_any_work(capsys, monkeypatch):
    """The projection (rounds x users x seeds x controllers) is checked first; --allow-long lifts it."""
    import time

    from spinlib.cli import main
    from spinlib.online import arena

    # 1e7 user-rounds per seed (the per-seed memory cap) x 1000 seeds x 2 controllers: hours of work
    t = time.perf_counter()
    assert main(["arena", "--rounds", "1000000", "--users", "10", "--seeds", "1000",
                 "--controllers", "fixed:L=2,fixed:L=3"]) == 2
    err = capsys.readouterr().err
    assert time.perf_counter() - t < 30 and err.count("\n") == 1 and "20,000,000,000 user-rounds" in err, err
    assert "--allow-long" in err
    monkeypatch.setattr(arena, "ARENA_WORK_LIMIT", 100)  # a small run past a small budget: refused, then allowed
    small = ["arena", "--rounds", "60", "--users", "2", "--seeds", "1", "--controllers", "fixed:L=2", "--json"]
    assert main(small) == 2 and "past its budget of 100" in capsys.readouterr().err
    assert main(small + ["--allow-long"]) == 0 and "fixed:L=2" in capsys.readouterr().out


def test_measure_refuses_one_prompt_before_loading_anything():
    # one prompt has no resampling interval: refused up front (it printed [NaN, NaN] as "JSON")
    r = run("measure", "--pair", "smollm2-rtn4g16", "--task", "qa", "--prompts", "1", "--json")
    assert r.returncode != 0 and "--prompts must be >= 2" in r.stderr and r.stderr.count("\n") == 1, r.stderr


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_printed_json_is_strict(value, capsys):
    from spinlib.cli import _print_json

    _print_json({"a": [1.0, value, {"b": (value, 2)}]})
    assert json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(c)) == \
        {"a": [1.0, None, {"b": [None, 2]}]}


# ---- one error policy for every command (issue 24): no input can produce a traceback
@pytest.mark.parametrize("exc", [RuntimeError("boom"), RecursionError("deep"), OverflowError("x"),
                                 MemoryError(), KeyError("k"), ZeroDivisionError("z"), ValueError("v\nsecond line")])
def test_any_escaping_exception_is_one_line_naming_command_and_input(monkeypatch, capsys, exc):
    import spinlib.cli as cli

    real = cli.cmd_scenario

    def failing(args):
        raise exc

    monkeypatch.setattr(cli, "cmd_scenario", failing)
    parser = cli.build_parser  # the sub-command's func is bound when the parser is built
    monkeypatch.setattr(cli, "build_parser", lambda: _rebind(parser(), "scenario", failing))
    assert cli.main(["scenario", "--users", "2"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("spinlib: internal error (a bug in spinlib") and type(exc).__name__ in err
    assert "scenario failed on input 'scenario --users 2'" in err
    with pytest.raises(type(exc)):  # --debug: the traceback instead
        cli.main(["scenario", "--users", "2", "--debug"])
    monkeypatch.setattr(cli, "cmd_scenario", real)


def _rebind(parser, command, func):
    sub = next(a for a in parser._actions if a.dest == "command")
    sub.choices[command].set_defaults(func=func)
    return parser


def test_an_interrupt_is_one_line_and_exit_130(monkeypatch, capsys):
    import spinlib.cli as cli

    def interrupted(args):
        raise KeyboardInterrupt

    parser = cli.build_parser
    monkeypatch.setattr(cli, "build_parser", lambda: _rebind(parser(), "arena", interrupted))
    assert cli.main(["arena"]) == 130
    assert capsys.readouterr().err == "spinlib: interrupted\n"


def test_a_message_that_cannot_be_formatted_still_gives_one_line():
    from spinlib.cli import _describe_failure

    class Unprintable(Exception):
        def __str__(self):
            raise ValueError("Exceeds the limit for integer string conversion")

    line = _describe_failure(Unprintable(), ["solve", "x.json"])
    assert line.count("\n") == 0 and "Unprintable" in line and "solve" in line


@pytest.mark.parametrize("argv, needle", [
    (["scenario", "--users", "2", "--seed", "-1"], "--seed must be in 0..2**63-1"),
    (["scenario", "--users", "2", "--seed", str(2 ** 64)], "--seed must be in 0..2**63-1"),
    (["emulate", "x.json", "--seed", "1e3"], "--seed must be an integer"),
    (["arena", "--seeds", "100000"], "--seeds must be an integer in [1, 1000]"),
])
def test_seeds_out_of_range_are_refused_by_name(argv, needle, tmp_path):
    r = run(*argv, cwd=tmp_path)
    assert r.returncode == 2 and needle in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_a_deeply_nested_file_is_one_line(tmp_path):
    f = tmp_path / "deep.json"
    f.write_text("[" * 200_000 + "]" * 200_000)
    r = run("solve", str(f), "--policy", "equal")
    assert r.returncode in (1, 2) and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr


def test_a_broken_plugin_is_one_line(tmp_path):
    plugin = tmp_path / "broken.py"
    plugin.write_text("raise RuntimeError('this plugin is broken')\n")
    s = tmp_path / "s.json"
    assert run("scenario", "--users", "2", "-o", str(s)).returncode == 0
    r = run("solve", str(s), "--policy", "equal", "--plugin", str(plugin))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "broken" in r.stderr, r.stderr
    assert "RuntimeError" in r.stderr and "internal error" not in r.stderr  # the plugin's error, not ours


@pytest.mark.parametrize("code", ["0", "None", "3", "'bye'"])
def test_a_plugin_cannot_end_the_command(tmp_path, code):
    """A plugin that calls sys.exit while loading is one line and exit 2, never a silent exit 0."""
    plugin = tmp_path / "exits.py"
    plugin.write_text(f"import sys\nsys.exit({code})\n")
    r = run("scenario", "--users", "2", "--plugin", str(plugin))
    assert r.returncode == 2 and "sys.exit" in r.stderr and r.stderr.count("\n") == 1 and not r.stdout, r


@pytest.mark.parametrize("code", ["0", "None", "3"])
def test_a_registered_policy_cannot_end_the_command_while_it_runs(tmp_path, code):
    """A plugin's policy that calls sys.exit inside a command is a bug reported as such (exit 1, one line), never a
    silent exit with the policy's code and no output."""
    plugin = tmp_path / "exits_later.py"
    plugin.write_text("import sys\nfrom spinlib.control.registry import register_policy\n\n"
                      "@register_policy('exits-later', 'calls sys.exit when solved')\n"
                      f"def exits_later(scenario):\n    sys.exit({code})\n")
    s = tmp_path / "s.json"
    assert run("scenario", "--users", "2", "-o", str(s)).returncode == 0
    r = run("solve", str(s), "--policy", "exits-later", "--plugin", str(plugin))
    assert r.returncode == 1 and "sys.exit" in r.stderr and "internal error" in r.stderr, r
    assert r.stderr.count("\n") == 1 and not r.stdout, r


_VALUES = ["-1", "0", "3", "1e309", "nan", "-inf", "99999999999999999999999", "L_max=3", "gap=2", "x=1,x=2",
           "{", "", "x.json", "qa,qaa", "equal", "exhaustive", "nope", "ucb-specstop:c=-1"]
_NO_GENERATED = {"generate", "measure"}  # they load real models: covered by their own range tests


def test_every_command_takes_plugins():
    """One --plugin option on every command (the parser adds it to each), loaded before the command runs."""
    import argparse

    from spinlib.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert len(sub.choices) >= 10
    for name, parser in sub.choices.items():
        assert "--plugin" in {o for a in parser._actions for o in a.option_strings}, name


@pytest.mark.campaign
def test_what_a_plugin_registers_every_command_lists_and_uses(tmp_path):
    """One plugin file registers a scenario preset, an energy preset, a policy, an online controller, a
    multi-user controller and a model pair; each command that takes such a name lists it and uses it."""
    plugin = tmp_path / "everything.py"
    plugin.write_text(
        "import dataclasses\n"
        "import numpy as np\n"
        "from spinlib.control import register_policy, solve\n"
        "from spinlib.online import Controller, register_controller\n"
        "from spinlib.online.energy import EnergyPreset, register_energy_preset\n"
        "from spinlib.decision import Plan\nfrom spinlib.online.multiuser import MultiUserController, register_multiuser_controller\n"
        "from spinlib.presets import get_preset, register_preset\n"
        "from spinlib.sd.models import Pair, register_pair\n"
        "register_preset(dataclasses.replace(get_preset('llama2-7b-l4'), name='plug-cell', bandwidth_hz=20e6))\n"
        "register_energy_preset(EnergyPreset('plug-laptop', 15.0, 0.2, 1.0, 'a laptop at 15 W (nominal)'))\n"
        "register_pair(Pair('plug-rtn5g16', 'smollm2-135m-instruct', draft_bits=5, group_size=16))\n"
        "@register_policy('plug-equal2', 'equal bandwidth, L = 2')\n"
        "def p(scenario):\n"
        "    return solve(scenario, 'equal', draft_length=2)\n"
        "@register_controller('plug-two', 'drafts 2 tokens every round')\n"
        "class Two(Controller):\n"
        "    def choose(self, ctx):\n"
        "        return np.full(self.env.K, 2)\n"
        "@register_multiuser_controller('plug-silent', 'nobody drafts')\n"
        "class Silent(MultiUserController):\n"
        "    def choose(self, ctx):\n"
        "        return Plan(np.zeros(self.env.K, dtype=int))\n")
    P = ("--plugin", str(plugin))
    listed = {("scenario", "--list-presets"): "plug-cell", ("replan", "--list-energy-presets"): "plug-laptop",
              ("solve", "--list-policies"): "plug-equal2", ("emulate", "--list-policies"): "plug-equal2",
              ("balance", "--list-policies"): "ad-only", ("arena", "--list-controllers"): "plug-two",
              ("generate", "--list-controllers"): "plug-two", ("replan", "--list-controllers"): "plug-silent",
              ("pairs",): "plug-rtn5g16"}
    for argv, name in listed.items():
        r = run(*argv, *P)
        assert r.returncode == 0 and name in r.stdout, (argv, r.stderr)
    cell = tmp_path / "cell.json"
    r = run("scenario", "--users", "2", "--preset", "plug-cell", "-o", str(cell), *P)
    assert r.returncode == 0, r.stderr
    assert json.loads(cell.read_text())["radio"]["bandwidth_hz"] == 20e6
    r = run("emulate", str(cell), "--policy", "plug-equal2", "--rounds", "20", "--json", *P)
    assert r.returncode == 0 and json.loads(r.stdout)["allocation"]["draft_lengths"] == [2, 2], r.stderr
    r = run("replan", str(cell), "--controllers", "plug-silent", "--rounds", "5", "--energy-preset", "plug-laptop",
            "--json", *P)
    assert r.returncode == 0 and json.loads(r.stdout)["controllers"][0]["mean_L"] == 0, r.stderr
    r = run("arena", "--synthetic-alpha", "0.7", "--rounds", "20", "--users", "1", "--seeds", "1",
            "--controllers", "plug-two", "--json", *P)
    assert r.returncode == 0, r.stderr
    r = run("scenario", "--users", "2", "--preset", "plug-cell")  # without the plugin: one line naming the presets
    assert r.returncode == 2 and "plug-cell" in r.stderr and r.stderr.count("\n") == 1, r.stderr


def _command_words():
    """Every sub-command and every option of the CLI, read from its parser (a new command or option
    is drawn here without editing this test), minus the ones that load real models or plugins."""
    import argparse

    from spinlib.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    words = {}
    for name, parser in sub.choices.items():
        if name in _NO_GENERATED:
            continue
        opts = [o for a in parser._actions for o in a.option_strings
                if o not in ("-h", "--help", "--plugin", "--real-models")]
        choices = [str(c) for a in parser._actions if a.choices for c in a.choices]
        words[name] = sorted(set(opts)), sorted(set(choices))
    return words


@pytest.mark.campaign
def test_generated_command_lines_never_give_a_traceback(tmp_path):
    """Random command lines over every command and option of the parser and a pool of bad values:
    exit 0, 1 or 2 and at most one line on stderr, never a traceback."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    import spinlib.cli as cli

    words = _command_words()
    assert {"scenario", "solve", "evaluate", "emulate", "arena", "replan", "balance"} <= set(words)
    assert run("scenario", "--users", "3", "-o", str(tmp_path / "x.json")).returncode == 0

    @st.composite
    def argv(draw):
        cmd = draw(st.sampled_from(sorted(words)))
        opts, choices = words[cmd]
        out = [cmd] + (["x.json"] if draw(st.booleans()) else [])
        for _ in range(draw(st.integers(0, 4))):
            out.append(draw(st.sampled_from(opts))) if opts else None
            out.append(draw(st.sampled_from(_VALUES + choices)))
        return out

    @settings(max_examples=150, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(argv())
    def check(args):
        import contextlib
        import io
        import os

        args = [str(tmp_path / "out.json") if prev in ("-o", "--output", "--out") else a
                for prev, a in zip([""] + args, args)]
        err = io.StringIO()
        cwd = os.getcwd()
        os.chdir(tmp_path)
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                try:
                    rc = cli.main(args)
                except SystemExit as e:
                    rc = e.code
        finally:
            os.chdir(cwd)
        text = err.getvalue()
        assert rc in (0, 1, 2) and text.count("\n") <= 1 and "Traceback" not in text, (args, rc, text)
        assert rc != 1, ("an unexpected failure (a bug to turn into a validation error)", args, text)

    check()


@pytest.mark.campaign
@pytest.mark.parametrize("argv, needle", [
    (["arena", "--tasks", "qa,qaa", "--rounds", "50", "--users", "2", "--seeds", "1"], "no traces of task 'qaa' (did you mean 'qa'?)"),
    (["arena", "--tasks", "qa,qa", "--rounds", "50", "--users", "2", "--seeds", "1"], "a task is listed twice"),
    (["emulate", "s.json", "--policy", "equal", "--temperature", "5"], "--temperature needs --real-models"),
])
def test_options_that_would_be_ignored_or_dropped_are_refused(argv, needle, tmp_path):
    assert run("scenario", "--users", "2", "-o", str(tmp_path / "s.json")).returncode == 0
    r = run(*argv, cwd=tmp_path)
    assert r.returncode == 2 and needle in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_scenario_size_is_capped_at_what_a_scenario_file_may_hold(tmp_path):
    from spinlib.scenario import MAX_USERS

    r = run("scenario", "--users", str(MAX_USERS + 1), "-o", str(tmp_path / "s.json"))
    assert r.returncode == 2 and f"--users must be <= {MAX_USERS:,}" in r.stderr and not (tmp_path / "s.json").exists()


@pytest.mark.parametrize(("args", "message"), [
    (["--controller", "nope"], "controller must be one of"),
    (["--controller", "ucb-specstop:zz=1"], "takes no parameter 'zz'"),
    (["--controller", "fixed", "--draft-length", "3"], "not both"),
    (["--controller", "fixed", "--delay-ms", "nan"], "--delay-ms must be finite"),
    (["--controller", "fixed", "--delay-ms", "-5"], "--delay-ms must be >= 0"),
    (["--controller", "fixed", "--uplink-kbps", "0"], "--uplink-kbps must be > 0"),
    (["--controller", "fixed", "--L-max", "99"], "--L-max must be an integer in [1, 64]"),
    (["--controller", "fixed", "--energy-budget-j", "-1"], "--energy-budget-j must be >= 0"),
])
def test_generate_with_a_controller_refuses_bad_input_before_loading_models(args, message):
    r = run("generate", "--pair", "smollm2-rtn4g16", "--prompt", "hi", *args)
    assert r.returncode == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.real_models
def test_generate_with_a_controller_is_lossless_and_reports_it():
    """`generate --controller` drives the real pair through the decision seam: greedy output equals the
    fixed-length run's (both are the target's greedy output); the lengths vary with the learner."""
    base = ["generate", "--pair", "smollm2-rtn3g16", "--prompt", "Name three rivers.", "--chat",
            "--max-new-tokens", "20", "--json"]
    fixed = run(*base)
    ucb = run(*base, "--controller", "ucb-specstop:c=0.5", "--delay-ms", "100", "--uplink-kbps", "500")
    oracle = run(*base, "--controller", "specstop-known", "--delay-ms", "100")
    for r in (fixed, ucb, oracle):
        assert r.returncode == 0, r.stderr[-500:]
    f, u, o = (json.loads(r.stdout) for r in (fixed, ucb, oracle))
    assert f["token_ids"] == u["token_ids"] == o["token_ids"]
    assert f["controller"] is None and u["controller"] == "ucb-specstop:c=0.5"
    assert len({r["drafted"] for r in u["rounds"]}) > 1


def test_an_output_that_is_an_input_is_refused_before_any_work(tmp_path):
    """``solve s.json -o s.json`` (or through a link to it) is one line, exit 2, and the input is untouched."""
    s = tmp_path / "s.json"
    assert run("scenario", "--users", "2", "--seed", "1", "-o", str(s)).returncode == 0
    before = s.read_bytes()
    link = tmp_path / "link.json"
    link.symlink_to(s)
    for out in (s, link, tmp_path / "." / "s.json"):
        r = run("solve", str(s), "--policy", "equal", "-o", str(out))
        assert r.returncode == 2 and "also the command's scenario" in r.stderr and r.stderr.count("\n") == 1, r.stderr
        assert s.read_bytes() == before
    assert run("solve", str(s), "--policy", "equal", "-o", str(tmp_path / "a.json")).returncode == 0


@pytest.mark.parametrize("args, needle", [
    (["generate", "--pair", "qwen-coder", "--prompt", "x", "--delay-ms", "100"], "--delay-ms only act(s) with --controller"),
    (["generate", "--pair", "qwen-coder", "--prompt", "x", "--L-max", "4", "--uplink-kbps", "10"],
     "--L-max, --uplink-kbps only act(s) with --controller"),
    (["generate", "--pair", "qwen-coder", "--prompt", "x", "--energy-budget-j", "1"], "with --controller"),
    (["balance", "--random", "5", "--set", "phi_steps=4"], "--set only act(s) with --policy"),
    (["balance", "nowhere.json", "--policy", "balance", "--seed", "3"], "--seed only act(s) with --random K"),
    (["measure", "--retime", "nowhere", "--prompts", "4"], "--prompts only act(s) with a new measurement"),
    (["measure", "--retime", "nowhere", "--seed", "1", "--recompute", "--out-dir", "x", "--allow-long"],
     "--seed, --recompute, --out-dir, --allow-long only act(s) with a new measurement"),
    (["measure", "--retime", "nowhere", "--max-new-tokens", "9"], "--max-new-tokens only act(s)"),
    (["replan", "nowhere.json", "--real-models", "qwen-coder", "--acceptance", "profile"],
     "--acceptance only act(s) with simulated acceptance"),
])
def test_an_option_without_effect_in_its_combination_is_refused(args, needle):
    """An option that would do nothing where it is given is one line and exit 2, before any model or
    file is read (generate's clock options without --controller, balance's --set without --policy,
    its --seed without --random)."""
    r = spinlib_cli(*args)
    assert r.returncode == 2 and needle in r.stderr and r.stderr.count("\n") == 1, r.stderr
