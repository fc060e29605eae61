"""The README's speed section, generated from the benchmark JSONs.

    .venv/bin/python benchmarks/speed_table.py [--check] [--readme README.md] [--results results/benchmarks]

Reads ``solver_scaling.json``, ``engine_throughput.json`` and ``emulator_speed.json`` (written by
the scripts of the same names) and writes the Markdown between ``<!-- speed:begin -->`` and
``<!-- speed:end -->`` in the README (atomically): every comparison as ``ratio [interval]`` with
its verdict, absolute times as medians with quartiles, and the conditions of each run (machine,
cores, threads, whether the load checks found it reliable). A comparison is called faster or
slower only when its stored interval excludes 1 (:meth:`spinlib.timing.Ratio.verdict` on the
stored ``ci_low`` / ``ci_high``; the ``verdict`` string in the JSON is not trusted).

``--check`` writes nothing and exits 1 when the README's section differs from the generated one;
exit 2 when the markers or a JSON are missing or malformed.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from spinlib.cache import atomic_write_text
from spinlib.control.heterogeneous import OPTIMAL_GAP
from spinlib.control.search import certified_status
from spinlib.paths import RESULTS, ROOT
from spinlib.validation import ValidationError
from spinlib.timing import Ratio, Timing

BEGIN, END = "<!-- speed:begin -->", "<!-- speed:end -->"
SCHEMA = "spinlib-speed/1"
BENCHMARKS = ("solver_scaling", "certified_scaling", "engine_throughput", "emulator_speed", "balance_scaling",
              "arena_speed")


# ---------------------------------------------------------------------------------------------
# reading


def load(results_dir: Path) -> dict:
    """``{name: document}`` of the benchmark JSONs (refusing a missing or old-format one)."""
    docs = {}
    for name in BENCHMARKS:
        path = Path(results_dir) / f"{name}.json"
        if not path.is_file():
            raise ValidationError(f"{path} is missing: run python benchmarks/{name}.py")
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ValidationError(f"{path} is not valid JSON ({e})") from None
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
            raise ValidationError(f"{path} was not written by the current benchmark (schema "
                                  f"{doc.get('schema') if isinstance(doc, dict) else None!r}, expected {SCHEMA!r}): "
                                  f"rerun python benchmarks/{name}.py")
        docs[name] = doc
    return docs


def as_ratio(rec: dict) -> Ratio:
    """A stored comparison as a :class:`~spinlib.timing.Ratio` (verdict recomputed from its interval)."""
    def timing(t):
        return Timing(t["median_s"], t["q25_s"], t["q75_s"], t["n"], ())
    try:
        return Ratio(float(rec["ratio"]), float(rec["ci_low"]), float(rec["ci_high"]), float(rec["confidence"]),
                     timing(rec["a"]), timing(rec["b"]))
    except (KeyError, TypeError, ValueError) as e:
        raise ValidationError(f"malformed comparison record ({e!r}): {str(rec)[:120]}") from None


# ---------------------------------------------------------------------------------------------
# formatting


def num(x: float) -> str:
    """Two to three significant digits, never in exponent notation."""
    ax = abs(x)
    if ax >= 100:
        return f"{x:,.0f}"
    if ax >= 10:
        return f"{x:.1f}"
    if ax >= 1:
        return f"{x:.2f}"
    if ax == 0:
        return "0"
    return f"{x:#.2g}" if ax >= 1e-3 else f"{x:.1e}"


def ratio_cell(rec: dict, win: str = "faster", loss: str = "slower", none: str = "no difference shown") -> str:
    """``ratio [low, high] (n pairs): verdict``; the verdict is ``win``/``loss`` only when the
    interval excludes 1."""
    r = as_ratio(rec)
    verdict = {"faster": f"**{win}**", "slower": f"**{loss}**"}.get(r.verdict(), none)
    return f"{num(r.ratio)}x [{num(r.ci_low)}, {num(r.ci_high)}] (n = {r.a.n}): {verdict}"


def spread(t: dict, scale: float = 1.0) -> str:
    """``median (q25-q75)`` of a stored timing, times ``scale``."""
    return f"{num(t['median_s'] * scale)} ({num(t['q25_s'] * scale)}-{num(t['q75_s'] * scale)})"


def _esc(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def conditions(doc: dict) -> str:
    """One line: machine, cores, threads, date, the code's commit, the load checks' verdict, a quick run flagged."""
    load = "reliable (quiet before, during and after)" if doc.get("reliable") else \
        f"**unreliable**: {_esc(doc.get('reliability', 'no load check recorded'))}"
    during = doc.get("load_during", {})
    other = f", other processes {num(during['other_cores'])} cores during the run" if "other_cores" in during else ""
    quick = "**quick run (small sizes, not the benchmark)**; " if doc.get("quick") else ""
    commit = doc.get("commit")
    code = (f"commit `{commit[:7]}`" + (" with uncommitted changes" if doc.get("uncommitted_changes") else "")
            if commit else "commit not recorded")
    return (f"Conditions: {quick}{_esc(doc.get('processor', '?'))}, {doc.get('cores', '?')} cores, "
            f"{doc.get('threads', '?')} torch threads, Python {doc.get('python', '?')}, {doc.get('date', '?')}, "
            f"{code}{other}; load: {load}.")


def _k(K: int) -> str:
    return f"{K:,}"


# ---------------------------------------------------------------------------------------------
# sections


def solver_section(doc: dict) -> list[str]:
    out = ["### Solvers vs their references (`benchmarks/solver_scaling.py`)", "",
           conditions(doc), "",
           f"Preset {doc['preset']}, T_acc = {doc['access_latency_s'] * 1e3:g} ms, L = {doc['L']} for every user "
           "in the splits. Ratio = time(reference) / time(ours), interleaved pairs, "
           f"{doc['confidence'] * 100:g} % bootstrap interval; \"faster\" only when the interval lies above 1.", "",
           "| K | sync split vs CVXPY bisection | async split vs CVXPY | CVXPY compile, sync / async [s] |",
           "|---|---|---|---|"]
    for row in doc["scaling"]:
        cells = []
        for key in ("sync_split_vs_cvxpy", "async_split_vs_cvxpy"):
            rec = row["comparisons"].get(key)
            cells.append(ratio_cell(rec, "ours faster", "ours slower") if rec else
                         f"not run ({_esc(row.get('not_run', {}).get(key, ''))})")
        comp = row.get("cvxpy_compile_s", {})
        compile_ = " / ".join(num(comp[k]) if k in comp else "-" for k in ("sync_split_cvxpy", "async_split_cvxpy"))
        out.append(f"| {_k(row['K'])} | {cells[0]} | {cells[1]} | {compile_} |")
    cols = [("homogeneous", "homogeneous"), ("heterogeneous-sync", "heterogeneous-sync"),
            ("heterogeneous-async", "heterogeneous-async"), ("sync_split", "sync split"),
            ("async_split", "async split")]
    out += ["", "Solve times, ms: median (quartiles); CVXPY from the interleaved comparisons.", "",
            "| K | " + " | ".join(c[1] for c in cols) + " | sync split, CVXPY | async split, CVXPY |",
            "|---" * (len(cols) + 3) + "|"]
    for row in doc["scaling"]:
        cells = [spread(row["times"][k], 1e3) if k in row["times"] else "-" for k, _ in cols]
        for key in ("sync_split_vs_cvxpy", "async_split_vs_cvxpy"):
            rec = row["comparisons"].get(key)
            cells.append(spread(rec["b"], 1e3) if rec else "-")
        out.append(f"| {_k(row['K'])} | " + " | ".join(cells) + " |")
    if doc.get("exhaustive"):
        out += ["", "Heterogeneous solvers vs exhaustive search (ratio = time(exhaustive) / time(ours)):", "",
                "| K | L_max | heterogeneous-sync vs exhaustive | heterogeneous-async vs exhaustive |",
                "|---|---|---|---|"]
        for row in doc["exhaustive"]:
            cells = [ratio_cell(row["comparisons"][f"heterogeneous-{m}_vs_exhaustive"], "ours faster", "ours slower")
                     for m in ("sync", "async")]
            out.append(f"| {row['K']} | {row['L_max']} | {cells[0]} | {cells[1]} |")
    return out


ENGINE_ROWS = (  # (key, label, win, loss, none)
    ("speculative_ours_vs_assisted_hf", "our speculative engine vs Hugging Face assisted generation",
     "ours faster", "ours slower", "no difference shown"),
    ("speculative_ours_vs_assisted_hf_default", "our speculative engine vs HF assisted generation with HF's defaults",
     "ours faster", "ours slower", "no difference shown"),
    ("speculative_ours_vs_plain_ours", "our speculative engine vs plain decoding (ours)",
     "speculation faster", "speculation slower", "no difference shown"),
    ("speculative_ours_vs_prompt_lookup_hf", "our speculative engine vs HF prompt lookup",
     "ours faster", "ours slower", "no difference shown"),
    ("prompt_lookup_hf_vs_plain_ours", "HF prompt lookup vs plain decoding (ours)",
     "lookup faster", "lookup slower", "no difference shown"),
    ("prompt_lookup_ours_vs_plain_ours", "our engine with prompt lookup vs plain decoding (ours)",
     "lookup faster", "lookup slower", "no difference shown"),
    ("prompt_lookup_ours_vs_prompt_lookup_hf", "prompt lookup: our engine vs Hugging Face",
     "ours faster", "ours slower", "no difference shown"),
    ("hybrid_ours_vs_plain_ours", "our engine with the hybrid drafter vs plain decoding (ours)",
     "hybrid faster", "hybrid slower", "no difference shown"),
    ("hybrid_ours_vs_speculative_ours", "our engine: the hybrid drafter vs the draft model",
     "hybrid faster", "hybrid slower", "no difference shown"),
    ("assisted_hf_vs_plain_hf", "Hugging Face assisted generation vs plain decoding (HF)",
     "speculation faster", "speculation slower", "no difference shown"),
    ("plain_ours_vs_plain_hf", "plain decoding: ours vs Hugging Face",
     "ours faster", "ours slower", "no difference shown"),
    ("teacher_forced_cost_in_plain_decodes", "teacher-forced measurement: its cost in plain decodes (ours)",
     "costs more than one decode", "costs less than one decode", "no difference from one decode shown"),
)
ENGINE_CONFIGS = (("plain_ours", "plain decoding, ours"), ("plain_hf", "plain decoding, Hugging Face"),
                  ("speculative_ours", "speculative, ours"), ("prompt_lookup_ours", "prompt lookup, ours"),
                  ("hybrid_ours", "hybrid (lookup, else the draft model), ours"), ("assisted_hf", "assisted generation, Hugging Face"),
                  ("assisted_hf_default", "assisted generation, Hugging Face defaults"),
                  ("prompt_lookup_hf", "prompt lookup, Hugging Face"),
                  ("teacher_forced", "teacher-forced measurement (T = 1)"))


def engine_section(doc: dict) -> list[str]:
    if "tasks" in doc:
        what = (f"Pair {doc['pair']} on kernel {doc.get('kernel_summary', '?')}, L = {doc['L']}, greedy, "
                f"{doc['prompts_per_task']} prompt(s) of each of {', '.join(doc['tasks'])} x {doc['rounds']} round(s), "
                f"up to {doc['max_new_tokens']} new tokens; outputs identical to plain greedy decoding: "
                f"{'yes' if doc['outputs_identical'] else 'no'}"
                + ("" if doc["outputs_identical"] else
                   f" ({len(doc['divergences'])} differing output(s), {doc['divergences_unexplained']} not explained "
                   "by a tie-break within the kernel's rounding noise)") + ".")
    else:
        what = (f"Pair {doc['pair']}, L = {doc['L']}, greedy, {doc['prompts']} Spec-Bench prompts x {doc['rounds']} "
                f"rounds, up to {doc['max_new_tokens']} new tokens; outputs identical to plain greedy decoding: "
                f"{'yes' if doc['outputs_identical'] else '**no**'}.")
    out = ["### Engine vs Hugging Face and plain decoding (`benchmarks/engine_throughput.py`)", "",
           conditions(doc), "",
           what + f" A sample is the time per generated token of one (round, prompt) run; the {len(doc['configs'])} "
           "configurations run interleaved. Ratio = time(second) / time(first) per "
           f"token, {doc['confidence'] * 100:g} % bootstrap interval over the pairs.", "",
           "| comparison | ratio [interval] (pairs): verdict |", "|---|---|"]
    for key, label, win, loss, none in ENGINE_ROWS:
        rec = doc["comparisons"].get(key)
        if rec:
            out.append(f"| {label} | {ratio_cell(rec, win, loss, none)} |")
    per = any("per_token" in c for c in doc["configs"].values())
    out += ["", "| configuration | tokens/s: median (quartiles) |"
            + (" target calls | target ms | draft calls | draft ms | other ms |" if per else ""),
            "|---|---|" + ("---|---|---|---|---|" if per else "")]
    for key, label in ENGINE_CONFIGS:
        c = doc["configs"].get(key)
        if c:
            t = c["tokens_per_s"]
            row = f"| {label} | {num(t['median'])} ({num(t['q25'])}-{num(t['q75'])}) |"
            if per:
                q = c.get("per_token")
                row += (" " + " | ".join(num(v) for v in (q["target_calls"], 1e3 * q["target_seconds"], q["draft_calls"],
                                                            1e3 * q["draft_seconds"], 1e3 * q["other_seconds"])) + " |"
                        if q else " | | | | |")
            out.append(row)
    if per:
        out += ["", "Calls and milliseconds are per generated token over the whole run (forward hooks on both models); "
                "'other' is the rest of the run's time: sampling, acceptance, cache bookkeeping and generation set-up."]
    if doc.get("acceptance"):
        out += ["", "Our engine's drafters (greedy): rounds, accepted per drafted token and tokens per round over "
                "the whole run; the hybrid drafts by lookup when the lookup matches.", "",
                "| drafter | rounds | accepted per drafted | tokens per round | rounds drafted by lookup |",
                "|---|---|---|---|---|"]
        for key, label in ENGINE_CONFIGS:
            a = doc["acceptance"].get(key)
            if a:
                by_lookup = (a["rounds"] if key == "prompt_lookup_ours" else a["lookup_rounds"])
                out.append(f"| {label} | {a['rounds']} | {num(a['accepted_per_drafted'])} | "
                           f"{num(a['tokens_per_round'])} | {by_lookup} |")
    if doc.get("by_task"):
        keys = [(k, lab) for k, lab, *_ in ENGINE_ROWS if k in doc["comparisons"] and k != "plain_ours_vs_plain_hf"
                and not k.startswith("teacher")]
        out += ["", "Per task group (ratio [interval], pairs):", "",
                "| task | " + " | ".join(lab for _, lab in keys) + " |", "|---|" + "---|" * len(keys)]
        for task, recs in doc["by_task"].items():
            cells = []
            for k, _ in keys:
                r = recs[k]
                cells.append(f"{num(r['ratio'])}x [{num(r['ci_low'])}, {num(r['ci_high'])}] ({r['pairs']})"
                             if "ci_low" in r else f"{num(r['ratio'])}x ({r['pairs']}, no interval)")
            out.append(f"| {task} | " + " | ".join(cells) + " |")
    return out


def emulator_section(doc: dict) -> list[str]:
    out = ["### Testbed fast mode vs the closed-form analysis (`benchmarks/emulator_speed.py`)", "",
           conditions(doc), "",
           "Emulation (`spinlib.emulator.emulate`) and the closed-form evaluation of the same allocation "
           "(`spinlib.rounds.evaluate`) interleaved; ratio = time(emulate) / time(evaluate): what one emulation "
           f"costs in analyses, {doc['confidence'] * 100:g} % bootstrap interval.", "",
           "| users x rounds | case | emulate [s]: median (quartiles) | million user-rounds per s "
           "| emulation cost in analyses |",
           "|---|---|---|---|---|"]
    for row in doc["rows"]:
        rec = row["emulate_vs_evaluate"]
        cell = ratio_cell(rec, "analysis faster", "analysis slower")
        out.append(f"| {_k(row['K'])} x {_k(row['rounds'])} | {_esc(row['case'])} | {spread(rec['b'])} | "
                   f"{num(row['user_rounds_per_s'] / 1e6)} | {cell} |")
    return out


def balance_section(doc: dict) -> list[str]:
    out = ["### BALANCE: the exact algorithm vs the MILP (`benchmarks/balance_scaling.py`)", "",
           conditions(doc), "",
           f"{_esc(doc['generator'])}, {doc['phi_steps'] + 1} grid shares. Solve time [s]: median (quartiles) of "
           "separate runs (not interleaved: the MILP's growth, not a ratio, is the point); the MILP ladder stops once a "
           f"solve passes {num(doc['milp_stop_s'])} s. Users served by both (equal wherever both ran).", "",
           "| K | BALANCE (exact on the grid) | served | MILP (HiGHS, same grid) | MILP served |", "|---|---|---|---|---|"]
    milp = {r["K"]: r for r in doc["milp"]}
    bal = {r["K"]: r for r in doc["balance"]}

    def served(r):
        return "not recorded" if r.get("served") is None else str(r["served"])

    for K in sorted(set(milp) | set(bal)):
        b, m = bal.get(K), milp.get(K)
        bcell = f"{spread(b)} | {served(b)}" if b else "not run | -"
        mcell = f"{spread(m)} | {served(m)}" if m else "not run | -"
        out.append(f"| {_k(K)} | {bcell} | {mcell} |")
    return out


def arena_section(doc: dict) -> list[str]:
    out = ["### Online controllers: the arena (`benchmarks/arena_speed.py`)", "",
           conditions(doc), "",
           "| rounds x controllers x users | oracles (best fixed length, clairvoyant) | time [s]: median (quartiles) "
           "| million controller-user-rounds per s |", "|---|---|---|---|"]
    for r in doc["rows"]:
        out.append(f"| {_k(r['rounds'])} x {r['controllers']} x {_k(r['users'])} | {'yes' if r['oracles'] else 'no'} | "
                   f"{spread(r)} | {num(r['controller_user_rounds_per_s'] / 1e6)} |")
    return out


def growth_exponent(rows: list[dict], key: str, last: bool = False) -> float:
    """The slope of ``log(median wall time of key)`` against ``log K`` over the sizes measured (least
    squares; ``last``: between the two largest sizes only, where fixed costs matter least): the
    search's cost grows as ``K^slope``."""
    Ks = sorted({r["K"] for r in rows})[-2:] if last else sorted({r["K"] for r in rows})
    med = [float(np.median([r[key]["wall_s"] for r in rows if r["K"] == K])) for K in Ks]
    return float(np.polyfit(np.log(Ks), np.log(med), 1)[0])


