"""The README's snippets (own policy, sweeps on a cluster, own certified search, claim map, own study, own
controller on the real engine, own drafter on both engines) run as written."""
import re
import subprocess
import sys

import pytest

from spinlib.paths import ROOT


def _python_blocks(section: str) -> list[str]:
    text = (ROOT / "README.md").read_text()
    m = re.search(rf"^## {re.escape(section)}\n(.*?)(?=^## )", text, flags=re.M | re.S)
    assert m, f"README has no section {section!r}"
    blocks = re.findall(r"```python\n(.*?)```", m.group(1), flags=re.S)
    assert blocks, f"section {section!r} has no python snippet"
    return blocks


@pytest.mark.campaign
@pytest.mark.parametrize("section", ["Add your own policy", "Add a model pair or a preset", "Run sweeps on a cluster",
                                     "Certify your own search problem",
                                     "Map a claim over its region", "Add your own study",
                                     "Re-plan many users with any decider",
                                     "Drive real speculative decoding with any controller",
                                     "Draft with any drafter, for one user or many",
                                     "The papers' own models (notebook 11)"])
def test_readme_snippet_runs(section, tmp_path):
    code = "\n".join(_python_blocks(section))
    script = tmp_path / "snippet.py"
    script.write_text(code)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    if section == "Add your own policy":
        assert "(2, 2, 2, 0, 0, 0)" in r.stdout  # the value its comment states
        assert "first-half-drafts" in r.stdout
    elif section == "Add a model pair or a preset":
        assert "low-bit-draft | SmolLM2-135M + RTN-5 (g16) draft" in r.stdout
        assert "branch-and-bound optimal" in r.stdout and "draft_j_per_token=0.15" in r.stdout
    elif section == "Run sweeps on a cluster":
        assert re.search(r"^\d+ records$", r.stdout, flags=re.M)
    elif section == "Certify your own search problem":
        assert "optimal" in r.stdout and "certified optimum equals brute force: True" in r.stdout
    elif section == "Map a claim over its region":
        assert "verdict" in r.stdout and "'holds'" in r.stdout
    elif section == "Re-plan many users with any decider":
        assert "FixedLength on the multi-user player equals replan-bandwidth: True" in r.stdout, r.stdout
        rows = re.findall(r"^(\S+) +([\d.]+) token/s  99 % interval \[([\d.]+), ([\d.]+)\]$", r.stdout, flags=re.M)
        assert [row[0] for row in rows] == ["plan-on-average", "replan-bandwidth", "strong-half"], r.stdout
        assert all(float(lo) <= float(g) <= float(hi) for _, g, lo, hi in rows)
        assert "static-policy of heterogeneous-sync equals plan-on-average: True" in r.stdout, r.stdout
        static = re.findall(r"^(\S+) +[\d.]+ token/s, mean L ([\d.]+)$", r.stdout, flags=re.M)
        assert [(n, float(L)) for n, L in static][1:] == [("equal", 2.0), ("server-only", 0.0)], r.stdout
        learners = re.findall(r"^(\S+) +([\d.]+) token/s as a per-user learner, mean L ([\d.]+)$", r.stdout, flags=re.M)
        assert [n for n, _, _ in learners] == ["ucb-specstop", "hf-heuristic", "fixed:L=2"], r.stdout
        assert all(float(g) > 0 for _, g, _ in learners) and float(learners[2][2]) == 2.0, r.stdout
        from spinlib.online.deciders import PLAYERS, playable
        for player in PLAYERS:
            n = len(playable(player)) + (player == "replan")  # the snippet's own strong-half plays in replan
            assert f"{player:21s} plays {n} registered deciders" in r.stdout, r.stdout
        assert "refused: controller 'specdec++' needs the draft's per-position confidence" in r.stdout, r.stdout
    elif section == "Add your own study":
        assert "interrupted after 2 tasks" in r.stdout, r.stdout  # K = 3's two seeds, stored
        assert "__main__.gain_study 4 records, 4 tasks computed; same: True" in r.stdout, r.stdout
        assert r.stdout.rstrip().endswith("['gain', 'num_users', 'seed'] True"), r.stdout
    elif section == "The papers' own models (notebook 11)":
        got = re.findall(r"^paper (\d): \[[\d ]+\] ([\d.]+) token/s; optimum \[[\d ]+\] ([\d.]+)$", r.stdout, flags=re.M)
        assert [g[0] for g in got] == ["1", "2"], r.stdout
        assert all(float(a) <= float(b) for _, a, b in got), r.stdout  # each paper's algorithm within its optimum
    elif section == "Draft with any drafter, for one user or many":
        assert r.stdout.count("lossless True") == 4 + 3 and "lossless False" not in r.stdout, r.stdout
        lengths = re.findall(r"^user \d: lossless True, lengths \[([\d, ]+)\]$", r.stdout, flags=re.M)
        assert len(lengths) == 3 and len({L for row in lengths for L in row.split(", ")}) > 1, r.stdout
    else:
        assert section == "Drive real speculative decoding with any controller", section
        assert r.stdout.count("lossless True") == 3, r.stdout


def _readme_command_lines() -> list[str]:
    """Every ``python -m spinlib <command> ...`` line of the README (continuations joined)."""
    text = (ROOT / "README.md").read_text().replace("\\\n", " ")
    return re.findall(r"^python -m spinlib [a-z].*$", text, flags=re.M)


def test_every_readme_command_line_parses():
    """Every command line the README shows parses with today's command line (any subcommand), fast tier."""
    import shlex

    from spinlib.cli import build_parser

    lines = _readme_command_lines()
    commands = {ln.split()[3] for ln in lines}
    assert {"solve", "emulate", "generate", "measure", "replan", "arena", "balance"} <= commands, commands
    parser = build_parser()
    for ln in lines:
        tokens = shlex.split(ln.split("#")[0])[3:]
        if ">" in tokens:
            tokens = tokens[:tokens.index(">")]
        try:
            parser.parse_args(tokens)
        except SystemExit:
            pytest.fail(f"README command line does not parse: {ln}")


def test_readme_solver_defaults_match_the_code():
    """The defaults the README states for the certified solvers are the code's (not typed apart)."""
    import inspect

    from spinlib.control import heterogeneous as H
    from spinlib.control.registry import get_policy

    text = " ".join((ROOT / "README.md").read_text().split())
    assert f"default {H.BNB_NODE_WORK:,} / K nodes up to K = {H.BNB_FULL_USERS}" in text
    assert f"certifying run of {H.LARGE_K_NODE_WORK:,} / K above" in text
    p = get_policy("heterogeneous-sync").params
    assert f"`time_limit_s` ({p['time_limit_s']:g} s) is only a safety net" in text
    assert f"Gap <= {p['gap']:.0e} (the default tolerance".replace("e-0", "e-") in text
    assert list(inspect.signature(H.node_budget).parameters) == ["K"]  # the function the README names, K -> nodes


def test_readme_multiuser_limits_match_the_code():
    """The multi-user limits and defaults the README states are the code's."""
    from spinlib.online import multiuser as MU, replan

    text = " ".join((ROOT / "README.md").read_text().split())
    ratio = MU.get_multiuser_controller("replan-ratio").params
    assert f"at a node budget of {ratio['max_nodes']} by default" in text
    assert f"Up to {replan.MAX_USERS} users" in text and f"and {replan.MAX_ROUNDS:,} rounds per run" in text
    assert f"may use at most {replan.REPLAN_NODE_BUDGET:,} nodes in a run (`REPLAN_NODE_BUDGET`" in text


