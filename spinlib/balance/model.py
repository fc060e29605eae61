"""The BALANCE model: one edge server serving users by autoregressive (AD) or speculative (SD) decoding.

Our reconstruction of the system of BALANCE (arXiv 2608.05926), not the paper's model as written: the published
one differs in its batch-completion latency, its L = 1 drafts, its memory split and its 1/2-approximation. Every class is a frozen dataclass validated at construction:
a bad value raises :class:`~spinlib.scenario.ValidationError` with one line naming the field and
its allowed range. Instances round-trip through JSON (``format: spinlib.balance/1``).

Notation
========

==================  ===========================================================  ===========
symbol              meaning                                                      unit
==================  ===========================================================  ===========
``n_k``             output length of user k                                      token
``T_k``             deadline of user k (request sent -> last token received)     s
``c_k``             communication time of user k (uplink + downlink, FDMA)       s
``alpha_k``         i.i.d. acceptance rate (or a prefix profile ``pi_i``)         --
``m_k^AD, m_k^SD``  KV-cache memory of user k in each mode                       byte
``M``               server memory                                                byte
``W_L, W_S``        weights of the large (target) and small (draft) model        byte
``t_L(N)``          large-model forward over N token positions ``t0_L + t1_L N``  s
``t_S(b)``          small-model step for a batch of b sequences ``t0_S + t1_S b``  s
``L``               draft length of the SD batch                                 token
``phi``             share of server compute given to the AD batch (1 - phi: SD)  --
``a, s``            AD and SD batch sizes (number of users in each mode)         users
``N_k``             expected tokens per SD round ``1 + sum_{i<=L} pi_i``          token
==================  ===========================================================  ===========

Model (all deterministic, expected values for SD)
=================================================

Time-shared compute: a step that takes ``t`` on the whole server takes ``t / phi`` on the AD
side and ``t / (1 - phi)`` on the SD side. The AD batch makes one large-model step per token;
the SD batch makes rounds of ``L`` small-model steps plus one verification of ``L + 1``
positions per user:

    tau_AD(a, phi)      = t_L(a) / phi                                    [s/token]
    R_SD(s, phi)        = (L t_S(s) + t_L(s (L + 1))) / (1 - phi)         [s/round]
    completion of k     = c_k + n_k tau_AD(a, phi)           (k in AD)
                        = c_k + n_k R_SD(s, phi) / N_k       (k in SD)

A schedule (a mode per user in {"off", "AD", "SD"} and phi in [0, 1]) is feasible when every
served user completes by its deadline and

    1[a + s > 0] W_L + 1[s > 0] W_S + sum_{k in AD} m_k^AD + sum_{k in SD} m_k^SD <= M

(the large model is loaded when anyone is served, the draft model when anyone is in SD).

The objective is the number of users served. :func:`feasible` checks a schedule exactly (all the
above, with a relative tolerance of ``TOL`` on the time and memory comparisons).
"""
from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..jsonio import read_json, write_json
from ..validation import (ValidationError, check_alpha, check_int_range, check_keys, check_real, field_names,
                          required_fields)

SERVING_MODES = ("off", "AD", "SD")
FORMAT = "spinlib.balance/1"
TOL = 1e-9  # relative tolerance of the deadline and memory comparisons in feasible()
MAX_USERS = 100_000
MAX_DRAFT_LENGTH = 32

# Allowed ranges [lo, hi] of the fields (SI units); "lo_open" ranges exclude lo. One line names them.
BALANCE_RANGES = {
    "output_tokens": (1, 1_000_000),
    "deadline_s": (0.0, 1e6),  # > 0
    "kv_ad_bytes": (0.0, 1e15), "kv_sd_bytes": (0.0, 1e15), "comm_s": (0.0, 1e6),
    "memory_bytes": (1.0, 1e15), "large_weights_bytes": (0.0, 1e15), "small_weights_bytes": (0.0, 1e15),
    "large_t0_s": (0.0, 1e3),  # > 0: a forward pass takes time
    "large_t1_s_per_token": (0.0, 1e3), "small_t0_s": (0.0, 1e3), "small_t1_s_per_token": (0.0, 1e3),
    "draft_length": (1, MAX_DRAFT_LENGTH),
}
_OPEN_LOW = {"deadline_s", "large_t0_s"}


