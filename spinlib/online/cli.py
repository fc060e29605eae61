"""``python -m spinlib arena``: online controllers on identical inputs (wired into :mod:`spinlib.cli`).

    python -m spinlib arena --pair smollm2-rtn4g16 --controllers ucb-specstop,naive-ucb,specdec++ \\
        --delay exponential --delay-ms 100 --rounds 1000 --users 10 --seeds 5 --json

Each controller is ``name`` or ``name:key=value,...`` (``--list-controllers``). Inputs: the
committed traces of ``--pair`` (``data/traces``; ``--tasks`` to pick task groups) or i.i.d.
outcomes (``--synthetic-alpha``). Output: per controller the mean over seeds with a 95 %
bootstrap interval of the mean user goodput [tokens/s per user], per-token latency percentiles, energy per token, energy debt and
regret against the best fixed length in hindsight and the per-round clairvoyant. Bad input is
one line on stderr and exit code 2.

``python -m spinlib replan SCENARIO.json --fading rayleigh --rounds 500 --controllers a,b --seed 0 [--json]``
runs the multi-user controllers of :mod:`spinlib.online.multiuser` (re-planning every synchronous
round on the current channel) on one cell, the same way.
"""
from __future__ import annotations

import json
import math

from ..cliargs import only_with, seed_arg

METRICS = ("user_goodput_tokens_per_s", "latency_p50_ms", "latency_p95_ms", "latency_p99_ms", "energy_per_token_j",
           "energy_per_round_j", "energy_debt_j", "regret_fixed_s", "regret_clairvoyant_s", "mean_L",
           "tokens_per_round")


def _finite(v):
    """A float, or None (JSON null) where a value is not finite: the output never holds a NaN."""
    v = float(v)
    return v if math.isfinite(v) else None


def _interval(lo, hi):
    lo, hi = _finite(lo), _finite(hi)
    return None if lo is None or hi is None else [lo, hi]


def add_arena_parser(subparsers):
    """Add the ``arena`` sub-command to an ``argparse`` sub-parser collection; returns its parser."""

    p = subparsers.add_parser("arena", help="run online draft-length controllers on identical inputs")
    p.add_argument("--controllers", default="ucb-specstop,naive-ucb,specdec++,hf-heuristic,gelato,fixed:L=4",
                   help="comma-separated controller specs, parameters after ':' "
                        "(e.g. ucb-specstop,gelato:V=5,eta=1.5,fixed:L=2)")
    p.add_argument("--list-controllers", action="store_true", help="list the registered controllers and exit")
    p.add_argument("--pair", default="smollm2-rtn4g16", help="pair whose committed traces feed the users")
    p.add_argument("--tasks", default=None, help="comma-separated task groups (default: every recorded one)")
    p.add_argument("--synthetic-alpha", type=float, default=None,
                   help="i.i.d. outcomes with this acceptance instead of traces")
    p.add_argument("--rounds", type=int, default=1000)
    p.add_argument("--users", type=int, default=10)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--seed", type=seed_arg(), default=0)
    p.add_argument("--L-max", dest="L_max", type=int, default=8)
    p.add_argument("--t-d-ms", type=float, default=20.0, help="draft time per token [ms]")
    p.add_argument("--t0-ms", type=float, default=30.0, help="verification fixed time [ms]")
    p.add_argument("--t1-ms", type=float, default=2.0, help="verification time per position [ms]")
    p.add_argument("--delay", default="constant",
                   help="constant, exponential, uniform (i.i.d., mean --delay-ms) or piecewise, sinusoidal, markov "
                        "(the mean moves between --delay-levels-ms)")
    p.add_argument("--delay-ms", type=float, default=None, help="mean delay per round of the i.i.d. kinds [ms] "
                   "(default 50; for the moving kinds the average of the levels)")
    p.add_argument("--delay-levels-ms", default=None, help="comma-separated delay means of piecewise, sinusoidal "
                   "(two: low,high) and markov [ms]")
    p.add_argument("--delay-period", type=int, default=None, help="rounds per level (piecewise) or per cycle "
                   "(sinusoidal), default 500")
    p.add_argument("--delay-stay", type=float, default=None, help="markov: probability of staying at a level per "
                                                                   "round (default 0.98)")
    p.add_argument("--fading", default="static", help="static, rayleigh or markov")
    p.add_argument("--energy-budget", type=float, default=float("inf"), help="average energy per round [J]")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--allow-long", action="store_true",
                   help="run past the arena's work budget (spinlib.online.arena.ARENA_WORK_LIMIT user-rounds)")
    p.set_defaults(func=cmd_arena)
    return p


