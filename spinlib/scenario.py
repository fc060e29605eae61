"""Configuration of a Multi-SPIN cell: users, radio, server, payload and the whole scenario.

Every class is a frozen dataclass validated at construction: a bad value raises
:class:`ValidationError` naming the field and the allowed range. Scenarios round-trip through
JSON (:meth:`Scenario.to_json`, :meth:`Scenario.from_json`).

Notation (see ``notebooks/01_system_model.ipynb``):

=================  ======================================================  ==========
symbol             meaning                                                 unit
=================  ======================================================  ==========
``tau_k``          draft time per token on user k's device                 s/token
``alpha_k``        i.i.d. acceptance rate of user k's draft/target pair    --
``g_k``            uplink channel gain (path loss and shadowing, linear)   --
``P_k``            uplink transmit power                                   W
``B``              total FDMA uplink bandwidth                             Hz
``N0``             noise power spectral density                            W/Hz
``S``              uplink bits per drafted token (payload model)           bit
``t0, t1``         verification time ``T_ver(N) = t0 + t1 N``               s, s/token
``T_acc``          per-round access latency (grant, core network)          s
``T_fb``           feedback (accepted count + token id) download time      s
``P_BS, W``        downlink power and bandwidth (UL/DL mode selection)     W, Hz
``L_k``            draft length of user k (0: decoded on the server)       token
``b_k``            uplink bandwidth of user k, ``sum_k b_k <= B``           Hz
``R_k(b)``         uplink rate ``b log2(1 + P_k g_k / (N0 b))``              bit/s
``N_k``            tokens per round ``E[N_k](L_k)`` (accepted + 1)          token
``pi_L``           ``P(first L drafts all accepted)`` (prefix profile)      --
``S_k``            uplink bits per drafted token in user k's mode           bit
``d_k, c_k``       expected DL bits and device correction time (DL mode)   bit, s
``p_k, w``         DL power of device k, DL band per DL device ``W/n_DL``   W, Hz
``D``              drafting + uplink makespan ``max_k (L_k tau_k + L_k S_k / R_k(b_k))``  s
``E``              DL phase ``max_{k in DL} (c_k + d_k / r_k(p_k))``         s
``T``              round time ``D + T_ver + E + T_fb + T_acc`` (sync)        s
``G``              goodput ``sum_k N_k / T`` (sync), ``sum_k N_k / T_k`` (async)  token/s
``mu``             Lagrange multiplier of the bandwidth (or power) budget   1/Hz (1/W)
``theta``          Dinkelbach ratio (goodput estimate) of the integer search  token/s
``rho``            server utilisation (share of time verifying)            --
``h_k``            block-fading power-gain factor of user k (mean 1)       --
=================  ======================================================  ==========

Two layers come from other papers and keep those papers' letters where they clash with this
table (the clashes we know of; a symbol not listed means what this table says):

* BALANCE (:mod:`spinlib.balance`) has its own table in :mod:`spinlib.balance.model` (``T_k`` a
  deadline, ``M`` the server memory, ``W_L, W_S`` model weights, ``L`` the SD batch's draft length).
* The online layer (:mod:`spinlib.decision`, :mod:`spinlib.online`: per-round controllers):

=================  ======================================================  ==========
``D``              communication (and access) delay of one round            s
                   (``Outcome.D``, ``RoundCosts.D``; ``D_c`` the critical delay)
``E``              device energy of one round (``Outcome.E``, GELATO's     J
                   ``E(L, R)``)
``S(L)``           prefix survival ``P(first L drafts all accepted)``,     --
                   the table's ``pi_L`` (the stopping rules)
``h``              ``h_k`` as above, except the SpecDec++ rule's            --
                   parameter ``h`` (``specdec++:h=0.7``), its paper's
                   stopping threshold
=================  ======================================================  ==========

Modes are written ``"UL"``/``"DL"`` everywhere.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .jsonio import read_json, write_json
from .validation import (ValidationError, check_alpha, check_int_range, check_keys, check_physical, check_real,
                         field_names, required_fields)


#: the largest vocabulary a payload may name (real ones are below 300,000 tokens)
MAX_VOCAB = 2**31 - 1

def _readonly(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


@dataclass(frozen=True)
class User:
    """One device drafting tokens.

    Parameters
    ----------
    draft_time_s : float
        ``tau_k`` [s/token], time to draft one token on the device (> 0).
    alpha : float
        ``alpha_k`` in [0, 1), i.i.d. acceptance rate of the pair on the user's task.
    channel_gain : float
        ``g_k`` (> 0), linear uplink power gain (``10**(-PL_dB/10)``).
    tx_power_w : float
        ``P_k`` [W] (> 0), uplink transmit power.
    acceptance_profile : tuple of float, optional
        Empirical prefix acceptance ``P(first i drafts all accepted)`` for i = 1, 2, ...;
        non-increasing values in [0, 1]. When given it replaces the i.i.d. model for the
        expected tokens per round (longer drafts than the profile extrapolate with ``alpha``).
    name : str
        Free label (device or task).
    """

    draft_time_s: float
    alpha: float
    channel_gain: float
    tx_power_w: float
    acceptance_profile: tuple[float, ...] | None = None
    name: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "draft_time_s", check_physical("draft_time_s", self.draft_time_s))
        object.__setattr__(self, "alpha", check_alpha("alpha", self.alpha))
        object.__setattr__(self, "channel_gain", check_physical("channel_gain", self.channel_gain))
        object.__setattr__(self, "tx_power_w", check_physical("tx_power_w", self.tx_power_w))
        if self.acceptance_profile is not None:
            prof = tuple(check_real("acceptance_profile", x) for x in self.acceptance_profile)
            if not prof:
                raise ValidationError("acceptance_profile must hold at least one value")
            if any(not 0.0 <= x <= 1.0 for x in prof):
                raise ValidationError("acceptance_profile values must be in [0, 1]")
            if any(b > a + 1e-12 for a, b in zip(prof, prof[1:])):
                raise ValidationError("acceptance_profile must be non-increasing")
            object.__setattr__(self, "acceptance_profile", prof)


@dataclass(frozen=True)
class Radio:
    """The FDMA uplink, the feedback downlink and the per-round access latency.

    Parameters
    ----------
    bandwidth_hz : float
        ``B`` [Hz] (> 0), total uplink bandwidth shared by FDMA.
    noise_psd_w_per_hz : float
        ``N0`` [W/Hz] (> 0), noise power spectral density (noise figure included).
    rate_model : {"shannon", "linear"}
        ``"shannon"``: ``R_k(b) = b log2(1 + P_k g_k / (N0 b))``. ``"linear"``: ``R_k(b) = c_k b``
        with the spectral efficiency frozen at the equal share, ``c_k = log2(1 + P_k g_k K/(N0 B))``.
    access_latency_s : float
        ``T_acc`` [s] (>= 0), fixed latency of every round (grant, core network, processing).
    downlink_rate_bps : float
        [bit/s] (> 0), rate of the feedback downlink (accepted count + one token id).
    """

    bandwidth_hz: float
    noise_psd_w_per_hz: float = 10 ** ((-174 + 9 - 30) / 10)  # -174 dBm/Hz + 9 dB noise figure
    rate_model: str = "shannon"
    access_latency_s: float = 0.02
    downlink_rate_bps: float = 50e6

    def __post_init__(self) -> None:
        object.__setattr__(self, "bandwidth_hz", check_physical("bandwidth_hz", self.bandwidth_hz))
        object.__setattr__(
            self, "noise_psd_w_per_hz", check_physical("noise_psd_w_per_hz", self.noise_psd_w_per_hz)
        )
        if self.rate_model not in ("shannon", "linear"):
            raise ValidationError(f"rate_model must be 'shannon' or 'linear', got {self.rate_model!r}")
        object.__setattr__(
            self, "access_latency_s", check_physical("access_latency_s", self.access_latency_s)
        )
        object.__setattr__(
            self, "downlink_rate_bps", check_physical("downlink_rate_bps", self.downlink_rate_bps)
        )


@dataclass(frozen=True)
class Server:
    """Edge server verification time ``T_ver(N) = t0 + t1 N`` for a batch of N token positions.

    Parameters
    ----------
    t0_s : float
        [s] (>= 0), fixed cost of one target forward pass (weights streamed from memory).
    t1_s_per_token : float
        [s/token] (>= 0), marginal cost per verified position (compute).
    name : str
        Free label (target model and hardware).
    """

    t0_s: float
    t1_s_per_token: float
    name: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "t0_s", check_physical("t0_s", self.t0_s))
        object.__setattr__(
            self, "t1_s_per_token", check_physical("t1_s_per_token", self.t1_s_per_token)
        )

    def verification_time(self, n_positions):
        """``T_ver(N) = t0 + t1 N`` [s]; ``n_positions`` scalar or array."""
        return self.t0_s + self.t1_s_per_token * np.asarray(n_positions, dtype=float)


@dataclass(frozen=True)
class Downlink:
    """The shared downlink that carries target distributions to DL-mode devices (paper 2).

    DL-mode devices split the band ``W`` equally and the base-station power ``P_BS`` as the
    optimiser decides; the downlink gain equals the uplink gain ``g_k`` (reciprocity) and the
    noise PSD is the radio's ``N0``. Rate of DL user k: ``r_k = w log2(1 + p_k g_k / (N0 w))``,
    ``w = W / n_DL``.

    Parameters
    ----------
    power_w : float
        ``P_BS`` [W] (> 0), base-station transmit power shared by the DL-mode devices.
    bandwidth_hz : float
        ``W`` [Hz] (> 0), downlink band for the target distributions.
    correction_time_s : float
        [s] (>= 0), time a device needs to sample one correction from ``norm(max(0, p - q))``
        (an O(V) pass over the vocabulary on the device).
    variant : {"reject", "all"}
        ``"reject"`` (default, DSSD-like): the device uploads ids + ``q(x_i)`` scalars, the server
        runs the accept test and sends ``p`` at the first rejected position only.
        ``"all"``: the device uploads ids only and the server sends all ``L + 1`` target
        distributions; the device runs the test itself.
    """

    power_w: float = 10.0  # 40 dBm, small-cell / edge base station
    bandwidth_hz: float = 20e6
    correction_time_s: float = 0.5e-3
    variant: str = "reject"

    def __post_init__(self) -> None:
        object.__setattr__(self, "power_w", check_physical("power_w", self.power_w))
        object.__setattr__(self, "bandwidth_hz", check_physical("bandwidth_hz", self.bandwidth_hz))
        object.__setattr__(
            self, "correction_time_s", check_physical("correction_time_s", self.correction_time_s)
        )
        if self.variant not in DL_VARIANTS:
            raise ValidationError(f"variant must be one of {DL_VARIANTS}, got {self.variant!r}")


DL_VARIANTS = ("reject", "all")
MAX_USERS = 100_000  # bound on the users a scenario file may hold
FEEDBACK_COUNT_BITS = 8  # the accepted count in every round's feedback
PAYLOAD_MODES = ("ids", "full", "topk")


@dataclass(frozen=True)
class Payload:
    """Uplink bits per drafted token.

    ``ids``: the token id only, ``ceil(log2 V)`` bits (enough for greedy verification).
    ``full``: id plus the full draft distribution, ``ceil(log2 V) + V Q`` bits.
    ``topk``: id plus the top-k entries as (id, probability) pairs, ``ceil(log2 V) + k (ceil(log2 V) + Q)``.

    Parameters
    ----------
    vocab_size : int
        ``V`` (>= 2), vocabulary size of the real tokenizer.
    mode : {"ids", "full", "topk"}
    bits_per_prob : int
        ``Q`` in [1, 64], bits per transmitted probability.
    top_k : int
        ``k`` in [1, V], entries kept in ``topk`` mode.
    """

    vocab_size: int
    mode: str = "topk"
    bits_per_prob: int = 16
    top_k: int = 128

    def __post_init__(self) -> None:
        check_int_range("vocab_size", self.vocab_size, 2, MAX_VOCAB)
        if self.mode not in PAYLOAD_MODES:
            raise ValidationError(f"mode must be one of {PAYLOAD_MODES}, got {self.mode!r}")
        check_int_range("bits_per_prob", self.bits_per_prob, 1, 64)
        check_int_range("top_k", self.top_k, 1, self.vocab_size)

    @property
    def id_bits(self) -> int:
        """``ceil(log2 V)`` bits to name one token."""
        return math.ceil(math.log2(self.vocab_size))

    @property
    def bits_per_token(self) -> float:
        """``S`` [bit] uploaded per drafted token under this payload model."""
        if self.mode == "ids":
            return float(self.id_bits)
        if self.mode == "full":
            return float(self.id_bits + self.vocab_size * self.bits_per_prob)
        return float(self.id_bits + self.top_k * (self.id_bits + self.bits_per_prob))

    @property
    def distribution_bits(self) -> float:
        """Bits of one probability distribution: ``V Q`` (full), ``k (ceil(log2 V) + Q)`` (topk).

        Raises for ``ids``: greedy verification sends no distributions, so there is no UL/DL choice.
        """
        if self.mode == "full":
            return float(self.vocab_size * self.bits_per_prob)
        if self.mode == "topk":
            return float(self.top_k * (self.id_bits + self.bits_per_prob))
        raise ValidationError("payload.mode 'ids' sends no distributions; UL/DL mode selection needs "
                              "payload.mode 'full' or 'topk'")

    @property
    def feedback_bits(self) -> float:
        """Downlink bits per round: accepted count (``FEEDBACK_COUNT_BITS`` = 8) + one token id."""
        return float(FEEDBACK_COUNT_BITS + self.id_bits)


@dataclass(frozen=True)
class Scenario:
    """A whole cell: K users, the radio, the edge server and the payload model.

    Array views (shape ``[K]``) of the user fields are exposed as properties for the vectorised
    models: :attr:`tau`, :attr:`alpha`, :attr:`gain`, :attr:`power`.
    """

    users: tuple[User, ...]
    radio: Radio
    server: Server
    payload: Payload
    name: str = ""
    meta: dict = field(default_factory=dict, compare=False, hash=False)
    downlink: Downlink = field(default_factory=Downlink)

    def __post_init__(self) -> None:
        users = tuple(self.users)
        if len(users) == 0:
            raise ValidationError("users must hold at least one user (K >= 1), got 0")
        for i, u in enumerate(users):
            if not isinstance(u, User):
                raise ValidationError(f"users[{i}] must be a User, got {type(u).__name__}")
        object.__setattr__(self, "users", users)
        for fname, cls in (("radio", Radio), ("server", Server), ("payload", Payload), ("downlink", Downlink)):
            if not isinstance(getattr(self, fname), cls):
                raise ValidationError(f"{fname} must be a {cls.__name__}")

    # ----- vectorised views (cached and read-only: the scenario is immutable) ---------------
    @property
    def num_users(self) -> int:
        return len(self.users)

    @functools.cached_property
    def tau(self) -> np.ndarray:
        """``[K]`` draft time per token [s]."""
        return _readonly(np.array([u.draft_time_s for u in self.users]))

    @functools.cached_property
    def alpha(self) -> np.ndarray:
        """``[K]`` i.i.d. acceptance rates."""
        return _readonly(np.array([u.alpha for u in self.users]))

    @functools.cached_property
    def gain(self) -> np.ndarray:
        """``[K]`` linear channel gains."""
        return _readonly(np.array([u.channel_gain for u in self.users]))

    @functools.cached_property
    def power(self) -> np.ndarray:
        """``[K]`` transmit powers [W]."""
        return _readonly(np.array([u.tx_power_w for u in self.users]))

    @functools.cached_property
    def snr_scale_hz(self) -> np.ndarray:
        """``[K]`` ``a_k = P_k g_k / N0`` [Hz]: SNR at bandwidth b is ``a_k / b``."""
        return _readonly(self.power * self.gain / self.radio.noise_psd_w_per_hz)

    @property
    def feedback_time_s(self) -> float:
        """``T_fb`` [s]: feedback bits over the downlink rate."""
        return self.payload.feedback_bits / self.radio.downlink_rate_bps

    def replace(self, **changes) -> "Scenario":
        """A copy with some fields changed (``radio=``, ``server=``, ``payload=``, ``users=``, ``downlink=``)."""
        return dataclasses.replace(self, **changes)

    # ----- JSON ----------------------------------------------------------------------------
    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        for u in d["users"]:
            if u["acceptance_profile"] is not None:
                u["acceptance_profile"] = list(u["acceptance_profile"])
        return {"format": "spinlib.scenario/1", **d}

    @classmethod
    def from_dict(cls, d: dict) -> "Scenario":
        d = dict(check_keys("scenario", d, ["format", *field_names(cls)], required=("users", "radio", "server", "payload")))
        fmt = d.pop("format", "spinlib.scenario/1")
        if fmt != "spinlib.scenario/1":
            raise ValidationError(f"format must be 'spinlib.scenario/1', got {fmt!r}")
        if not isinstance(d["users"], (list, tuple)):
            raise ValidationError(f"users must be a JSON list, got {type(d['users']).__name__}")
        if len(d["users"]) > MAX_USERS:
            raise ValidationError(f"users must hold at most {MAX_USERS:,} users, got {len(d['users']):,}")
        users = []
        for i, u in enumerate(d["users"]):
            u = dict(check_keys(f"users[{i}]", u, field_names(User), required=required_fields(User)))
            prof = u.get("acceptance_profile")
            if prof is not None:
                if not isinstance(prof, (list, tuple)):
                    raise ValidationError(f"users[{i}].acceptance_profile must be a list or null")
                u["acceptance_profile"] = tuple(prof)
            try:
                users.append(User(**u))
            except ValidationError as e:
                raise ValidationError(f"users[{i}].{e}") from None
        parts = {}
        for fname, klass in (("radio", Radio), ("server", Server), ("payload", Payload), ("downlink", Downlink)):
            if fname not in d:
                continue
            sub = check_keys(fname, d[fname], field_names(klass), required=required_fields(klass))
            try:
                parts[fname] = klass(**sub)
            except ValidationError as e:
                raise ValidationError(f"{fname}.{e}") from None
        name = d.get("name", "")
        if not isinstance(name, str):
            raise ValidationError(f"name must be a string, got {type(name).__name__}")
        meta = d.get("meta", {}) or {}
        if not isinstance(meta, dict):
            raise ValidationError(f"meta must be a JSON object, got {type(meta).__name__}")
        return cls(users=tuple(users), **parts, name=name, meta=meta)

    def to_json(self, path: str | Path | None = None, indent: int = 2) -> str:
        return write_json(self.to_dict(), path, indent)

    @classmethod
    def from_json(cls, source: str | Path) -> "Scenario":
        """Load from a JSON string or a path to a JSON file (one-line errors, :func:`read_json`)."""
        return cls.from_dict(read_json(source, "scenario"))