def check_range(name: str, value: Any) -> float:
    """``float(value)`` inside :data:`BALANCE_RANGES` ``[name]`` (open at 0 where it must be > 0), else one line."""
    v = check_real(name, value)
    lo, hi = BALANCE_RANGES[name]
    if name in _OPEN_LOW:
        if not lo < v <= hi:
            raise ValidationError(f"{name} must be in ({lo:g}, {hi:g}], got {v!r}")
    elif not lo <= v <= hi:
        raise ValidationError(f"{name} must be in [{lo:g}, {hi:g}], got {v!r}")
    return v


@dataclass(frozen=True)
class BalanceUser:
    """One requesting user.

    Parameters
    ----------
    output_tokens : int
        ``n_k`` [token] in [1, 1e6], tokens to generate.
    deadline_s : float
        ``T_k`` [s] in (0, 1e6], from sending the request to receiving the last token.
    alpha : float
        ``alpha_k`` in [0, 1), i.i.d. acceptance rate of the server's draft/target pair on this user's task.
    kv_ad_bytes, kv_sd_bytes : float
        ``m_k^AD``, ``m_k^SD`` [byte] in [0, 1e15], KV-cache memory of the user in each mode (SD also
        holds the draft model's cache and ``L`` speculative positions).
    comm_s : float
        ``c_k`` [s] in [0, 1e6], uplink + downlink time (:mod:`spinlib.balance.wireless`); 0 = none.
    acceptance_profile : tuple of float, optional
        Prefix profile ``pi_i = P(first i drafts accepted)``, non-increasing in [0, 1]; replaces
        ``alpha`` for the positions it covers (beyond, ``pi_{i+1} = pi_i alpha``).
    name : str
        Free label.
    """

    output_tokens: int
    deadline_s: float
    alpha: float
    kv_ad_bytes: float
    kv_sd_bytes: float
    comm_s: float = 0.0
    acceptance_profile: tuple[float, ...] | None = None
    name: str = ""

    def __post_init__(self) -> None:
        lo, hi = BALANCE_RANGES["output_tokens"]
        object.__setattr__(self, "output_tokens", check_int_range("output_tokens", self.output_tokens, lo, hi))
        for f in ("deadline_s", "kv_ad_bytes", "kv_sd_bytes", "comm_s"):
            object.__setattr__(self, f, check_range(f, getattr(self, f)))
        object.__setattr__(self, "alpha", check_alpha("alpha", self.alpha))
        if self.acceptance_profile is not None:
            if not isinstance(self.acceptance_profile, (list, tuple)) or not self.acceptance_profile:
                raise ValidationError("acceptance_profile must be a non-empty list of values in [0, 1] or null")
            prof = tuple(check_real("acceptance_profile", x) for x in self.acceptance_profile)
            if any(not 0.0 <= x <= 1.0 for x in prof) or any(b > a + 1e-12 for a, b in zip(prof, prof[1:])):
                raise ValidationError("acceptance_profile must hold non-increasing values in [0, 1]")
            object.__setattr__(self, "acceptance_profile", prof)
        if not isinstance(self.name, str):
            raise ValidationError(f"name must be a string, got {type(self.name).__name__}")

    def prefix_probabilities(self, L: int) -> list[float]:
        """``[pi_1, ..., pi_L]``, ``pi_i = P(the first i drafts are accepted)``: the profile where it is given,
        then ``pi_{i+1} = pi_i alpha`` (non-increasing)."""
        prof = list(self.acceptance_profile or ())[:L]
        while len(prof) < L:
            p = (prof[-1] if prof else 1.0) * self.alpha
            prof.append(p)
        return prof

    def tokens_per_round(self, L: int) -> float:
        """``N_k(L) = 1 + sum_{i=1}^{L} pi_i`` [token] (expected tokens of one SD round)."""
        return 1.0 + float(sum(self.prefix_probabilities(L)))