def _delay(args):
    """The arena's :class:`Delay` from the command line (every combination checked by ``Delay`` itself)."""
    from ..validation import ValidationError
    from .arena import Delay, IID_DELAY_KINDS

    levels = ()
    if args.delay_levels_ms is not None:
        try:
            levels = tuple(float(v) / 1e3 for v in args.delay_levels_ms.split(","))
        except ValueError:
            raise ValidationError(f"--delay-levels-ms must be comma-separated numbers [ms], got "
                                  f"{args.delay_levels_ms[:60]!r}") from None
    mean = args.delay_ms
    if mean is None and args.delay in IID_DELAY_KINDS:
        mean = 50.0
    return Delay(args.delay, None if mean is None else mean / 1e3, levels_s=levels, period=args.delay_period,
                 stay=args.delay_stay)


def _specs(text: str):
    return _split_specs(text)


def _split_specs(text: str, parse=None):
    """``a,b:k=1,c:k=2,j=3`` -> specs: a comma starts a new spec only when the next item has no '=' before
    any ':' (an item ``j=3`` continues the previous spec's parameters). ``parse`` turns one item into a
    spec (default :func:`spinlib.online.registry.parse_spec`)."""
    from .registry import parse_spec

    parse = parse or parse_spec
    items, cur = [], None
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        head = part.split(":", 1)[0]
        if "=" in head and cur is not None:
            cur += "," + part
        else:
            if cur is not None:
                items.append(cur)
            cur = part
    if cur is not None:
        items.append(cur)
    return [parse(i) for i in items]


def cmd_arena(args) -> int:
    """Run the arena for parsed ``args`` (bad input raises one :class:`ValidationError` line, which
    :func:`spinlib.cli.main`, the one error policy, prints with exit 2)."""
    import numpy as np

    from ..emulator.fading import Fading
    from ..validation import check_int_range
    from .arena import ArenaConfig, Stream, run_arena
    from .deciders import playable
    from .registry import REGISTRY

    if args.list_controllers:
        print("\n".join(REGISTRY.listing(16, playable("arena"))))
        return 0
    check_int_range("--seeds", args.seeds, 1, 1000)  # a run's size is bounded: rounds x users x seeds
    specs = _specs(args.controllers)
    cfg = ArenaConfig(rounds=args.rounds, users=args.users, L_max=args.L_max, t_d=args.t_d_ms / 1e3,
                      t0=args.t0_ms / 1e3, t1=args.t1_ms / 1e3, delay=_delay(args),
                      fading=Fading(args.fading), energy_budget_j=args.energy_budget)
    if args.synthetic_alpha is not None:
        streams = [Stream.synthetic(args.synthetic_alpha, 20_000, np.random.default_rng(args.seed))]
        source = f"i.i.d. synthetic, alpha = {args.synthetic_alpha:g}"
    else:
        from .traces import load_pair_traces

        tasks = [t.strip() for t in args.tasks.split(",")] if args.tasks else None
        by_task = load_pair_traces(args.pair, tasks=tasks)
        streams = [Stream.from_traces(tr, f"{args.pair}/{t}") for t, tr in by_task.items()]
        source = f"traces of {args.pair}: {', '.join(by_task)}"
    res = run_arena(specs, streams, cfg, seed=args.seed, n_seeds=args.seeds, allow_long=args.allow_long)
    summ = res.summary()
    rows = []
    for lab in res.labels:
        r = summ.loc[lab]
        rows.append({"controller": lab, **{m: {"mean": _finite(r[m]), "ci95": _interval(r[m + "_lo"], r[m + "_hi"])}
                                           for m in METRICS}})
    if args.json:
        doc = {"inputs": source, "rounds": cfg.rounds, "users": cfg.users, "seeds": args.seeds, "seed": args.seed,
               "delay": {"kind": cfg.delay.kind, "mean_s": cfg.delay.mean_s, "levels_s": list(cfg.delay.levels_s),
                         "period": cfg.delay.period, "stay": cfg.delay.stay}, "fading": cfg.fading.model,
               "controllers": rows}
        if args.seeds < 3:
            doc["ci95_note"] = "no interval: fewer than 3 seeds"
        print(json.dumps(doc, indent=1, allow_nan=False))
    else:
        print(f"arena: {source}; {cfg.users} users x {cfg.rounds} rounds x {args.seeds} seeds")
        print(f"{'controller':28s} {'tok/s/user':>10s} {'p95 ms':>8s} {'J/token':>9s} {'regret s':>9s} {'mean L':>7s}")
        for r in rows:
            print(f"{r['controller']:28s} {r['user_goodput_tokens_per_s']['mean']:10.2f} {r['latency_p95_ms']['mean']:8.1f} "
                  f"{r['energy_per_token_j']['mean']:9.4f} {r['regret_fixed_s']['mean']:9.2f} "
                  f"{r['mean_L']['mean']:7.2f}")
    return 0