def certified_section(doc: dict) -> list[str]:
    names = list(doc["variants"])
    out = ["### Certified search at scale: the solver's search and its variants (`benchmarks/certified_scaling.py`)", "",
           conditions(doc), "",
           f"`heterogeneous-sync` branch-and-bound to a relative gap of {doc['gap']:g} from the same incumbent, "
           f"node budget {_k(doc['max_nodes'])}, wall-clock limit {num(doc['time_limit_s'])} s; instances: "
           f"{_esc(doc['family'])} (drafting stays worth it as K grows). One run per instance (wall time, not a "
           "median); the gap is what the search certified. Variants (the benchmark's docstring): *the solver's "
           "search*: the settings `solve_heterogeneous_sync` uses at K (`sync_search_settings`: above 64 users "
           "every makespan cut at the interval's midpoint and open nodes left with their first valid bound; above "
           f"{_k(doc['per_node_users'])} users one node per bound call on every core, {doc['threads']} here); "
           "*one batch pass*: the same with a batch's nodes in one vectorised call; the other columns: the search "
           "before, with cuts at the relaxed solution's own makespan and every bound refined, its cold-start and "
           "one-end references, and its midpoint-cut variant. Each cell: time [s], nodes, gap, status.", "",
           "| K | instance | " + " | ".join(_esc(doc["variants"][n]) for n in names) + " | whole solver: time [s] | "
           "users drafting |", "|---|---|" + "---|" * len(names) + "---|---|"]

    def cell(r):  # the engine's "optimal" at a looser requested gap is a gap stop (spinlib.control.search)
        if r is None:  # not run at this K (the references at the largest K; one batch pass where it is the solver's)
            return "not run"
        return f"{num(r['wall_s'])}, {r['nodes']}, {r['gap']:.1e}, {certified_status(r['status'], r['gap'], OPTIMAL_GAP)}"

    for r in doc["rows"]:
        out.append(f"| {_k(r['K'])} | {r['instance']} | " + " | ".join(cell(r.get(n)) for n in names)
                   + f" | {num(r['solver']['wall_s'])} | {r['solver']['drafting_share']:.0%} |")

    def growth(key):  # over the sizes where the variant ran
        rows = [r for r in doc["rows"] if r.get(key) is not None]
        Ks = sorted({r["K"] for r in rows})
        return (Ks[0], Ks[-1], Ks[-2], growth_exponent(rows, key), growth_exponent(rows, key, last=True)) \
            if len(Ks) > 1 else None

    def text(key):
        lo, hi, prev, all_k, last = growth(key)
        capped = any(r["K"] == hi and r[key].get("status") == "time_limit" for r in doc["rows"] if r.get(key))
        return (f"K^{all_k:.2f} over K = {_k(lo)} to {_k(hi)} (K^{last:.2f} between {_k(prev)} and {_k(hi)}"
                + (f"; at least: a run at K = {_k(hi)} stopped at the time limit" if capped else "") + ")")

    shown = [("the solver's search", "solver_search"), ("the search before", "two_end"),
             ("its cold reference", "two_end_cold"), ("its midpoint-cut variant", "two_end_mid"),
             ("whole solver", "solver")]
    parts = [f"{label} {text(key)}" for label, key in shown if growth(key)]
    if parts:
        out += ["", "Growth in K (least-squares slope of log median time against log K): " + "; ".join(parts) + "."]
    goals = {int(K): v for K, v in doc.get("goals_s", {}).items()}
    if goals:
        parts = []
        for K, limit in sorted(goals.items()):
            times = [r["solver"]["wall_s"] for r in doc["rows"] if r["K"] == K]
            if times:
                med = float(np.median(times))
                parts.append(f"K = {_k(K)} under {num(limit)} s: median {num(med)} s, "
                             f"{'met' if med < limit else 'not met'}")
            else:
                parts.append(f"K = {_k(K)} under {num(limit)} s: not measured")
        out += ["", "Speed goal of the whole solver: " + "; ".join(parts) + "."]
    if doc.get("tiny"):
        out += ["", f"Tiny instances: the whole solver with its default dispatch (every length vector evaluated up to "
                    f"{_k(doc['exhaustive_max_vectors'])} of them) against the same solver told to branch "
                    "(`exhaustive_max=0`); best of 5 runs.", "",
                "| K | L_max | length vectors | default: time [ms], search | branch-and-bound: time [ms] | goodputs within 1e-8 |",
                "|---|---|---|---|---|---|"]
        for r in doc["tiny"]:
            d, b = r["default"], r["branch_and_bound"]
            same = abs(d["goodput"] - b["goodput"]) <= 1e-8 * abs(b["goodput"])
            out.append(f"| {r['K']} | {r['L_max']} | {_k(r['vectors'])} | {num(d['wall_s'] * 1e3)}, {d['search']} | "
                       f"{num(b['wall_s'] * 1e3)} | {'yes' if same else 'no'} |")
    return out


