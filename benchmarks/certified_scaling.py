"""Certified search at scale: time, nodes and proven gap of ``heterogeneous-sync`` vs the number of users.

    .venv/bin/python benchmarks/certified_scaling.py [--quick] [--allow-busy] [--threads N] [--wait-quiet S]

Writes results/benchmarks/certified_scaling.json (``--quick``: under results/smoke/).

Instances. ``random_scenario(K)`` with the default Llama-2 preset becomes server-bound as K grows
(at K = 1,000 and beyond nobody drafts and the certificate is trivial), so the scaling family here
grows the server and the band with the users: the server's per-token cost divided by ``K / 100``
and the band multiplied by ``K / 100`` (``scaled_instance``); every instance of it has drafting
users (the fraction is recorded). Seeds ``[K, i]``, i = 0..n-1.

Per K and instance, from the same incumbent (the solver's own start: homogeneous optimum and
server-only decoding, plus at K <= 64 its Lagrangian candidates and local search), the
branch-and-bound runs to the requested gap with each variant of :func:`variants`:

* ``solver_search``: the settings the solver uses at K (:func:`spinlib.control.heterogeneous.sync_search_settings`:
  above 64 users every makespan cut at the midpoint, open nodes keep their first valid bound, and above
  :data:`~spinlib.control.heterogeneous.PER_NODE_USERS` one node per bound call on every core);
* ``solver_batch``: the same with the nodes of a batch in one vectorised pass (``per_node=False``), where the
  solver uses one call per node: the crossover that sets ``PER_NODE_USERS``;
* ``two_end``: the two-end node bound with warm multiplier searches, cuts at the relaxed solution's own
  makespan and every bound refined (the solver's settings above 64 users before this benchmark's last change);
* ``two_end_cold``: the same with every multiplier search started cold (the reference of the warm start);
* ``one_end``: the same with the one-end node bound it replaced (the reference of the bound);
* ``two_end_mid``: ``two_end`` with every makespan cut at the interval's midpoint;

each under the same node budget and wall-clock limit; recorded: wall time, nodes, the certified
gap and the status. The whole solver (``solve_heterogeneous_sync``) is timed too, and the threads it
may use are recorded. At K = 100,000 (:data:`LARGEST`, not in ``--quick``) one instance, and only
:data:`LARGEST_VARIANTS` and the whole solver run: the references would take many minutes.
:data:`GOALS_S` (our speed goal) is recorded, and the README's table says whether the medians meet it.

Tiny instances (``tiny`` rows): K = 2, 3, 4 with L_max = 8 and 16, the whole solver with its
default dispatch (every length vector evaluated up to
:data:`spinlib.control.search.EXHAUSTIVE_MAX_VECTORS` of them) side by side with the same solver told
to branch (``exhaustive_max=0``): the crossover that sets the constant. Best of 5 runs each.
"""
from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np

from bench_common import Run, add_arguments, main_guard
from spinlib import random_scenario
from spinlib.acceptance import tokens_table
from spinlib.channel import RateModel
from spinlib.control.branch_and_bound import available_cores, branch_and_bound_sync
from spinlib.control.heterogeneous import BNB_FULL_USERS, PER_NODE_USERS, solve_heterogeneous_sync, sync_search_settings
from spinlib.control.homogeneous import solve_homogeneous
from spinlib.control.search import EXHAUSTIVE_MAX_VECTORS

GAP, L_MAX = 1e-4, 16


def scaled_instance(K: int, seed) -> "object":
    """``random_scenario(K)`` with the server's per-token cost / (K/100) and the band x (K/100)."""
    s = random_scenario(K, seed=seed, access_latency_s=0.05)
    f = K / 100
    return dataclasses.replace(
        s, server=dataclasses.replace(s.server, t1_s_per_token=s.server.t1_s_per_token / f),
        radio=dataclasses.replace(s.radio, bandwidth_hz=s.radio.bandwidth_hz * f))


LARGEST = 100_000  # measured with LARGEST_VARIANTS and the whole solver only (the references take minutes)
LARGEST_VARIANTS = ("solver_search", "solver_batch", "two_end", "two_end_mid")
GOALS_S = {10_000: 1.0, 100_000: 15.0}  # our speed goal: the whole solver's median time [s] at K


