"""The README's speed section (issue 16): generated from the benchmark JSONs by
benchmarks/speed_table.py; a comparison is called faster or slower only when its interval excludes 1;
the README's section, where it has the markers, is exactly the generated one."""
import copy
import importlib.util
import json

import pytest

from spinlib.paths import ROOT
from spinlib.validation import ValidationError

_spec = importlib.util.spec_from_file_location("speed_table", ROOT / "benchmarks" / "speed_table.py")
ST = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ST)


def _timing(median):
    return {"median_s": median, "q25_s": 0.9 * median, "q75_s": 1.1 * median, "n": 5}


def _cmp(ratio, lo, hi, a="ours", b="reference", verdict=None):
    """A stored comparison; ``verdict`` deliberately wrong where given (the generator must not trust it)."""
    return {"ratio": ratio, "ci_low": lo, "ci_high": hi, "confidence": 0.95, "verdict": verdict or "?",
            "pairs": 5, "a": {"name": a, **_timing(0.01)}, "b": {"name": b, **_timing(0.01 * ratio)}}


def _common(name, reliable=True, quick=False):
    lc = {"cores": 2, "loadavg_1min": 0.1, "busy_processes": [], "reliable": reliable, "reason": "quiet"}
    return {"benchmark": name, "schema": ST.SCHEMA, "quick": quick, "date": "2000-01-01", "machine": "Linux-x",
            "processor": "x86_64", "cores": 2, "python": "3.11", "threads": 2, "confidence": 0.95,
            "allow_busy": not reliable, "load_before": lc, "load_after": lc,
            "load_during": {"wall_s": 1.0, "own_cores": 1.0, "other_cores": 0.01 if reliable else 1.5,
                            "other_cores_max": 0.3},
            "reliable": reliable, "reliability": "quiet before, during and after" if reliable else
            "during: other processes used 1.50 cores on average (> 0.3)"}