CAMPAIGNS_BEGIN, CAMPAIGNS_END = "<!-- campaigns:begin -->", "<!-- campaigns:end -->"
CERTIFIED = (("heterogeneous-sync", "certified_optimality"),
             ("heterogeneous-async", "certified_optimality_heterogeneous_async"),
             ("uldl-optimal", "certified_optimality_uldl_optimal"))


def _read(path: Path) -> dict:
    if not path.is_file():
        raise ValidationError(f"{path} is missing: run the campaign that writes it (benchmarks/)")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValidationError(f"{path} is not valid JSON ({e})") from None
    if not isinstance(doc, dict) or not doc.get("commit"):
        raise ValidationError(f"{path} does not record the commit that produced it: rerun its campaign")
    return doc


def _source(doc: dict) -> str:
    return f"`{doc['commit'][:7]}`{' (with uncommitted changes)' if doc.get('uncommitted_changes') else ''}, {doc['date']}"


def campaigns_section(results_dir: Path) -> str:
    """The correctness campaigns (counts, not timings): certified optimality per integer policy
    against exhaustive search, the fuzz campaign of the CLI boundary and the fault-injection campaign."""
    out = ["Generated by `python benchmarks/speed_table.py` from `results/benchmarks/certified_optimality*.json` "
           "and `fuzz_campaign.json`, `fault_campaign.json` (do not edit by hand).", "",
           "| integer policy (`benchmarks/certified_optimality.py --policy P`) | fresh random instances | misses "
           "(below the exhaustive optimum) | proven optimal (gap <= tolerance) | false certificates | invalid bounds "
           "| largest certified gap | run |", "|---|---|---|---|---|---|---|---|"]
    try:
        for policy, name in CERTIFIED:
            doc = _read(Path(results_dir) / f"{name}.json")
            s = doc["summary"]
            heur = (f" (its heuristic part alone: {s['heuristic_misses']})" if "heuristic_misses" in s else "")
            out.append(f"| {policy} | {s['instances']:,} (seed {s['seed']}) | {s['misses']}{heur} | "
                       f"{s['proven_optimal']:,} (tolerance {s['gap_tolerance']:g}) | {s['false_certificates']} | "
                       f"{s['invalid_bounds']} | {s['max_gap']:.2g} | {_source(doc)} |")
        f = _read(Path(results_dir) / "fuzz_campaign.json")
        per = ", ".join(f"{k} {v:,}" for k, v in f["cases"].items())
        out += ["", f"Fuzz campaign of the CLI boundary (`benchmarks/fuzz_campaign.py`, the properties of "
                    f"`tests/test_fuzz.py`): {f['cases_total']:,} mutated inputs ({per}), "
                    f"{f['failing_properties']} failing properties, {_source(f)}."]
        g = _read(Path(results_dir) / "fault_campaign.json")
        kinds = "; ".join(f"{k} {n:,} (" + ", ".join(f"{o} {c:,}" for o, c in g["outcomes"].get(k, {}).items()) + ")"
                          for k, n in g["cases"].items())
        out += ["", f"Fault-injection campaign of every cache and record kind (`benchmarks/fault_campaign.py`, the "
                    f"properties of `tests/test_faults.py`): {g['cases_total']:,} injected faults ({kinds}), "
                    f"{g['failing_properties']} failing properties, {_source(g)}."]
    except (KeyError, TypeError) as e:
        raise ValidationError(f"a campaign JSON lacks a field ({e!r}): rerun the campaign") from None
    return "\n".join(out) + "\n"