def variants(K: int) -> dict:
    """``name -> (label, branch_and_bound_sync keywords)`` at K users (module docstring)."""
    solver = sync_search_settings(K)
    before = {"batch": 8 if K > BNB_FULL_USERS else 64, "n_root": 4 if K > BNB_FULL_USERS else 16}
    out = {"solver_search": ("the solver's search", solver)}
    if solver.get("per_node"):
        out["solver_batch"] = ("the solver's search, one batch pass", {**solver, "per_node": False})
    out.update({
        "two_end": ("two-end bound, relaxed-makespan cut, refined", before),
        "two_end_cold": ("the same, cold multiplier searches", {**before, "warm_start": False}),
        "one_end": ("one-end bound (the reference)", {**before, "tangent": False}),
        "two_end_mid": ("two-end bound, midpoint cut, refined", {**before, "d_split": "midpoint"}),
    })
    return out


def one(K: int, i: int, time_limit_s: float, max_nodes: int, only=None) -> dict:
    s = scaled_instance(K, [K, i])
    rates, table = RateModel.of(s), tokens_table(s, L_MAX)
    hom = solve_homogeneous(s, L_MAX, rates)
    G0 = hom.goodput_tokens_per_s
    row = {"K": K, "instance": i}
    for name, (_, kw) in variants(K).items():
        if only is not None and name not in only:
            continue
        t0 = time.perf_counter()
        r = branch_and_bound_sync(s, rates, table, np.array(hom.draft_lengths), G0, gap=GAP,
                                  time_limit_s=time_limit_s, max_nodes=max_nodes, **kw)
        row[name] = {"wall_s": time.perf_counter() - t0, "nodes": r.nodes, "gap": r.certificate.gap,
                     "status": r.status, "goodput": r.value, "upper_bound": r.upper_bound}
    t0 = time.perf_counter()
    a = solve_heterogeneous_sync(s, L_MAX, gap=GAP, time_limit_s=time_limit_s)
    row["solver"] = {"wall_s": time.perf_counter() - t0, "gap": a.info["gap"], "status": a.info["status"],
                     "nodes": a.info["bnb_nodes"], "drafting_share": float(np.mean(np.array(a.draft_lengths) > 0))}
    return row


def tiny(K: int, L_max: int, repeats: int = 5) -> dict:
    """The solver at K, L_max: default dispatch vs forced branch-and-bound (best of ``repeats``)."""
    s = random_scenario(K, seed=[K, L_max], access_latency_s=0.05)
    row = {"K": K, "L_max": L_max, "vectors": (L_max + 1) ** K}
    for name, kw in (("default", {}), ("branch_and_bound", {"exhaustive_max": 0})):
        best = np.inf
        for _ in range(repeats):
            t0 = time.perf_counter()
            a = solve_heterogeneous_sync(s, L_max, **kw)
            best = min(best, time.perf_counter() - t0)
        row[name] = {"wall_s": best, "search": a.info["search"], "gap": a.info["gap"], "goodput": a.goodput_tokens_per_s}
    return row


def main(args) -> dict:
    run = Run("certified_scaling", args, what="the certified-scaling benchmark")
    sizes = [100, 1000] if args.quick else [100, 1000, 10000]
    n_inst = 2 if args.quick else 3
    time_limit_s, max_nodes = 60.0, 2000
    rows = []
    for K in sizes + ([] if args.quick else [LARGEST]):
        for i in range(1 if K == LARGEST else n_inst):
            row = one(K, i, time_limit_s, max_nodes, LARGEST_VARIANTS if K == LARGEST else None)
            rows.append(row)
            print(K, i, {k: (f"{v['wall_s']:.2f} s", v["nodes"], f"{v['gap']:.1e}", v["status"])
                         for k, v in row.items() if isinstance(v, dict)}, flush=True)
    tiny_rows = []
    for K in (2, 3, 4):
        for L_max in (8, 16):
            row = tiny(K, L_max)
            tiny_rows.append(row)
            print("tiny", K, L_max, row["vectors"], {k: (f"{v['wall_s'] * 1e3:.1f} ms", v["search"])
                                                    for k, v in row.items() if isinstance(v, dict)}, flush=True)
    return run.finish({"gap": GAP, "L_max": L_MAX, "time_limit_s": time_limit_s, "max_nodes": max_nodes,
                       "family": "random_scenario(K, access_latency_s=0.05), t1 / (K/100), B x (K/100)",
                       "rows": rows, "exhaustive_max_vectors": EXHAUSTIVE_MAX_VECTORS, "tiny": tiny_rows,
                       "goals_s": {str(K): v for K, v in GOALS_S.items()}, "threads": available_cores(),
                       "per_node_users": PER_NODE_USERS,
                       "variants": {name: label for name, (label, _) in variants(LARGEST).items()}})


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(p)
    main_guard(lambda: main(p.parse_args()))
