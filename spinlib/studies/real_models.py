"""Notebook 12's study: does multi-user speculation pay on real models here, and where would it?

Two pieces:

* :func:`earlier_claims`: the claims other notebooks stated in this run (``<results>/claims/<nb>.json``),
  or, where this run has none (a smoke run, a partial run), those of the committed full run under
  the repository's ``results/claims/``; each record says which.
* :func:`compute_speedup` / :func:`best_speedup`: the speed-up of ``K`` users who each draft ``L``
  tokens over plain batched decoding of the same ``K`` users, counting computation only (no radio:
  an upper bound on what any link leaves), with i.i.d. acceptance ``alpha``::

      plain round:        T_p = T_ver(K users x 1 position)             -> K tokens
      speculative round:  T_s = L t_d + T_ver(K users x (L + 1))         -> K E[N](L) tokens
      S(L) = E[N](L) T_p / T_s,   E[N](L) = (1 - alpha^(L+1)) / (1 - alpha)

  (:mod:`spinlib.roundcost`: the synchronous round with every device drafting ``L t_d`` in
  parallel). Two server models: ``"position"`` (ours, notebooks 01-10: ``T_ver = t0 + t1 x
  positions``, the fit of notebook 05 on this CPU) and ``"device"`` (both Multi-SPIN papers, paper 1
  eq. (7), paper 2 Sec. II: ``T_ver = t0 + t1 K``, whatever the draft lengths, the fits on an A100).
  ``S(0) = 1``: a round of plain decoding.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..roundcost import iid_expected_tokens, sync_round_time
from ..validation import ValidationError

SERVER_MODELS = ("position", "device")


def verify_time(t0: float, t1: float, K, L, per: str):
    """``T_ver`` [s] of ``K`` users drafting ``L`` each: ``t0 + t1 K (L + 1)`` (``per="position"``) or
    ``t0 + t1 K`` (``per="device"``); broadcasting."""
    if per not in SERVER_MODELS:
        raise ValidationError(f"per must be one of {SERVER_MODELS}, got {per!r}")
    K, L = np.asarray(K, dtype=float), np.asarray(L, dtype=float)
    return t0 + t1 * K * ((L + 1.0) if per == "position" else 1.0)


def compute_speedup(alpha, L, t_d, t0, t1, K, per: str = "position"):
    """``S(L)`` of the module docstring (broadcasting over every argument): K users drafting ``L``
    tokens each at ``t_d`` [s] per token against plain batched decoding, computation only."""
    plain = sync_round_time(0.0, verify_time(t0, t1, K, 0, per))
    spec = sync_round_time(np.asarray(L, dtype=float) * t_d, verify_time(t0, t1, K, L, per))
    return iid_expected_tokens(alpha, L) * plain / spec


def best_speedup(alpha, t_d, t0, t1, K, per: str = "position", L_max: int = 25) -> tuple[float, int]:
    """``(max_L S(L), argmax)`` over ``L = 0..L_max`` by enumeration (``L = 0``: plain decoding, ``S = 1``)."""
    Ls = np.arange(L_max + 1)
    S = compute_speedup(alpha, Ls, t_d, t0, t1, K, per)
    i = int(np.argmax(S))
    return float(S[i]), int(Ls[i])


def breakeven_grid(alpha: float, K: int, draft_ratios, server_ratios, per: str = "position", L_max: int = 25):
    """``best S [len(server_ratios), len(draft_ratios)]`` over ``t_d / t0`` (columns) and ``t1 / t0`` (rows),
    ``t0 = 1``: the map of where speculation pays (``S > 1``)."""
    return np.array([[best_speedup(alpha, c, 1.0, r, K, per, L_max)[0] for c in draft_ratios]
                     for r in server_ratios])


def earlier_claims(notebooks, results: Path | None = None) -> dict[str, dict]:
    """``{claim id: record}`` of ``notebooks``' claims; each record gains ``"source"``: ``"this run"``
    when read from ``results/claims/<nb>.json`` of this run (``results`` default: ``$SPINLIB_RESULTS``),
    else ``"committed run"`` (the repository's ``results/claims/``). One line when neither has it."""
    from ..claims import load
    from ..paths import RESULTS, ROOT

    out = {}
    for nb in notebooks:
        for source, root in (("this run", Path(results or RESULTS)), ("committed run", ROOT / "results")):
            f = root / "claims" / f"{nb}.json"
            if f.is_file():
                for r in load(f):
                    out[r["id"]] = {**r, "source": source}
                break
        else:
            raise ValidationError(f"no claims of notebook {nb!r} in this run or the committed one: run it first")
    return out


def read_benchmark(name: str, results: Path | None = None) -> dict:
    """A benchmark's JSON (``results/benchmarks/<name>.json`` of this run, else the committed one)."""
    from ..paths import RESULTS, ROOT

    for root in (Path(results or RESULTS), ROOT / "results"):
        f = root / "benchmarks" / f"{name}.json"
        if f.is_file():
            return json.loads(f.read_text(encoding="utf-8"))
    raise ValidationError(f"no benchmark {name!r} under results/benchmarks: run benchmarks/{name}.py first")


__all__ = ["SERVER_MODELS", "verify_time", "compute_speedup", "best_speedup", "breakeven_grid", "earlier_claims",
           "read_benchmark"]