def add_replan_parser(subparsers):
    """Add the ``replan`` sub-command: multi-user controllers that re-plan every round on the
    current channel (:mod:`spinlib.online.multiuser`)::

        python -m spinlib replan cell.json --fading rayleigh --rounds 500 \\
            --controllers plan-on-average,replan-dinkelbach,energy-queue:V=0.1 --seed 0 --json
    """
    from .replan import DEFAULT_CONTROLLERS

    p = subparsers.add_parser("replan", help="multi-user controllers re-planning every round on the current channel")
    p.add_argument("scenario", nargs="?", help="scenario JSON (python -m spinlib scenario ...)")
    p.add_argument("--controllers", default=",".join(DEFAULT_CONTROLLERS),
                   help="comma-separated controller specs, parameters after ':' (e.g. replan-ratio:max_nodes=64,"
                        "energy-queue:V=0.1,budget_scale=0.7)")
    p.add_argument("--list-controllers", action="store_true", help="list the registered controllers and exit")
    p.add_argument("--fading", default="static", help="static, rayleigh or markov")
    p.add_argument("--rounds", type=int, default=500)
    p.add_argument("--seed", type=seed_arg(), default=0)
    p.add_argument("--L-max", dest="L_max", type=int, default=8)
    p.add_argument("--acceptance", default=None, help="iid or profile (default iid; not with --real-models, whose "
                                                      "acceptance is the engine's)")
    p.add_argument("--energy-preset", default="phone-soc", help="device energy preset (see --list-energy-presets)")
    p.add_argument("--list-energy-presets", action="store_true", help="list the device energy presets and exit")
    p.add_argument("--json", action="store_true", help="print the records as JSON")
    p.add_argument("--real-models", default=None, metavar="PAIR", help="run real speculative decoding with a "
                   "same-tokenizer pair (see 'pairs'): every user drafts and the target verifies all drafts in one "
                   "batched pass per round, the plan of each round from the controller")
    p.add_argument("--allow-long", action="store_true", help="let a certified per-round search run past its node "
                   "budget (spinlib.online.replan.REPLAN_NODE_BUDGET nodes per controller and run)")
    p.set_defaults(func=cmd_replan)
    return p


def cmd_replan(args) -> int:
    """Run :func:`spinlib.online.replan.run_replan` for parsed ``args`` (bad input: one
    :class:`ValidationError` line, printed by :func:`spinlib.cli.main` with exit 2)."""
    from ..emulator.fading import Fading
    from ..scenario import Scenario
    from ..validation import ValidationError
    from .deciders import playable
    from .multiuser import REGISTRY, parse_mspec
    from .replan import ReplanConfig, run_replan

    if args.list_controllers:
        print("\n".join(REGISTRY.listing(18, playable("replan"))))
        return 0
    if args.list_energy_presets:
        from .energy import ENERGY_PRESETS

        print("\n".join(ENERGY_PRESETS.listing(16)))
        return 0
    if args.scenario is None:
        raise ValidationError("replan needs a scenario file (or --list-controllers)")
    only_with(args, "simulated acceptance (without --real-models, whose acceptance is the engine's)",
              args.real_models is None, {"acceptance": ("--acceptance", "iid")})
    specs = _split_specs(args.controllers, parse_mspec)
    cfg = ReplanConfig(rounds=args.rounds, seed=args.seed, fading=Fading(args.fading), L_max=args.L_max,
                       acceptance=args.acceptance, energy_preset=args.energy_preset, allow_long=args.allow_long)
    scenario = Scenario.from_json(args.scenario)
    results = run_replan(scenario, specs, cfg, real_models=args.real_models)
    rows = [r.record() for r in results]
    if args.json:
        def clean(v):
            if isinstance(v, float):
                return _finite(v)
            if isinstance(v, (list, tuple)):
                return [clean(x) for x in v]
            if isinstance(v, dict):
                return {k: clean(x) for k, x in v.items()}
            return v

        doc = {"scenario": str(args.scenario), "users": scenario.num_users, "fading": cfg.fading.model,
               "rounds": cfg.rounds, "seed": cfg.seed, "L_max": cfg.L_max, "acceptance": cfg.acceptance,
               "energy_preset": cfg.energy_preset, "real_models": args.real_models,
               "controllers": [clean(r) for r in rows]}
        print(json.dumps(doc, indent=1, allow_nan=False))
    else:
        print(f"replan: {args.scenario}; {scenario.num_users} users x {cfg.rounds} rounds, {cfg.fading.model} fading, "
              f"seed {cfg.seed}" + (f"; real models {args.real_models} (acceptance: the engine's)" if args.real_models
                                    else f"; acceptance {cfg.acceptance}"))
        print(f"{'controller':28s} {'tokens/s':>9s} {'99 % interval':>17s} {'E[tokens]/s':>11s} {'mean L':>7s} "
              f"{'J/token':>8s} {'E/budget':>8s}")
        for r in rows:
            over = r.get("energy_over_budget")
            print(f"{r['controller']:28s} {r['goodput_tokens_per_s']:9.2f} [{r['ci_low']:7.2f}, {r['ci_high']:7.2f}] "
                  f"{r['expected_goodput_tokens_per_s']:11.2f} {r['mean_L']:7.2f} {r['energy_per_token_j']:8.4f} "
                  + (f"{over:8.3f}" if over is not None else f"{'-':>8s}"))
    return 0


__all__ = ["add_arena_parser", "cmd_arena", "add_replan_parser", "cmd_replan"]
