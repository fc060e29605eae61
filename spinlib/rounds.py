"""Round timing and token goodput of a given allocation (draft lengths + bandwidth).

Synchronous round (one verification batch for all users; model (A) of our reconstruction, which is
the homogeneous round when all ``L_k`` are equal)::

    D      = max_k ( L_k tau_k + L_k S / R_k(b_k) )               drafting + uplink makespan [s]
    T      = D + T_ver(sum_k (L_k + 1)) + T_fb + T_acc            round time [s]
    G_sync = sum_k E[N_k](L_k) / T                                goodput [token/s]

Asynchronous rounds (model (B): each user runs its own rounds, the server verifies each draft on
arrival, queueing ignored -- the emulator (:mod:`spinlib.emulator`, notebook 07) measures what that leaves out)::

    T_k     = L_k tau_k + L_k S / R_k(b_k) + T_ver(L_k + 1) + T_fb + T_acc
    G_async = sum_k E[N_k](L_k) / T_k,     server utilisation rho = sum_k T_ver(L_k + 1) / T_k

The asynchronous model ignores the server's capacity: the server is busy ``rho`` of the time and
``rho > 1`` is not sustainable. :func:`evaluate` also reports ``G / max(1, rho)``, the goodput when
an overloaded server stretches every user's round by the same factor (processor sharing); the
synchronous round includes the verification time, so there ``rho <= 1`` always.

A user with ``L_k = 0`` decodes autoregressively on the server: no draft, no upload, one token
per round (``E[N](0) = 1``) and needs no bandwidth.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .acceptance import tokens_table
from .cache import json_default
from .channel import RateModel
from .jsonio import read_json
from .roundcost import sync_round_time as _sync_time, user_round_time
from .scenario import Scenario
from .validation import ValidationError, check_int_range, check_keys

ROUND_MODELS = ("sync", "async")
L_MAX_ALLOWED = 64


@dataclass(frozen=True)
class Allocation:
    """Draft lengths and bandwidth of every user, and the round model they are meant for.

    Parameters
    ----------
    draft_lengths : tuple of int, shape [K]
        ``L_k`` in [0, 64].
    bandwidth_hz : tuple of float, shape [K]
        ``b_k`` [Hz] >= 0 with ``sum b_k <= B``; users drafting (L_k > 0) need ``b_k > 0``.
    round_model : {"sync", "async"}
    policy : str
        Name of the policy that produced it.
    goodput_tokens_per_s : float or None
        Goodput the policy predicts (filled by the solvers; :func:`evaluate` recomputes it).
    info : dict
        Solver diagnostics (iterations, bounds, timings).
    modes : tuple of {"UL", "DL"}, optional
        Communication mode of each device (paper 2, :mod:`spinlib.modes`); ``None`` for the
        paper-1 allocations, where every device uploads the scenario's payload.
    dl_power_w : tuple of float, optional
        Base-station power [W] per device (0 for UL-mode devices); required with ``modes``.
    """

    draft_lengths: tuple[int, ...]
    bandwidth_hz: tuple[float, ...]
    round_model: str = "sync"
    policy: str = ""
    goodput_tokens_per_s: float | None = None
    info: dict = field(default_factory=dict, compare=False, hash=False)
    modes: tuple[str, ...] | None = None
    dl_power_w: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if self.round_model not in ROUND_MODELS:
            raise ValidationError(f"round_model must be one of {ROUND_MODELS}, got {self.round_model!r}")
        L = tuple(self.draft_lengths)
        b = tuple(self.bandwidth_hz)
        L_arr = np.array(L, dtype=object)
        int_ok = np.array([isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in L], dtype=bool)
        if not int_ok.all() or (len(L) and not np.all((L_arr >= 0) & (L_arr <= L_MAX_ALLOWED))):
            for i, x in enumerate(L):  # slow path only to name the first bad entry
                check_int_range(f"draft_lengths[{i}]", x, 0, L_MAX_ALLOWED)
        b = _nonnegative_floats("bandwidth_hz", b)
        if len(L) != len(b):
            raise ValidationError(
                f"draft_lengths and bandwidth_hz must have the same length, got {len(L)} and {len(b)}"
            )
        object.__setattr__(self, "draft_lengths", tuple(int(x) for x in L))
        object.__setattr__(self, "bandwidth_hz", b)
        if (self.modes is None) != (self.dl_power_w is None):
            raise ValidationError("modes and dl_power_w must be given together (UL/DL allocation)")
        if self.modes is not None:
            from .modes import parse_modes

            parse_modes(self.modes, len(L))
            object.__setattr__(self, "modes", tuple(self.modes))
            p = _nonnegative_floats("dl_power_w", self.dl_power_w)
            if len(p) != len(L):
                raise ValidationError(f"dl_power_w has {len(p)} entries, draft_lengths has {len(L)}")
            object.__setattr__(self, "dl_power_w", p)
            if self.round_model != "sync":
                raise ValidationError("UL/DL allocations use the synchronous round: round_model must be 'sync'")

    @property
    def L(self) -> np.ndarray:
        return np.array(self.draft_lengths, dtype=int)

    @property
    def b(self) -> np.ndarray:
        return np.array(self.bandwidth_hz, dtype=float)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json(self, path: str | Path | None = None) -> str:
        text = json.dumps(self.to_dict(), indent=2, default=json_default)
        if path is not None:
            from .cache import atomic_write_text

            atomic_write_text(Path(path), text + "\n", follow_symlinks=True)  # a path the user names
        return text

    @classmethod
    def from_dict(cls, d: dict) -> "Allocation":
        known = [f.name for f in dataclasses.fields(cls)]
        d = check_keys("allocation", d, known, required=("draft_lengths", "bandwidth_hz"))
        for key in ("draft_lengths", "bandwidth_hz", "modes", "dl_power_w"):
            optional = key in ("modes", "dl_power_w")  # null: a paper-1 (all-UL) allocation
            if key in d and not (optional and d[key] is None) and not isinstance(d[key], (list, tuple)):
                got = "null" if d[key] is None else type(d[key]).__name__
                raise ValidationError(f"{key} must be a list, got {got}")
        if d.get("info") is not None and not isinstance(d["info"], dict):
            raise ValidationError(f"info must be a JSON object, got {type(d['info']).__name__}")
        G = d.get("goodput_tokens_per_s")
        if G is not None and (isinstance(G, bool) or not isinstance(G, (int, float)) or not math.isfinite(G)):
            raise ValidationError(f"goodput_tokens_per_s must be a finite number or null, got {G!r}")
        return cls(**{k: (tuple(v) if isinstance(v, (list, tuple)) else v) for k, v in d.items() if k != "info"},
                   info=d.get("info") or {})

    @classmethod
    def from_json(cls, source: str | Path) -> "Allocation":
        """Load from a JSON string or a path to a JSON file (one-line errors, :func:`~spinlib.jsonio.read_json`)."""
        return cls.from_dict(read_json(source, "allocation"))


def _nonnegative_floats(name: str, values) -> tuple[float, ...]:
    """``values`` as a tuple of floats, or a :class:`ValidationError` naming the first entry that
    is not a finite number >= 0 (vectorised check first; the loop only names the culprit)."""
    values = tuple(values)
    try:
        arr = np.array(values, dtype=float)
        ok = not any(isinstance(x, (bool, str)) for x in values)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer beyond the float range
        arr, ok = np.array([]), False

    def finite(x) -> bool:
        try:
            return math.isfinite(x)
        except OverflowError:
            return False
    if not ok or arr.shape != (len(values),) or not np.all(np.isfinite(arr) & (arr >= 0)):
        for i, x in enumerate(values):
            if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)) or not finite(x) or x < 0:
                shown = f"an integer of {x.bit_length()} bits" if isinstance(x, int) and not finite(x) else repr(x)
                raise ValidationError(f"{name}[{i}] must be a finite number >= 0, got {shown}")
    return tuple(float(x) for x in values)


@dataclass(frozen=True)
class Evaluation:
    """Goodput and per-user phase times of an allocation (all arrays have shape [K])."""

    round_model: str
    goodput_tokens_per_s: float
    user_goodput: np.ndarray  # [K] token/s
    expected_tokens: np.ndarray  # [K] E[N_k](L_k)
    draft_time_s: np.ndarray  # [K] L_k tau_k
    uplink_time_s: np.ndarray  # [K] L_k S / R_k(b_k)
    verification_time_s: np.ndarray  # [K] sync: the batch's T_ver (same for all); async: T_ver(L_k+1)
    feedback_time_s: float
    access_latency_s: float
    round_time_s: np.ndarray  # [K] sync: T for everyone; async: T_k
    server_utilisation: float
    capacity_limited_goodput: float  # G / max(1, rho): every round stretched when the server is overloaded
    downlink_time_s: np.ndarray | None = None  # [K] UL/DL only: c_k + d_k / r_k(p_k) (0 for UL devices)
    modes: tuple[str, ...] | None = None

    def to_dict(self) -> dict:
        return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in dataclasses.asdict(self).items()}


def check_allocation(scenario: Scenario, alloc: Allocation) -> None:
    """Raise :class:`ValidationError` if the allocation does not fit the scenario."""
    K = scenario.num_users
    if len(alloc.draft_lengths) != K:
        raise ValidationError(f"allocation has {len(alloc.draft_lengths)} users, the scenario has {K}")
    B = scenario.radio.bandwidth_hz
    total = float(np.sum(alloc.b))
    if total > B * (1 + 1e-9):
        raise ValidationError(f"bandwidth_hz sums to {total:.6g} Hz, above the budget B = {B:.6g} Hz")
    starved = np.flatnonzero((alloc.L > 0) & (alloc.b <= 0))
    if starved.size:
        k = int(starved[0])
        raise ValidationError(
            f"bandwidth_hz[{k}] is 0 but user {k} drafts {alloc.draft_lengths[k]} tokens (needs b > 0)"
        )
    if alloc.modes is not None:
        P = scenario.downlink.power_w
        p = np.array(alloc.dl_power_w)
        if p.sum() > P * (1 + 1e-9):
            raise ValidationError(f"dl_power_w sums to {p.sum():.6g} W, above the budget P_BS = {P:.6g} W")
        dl_drafting = np.flatnonzero((np.array(alloc.modes) == "DL") & (alloc.L > 0) & (p <= 0))
        if dl_drafting.size:
            k = int(dl_drafting[0])
            raise ValidationError(f"dl_power_w[{k}] is 0 but user {k} is in DL mode and drafts (needs p > 0)")


def uplink_time(scenario: Scenario, L, b, rates: RateModel | None = None, bits_per_token=None) -> np.ndarray:
    """``L_k S_k / R_k(b_k)`` [s], 0 where ``L_k = 0``; ``inf`` where b_k = 0 and L_k > 0.

    ``S`` is the scenario's payload per token, or ``bits_per_token`` per user (UL/DL modes).
    """
    rates = rates or RateModel.of(scenario)
    L = np.asarray(L, dtype=float)
    R = rates.rate(np.asarray(b, dtype=float))
    S = scenario.payload.bits_per_token if bits_per_token is None else np.asarray(bits_per_token, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = L * S / R
    return np.where(L > 0, t, 0.0)


def fixed_round_overhead(scenario: Scenario) -> float:
    """``T_fb + T_acc`` [s], paid by every round."""
    return scenario.feedback_time_s + scenario.radio.access_latency_s


def sync_round_time(scenario: Scenario, makespan_s, total_draft):
    """``T = D + t0 + t1 (sum L_k + K) + T_fb + T_acc`` [s], broadcasting over leading dims."""
    K = scenario.num_users
    return _sync_time(makespan_s, scenario.server.verification_time(np.asarray(total_draft, dtype=float) + K),
                      fixed_round_overhead(scenario))


def async_round_time(scenario: Scenario, L, uplink_s):
    """``T_k = L_k tau_k + uplink_k + t0 + t1 (L_k + 1) + T_fb + T_acc`` [s], shape [..., K]."""
    L = np.asarray(L, dtype=float)
    return user_round_time(L * scenario.tau, uplink_s, scenario.server.verification_time(L + 1),
                           fixed_round_overhead(scenario))


def sync_goodput(scenario: Scenario, L, tokens, makespan_s, downlink_s=0.0):
    """The synchronous goodput kernel, batched over leading dims::

        G = sum_k N_k / ( D + T_ver(sum_k (L_k + 1)) + E + T_fb + T_acc )   [token/s]

    Parameters
    ----------
    L : int array [..., K]
        Draft lengths.
    tokens : array [..., K]
        ``N_k = E[N_k](L_k)``.
    makespan_s : array [...]
        ``D``, drafting + uplink makespan [s].
    downlink_s : array [...], optional
        ``E``, DL phase [s] (paper 2; 0 when every device is in UL mode).
    """
    K = scenario.num_users
    T = _sync_time(makespan_s, scenario.server.verification_time(np.asarray(L).sum(axis=-1).astype(float) + K),
                   fixed_round_overhead(scenario), downlink_s)
    return np.sum(tokens, axis=-1) / T


def async_terms(scenario: Scenario, L, bits_per_token=None):
    """``A_k`` [s] and ``C_k = L_k S_k`` [bit] of the asynchronous round ``T_k = A_k + C_k / R_k(b_k)``.

    ``A_k = L_k tau_k + T_ver(L_k + 1) + T_fb + T_acc``; ``S_k`` is the scenario's payload per
    token unless ``bits_per_token`` is given. Shapes ``[..., K]``.
    """
    L = np.asarray(L, dtype=float)
    S = scenario.payload.bits_per_token if bits_per_token is None else np.asarray(bits_per_token, dtype=float)
    return async_round_time(scenario, L, 0.0), L * S


def async_goodput(scenario: Scenario, L, tokens, b, rates: RateModel | None = None):
    """The asynchronous goodput kernel ``sum_k N_k / (A_k + C_k / R_k(b_k))`` [token/s] (all ``[..., K]``)."""
    rates = rates or RateModel.of(scenario)
    A, C = async_terms(scenario, L)
    with np.errstate(divide="ignore", invalid="ignore"):
        up = np.where(C > 0, C / rates.rate(b), 0.0)
    return np.sum(np.asarray(tokens) / (A + up), axis=-1)


def evaluate(scenario: Scenario, alloc: Allocation, round_model: str | None = None) -> Evaluation:
    """Goodput and phase times of ``alloc`` under its round model (or ``round_model``).

    One evaluator for both papers: a paper-1 allocation (``modes is None``) is the all-UL case of
    paper 2, whose round adds the DL phase ``E = max_{k in DL} (c_k + d_k / r_k(p_k))``
    (:mod:`spinlib.modes`). Every solver's reported goodput equals this function's (tested).
    """
    from .acceptance import accept_all_table
    from .modes import downlink_finish_times, mode_payload, parse_modes

    check_allocation(scenario, alloc)
    model = round_model or alloc.round_model
    if model not in ROUND_MODELS:
        raise ValidationError(f"round_model must be one of {ROUND_MODELS}, got {model!r}")
    if alloc.modes is not None and model != "sync":
        raise ValidationError("UL/DL allocations use the synchronous round: round_model must be 'sync'")
    K = scenario.num_users
    L, b = alloc.L, alloc.b
    table = tokens_table(scenario, int(L.max()))
    N = table[np.arange(K), L]
    ul = np.ones(K, dtype=bool) if alloc.modes is None else parse_modes(alloc.modes, K)
    pi = None if ul.all() else accept_all_table(table)
    S, _, _ = mode_payload(scenario, L, ul, pi)
    t_draft = L * scenario.tau
    t_up = uplink_time(scenario, L, b, bits_per_token=S)
    t_dl = None
    if model == "sync":
        D = float(np.max(t_draft + t_up))
        E = 0.0
        if alloc.modes is not None:
            t_dl = downlink_finish_times(scenario, L, ul, np.array(alloc.dl_power_w), pi)
            E = float(np.max(t_dl))
        G = float(sync_goodput(scenario, L, N, D, E))
        T = float(_sync_time(D, scenario.server.verification_time(float(L.sum()) + K), fixed_round_overhead(scenario), E))
        Tk = np.full(K, T)
        t_ver = float(scenario.server.verification_time(L.sum() + K))
        t_ver_k = np.full(K, t_ver)
        util = t_ver / T
    else:
        Tk = async_round_time(scenario, L, t_up)
        t_ver_k = scenario.server.verification_time(L + 1)
        G = float(async_goodput(scenario, L, N, b))
        util = float(np.sum(t_ver_k / Tk))
    for phase, arr in (("uplink", t_up), ("downlink", t_dl), ("round", Tk)):
        if arr is None:
            continue
        bad = np.flatnonzero(~np.isfinite(np.atleast_1d(np.asarray(arr, dtype=float))))
        if bad.size:
            k = int(bad[0])
            raise ValidationError(
                f"user {k}: {phase} time is not finite (bandwidth_hz[{k}] = {alloc.bandwidth_hz[k]!r}"
                + ("" if alloc.dl_power_w is None else f", dl_power_w[{k}] = {alloc.dl_power_w[k]!r}")
                + "): too small to carry its payload")
    return Evaluation(
        round_model=model,
        goodput_tokens_per_s=G,
        user_goodput=N / Tk,
        expected_tokens=N,
        draft_time_s=t_draft,
        uplink_time_s=t_up,
        verification_time_s=t_ver_k,
        feedback_time_s=scenario.feedback_time_s,
        access_latency_s=scenario.radio.access_latency_s,
        round_time_s=Tk,
        server_utilisation=util,
        capacity_limited_goodput=G / max(1.0, util),
        downlink_time_s=t_dl,
        modes=None if alloc.modes is None else tuple(alloc.modes),
    )