def section(results_dir: Path) -> str:
    """The generated Markdown (what goes between the markers)."""
    docs = load(results_dir)
    try:
        parts = [solver_section(docs["solver_scaling"]), certified_section(docs["certified_scaling"]),
                 engine_section(docs["engine_throughput"]),
                 emulator_section(docs["emulator_speed"]), balance_section(docs["balance_scaling"]),
                 arena_section(docs["arena_speed"])]
    except (KeyError, TypeError) as e:
        raise ValidationError(f"a benchmark JSON lacks a field ({e!r}): rerun the benchmarks") from None
    head = ["Generated by `python benchmarks/speed_table.py` from `results/benchmarks/*.json` (do not edit by "
            "hand). Wall-clock times on the machine named in each run's conditions; absolute figures are medians "
            "(quartiles), comparisons are ratios with a bootstrap interval over interleaved pairs, and a "
            "comparison is called faster or slower only when its interval excludes 1."]
    return "\n".join(head + [""] + [line for p in parts for line in (*p, "")]).rstrip("\n") + "\n"


def replace_section(text: str, generated: str, name: str = "README.md", begin: str = BEGIN, end: str = END) -> str:
    """``text`` with what lies between the markers replaced by ``generated``."""
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        raise ValidationError(f"{name}: needs exactly one {begin} followed by one {end}")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return head + begin + "\n" + generated + end + tail


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks/speed_table.py", description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the README's section differs; write nothing")
    ap.add_argument("--readme", type=Path, default=ROOT / "README.md")
    ap.add_argument("--results", type=Path, default=RESULTS / "benchmarks", help="folder of the benchmark JSONs")
    args = ap.parse_args(argv)
    try:
        text = args.readme.read_text(encoding="utf-8")
        new = replace_section(text, section(args.results), str(args.readme))
        if CAMPAIGNS_BEGIN in new:
            new = replace_section(new, campaigns_section(args.results), str(args.readme), CAMPAIGNS_BEGIN, CAMPAIGNS_END)
    except (OSError, ValidationError) as e:
        print(f"speed_table: error: {e}", file=sys.stderr)
        return 2
    if args.check:
        if new != text:
            print(f"{args.readme}: the speed section differs from {args.results}: run python benchmarks/speed_table.py",
                  file=sys.stderr)
            return 1
        print(f"{args.readme}: speed section up to date")
        return 0
    if new != text:
        atomic_write_text(args.readme, new)
        print(f"{args.readme}: speed section regenerated from {args.results}")
    else:
        print(f"{args.readme}: speed section already up to date")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