def _docs():
    times = {k: _timing(0.001) for k in ("homogeneous", "heterogeneous-sync", "heterogeneous-async",
                                          "sync_split", "async_split")}
    solver = {**_common("solver_scaling"), "preset": "llama2-7b-l4", "access_latency_s": 0.05, "L": 3,
              "scaling": [
                  {"K": 10, "times": times, "cvxpy_compile_s": {"sync_split_cvxpy": 0.5, "async_split_cvxpy": 0.1},
                   "comparisons": {"sync_split_vs_cvxpy": _cmp(150.0, 120.0, 180.0),
                                   # interval includes 1, stored verdict claims a win: not a win
                                   "async_split_vs_cvxpy": _cmp(1.2, 0.93, 1.41, verdict="faster")},
                   "not_run": {}},
                  {"K": 1000, "times": times, "cvxpy_compile_s": {"async_split_cvxpy": 0.1},
                   "comparisons": {"async_split_vs_cvxpy": _cmp(0.5, 0.4, 0.6)},
                   "not_run": {"sync_split_vs_cvxpy": "K > 100: minutes per solve"}}],
              "exhaustive": [{"K": 2, "L_max": 8, "comparisons": {
                  "heterogeneous-sync_vs_exhaustive": _cmp(0.05, 0.04, 0.06),
                  "heterogeneous-async_vs_exhaustive": _cmp(1.0, 0.8, 1.2)}}]}
    configs = {c: {"tokens_per_s": {"median": 12.7, "q25": 12.0, "q75": 13.1}, "s_per_token": _timing(0.08),
                   "overall_tokens_per_s": 12.5, "tokens": 288}
               for c in ("plain_ours", "plain_hf", "speculative_ours", "assisted_hf", "teacher_forced")}
    engine = {**_common("engine_throughput", reliable=False), "pair": "smollm2-rtn6", "L": 4, "prompts": 6,
              "max_new_tokens": 48, "rounds": 3, "outputs_identical": True, "configs": configs,
              "comparisons": {"speculative_ours_vs_assisted_hf": _cmp(1.03, 0.97, 1.09, verdict="faster"),
                              "speculative_ours_vs_plain_ours": _cmp(0.72, 0.69, 0.75),
                              "assisted_hf_vs_plain_hf": _cmp(0.66, 0.6, 0.7),
                              "plain_ours_vs_plain_hf": _cmp(0.93, 0.9, 0.96),
                              "teacher_forced_cost_in_plain_decodes": _cmp(1.02, 0.98, 1.06)}}
    emulator = {**_common("emulator_speed", quick=True), "budget_s": 1.0, "rows": [
        {"K": 1000, "rounds": 1000, "case": "sync, static", "user_rounds_per_s": 9.2e6,
         "emulate_vs_evaluate": _cmp(450.0, 300.0, 600.0, a="evaluate", b="emulate")}]}
    balance = {**_common("balance_scaling"), "phi_steps": 20, "generator": "random_instance(K, seed=K)",
               "milp_stop_s": 30.0,
               "balance": [{"K": 10, "served": 10, **_timing(0.005)}, {"K": 10000, "served": 287, **_timing(0.7)}],
               "milp": [{"K": 10, "served": 10, **_timing(0.04)}, {"K": 200, "served": None, **_timing(15.8)}]}
    arena = {**_common("arena_speed"), "rows": [
        {"rounds": 1000, "controllers": 10, "users": 100, "oracles": False, "controller_user_rounds_per_s": 9.5e5,
         **_timing(1.05)}]}
    run = {"wall_s": 0.5, "nodes": 40, "gap": 5e-5, "status": "optimal", "goodput": 1.0, "upper_bound": 1.00005}
    certified = {**_common("certified_scaling"), "gap": 1e-4, "L_max": 16, "time_limit_s": 60.0, "max_nodes": 2000,
                 "family": "scaled random_scenario", "rows": [
                     {"K": K, "instance": 0, "solver_search": {**run, "wall_s": 0.2 * (K / 123) ** 1.1, "nodes": 36},
                      "two_end": {**run, "wall_s": 0.5 * (K / 123) ** 1.5},
                      "two_end_cold": {**run, "wall_s": 0.8 * (K / 123) ** 2, "nodes": 44},
                      "one_end": {**run, "wall_s": 60.0, "nodes": 400, "gap": 2e-4, "status": "time_limit"},
                      "two_end_mid": {**run, "wall_s": 0.3 * (K / 123) ** 1.25, "nodes": 30},
                      "solver": {"wall_s": 0.6 * K / 123, "gap": 5e-5, "status": "gap_limit", "nodes": 40,
                                 "drafting_share": 0.9}} for K in (123, 1230)],
                 "exhaustive_max_vectors": 5000, "threads": 2, "per_node_users": 3000,
                 "variants": {"solver_search": "the solver's search", "solver_batch": "the solver's search, one batch pass",
                              "two_end": "two-end bound, relaxed-makespan cut, refined",
                              "two_end_cold": "the same, cold multiplier searches",
                              "one_end": "one-end bound (the reference)",
                              "two_end_mid": "two-end bound, midpoint cut, refined"},
                 "tiny": [{"K": 2, "L_max": 8, "vectors": 81,
                           "default": {"wall_s": 0.002, "search": "exhaustive", "gap": 0.0, "goodput": 10.0},
                           "branch_and_bound": {"wall_s": 0.04, "search": "branch-and-bound", "gap": 0.0,
                                                "goodput": 10.0 * (1 - 1e-10)}},
                          {"K": 3, "L_max": 8, "vectors": 729,
                           "default": {"wall_s": 0.01, "search": "exhaustive", "gap": 0.0, "goodput": 10.0},
                           "branch_and_bound": {"wall_s": 0.05, "search": "branch-and-bound", "gap": 1e-9,
                                                "goodput": 9.0}}]}
    return {"solver_scaling": solver, "certified_scaling": certified, "engine_throughput": engine,
            "emulator_speed": emulator, "balance_scaling": balance, "arena_speed": arena}


def _write(folder, docs):
    folder.mkdir(parents=True, exist_ok=True)
    for name, doc in docs.items():
        (folder / f"{name}.json").write_text(json.dumps(doc))
    return folder


def _row(text, start):
    """The first table row starting with ``start`` (the comparisons come before the times)."""
    rows = [line for line in text.splitlines() if line.startswith(start)]
    assert rows, start
    return rows[0]


def test_a_win_is_called_only_when_the_interval_excludes_one(tmp_path):
    text = ST.section(_write(tmp_path / "b", _docs()))
    k10 = _row(text, "| 10 |")
    assert "150x [120, 180] (n = 5): **ours faster**" in k10
    # stored verdict "faster", interval [0.93, 1.41]: not a win
    assert "1.20x [0.93, 1.41] (n = 5): no difference shown" in k10 and k10.count("faster") == 1
    assert "0.50x [0.40, 0.60] (n = 5): **ours slower**" in _row(text, "| 1,000 | not run (K > 100")
    ex = _row(text, "| 2 | 8 |")
    assert "**ours slower**" in ex and "1.00x [0.80, 1.20] (n = 5): no difference shown" in ex
    eng = _row(text, "| our speculative engine vs Hugging Face")
    assert "1.03x [0.97, 1.09]" in eng and "no difference shown" in eng and "faster" not in eng
    assert "**speculation slower**" in _row(text, "| our speculative engine vs plain decoding")
    assert "no difference from one decode shown" in _row(text, "| teacher-forced measurement")
    assert "**analysis faster**" in _row(text, "| 1,000 x 1,000 | sync, static |")
    assert "| plain decoding, ours | 12.7 (12.0-13.1) |" in text


