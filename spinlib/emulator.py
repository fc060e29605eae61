"""A discrete-event testbed: the whole system played out round by round on a virtual clock.

The analysis (:mod:`spinlib.rounds`, :mod:`spinlib.uldl`) predicts goodput from averages. The
emulator executes an allocation (from any policy) instead:

* **acceptances** are drawn per round and user -- ``"iid"``: ``P(A >= i) = alpha^i``;
  ``"profile"``: ``P(A >= i) = pi_i`` from the user's measured prefix profile -- or taken from
  **real speculative decoding** (``real_models=PAIR``): every user runs the packaged draft and
  target on its own Spec-Bench prompt with the engine of :mod:`spinlib.sd.engine`, and the
  emulator replays the engine's rounds (accepted counts, tokens and the bits actually produced
  in UL or DL mode). Round contents do not depend on timing for a fixed allocation, so replaying
  each user's trace is the same as interleaving the users' rounds;
* **transfers** take the time the rate model gives for the bits of that round, with the
  allocation's bandwidth / power and the **channel of that round** (block fading: ``"static"``,
  ``"rayleigh"`` -- a new exponential power gain per round and user -- or ``"markov"`` -- a
  two-state Gilbert-Elliott channel per user, see :class:`Fading`);
* **verification**: synchronous policies verify every user's draft in one batch per round,
  ``T_ver(sum_k (L_k + 1))``; asynchronous policies send each draft to the server on arrival,
  where ``server="batch"`` (default) is one server that verifies, whenever it becomes free, all
  drafts that have arrived, in one pass ``T_ver(sum (L_i + 1))`` (dynamic batching, with
  queueing), and ``server="ideal"`` gives every draft its own server (no queueing: the
  assumption of the analytical model B);
* **compute times** come from the calibrated latency model (``tau_k``, ``t0 + t1 N``) or, in real
  mode with ``compute="measured"``, from the engine's measured times on this machine, the draft
  time scaled by each device's speed factor ``tau_k / min_j tau_j`` (the fastest device drafts
  at this machine's speed) and the batch's verification as the sum of the measured passes.

In real mode, synchronous policies run :func:`spinlib.sd.batched.batched_sync_generate`: every
round, each user drafts with its own cached draft model and the target verifies all users'
drafts in **one batched forward pass** (left-padded rows, no target cache across rounds);
asynchronous policies run each user's own engine (one cached target pass per draft, as the
server verifies drafts on arrival). The batch's *time* comes from ``T_ver`` (``compute="model"``)
or from the measured pass (``compute="measured"``).
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from .acceptance import prefix_table, sample_accepted
from .channel import RateModel
from .rounds import Allocation, check_allocation, evaluate, fixed_round_overhead
from .scenario import Scenario, ValidationError, check_int_range, check_nonnegative

FADING_MODELS = ("static", "rayleigh", "markov")
ACCEPTANCE_MODELS = ("iid", "profile")
SERVER_MODELS = ("batch", "ideal")
COMPUTE_MODELS = ("model", "measured")


@dataclass(frozen=True)
class Fading:
    """Block fading: one power-gain factor ``h[r, k]`` per round and user, multiplying ``g_k``.

    ``"static"``: ``h = 1``. ``"rayleigh"``: ``h = max(X, 10^(floor_db/10))``, ``X ~ Exp(1)``
    i.i.d.: without a floor ``E[1/h]`` diverges (``1/R ~ 1/h`` in a deep fade), so the mean round
    time of any policy that uploads would be infinite; the floor (default -20 dB, i.e. fades
    deeper than 20 dB are absorbed by power control / link adaptation) keeps it finite and is a
    modelling choice reported with the results. ``"markov"``: a
    two-state chain per user, good (``h = 1``) and bad (``h = 10^(-bad_db/10)``), switching
    good -> bad with probability ``p_good_to_bad`` and back with ``p_bad_to_good`` per round,
    started from its stationary law. Uplink and downlink see the same ``h`` (reciprocity).
    """

    model: str = "static"
    floor_db: float = -20.0
    bad_db: float = 10.0
    p_good_to_bad: float = 0.1
    p_bad_to_good: float = 0.3

    def __post_init__(self) -> None:
        if self.model not in FADING_MODELS:
            raise ValidationError(f"fading must be one of {FADING_MODELS}, got {self.model!r}")
        check_nonnegative("bad_db", self.bad_db)
        if not (isinstance(self.floor_db, (int, float)) and math.isfinite(self.floor_db) and self.floor_db <= 0):
            raise ValidationError(f"floor_db must be a finite number <= 0, got {self.floor_db!r}")
        for name in ("p_good_to_bad", "p_bad_to_good"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and 0 < v <= 1):
                raise ValidationError(f"{name} must be in (0, 1], got {v!r}")

    def draw(self, rounds: int, K: int, rng: np.random.Generator) -> np.ndarray:
        """``h`` of shape ``[rounds, K]``."""
        if self.model == "static":
            return np.ones((rounds, K))
        if self.model == "rayleigh":
            return np.maximum(rng.exponential(1.0, (rounds, K)), 10.0 ** (self.floor_db / 10.0))
        pi_bad = self.p_good_to_bad / (self.p_good_to_bad + self.p_bad_to_good)
        bad = np.empty((rounds, K), dtype=bool)
        bad[0] = rng.random(K) < pi_bad
        u = rng.random((rounds, K))
        for r in range(1, rounds):
            bad[r] = np.where(bad[r - 1], u[r] >= self.p_bad_to_good, u[r] < self.p_good_to_bad)
        return np.where(bad, 10.0 ** (-self.bad_db / 10.0), 1.0)


@dataclass(frozen=True)
class EmulatorConfig:
    """What to emulate.

    Parameters
    ----------
    rounds : int
        Synchronous: rounds of the cell. Asynchronous: rounds of every user (>= 2).
    seed : int
        All randomness (acceptances, fading) flows from ``numpy.random.default_rng(seed)``.
    fading : Fading
    acceptance : {"iid", "profile"}
        Synthetic acceptances (ignored in real mode).
    server : {"batch", "ideal"}
        Asynchronous policies only (see the module docstring).
    real_models : str or None
        A same-tokenizer pair of :data:`spinlib.sd.models.PAIRS` for real speculative decoding.
    temperature : float
        Real mode: 0 (greedy) or the sampling temperature.
    compute : {"model", "measured"}
        Real mode: compute times from the latency model or measured by the engine.
    timeline_rounds : int
        Rounds (sync) or server batches (async) kept in the per-phase timeline.
    """

    rounds: int = 1000
    seed: int = 0
    fading: Fading = field(default_factory=Fading)
    acceptance: str = "iid"
    server: str = "batch"
    real_models: str | None = None
    temperature: float = 0.0
    compute: str = "model"
    timeline_rounds: int = 12

    def __post_init__(self) -> None:
        check_int_range("rounds", self.rounds, 2)
        check_int_range("seed", self.seed, 0)
        check_int_range("timeline_rounds", self.timeline_rounds, 0)
        if not isinstance(self.fading, Fading):
            raise ValidationError("fading must be a Fading")
        for name, allowed in (("acceptance", ACCEPTANCE_MODELS), ("server", SERVER_MODELS),
                              ("compute", COMPUTE_MODELS)):
            if getattr(self, name) not in allowed:
                raise ValidationError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        check_nonnegative("temperature", self.temperature)
        if self.compute == "measured" and self.real_models is None:
            raise ValidationError("compute='measured' needs real_models (the engine measures the times)")


@dataclass
class EmulationResult:
    """What the testbed measured (arrays over users have shape [K])."""

    goodput_tokens_per_s: float
    ci_low: float
    ci_high: float
    predicted_tokens_per_s: float  # the analytical model's goodput for the same allocation
    user_goodput: np.ndarray
    tokens_per_round: np.ndarray  # [K] mean tokens per round
    round_time_s: np.ndarray  # all round durations (sync: [R]; async: every user's rounds)
    token_latency_s: np.ndarray  # [K] elapsed time / tokens
    phase_shares: dict  # phase -> share of the elapsed time
    server_utilisation: float
    rounds: int
    timeline: list = field(default_factory=list)  # {"user", "phase", "start", "end"}
    outputs: list | None = None  # real mode: each user's emitted token ids
    info: dict = field(default_factory=dict)

    @property
    def relative_error(self) -> float:
        """``(emulated - predicted) / predicted``."""
        return self.goodput_tokens_per_s / self.predicted_tokens_per_s - 1.0

    def to_dict(self) -> dict:
        out = {}
        for k, v in self.__dict__.items():
            out[k] = v.tolist() if isinstance(v, np.ndarray) else v
        out["relative_error"] = self.relative_error
        return out


# ----------------------------------------------------------------------------------------------
# Per-round inputs: acceptances (synthetic or replayed) and bits
# ----------------------------------------------------------------------------------------------
@dataclass
class _Trace:
    """Per-round, per-user inputs of the timing: ``[R, K]`` arrays."""

    drafted: np.ndarray
    accepted: np.ndarray
    bits_up: np.ndarray
    bits_down: np.ndarray  # distribution bits going down (DL mode), without the feedback
    draft_s: np.ndarray
    verify_s: np.ndarray | None = None  # measured per-user verification pass (real mode)
    outputs: list | None = None


def synthetic_trace(scenario: Scenario, alloc: Allocation, cfg: EmulatorConfig, rng) -> _Trace:
    from .modes import mode_payload, parse_modes

    L = alloc.L
    R, K = cfg.rounds, scenario.num_users
    pi = prefix_table(scenario, max(int(L.max()), 1), cfg.acceptance)
    A = sample_accepted(L, pi, R, rng)
    drafted = np.broadcast_to(L, (R, K))
    if alloc.modes is None:
        up = drafted * scenario.payload.bits_per_token
        down = np.zeros((R, K))
    else:  # uplink as the model (spinlib.uldl); downlink: this round's realised payload
        ul = parse_modes(alloc.modes, K)
        S, _, _ = mode_payload(scenario, L, ul, pi)
        up = drafted * S
        dist = scenario.payload.distribution_bits
        if scenario.downlink.variant == "reject":
            down_dl = np.where(A < drafted, dist, 0.0)
        else:
            down_dl = (drafted + 1.0) * dist
        down = np.where(ul | (drafted == 0), 0.0, down_dl)
    return _Trace(drafted=drafted, accepted=A, bits_up=up.astype(float), bits_down=down.astype(float),
                  draft_s=drafted * scenario.tau)


REAL_TASKS = ("qa", "math_reasoning", "translation", "summarization", "mt_bench", "rag")


def real_prompts(num_users: int) -> list[str]:
    """User k's prompt in real mode: Spec-Bench task ``REAL_TASKS[k % 6]``, its ``k // 6``-th prompt."""
    from .sd.prompts import load_spec_bench

    out = []
    for k in range(num_users):
        recs = load_spec_bench(REAL_TASKS[k % len(REAL_TASKS)], k // len(REAL_TASKS) + 1)
        out.append(recs[k // len(REAL_TASKS)]["prompt"])
    return out


def real_trace(scenario: Scenario, alloc: Allocation, cfg: EmulatorConfig, progress: bool = False) -> _Trace:
    """Every user runs the real pair on its own prompt (Spec-Bench, tasks cycled) for
    ``cfg.rounds`` rounds of its draft length (synchronous policies: all users together, one
    batched target pass per round); the rounds are replayed on the emulator's clock."""
    import torch
    from tqdm import tqdm

    from .scenario import Payload
    from .sd.engine import speculative_generate
    from .sd.models import PACKAGED, get_pair, load_pair
    from .sd.prompts import encode

    pair = get_pair(cfg.real_models)
    if not pair.installed():
        raise ValidationError(f"pair {cfg.real_models!r} needs {PACKAGED[pair.target].install}")
    if alloc.modes is not None and scenario.downlink.variant != "reject":
        raise ValidationError("real mode implements the DL variant 'reject' only")
    V = PACKAGED[pair.target].vocab_size
    pay = scenario.payload
    payload = Payload(V, pay.mode, pay.bits_per_prob, min(pay.top_k, V))
    target, draft, tok = load_pair(pair.name)
    K, R = scenario.num_users, cfg.rounds
    prompts = real_prompts(K)
    cols = {n: np.zeros((R, K)) for n in ("drafted", "accepted", "bits_up", "bits_down", "draft_s", "verify_s")}
    outputs, done = [], np.full(K, R)
    modes = alloc.modes or ("UL",) * K
    ids_all = [encode(tok, prompts[k], chat=True) for k in range(K)]
    if alloc.round_model == "sync":  # one real batched target pass per round for all users
        from .sd.batched import batched_sync_generate

        outputs, recs, _ = batched_sync_generate(
            target, draft, ids_all, [int(x) for x in alloc.draft_lengths], R, temperature=cfg.temperature,
            seed=cfg.seed, modes=[m.lower() for m in modes], payload=payload,
            pad_id=tok.pad_token_id if tok.pad_token_id is not None else 0)
    else:  # asynchronous: each user's own rounds, verified one draft at a time
        recs = []
        for k in tqdm(range(K), desc="real users", disable=not progress, leave=False):
            L = int(alloc.draft_lengths[k])
            out, rr = speculative_generate(target, draft, ids_all[k], max_new_tokens=R * (L + 1), draft_length=L,
                                           temperature=cfg.temperature,
                                           generator=torch.Generator().manual_seed(cfg.seed + k),
                                           mode=modes[k].lower(), payload=payload)
            outputs.append(out)
            recs.append(rr)
    for k, rr in enumerate(recs):
        n = min(len(rr), R)
        done[k] = n
        for j, r in enumerate(rr[:n]):
            cols["drafted"][j, k] = r.drafted
            cols["accepted"][j, k] = r.accepted
            cols["bits_up"][j, k] = r.bits_up
            # the engine's downlink bits include the feedback (count + id), which T_fb covers
            cols["bits_down"][j, k] = max(0.0, r.bits_down - payload.feedback_bits) if modes[k] == "DL" else 0.0
            cols["draft_s"][j, k] = r.draft_s
            cols["verify_s"][j, k] = r.verify_s
    n_rounds = int(done.min())
    if n_rounds < 2:
        raise ValidationError("a real user finished in fewer than 2 rounds; raise rounds or change prompts")
    cut = {n: v[:n_rounds] for n, v in cols.items()}
    if cfg.compute == "model":
        cut["draft_s"] = cut["drafted"] * scenario.tau
        cut["verify_s"] = None
    else:  # measured on this machine, scaled by each device's speed factor tau_k / min_j tau_j
        cut["draft_s"] = cut["draft_s"] * (scenario.tau / scenario.tau.min())
    if cut["verify_s"] is not None and alloc.round_model == "sync":
        cut["verify_s"] = cut["verify_s"] / K  # every user's record holds the whole batch's time
    t = _Trace(drafted=cut["drafted"].astype(int), accepted=cut["accepted"].astype(int), bits_up=cut["bits_up"],
               bits_down=cut["bits_down"], draft_s=cut["draft_s"], verify_s=cut["verify_s"], outputs=outputs)
    return t


# ----------------------------------------------------------------------------------------------
# Timing
# ----------------------------------------------------------------------------------------------
def _transfer_times(scenario: Scenario, alloc: Allocation, tr: _Trace, h: np.ndarray):
    """Uplink ``[R, K]`` and downlink ``[R, K]`` times under the round's channel ``h``."""
    from .channel import downlink_rate

    # the scenario's rate model with this round's SNR scale a_k h (the linear model's efficiency
    # at the equal share is recomputed from the faded SNR)
    R_up = RateModel(scenario.radio.rate_model, scenario.snr_scale_hz * h, scenario.radio.bandwidth_hz).rate(alloc.b)
    with np.errstate(divide="ignore", invalid="ignore"):
        up = np.where(tr.bits_up > 0, tr.bits_up / R_up, 0.0)
    down = np.zeros_like(up)
    corr = np.zeros_like(up)
    if alloc.modes is not None:
        from .modes import parse_modes

        ul = parse_modes(alloc.modes, scenario.num_users)
        n_dl = int(np.count_nonzero(~ul & (alloc.L > 0)))
        r_dl = downlink_rate(scenario, np.array(alloc.dl_power_w), n_dl, fading=h)
        with np.errstate(divide="ignore", invalid="ignore"):
            down = np.where(tr.bits_down > 0, tr.bits_down / r_dl, 0.0)
        if scenario.downlink.variant == "reject":
            corr = np.where(tr.bits_down > 0, scenario.downlink.correction_time_s, 0.0)
        else:
            corr = np.where(~ul[None, :] & (tr.drafted > 0), scenario.downlink.correction_time_s, 0.0)
    return up, down + corr


def _ratio_ci(num: np.ndarray, den: np.ndarray, confidence: float):
    """``sum num / sum den`` with a delta-method interval over i.i.d. pairs (rounds)."""
    from scipy.stats import norm

    n = num.size
    G = num.sum() / den.sum()
    resid = num - G * den
    half = norm.ppf(0.5 + confidence / 2) * resid.std(ddof=1) / (np.sqrt(n) * den.mean())
    return float(G), float(G - half), float(G + half)


def _emulate_sync(scenario, alloc, tr, h, cfg, confidence):
    R, K = tr.drafted.shape
    up, dl = _transfer_times(scenario, alloc, tr, h)
    ready = tr.draft_s + up  # [R, K]
    D = ready.max(axis=1)
    srv = scenario.server
    if tr.verify_s is not None:
        t_ver = tr.verify_s.sum(axis=1)  # measured: the users' shares of the round's batched pass
    else:
        t_ver = srv.t0_s + srv.t1_s_per_token * (tr.drafted.sum(axis=1) + K)
    E = dl.max(axis=1)
    over = fixed_round_overhead(scenario)
    T = D + t_ver + E + over
    N = tr.accepted + 1  # [R, K]
    G, lo, hi = _ratio_ci(N.sum(axis=1).astype(float), T, confidence)
    total = T.sum()
    timeline = []
    t = 0.0
    for r in range(min(cfg.timeline_rounds, R)):
        for k in range(K):
            timeline.append({"user": k, "phase": "draft", "start": t, "end": t + tr.draft_s[r, k]})
            timeline.append({"user": k, "phase": "uplink", "start": t + tr.draft_s[r, k], "end": t + ready[r, k]})
            v0 = t + D[r]
            timeline.append({"user": k, "phase": "verify", "start": v0, "end": v0 + t_ver[r]})
            if dl[r, k] > 0:
                timeline.append({"user": k, "phase": "downlink", "start": v0 + t_ver[r],
                                 "end": v0 + t_ver[r] + dl[r, k]})
            timeline.append({"user": k, "phase": "feedback+access", "start": t + T[r] - over, "end": t + T[r]})
        t += T[r]
    shares = {"draft+uplink (makespan)": float(D.sum() / total), "verification": float(t_ver.sum() / total),
              "downlink": float(E.sum() / total), "feedback+access": float(R * over / total),
              "draft (mean user)": float(tr.draft_s.mean(axis=1).sum() / total),
              "uplink (mean user)": float(up.mean(axis=1).sum() / total)}
    tokens = N.sum(axis=0)
    return dict(G=G, lo=lo, hi=hi, user_goodput=tokens / total, tokens_per_round=N.mean(axis=0),
                round_time_s=T, token_latency_s=total / tokens, phase_shares=shares,
                server_utilisation=float(t_ver.sum() / total), timeline=timeline)


def _emulate_async(scenario, alloc, tr, h, cfg, confidence):
    R, K = tr.drafted.shape
    up, _ = _transfer_times(scenario, alloc, tr, h)
    pre = tr.draft_s + up  # [R, K] drafting + upload of each user's round j
    srv = scenario.server
    if tr.verify_s is not None:
        ver = tr.verify_s
    else:
        ver = srv.t0_s + srv.t1_s_per_token * (tr.drafted + 1.0)
    over = fixed_round_overhead(scenario)
    N = (tr.accepted + 1).astype(float)
    wait = np.zeros((R, K))
    ver_used = np.array(ver, dtype=float, copy=True)
    timeline = []
    busy = 0.0
    if cfg.server == "ideal":
        dur = pre + ver + over
        elapsed = dur.sum(axis=0)
        busy = float(ver.sum())
    else:
        positions = tr.drafted + 1.0
        heap = [(pre[0, k], k) for k in range(K)]
        heapq.heapify(heap)
        j = np.zeros(K, dtype=int)  # round in progress per user
        elapsed = np.zeros(K)
        free = 0.0
        n_batch = 0
        while heap:
            t_arr, k = heapq.heappop(heap)
            start = max(free, t_arr)
            batch = [(t_arr, k)]
            while heap and heap[0][0] <= start:
                batch.append(heapq.heappop(heap))
            if tr.verify_s is not None:
                t_ver = float(sum(ver[j[i], i] for _, i in batch))
            else:
                t_ver = srv.t0_s + srv.t1_s_per_token * float(sum(positions[j[i], i] for _, i in batch))
            end = start + t_ver
            busy += t_ver
            for t_i, i in batch:
                wait[j[i], i] = start - t_i
                ver_used[j[i], i] = t_ver
                if n_batch < cfg.timeline_rounds:
                    r0 = t_i - pre[j[i], i]
                    timeline += [{"user": i, "phase": "draft", "start": r0, "end": r0 + tr.draft_s[j[i], i]},
                                 {"user": i, "phase": "uplink", "start": r0 + tr.draft_s[j[i], i], "end": t_i},
                                 {"user": i, "phase": "queue", "start": t_i, "end": start},
                                 {"user": i, "phase": "verify", "start": start, "end": end},
                                 {"user": i, "phase": "feedback+access", "start": end, "end": end + over}]
                j[i] += 1
                if j[i] < R:
                    heapq.heappush(heap, (end + over + pre[j[i], i], i))
                else:
                    elapsed[i] = end + over
            free = end
            n_batch += 1
        dur = pre + wait + ver_used + over
    tokens = N.sum(axis=0)
    user_G = tokens / elapsed
    # CI: per-round goodput samples sum_k N_rk / dur_rk ... as a ratio per user, summed
    from scipy.stats import norm

    z = norm.ppf(0.5 + confidence / 2)
    var = 0.0
    for k in range(K):
        g = tokens[k] / elapsed[k]
        resid = N[:, k] - g * dur[:, k]
        var += resid.var(ddof=1) / (R * dur[:, k].mean() ** 2)
    half = z * math.sqrt(var)
    G = float(user_G.sum())
    span = float(elapsed.max())
    shares = {"draft": float(np.mean(tr.draft_s.sum(0) / elapsed)), "uplink": float(np.mean(up.sum(0) / elapsed)),
              "queue": float(np.mean(wait.sum(0) / elapsed)), "verification": float(np.mean(ver_used.sum(0) / elapsed)),
              "feedback+access": float(np.mean(R * over / elapsed))}
    return dict(G=G, lo=G - half, hi=G + half, user_goodput=user_G, tokens_per_round=N.mean(axis=0),
                round_time_s=dur.reshape(-1), token_latency_s=elapsed / tokens, phase_shares=shares,
                server_utilisation=float(busy / span) if cfg.server == "batch" else float(np.sum(ver.sum(0) / elapsed)),
                timeline=timeline)


def emulate(scenario: Scenario, alloc: Allocation, cfg: EmulatorConfig | None = None, *,
            confidence: float = 0.99, progress: bool = False) -> EmulationResult:
    """Play ``alloc`` out on ``scenario`` (see the module docstring); returns what was measured.

    The interval is a delta-method confidence interval of the ratio estimator (tokens / time)
    over independent rounds (exact in the static i.i.d. case, approximate under Markov fading,
    whose rounds are correlated).
    """
    cfg = cfg or EmulatorConfig()
    check_allocation(scenario, alloc)
    rng = np.random.default_rng(cfg.seed)
    if cfg.real_models is not None:
        tr = real_trace(scenario, alloc, cfg, progress)
    else:
        tr = synthetic_trace(scenario, alloc, cfg, rng)
    R = tr.drafted.shape[0]
    h = cfg.fading.draw(R, scenario.num_users, rng)
    fn = _emulate_async if (alloc.round_model == "async" and alloc.modes is None) else _emulate_sync
    m = fn(scenario, alloc, tr, h, cfg, confidence)
    return EmulationResult(
        goodput_tokens_per_s=m["G"], ci_low=m["lo"], ci_high=m["hi"],
        predicted_tokens_per_s=evaluate(scenario, alloc).goodput_tokens_per_s,
        user_goodput=m["user_goodput"], tokens_per_round=m["tokens_per_round"], round_time_s=m["round_time_s"],
        token_latency_s=m["token_latency_s"], phase_shares=m["phase_shares"],
        server_utilisation=m["server_utilisation"], rounds=R, timeline=m["timeline"], outputs=tr.outputs,
        info={"round_model": alloc.round_model, "policy": alloc.policy, "fading": cfg.fading.model,
              "acceptance": "real" if cfg.real_models else cfg.acceptance, "server": cfg.server},
    )