@dataclass(frozen=True)
class BalanceServer:
    """The edge server: memory, the two models' weights and their batch-dependent step times.

    Parameters
    ----------
    memory_bytes : float
        ``M`` [byte] in [1, 1e15].
    large_weights_bytes, small_weights_bytes : float
        ``W_L``, ``W_S`` [byte] in [0, 1e15] (``W_L`` counts when anyone is served, ``W_S`` when some user
        is in SD).
    large_t0_s : float
        ``t0_L`` [s] in (0, 1e3], fixed cost of one large-model forward (weights streamed once).
    large_t1_s_per_token : float
        ``t1_L`` [s/token] in [0, 1e3], cost per token position of a large-model forward.
    small_t0_s, small_t1_s_per_token : float
        ``t0_S`` [s], ``t1_S`` [s/token] in [0, 1e3], the same for one small-model step.
    draft_length : int
        ``L`` [token] in [1, 32], draft length of every SD round.
    name : str
        Free label (models and hardware).
    """

    memory_bytes: float
    large_weights_bytes: float
    small_weights_bytes: float
    large_t0_s: float
    large_t1_s_per_token: float
    small_t0_s: float
    small_t1_s_per_token: float
    draft_length: int = 4
    name: str = ""

    def __post_init__(self) -> None:
        for f in ("memory_bytes", "large_weights_bytes", "small_weights_bytes", "large_t0_s",
                  "large_t1_s_per_token", "small_t0_s", "small_t1_s_per_token"):
            object.__setattr__(self, f, check_range(f, getattr(self, f)))
        lo, hi = BALANCE_RANGES["draft_length"]
        object.__setattr__(self, "draft_length", check_int_range("draft_length", self.draft_length, lo, hi))
        if not isinstance(self.name, str):
            raise ValidationError(f"name must be a string, got {type(self.name).__name__}")

    # ----- step times (broadcast over batch sizes) -------------------------------------------------
    def ad_step_time(self, a):
        """``t_L(a) = t0_L + t1_L a`` [s]: one AD step (one token for each of a users), whole server."""
        return self.large_t0_s + self.large_t1_s_per_token * np.asarray(a, dtype=float)

    def sd_round_time(self, s):
        """``L t_S(s) + t_L(s (L + 1))`` [s]: one SD round for s users, whole server."""
        L = self.draft_length
        s = np.asarray(s, dtype=float)
        return L * (self.small_t0_s + self.small_t1_s_per_token * s) + self.large_t0_s \
            + self.large_t1_s_per_token * s * (L + 1)


