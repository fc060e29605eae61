"""A measured pair as the online controllers see it: its timings and its token streams.

Timings are the medians of the pair's committed measurement summaries (``data/measurements/<pair>``:
draft seconds per token and the verification fit ``t0 + t1 N`` on the measuring machine's CPU), each
read and checked by :func:`spinlib.measurements.read_summaries`; token streams are its committed
traces (``data/traces/<pair>``, :func:`spinlib.online.traces.load_pair_traces`), one stream per task.
"""
from __future__ import annotations

import numpy as np

from ..measurements import read_summaries
from ..validation import ValidationError
from .arena import Stream
from .traces import load_pair_traces


def pair_timing_records(pair: str) -> list[dict]:
    """The ``timing`` object of each of the pair's committed measurement summaries (one per task),
    read and checked by :func:`spinlib.measurements.read_summaries` (a bad file is one line)."""
    found = read_summaries(pair)
    if not found:
        raise ValidationError(f"no committed measurements of pair {pair!r} under data/measurements")
    return [m.timing for m in found]


def pair_timings(pair: str) -> dict:
    """``{"t_d", "t0", "t1"}`` [s]: medians over the pair's committed measurement summaries."""
    tim = pair_timing_records(pair)
    return {"t_d": float(np.median([t["draft_s_per_token"] for t in tim])),
            "t0": float(np.median([t["verify_t0_s"] for t in tim])),
            "t1": float(max(np.median([t["verify_t1_s"] for t in tim]), 0.0))}


def pair_streams(pair: str) -> list[Stream]:
    return [Stream.from_traces(tr, f"{pair}/{task}") for task, tr in load_pair_traces(pair).items()]


def pooled_survival(pair: str, L_max: int) -> np.ndarray:
    """Survival over every start position of every task stream of the pair."""
    runs = np.concatenate([s.cyclic_runs(L_max + 1) for s in pair_streams(pair)])
    return np.array([1.0] + [float(np.mean(runs >= i)) for i in range(1, L_max + 1)])


__all__ = ["pair_timing_records", "pair_timings", "pair_streams", "pooled_survival"]