def test_verdict_follows_the_stored_interval_not_the_stored_string():
    for (lo, hi), v in {(1.01, 2.0): "faster", (0.5, 0.99): "slower", (0.99, 1.01): "no difference shown",
                        (1.0, 1.5): "no difference shown"}.items():
        assert ST.as_ratio(_cmp(1.0, lo, hi, verdict="faster")).verdict() == v
    with pytest.raises(ValidationError, match="malformed"):
        ST.as_ratio({"ratio": 1.0})


def test_conditions_show_machine_threads_load_and_quick_runs(tmp_path):
    text = ST.section(_write(tmp_path / "b", _docs()))
    lines = [line for line in text.splitlines() if line.startswith("Conditions:")]
    assert len(lines) == 6
    solver, certified, engine, emulator = lines[:4]
    assert "load: reliable" in certified
    assert "2 cores, 2 torch threads" in solver and "load: reliable" in solver and "quick" not in solver
    assert "**unreliable**: during: other processes used 1.50 cores" in engine
    assert "**quick run" in emulator


def test_numbers_never_use_exponent_notation_above_a_thousandth():
    assert [ST.num(x) for x in (12345.6, 240.0, 18.04, 1.234, 0.4, 0.0063)] == \
        ["12,346", "240", "18.0", "1.23", "0.40", "0.0063"]


def test_main_writes_checks_and_refuses(tmp_path):
    results = _write(tmp_path / "b", _docs())
    readme = tmp_path / "README.md"
    readme.write_text("# title\n\n## Speed\n\n<!-- speed:begin -->\nold\n<!-- speed:end -->\n\n## next\n")
    args = ["--readme", str(readme), "--results", str(results)]
    assert ST.main(args + ["--check"]) == 1
    assert "old" in readme.read_text()  # --check writes nothing
    assert ST.main(args) == 0
    text = readme.read_text()
    assert text.startswith("# title\n\n## Speed\n\n<!-- speed:begin -->\nGenerated by") and text.endswith(
        "<!-- speed:end -->\n\n## next\n")
    assert ST.main(args + ["--check"]) == 0
    assert ST.main(args) == 0 and readme.read_text() == text  # idempotent
    # a changed result makes the README stale
    docs = _docs()
    docs["engine_throughput"]["comparisons"]["plain_ours_vs_plain_hf"]["ci_high"] = 1.2
    _write(results, docs)
    assert ST.main(args + ["--check"]) == 1
    # refusals: no markers; an old-format JSON; a missing JSON
    readme.write_text("# no markers\n")
    assert ST.main(args) == 2
    readme.write_text(text)
    old = copy.deepcopy(docs["solver_scaling"])
    del old["schema"]
    (results / "solver_scaling.json").write_text(json.dumps(old))
    with pytest.raises(ValidationError, match="rerun python benchmarks/solver_scaling.py"):
        ST.section(results)
    assert ST.main(args) == 2 and readme.read_text() == text
    (results / "solver_scaling.json").unlink()
    with pytest.raises(ValidationError, match="missing"):
        ST.section(results)