@dataclass(frozen=True)
class BalanceInstance:
    """K requesting users and the server. Array views ``[K]`` as properties (``n``, ``T``, ...)."""

    users: tuple[BalanceUser, ...]
    server: BalanceServer
    name: str = ""
    meta: dict = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        users = tuple(self.users)
        if not users:
            raise ValidationError("users must hold at least one user (K >= 1), got 0")
        if len(users) > MAX_USERS:
            raise ValidationError(f"users must hold at most {MAX_USERS:,} users, got {len(users):,}")
        for i, u in enumerate(users):
            if not isinstance(u, BalanceUser):
                raise ValidationError(f"users[{i}] must be a BalanceUser, got {type(u).__name__}")
        if not isinstance(self.server, BalanceServer):
            raise ValidationError(f"server must be a BalanceServer, got {type(self.server).__name__}")
        object.__setattr__(self, "users", users)

    @property
    def num_users(self) -> int:
        return len(self.users)

    def _arr(self, f) -> np.ndarray:
        a = np.array([getattr(u, f) for u in self.users], dtype=float)
        a.flags.writeable = False
        return a

    @functools.cached_property
    def n(self) -> np.ndarray:
        """``[K]`` output tokens."""
        return self._arr("output_tokens")

    @functools.cached_property
    def deadline(self) -> np.ndarray:
        """``[K]`` deadlines [s]."""
        return self._arr("deadline_s")

    @functools.cached_property
    def comm(self) -> np.ndarray:
        """``[K]`` communication times [s]."""
        return self._arr("comm_s")

    @functools.cached_property
    def alpha(self) -> np.ndarray:
        return self._arr("alpha")

    @functools.cached_property
    def kv_ad(self) -> np.ndarray:
        return self._arr("kv_ad_bytes")

    @functools.cached_property
    def kv_sd(self) -> np.ndarray:
        return self._arr("kv_sd_bytes")

    @functools.cached_property
    def tokens_per_round(self) -> np.ndarray:
        """``[K]`` ``N_k(L)`` at the server's draft length."""
        a = np.array([u.tokens_per_round(self.server.draft_length) for u in self.users])
        a.flags.writeable = False
        return a

    def replace(self, **changes) -> "BalanceInstance":
        return dataclasses.replace(self, **changes)

    # ----- JSON ------------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["users"] = list(d["users"])
        for u in d["users"]:
            if u["acceptance_profile"] is not None:
                u["acceptance_profile"] = list(u["acceptance_profile"])
        return {"format": FORMAT, **d}

    @classmethod
    def from_dict(cls, d: Any) -> "BalanceInstance":
        d = dict(check_keys("instance", d, ["format", *field_names(cls)], required=("users", "server")))
        fmt = d.pop("format", FORMAT)
        if fmt != FORMAT:
            raise ValidationError(f"format must be {FORMAT!r}, got {fmt!r}")
        if not isinstance(d["users"], list):
            raise ValidationError(f"users must be a JSON list, got {type(d['users']).__name__}")
        if len(d["users"]) > MAX_USERS:
            raise ValidationError(f"users must hold at most {MAX_USERS:,} users, got {len(d['users']):,}")
        users = []
        for i, u in enumerate(d["users"]):
            u = check_keys(f"users[{i}]", u, field_names(BalanceUser), required=required_fields(BalanceUser))
            try:
                users.append(BalanceUser(**u))
            except ValidationError as e:
                raise ValidationError(f"users[{i}].{e}") from None
        srv = check_keys("server", d["server"], field_names(BalanceServer), required=required_fields(BalanceServer))
        try:
            server = BalanceServer(**srv)
        except ValidationError as e:
            raise ValidationError(f"server.{e}") from None
        name, meta = d.get("name", ""), d.get("meta", {}) or {}
        if not isinstance(name, str):
            raise ValidationError(f"name must be a string, got {type(name).__name__}")
        if not isinstance(meta, dict):
            raise ValidationError(f"meta must be a JSON object, got {type(meta).__name__}")
        return cls(users=tuple(users), server=server, name=name, meta=meta)

    def to_json(self, path: str | Path | None = None, indent: int = 2) -> str:
        return write_json(self.to_dict(), path, indent)

    @classmethod
    def from_json(cls, source: str | Path) -> "BalanceInstance":
        """Load from a JSON string or a path to a JSON file (one-line errors, :func:`~spinlib.jsonio.read_json`)."""
        return cls.from_dict(read_json(source, "instance"))


@dataclass(frozen=True)
class Schedule:
    """Who is served in which mode, and the compute share.

    Parameters
    ----------
    modes : tuple of str
        ``[K]`` one of :data:`SERVING_MODES` per user (``"off"``: not served).
    phi : float
        Share of server compute given to the AD batch, in [0, 1] (``1 - phi`` to the SD batch).
    policy : str
        Name of the policy that produced it.
    info : dict
        Diagnostics (solve details); not part of the schedule's identity.
    """

    modes: tuple[str, ...]
    phi: float
    policy: str = ""
    info: dict = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        modes = tuple(self.modes)
        for i, m in enumerate(modes):
            if m not in SERVING_MODES:
                raise ValidationError(f"modes[{i}] must be one of {SERVING_MODES}, got {m!r}")
        object.__setattr__(self, "modes", modes)
        phi = check_real("phi", self.phi)
        if not 0.0 <= phi <= 1.0:
            raise ValidationError(f"phi must be in [0, 1], got {phi!r}")
        object.__setattr__(self, "phi", phi)

    @property
    def served(self) -> int:
        return sum(m != "off" for m in self.modes)

    @property
    def num_ad(self) -> int:
        return sum(m == "AD" for m in self.modes)

    @property
    def num_sd(self) -> int:
        return sum(m == "SD" for m in self.modes)

    def to_dict(self) -> dict:
        return {"modes": list(self.modes), "phi": self.phi, "policy": self.policy, "served": self.served,
                "num_ad": self.num_ad, "num_sd": self.num_sd, "info": self.info}

    @classmethod
    def from_dict(cls, d: Any) -> "Schedule":
        d = check_keys("schedule", d, ["modes", "phi", "policy", "served", "num_ad", "num_sd", "info"],
                       required=("modes", "phi"))
        if not isinstance(d["modes"], list):
            raise ValidationError(f"modes must be a JSON list, got {type(d['modes']).__name__}")
        sched = cls(tuple(d["modes"]), d["phi"], d.get("policy", ""), d.get("info", {}) or {})
        for k in ("served", "num_ad", "num_sd"):  # derived counts: a file's copy must agree with its modes
            if k in d and (isinstance(d[k], bool) or d[k] != getattr(sched, k)):
                raise ValidationError(f"schedule {k} is {d[k]!r} but its modes give {getattr(sched, k)}")
        return sched

    def to_json(self, path: str | Path | None = None) -> str:
        """The schedule as the JSON document :meth:`from_dict` reads (``balance -o``, ``balance --check``); ``path``
        is a file the user names (its link, if any, is followed and the target replaced atomically)."""
        import json

        from ..jsonio import atomic_write_text, json_default

        text = json.dumps(self.to_dict(), indent=2, default=json_default)
        if path is not None:
            atomic_write_text(Path(path), text + "\n", follow_symlinks=True)
        return text