def test_readme_speed_section_is_generated_from_the_benchmarks():
    """Where the README has the speed markers, its section is exactly the generated one
    (python benchmarks/speed_table.py regenerates it from results/benchmarks/)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    if ST.BEGIN not in readme and ST.END not in readme:
        return  # no generated section (yet): nothing to compare
    generated = ST.replace_section(readme, ST.section(ROOT / "results" / "benchmarks"))  # the committed run
    assert generated == readme, \
        "README speed section differs from results/benchmarks/: python benchmarks/speed_table.py"


def test_balance_and_arena_sections(tmp_path):
    text = ST.section(_write(tmp_path / "b", _docs()))
    assert "| 10 | 0.0050 (0.0045-0.0055) | 10 | 0.040 (0.036-0.044) | 10 |" in text
    assert "| 200 | not run | - | 15.8 (14.2-17.4) | not recorded |" in text
    assert "| 10,000 | 0.70 (0.63-0.77) | 287 | not run | - |" in text
    assert "| 1,000 x 10 x 100 | no | 1.05 (0.95-1.16) | 0.95 |" in text


def test_campaigns_section_states_the_counts_and_refuses_unrecorded_runs(tmp_path):
    from spinlib.paths import RESULTS

    text = ST.campaigns_section(RESULTS / "benchmarks")
    for policy, name in ST.CERTIFIED:
        s = json.loads((RESULTS / "benchmarks" / f"{name}.json").read_text())["summary"]
        assert f"| {policy} | {s['instances']:,} (seed {s['seed']}) | {s['misses']}" in text
    f = json.loads((RESULTS / "benchmarks" / "fuzz_campaign.json").read_text())
    assert f"{f['cases_total']:,} mutated inputs" in text and f"{f['failing_properties']} failing properties" in text
    for name in [n for _, n in ST.CERTIFIED] + ["fuzz_campaign"]:
        doc = json.loads((RESULTS / "benchmarks" / f"{name}.json").read_text())
        doc.pop("commit")
        (tmp_path / f"{name}.json").write_text(json.dumps(doc))
    with pytest.raises(ValidationError, match="does not record the commit"):
        ST.campaigns_section(tmp_path)


def test_readme_campaigns_section_is_generated_from_the_campaigns():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert ST.CAMPAIGNS_BEGIN in readme
    generated = ST.replace_section(readme, ST.campaigns_section(ROOT / "results" / "benchmarks"), "README.md",
                                   ST.CAMPAIGNS_BEGIN, ST.CAMPAIGNS_END)
    assert generated == readme, "README campaigns section differs: python benchmarks/speed_table.py"


def test_certified_section_reports_the_status_the_solver_would(tmp_path):
    """The engine's "optimal" at a requested gap above the optimality tolerance is a gap stop."""
    text = ST.section(_write(tmp_path / "b", _docs()))
    row = _row(text, "| 123 | 0 |")
    assert "0.50, 40, 5.0e-05, gap_limit" in row and "60.0, 400, 2.0e-04, time_limit" in row and "90%" in row
    assert "| 0.80, 44, 5.0e-05, gap_limit |" in row  # the cold reference in its own column
    assert "| 0.30, 30, 5.0e-05, gap_limit |" in row  # the midpoint split in its own column
    assert row.startswith("| 123 | 0 | 0.20, 36, 5.0e-05, gap_limit | not run | 0.50, 40,"), row  # solver's, no batch run
    assert "above 3,000 users one node per bound call on every core, 2 here" in text


def test_certified_section_states_the_growth_and_the_tiny_dispatch(tmp_path):
    """The growth exponents are fitted from the rows (times built as K^1.5, K^2 and K^1 here); a tiny row
    says which search ran and whether the two goodputs agree (to 1e-8)."""
    text = ST.section(_write(tmp_path / "b", _docs()))
    assert ("the solver's search K^1.10 over K = 123 to 1,230 (K^1.10 between 123 and 1,230); the search before "
            "K^1.50 over K = 123 to 1,230 (K^1.50 between 123 and 1,230); its cold reference K^2.00 over "
            "K = 123 to 1,230 (K^2.00 between 123 and 1,230); its midpoint-cut variant K^1.25 over K = 123 to 1,230 "
            "(K^1.25 between 123 and 1,230); whole solver K^1.00 over K = 123 to 1,230 (K^1.00 between 123 and "
            "1,230)") in text
    assert "| 2 | 8 | 81 | 2.00, exhaustive | 40.0 | yes |" in text
    assert "| 3 | 8 | 729 | 10.0, exhaustive | 50.0 | no |" in text


def test_certified_section_largest_K_and_the_speed_goal(tmp_path):
    """A size where only the default search and the whole solver ran (the largest K) says "not run" for
    the references, and each growth exponent is fitted over the sizes its variant ran at; the goal line
    compares the whole solver's median time at each goal size with the goal (met / not met / not
    measured), from the rows."""
    docs = _docs()
    c = docs["certified_scaling"]
    run = c["rows"][0]["two_end"]
    c["rows"] += [{"K": 12300, "instance": i, "solver_search": {**run, "wall_s": 0.2 * 100 ** 1.1, "nodes": 36},
                   "two_end": {**run, "wall_s": 0.5 * 100 ** 1.5, "status": "time_limit"},
                   "solver": {"wall_s": w, "gap": 5e-5, "status": "gap_limit", "nodes": 40, "drafting_share": 0.9}}
                  for i, w in enumerate((9.0, 11.0, 30.0))]
    c["goals_s"] = {"1230": 1.0, "12300": 15.0, "99999": 2.0}
    text = ST.section(_write(tmp_path / "b", docs))
    row = _row(text, "| 12,300 | 1 |")
    assert row.count("not run") == 4 and "| 11.0 |" in row, row  # its batch pass, the two references, the midpoint cut
    assert ("the search before K^1.50 over K = 123 to 12,300 (K^1.50 between 1,230 and 12,300; at least: a run "
            "at K = 12,300 stopped at the time limit)") in text
    assert "its cold reference K^2.00 over K = 123 to 1,230 (K^2.00 between 123 and 1,230)" in text
    assert ("Speed goal of the whole solver: K = 1,230 under 1.00 s: median 6.00 s, not met; "
            "K = 12,300 under 15.0 s: median 11.0 s, met; K = 99,999 under 2.00 s: not measured.") in text, text