@dataclass(frozen=True)
class Feasibility:
    """Result of :func:`feasible`: ``ok`` and why not."""

    ok: bool
    memory_bytes: float  # memory the schedule uses (weights + KV)
    completion_s: tuple  # [K] completion time of each served user (nan when off)
    violations: tuple  # one line each

    def __bool__(self) -> bool:
        return self.ok


def feasible(instance: BalanceInstance, schedule: Schedule) -> Feasibility:
    """Exact feasibility of ``schedule`` for ``instance`` (module docstring), user by user.

    Memory: weights + KV of the served users <= M. Time: every served user's completion
    ``c_k + n_k tau`` <= ``T_k`` at the schedule's batch sizes and share (relative tolerance
    :data:`TOL`). A mode given zero share (AD at phi = 0, SD at phi = 1) is a violation.
    """
    if not isinstance(instance, BalanceInstance):
        raise ValidationError(f"instance must be a BalanceInstance, got {type(instance).__name__}")
    if not isinstance(schedule, Schedule):
        raise ValidationError(f"schedule must be a Schedule, got {type(schedule).__name__}")
    K = instance.num_users
    if len(schedule.modes) != K:
        raise ValidationError(f"modes must hold one mode per user ({K}), got {len(schedule.modes)}")
    srv, phi = instance.server, schedule.phi
    a, s = schedule.num_ad, schedule.num_sd
    viol = []
    mem = (srv.large_weights_bytes if a + s > 0 else 0.0) + (srv.small_weights_bytes if s > 0 else 0.0)
    done = []
    for k, (u, m) in enumerate(zip(instance.users, schedule.modes)):
        if m == "off":
            done.append(math.nan)
            continue
        if m == "AD":
            mem += u.kv_ad_bytes
            if phi <= 0.0:
                viol.append(f"user {k}: AD with share phi = 0")
                done.append(math.inf)
                continue
            t = u.comm_s + u.output_tokens * float(srv.ad_step_time(a)) / phi
        else:
            mem += u.kv_sd_bytes
            if phi >= 1.0:
                viol.append(f"user {k}: SD with share 1 - phi = 0")
                done.append(math.inf)
                continue
            t = u.comm_s + u.output_tokens * float(srv.sd_round_time(s)) / (1.0 - phi) \
                / u.tokens_per_round(srv.draft_length)
        done.append(t)
        if t > u.deadline_s * (1 + TOL):
            viol.append(f"user {k}: {m} completes at {t:.6g} s > deadline {u.deadline_s:.6g} s")
    if mem > srv.memory_bytes * (1 + TOL):
        viol.append(f"memory {mem:.6g} B > {srv.memory_bytes:.6g} B")
    return Feasibility(not viol, mem, tuple(done), tuple(viol))


__all__ = ["SERVING_MODES", "FORMAT", "TOL", "BALANCE_RANGES", "BalanceUser", "BalanceServer", "BalanceInstance", "Schedule",
           "Feasibility", "feasible", "check_range"]
