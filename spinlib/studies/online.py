"""Studies of notebook 10 (JSON-able results, for :func:`spinlib.cache.cached_call`).

The arena studies (regret, drift, communication-dominated, context, GELATO) run their replicates as
:class:`spinlib.study.Study` tasks (:func:`arena_study`: one record per replicate and controller, resumable);
the claim maps' point functions run one replicate each inside a map's study (:mod:`spinlib.maps`); the
critical-delay and log-growth tables are deterministic, and the intervals are bootstraps over measurements.

A pair's timings and token streams are read by :mod:`spinlib.online.measured` (the medians of its
committed measurements; its committed traces, one stream per task group).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..emulator.fading import Fading
from ..maps import check_axes
from ..timing import median_standard_error
from ..validation import ValidationError
from ..verdicts import log_like
from ..online.arena import ArenaConfig, ArenaResult, Delay, run_arena
from ..online.energy import energy_preset
from ..online.registry import as_spec, cspec
from ..study import Study
from ..online.stopping import (RoundCosts, brute_force_length, critical_delay, critical_delay_iid, iid_survival,
                       large_delay_length, optimal_stopping)
from ..online.measured import pair_streams, pair_timing_records, pair_timings, pooled_survival


#: the key of these studies in the results cache (:func:`spinlib.cache.cache_name`): the module they were
#: first cached under, kept when they moved here
CACHE_NAMESPACE = "spinlib.online.experiments"


def critical_delay_study(pairs, D_grid_s, L_max: int = 12) -> dict:
    """Per pair: the closed-form critical delay (empirical profile and i.i.d. fit ``alpha = S(1)``),
    and the brute-force optimum ``L*(D)`` on a delay grid with the grid's flip point."""
    out = {}
    for pair in pairs:
        tim = pair_timings(pair)
        S = pooled_survival(pair, L_max)
        base = RoundCosts(tim["t_d"], tim["t0"], tim["t1"], 0.0)
        L_star = [brute_force_length(S, RoundCosts(tim["t_d"], tim["t0"], tim["t1"], float(D)))[0] for D in D_grid_s]
        above = [D for D, L in zip(D_grid_s, L_star) if L >= 2]
        out[pair] = {"timings": tim, "survival": S.tolist(), "alpha": float(S[1]),
                     "D_c_profile_s": critical_delay(S, base), "D_c_iid_s": critical_delay_iid(float(S[1]), base),
                     "D_grid_s": [float(d) for d in D_grid_s], "L_star": L_star,
                     "grid_flip_s": float(min(above)) if above else None}
    return out


def critical_delay_two_points(S, t_d: float, T2: float, T3: float) -> float:
    """The critical delay from verification times measured at 2 and 3 positions, without the linear fit:
    ``J(L) = (L t_d + T(L+1) + D) / N(L)`` with ``N(L) = sum_{i<=L} S_i``; ``J(1) = J(2)`` at::

        D_c = [ N1 (2 t_d + T3) - N2 (t_d + T2) ] / (N2 - N1),   N1 = 1 + S1,  N2 = N1 + S2   [s]

    (equal to :func:`~spinlib.online.stopping.critical_delay` when ``T(n) = t0 + t1 n``; ``inf`` when S2 = 0)."""
    S = np.asarray(S, float)
    N1, N2 = 1.0 + S[1], 1.0 + S[1] + S[2]
    if S[2] == 0:
        return math.inf
    return float((N1 * (2 * t_d + T3) - N2 * (t_d + T2)) / (N2 - N1))


def _length_interval(L0: int, reps, confidence: float) -> dict:
    """A point length ``L0`` with its replicates' percentile interval (lengths are integers: the
    inverted-CDF quantile) and the share of replicates equal to it."""
    reps = np.asarray(reps)
    lo, hi = np.quantile(reps, [(1 - confidence) / 2, (1 + confidence) / 2], method="inverted_cdf")
    return {"L": int(L0), "share_same": float(np.mean(reps == L0)), "ci_low": int(lo), "ci_high": int(hi)}


def critical_delay_intervals(pairs, L_max: int = 12, n_boot: int = 400, seed: int = 0,
                             confidence: float = 0.95, verify_repeats: int = 5, lengths_at_s=()) -> dict:
    """The critical delay of each pair with a bootstrap interval carried from the measurements.

    One replicate: the pair's task summaries resampled with replacement; in each, every median
    (draft seconds per token, verification seconds at each size) moved by a normal draw with the
    median's standard error from its quartiles (``verify_repeats`` timed passes per size, the draft's
    own count); the line ``t0 + t1 N`` refitted per task; medians over the resampled tasks (as
    :func:`pair_timings`); the prefix survival pooled over task streams resampled with replacement.
    The interval is the replicates' percentile interval. Beside it, the linear fit's adequacy: its
    RMS residual, and :func:`critical_delay_two_points` from the measured times at 2 positions and
    the interpolation at 3 (no fit). One ``SeedSequence(seed)``, one child per pair.

    For every delay ``D`` [s] in ``lengths_at_s`` the same replicates also give the optimal length
    ``L*(D)`` (:func:`optimal_stopping`): ``out[pair]["L_star_at"][str(D)]`` holds the point
    estimate ``L``, the replicates' percentile interval ``ci_low``/``ci_high`` and ``share_same``,
    the share of replicates whose ``L*`` equals the point estimate's.
    """
    out = {}
    for pair, child in zip(pairs, np.random.SeedSequence(seed).spawn(len(pairs))):
        rng = np.random.default_rng(child)
        tim = pair_timing_records(pair)
        streams = pair_streams(pair)
        runs = [st.cyclic_runs(L_max + 1) for st in streams]

        def survival(idx):
            r = np.concatenate([runs[i] for i in idx])
            return np.array([1.0] + [float(np.mean(r >= i)) for i in range(1, L_max + 1)])

        point = pair_timings(pair)
        S0 = survival(range(len(runs)))
        dc0 = critical_delay(S0, RoundCosts(point["t_d"], point["t0"], point["t1"], 0.0))
        L0 = {D: optimal_stopping(S0, RoundCosts(point["t_d"], point["t0"], point["t1"], float(D)))[0]
              for D in lengths_at_s}
        reps, L_reps = [], {D: [] for D in lengths_at_s}
        for _ in range(n_boot):
            pick = rng.integers(0, len(tim), len(tim))
            t_d, t0, t1 = [], [], []
            for i in pick:
                t = tim[i]
                d = t["draft_spread"]
                t_d.append(d["median_s"] + rng.normal(0.0, median_standard_error(d["q25_s"], d["q75_s"], d["n"])))
                sizes = np.asarray(t["verify_sizes"], float)
                se = median_standard_error(t["verify_fit"]["q25_s"], t["verify_fit"]["q75_s"], verify_repeats)
                y = np.asarray(t["verify_s"], float) + rng.normal(0.0, se)
                b1, b0 = np.polyfit(sizes, y, 1)
                t0.append(b0)
                t1.append(b1)
            S = survival(rng.integers(0, len(runs), len(runs)))
            costs = RoundCosts(max(float(np.median(t_d)), 1e-9), max(float(np.median(t0)), 0.0),
                               max(float(np.median(t1)), 0.0), 0.0)
            reps.append(critical_delay(S, costs))
            for D in lengths_at_s:
                L_reps[D].append(optimal_stopping(S, RoundCosts(costs.t_d, costs.t0, costs.t1, float(D)))[0])
        reps = np.asarray(reps, float)
        lo, hi = np.quantile(reps, [(1 - confidence) / 2, (1 + confidence) / 2])
        T2 = float(np.median([np.interp(2, t["verify_sizes"], t["verify_s"]) for t in tim]))
        T3 = float(np.median([np.interp(3, t["verify_sizes"], t["verify_s"]) for t in tim]))
        out[pair] = {"D_c_s": float(dc0), "ci_low_s": float(lo), "ci_high_s": float(hi), "confidence": confidence,
                     "n_boot": n_boot, "replicates_s": reps.tolist(),
                     "fit_rms_residual_s": float(np.median([t["verify_fit"]["rms_residual_s"] for t in tim])),
                     "D_c_two_points_s": critical_delay_two_points(S0, point["t_d"], T2, T3),
                     "T2_s": T2, "T3_s": T3, "fit_T2_s": point["t0"] + 2 * point["t1"],
                     "fit_T3_s": point["t0"] + 3 * point["t1"],
                     "L_star_at": {str(float(D)): _length_interval(L0[D], L_reps[D], confidence) for D in lengths_at_s}}
    return out


def log_growth_study(pairs, D_values_s, L_cap: int = 400) -> dict:
    """``L*(D)`` of the i.i.d. fit of each pair (``alpha = S(1)``) for large delays, the least-squares
    slope of ``L*`` against ``ln D`` and the law's slope ``1 / ln(1/alpha)``."""
    out = {}
    for pair in pairs:
        tim = pair_timings(pair)
        alpha = float(pooled_survival(pair, 2)[1])
        S = iid_survival(alpha, L_cap)
        L = [optimal_stopping(S, RoundCosts(tim["t_d"], tim["t0"], tim["t1"], float(D)))[0] for D in D_values_s]
        law = [float(large_delay_length(alpha, tim["t0"] + tim["t1"] + D, tim["t_d"] + tim["t1"])) for D in D_values_s]
        slope = float(np.polyfit(np.log(D_values_s), L, 1)[0])
        out[pair] = {"alpha": alpha, "D_s": [float(d) for d in D_values_s], "L_star": L, "law": law,
                     "fitted_slope": slope, "law_slope": 1.0 / math.log(1.0 / alpha)}
    return out


def _curve_stats(sub: np.ndarray, points) -> dict:
    """Mean and 95 % range over seeds of regret curves ``sub`` [seeds, P] kept at the 0-based rounds ``points``."""
    return {"rounds": [int(p) + 1 for p in points], "mean": sub.mean(0).tolist(),
            "lo": np.quantile(sub, 0.025, axis=0).tolist(), "hi": np.quantile(sub, 0.975, axis=0).tolist(),
            "seeds": sub.tolist()}


def curve_points(rounds: int) -> list[int]:
    """The 0-based rounds at which a study keeps regret curves: 40 geometric points over ``1..rounds``."""
    return np.unique(np.geomspace(1, rounds, 40).astype(int) - 1).tolist()


_CURVES = ("regret_fixed_curve", "regret_clairvoyant_curve")


@dataclass(frozen=True)
class ArenaReplicate:
    """One replicate of an arena study (a :class:`~spinlib.study.Study` task): every controller on the pair's
    traces (:func:`~spinlib.online.measured.pair_streams`) under ``config``, on identical inputs drawn from
    the task's seed (:func:`~spinlib.online.arena.run_arena` with ``seed``, one replicate).

    One record per controller: its arena metrics (``controller`` and the metrics of
    :func:`~spinlib.online.arena.run_arena`'s rows), and with ``oracles`` the replicate's best fixed lengths
    in hindsight ``best_fixed_L`` [K] and its regret curves [s] at the 0-based rounds ``curve_rounds``
    (``regret_fixed_curve``, ``regret_clairvoyant_curve``).
    """

    pair: str
    controllers: tuple
    config: ArenaConfig
    oracles: bool = True
    curve_rounds: tuple = ()

    def __call__(self, params: dict, seed: int) -> list[dict]:
        res = run_arena(list(self.controllers), pair_streams(self.pair), self.config, seed=seed, n_seeds=1,
                        oracles=self.oracles)
        idx = list(self.curve_rounds)
        out = []
        for row in res.rows:
            rec = {k: v for k, v in row.items() if k != "seed"}
            if self.oracles:
                lab = row["controller"]
                rec["best_fixed_L"] = list(res.best_fixed_L[0])
                rec["regret_fixed_curve"] = res.regret_fixed[lab][0, idx].tolist()
                rec["regret_clairvoyant_curve"] = res.regret_clairvoyant[lab][0, idx].tolist()
            out.append(rec)
        return out


def arena_study(name: str, pair: str, controllers, config: ArenaConfig, *, n_seeds: int, seed: int,
                oracles: bool = True, curve_rounds=(), n_jobs: int | None = None) -> ArenaResult:
    """``n_seeds`` replicates of an arena run as a :class:`~spinlib.study.Study` (:class:`ArenaReplicate`,
    seeds ``study_seeds(seed, n_seeds)``; records first, resumable, on joblib or Dask), gathered into an
    :class:`~spinlib.online.arena.ArenaResult`: ``rows`` (per seed and controller, ``seed`` the replicate's),
    and with ``oracles`` the regret curves ``[seeds, P]`` at ``curve_rounds`` and the best fixed lengths."""
    specs = tuple(as_spec(c) for c in controllers)
    labels = [sp.title for sp in specs]
    point = ArenaReplicate(pair, specs, config, bool(oracles), tuple(int(r) for r in curve_rounds))
    recs = Study(f"arena-{name}", point, [{"pair": pair}], n_seeds, seed).run(n_jobs=n_jobs)
    extra = {"pair", "best_fixed_L", *_CURVES}
    rows = [{k: v for k, v in r.items() if k not in extra} for r in recs]
    curves = {c: {lab: np.array([r[c] for r in recs if r["controller"] == lab], float).reshape(n_seeds, -1)
                  for lab in labels} if oracles else {} for c in _CURVES}
    best_L = [r["best_fixed_L"] for r in recs if r["controller"] == labels[0]] if oracles else []
    return ArenaResult(config, labels, rows, curves["regret_fixed_curve"], curves["regret_clairvoyant_curve"], best_L)


def _growth_fitter(t, start_fraction: float):
    """The least-squares exponent ``p`` of ``y(t) = a + b t^p`` over ``t >= start_fraction * t[-1]``
    (:func:`regret_exponent`): a function of one curve ``y`` [P] with attribute ``points``."""
    from scipy.optimize import minimize_scalar

    keep = t >= start_fraction * t[-1]
    if keep.sum() < 4:
        raise ValidationError("the regret exponent needs at least 4 curve points in its window")
    x = t[keep] / t[keep][-1]  # scaled time: the fit is well conditioned
    grid = np.linspace(1e-3, 3.0, 300)
    Xg = x[None, :] ** grid[:, None]  # [G, P]
    Xc = Xg - Xg.mean(1, keepdims=True)
    sxx = (Xc ** 2).sum(1)

    def rss_grid(y):
        yc = y - y.mean()
        return (yc @ yc) - (Xc @ yc) ** 2 / sxx  # residual of the best (a, b) at each p

    def rss(p, y):
        xp = x ** p
        xc, yc = xp - xp.mean(), y - y.mean()
        return float(yc @ yc - (xc @ yc) ** 2 / (xc @ xc))

    def fit(y):
        y = np.asarray(y, float)[keep]
        i = int(np.argmin(rss_grid(y)))
        lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
        return float(minimize_scalar(rss, bounds=(lo, hi), args=(y,), method="bounded",
                                     options={"xatol": 1e-5}).x)

    fit.points = int(x.size)
    return fit


def regret_exponent(rounds, curves, *, start_fraction: float = 1 / 32, n_boot: int = 400, seed: int = 0,
                    confidence: float = 0.95) -> dict:
    """The growth of a regret curve: ``R(t) = a + b t^p`` fitted over ``t >= start_fraction * T``.

    Logarithmic growth is the limit ``p -> 0`` of this family (``(t^p - 1) / p -> ln t``), a linear
    regret is ``p = 1``. For a given ``p`` the model is linear in ``(a, b)``, so the least-squares
    ``p`` minimises the profiled residual (variable projection): a grid over ``(0, 3]`` refined by
    a bounded scalar search (``scipy.optimize.minimize_scalar``). ``p`` is fitted to the mean curve
    over seeds and to ``n_boot`` bootstrap resamples of the seeds; the growth is *consistent with
    logarithmic* when the percentile interval of ``p`` reaches down to 0.1 or below (a power law
    ``t^0.1`` grows by 7 % per doubling), and a *power law* otherwise.

    Parameters
    ----------
    rounds : array_like [P]
        Round indices of the curve points (increasing, >= 1).
    curves : array_like [seeds, P]
        Regret [s] at those rounds, one row per seed (at least 2 seeds).

    Returns
    -------
    dict
        ``p`` (mean curve), ``p_lo``, ``p_hi`` (interval), ``points`` used, ``log_like``
        (:func:`spinlib.verdicts.log_like`: the interval's upper bound ``p_hi`` below 0.1; a lower bound
        below 0.1 alone does not make a power law log-like), ``per_doubling`` (the fitted growth factor ``2^p``).
    """
    t = np.asarray(rounds, float)
    Y = np.asarray(curves, float)
    if t.ndim != 1 or Y.ndim != 2 or Y.shape[1] != t.size or Y.shape[0] < 2 or not np.all(np.diff(t) > 0) \
            or not np.all(np.isfinite(Y)) or t[0] < 1:
        raise ValidationError("rounds must be increasing [P], >= 1, and curves finite [seeds >= 2, P]")
    fit = _growth_fitter(t, start_fraction)
    p_mean = fit(Y.mean(0))
    rng = np.random.default_rng(seed)
    boots = np.array([fit(Y[rng.integers(0, Y.shape[0], Y.shape[0])].mean(0)) for _ in range(n_boot)])
    lo, hi = np.quantile(boots, [(1 - confidence) / 2, (1 + confidence) / 2])
    return {"p": p_mean, "p_lo": float(lo), "p_hi": float(hi), "points": fit.points,
            "log_like": log_like(hi).holds, "per_doubling": float(2 ** p_mean)}


def regret_study(pair: str, controllers, *, rounds: int, users: int, n_seeds: int, seed: int, delay_kind: str,
                 delay_s: float, L_max: int = 8, n_jobs: int | None = None) -> dict:
    """The learners and the field's rules on the pair's traces with a random delay (:func:`arena_study`):
    per controller the mean (and 95 % bootstrap interval over seeds) of every arena metric, and regret curves
    at :func:`curve_points`."""
    tim = pair_timings(pair)
    cfg = ArenaConfig(rounds=rounds, users=users, L_max=L_max, delay=Delay(delay_kind, delay_s), **tim)
    points = curve_points(rounds)
    res = arena_study("regret", pair, controllers, cfg, n_seeds=n_seeds, seed=seed, curve_rounds=points, n_jobs=n_jobs)
    summ = res.summary()
    return {"timings": tim, "labels": res.labels, "rows": res.rows,
            "summary": {lab: summ.loc[lab].to_dict() for lab in res.labels},
            "regret_fixed": {lab: _curve_stats(res.regret_fixed[lab], points) for lab in res.labels},
            "regret_clairvoyant": {lab: _curve_stats(res.regret_clairvoyant[lab], points) for lab in res.labels},
            "best_fixed_L": res.best_fixed_L}



def _best(res, specs):
    """The spec among ``specs`` with the highest mean throughput over seeds in the arena result ``res``."""
    summ = res.summary()
    return max(specs, key=lambda sp: float(summ.loc[sp.title, "user_goodput_tokens_per_s"]))


def drift_study(pair: str, *, levels_s, period: int, h_grid, rounds: int, users: int, n_seeds: int, seed: int,
                L_max: int = 8, gamma: float = 0.995, c_extra: float = 1.0, extra_learners=(),
                n_jobs: int | None = None) -> dict:
    """UCB-SpecStop against statically tuned rules under a drifting delay (piecewise means).

    The *static tuning* the paper compares with: the best fixed length and SpecDec++'s best threshold
    ``h`` (over ``h_grid``), tuned offline with an exponential delay at the first level
    ``levels_s[0]``; then every rule runs under the drift (``Delay("piecewise", levels_s, period)``).
    The offline oracle is the best fixed length in hindsight on the drift run (per user); SpecDec++'s
    best threshold in hindsight on the drift run is reported beside its statically tuned one.

    UCB-SpecStop runs with ``c = 1``, with ``c = c_extra`` and discounted (``gamma``); every registered
    controller named in ``extra_learners`` (one with a ``gamma`` parameter) runs plain and discounted too.

    Returns per-seed throughputs [tokens/s] of every controller (``rows``), the tuned ``L0``/``h0``
    and the hindsight ``h`` (``h_hindsight``); ``small_label`` and ``gamma_label`` name the runs
    with ``c_extra`` and with the discount, ``extra_labels[name]`` the plain and discounted runs of
    each extra learner.
    """
    tim = pair_timings(pair)
    common = dict(rounds=rounds, users=users, L_max=L_max, **tim)
    fixed = [cspec("fixed", L=L) for L in range(1, L_max + 1)]
    spd = [cspec("specdec++", h=float(h)) for h in h_grid]
    tune = arena_study("drift-tuning", pair, fixed + spd, ArenaConfig(delay=Delay("exponential", float(levels_s[0])),
                                                                     **common),
                       n_seeds=n_seeds, seed=seed, oracles=False, n_jobs=n_jobs)
    L0 = _best(tune, fixed).kwargs["L"]
    h0 = _best(tune, spd).kwargs["h"]
    drift = Delay("piecewise", levels_s=tuple(float(v) for v in levels_s), period=period)
    spd_drift = [cspec("specdec++", h=h0, label="SpecDec++ (tuned offline)")] + [x for x in spd if x.kwargs["h"] != h0]
    specs = [cspec("fixed", L=L0, label="fixed (tuned offline)"), spd_drift[0],
             cspec("ucb-specstop"), cspec("ucb-specstop", gamma=gamma)] + spd_drift[1:]
    small = cspec("ucb-specstop", c=float(c_extra))
    if c_extra != 1:
        specs.insert(3, small)
    extra = {name: [cspec(name), cspec(name, gamma=gamma)] for name in extra_learners}
    specs += [sp for pair_ in extra.values() for sp in pair_]
    res = arena_study("drift", pair, specs, ArenaConfig(delay=drift, **common), n_seeds=n_seeds, seed=seed,
                      n_jobs=n_jobs)
    best_h = _best(res, spd_drift)
    return {"timings": tim, "levels_s": [float(v) for v in levels_s], "period": int(period), "L0": L0, "h0": h0,
            "h_hindsight": best_h.kwargs["h"], "h_hindsight_label": best_h.title, "gamma": float(gamma),
            "small_label": small.title if c_extra != 1 else "ucb-specstop",
            "gamma_label": cspec("ucb-specstop", gamma=gamma).title, "labels": res.labels,
            "extra_labels": {name: [sp.title for sp in pair_] for name, pair_ in extra.items()},
            "rows": res.rows, "tuning_rows": tune.rows}


def comm_dominated_study(pair: str, *, delays_s, rounds: int, users: int, n_seeds: int, seed: int,
                         L_max: int = 8, controllers=("ucb-specstop",), n_jobs: int | None = None) -> dict:
    """The learners' gap to the offline oracle (best fixed length in hindsight, per user) for long
    exponential delays; per delay the per-seed rows of an :func:`arena_study` (``controllers``: distinct
    specs; the same seeds at every delay)."""
    tim = pair_timings(pair)
    out = {"timings": tim, "delays_s": [float(d) for d in delays_s], "runs": {}}
    for D in delays_s:
        res = arena_study("comm-dominated", pair, list(dict.fromkeys(controllers)),
                          ArenaConfig(rounds=rounds, users=users, L_max=L_max, delay=Delay("exponential", float(D)),
                                      **tim), n_seeds=n_seeds, seed=seed, n_jobs=n_jobs)
        out["runs"][str(float(D))] = res.rows
    return out


def context_study(pair: str, *, levels_s, stay: float, bits_per_token: float, bandwidth_hz: float, snr_db: float,
                  rounds: int, users: int, n_seeds: int, seed: int, L_max: int = 8, c: float = 1.0,
                  n_jobs: int | None = None) -> dict:
    """A Markov-modulated channel: the delay's mean switches between ``levels_s`` (a Markov chain per
    user) and the uplink fades (Gilbert-Elliott, :class:`spinlib.emulator.Fading` ``"markov"``), the
    draft's top-k distribution uploaded per token. UCB-SpecStop with and without channel-state
    information, and the known-statistics rule with the mean costs and with the state-dependent
    threshold (UCB's bonus weight ``c``; the first two labels are the learners). Per-seed rows of an
    :func:`arena_study`."""
    tim = pair_timings(pair)
    cfg = ArenaConfig(rounds=rounds, users=users, L_max=L_max, fading=Fading("markov"),
                      delay=Delay("markov", levels_s=tuple(float(v) for v in levels_s), stay=stay),
                      bits_per_token=bits_per_token, bandwidth_hz=bandwidth_hz, snr_db=snr_db, **tim)
    ucb = [cspec("ucb-specstop", c=float(c)), cspec("ucb-specstop-csi", c=float(c))] if c != 1 else \
        ["ucb-specstop", "ucb-specstop-csi"]
    res = arena_study("context", pair, ucb + ["specstop-known", "specstop-known:csi=state"], cfg, n_seeds=n_seeds,
                      seed=seed, n_jobs=n_jobs)
    return {"timings": tim, "labels": res.labels, "rows": res.rows}


def best_feasible_mixture(N, T, E, budget: float) -> tuple[float, tuple]:
    """Best throughput of a time-sharing of two fixed lengths under an average energy per round.

    ``N, T, E`` [L_max]: mean tokens, seconds and joules per round of each fixed length. A share
    ``p`` of rounds at ``a`` and ``1 - p`` at ``b`` yields ``(p N_a + (1-p) N_b) / (p T_a + (1-p) T_b)``
    tokens/s at ``p E_a + (1-p) E_b`` J per round; the best feasible pair (the budget tight when it
    binds) is returned with ``(a, b, p)`` (lengths 1-based). ``(nan, ())`` when even the cheapest
    length exceeds the budget.
    """
    N, T, E = (np.asarray(x, float) for x in (N, T, E))
    best, arg = -math.inf, ()
    for a in range(N.size):
        for b in range(N.size):
            if E[a] <= budget and E[b] <= budget:
                ps = [1.0]
            elif E[a] <= budget < E[b]:
                ps = [(E[b] - budget) / (E[b] - E[a])]
            else:
                continue
            for p in ps:
                th = (p * N[a] + (1 - p) * N[b]) / (p * T[a] + (1 - p) * T[b])
                if th > best:
                    best, arg = th, (a + 1, b + 1, float(p))
    return (best if arg else math.nan), arg


def fit_inverse_v(V_values, throughput) -> dict:
    """Least-squares fit of ``G(V) = G_inf - b / V`` (the drift-plus-penalty law: throughput within
    O(1/V) of its limit) to a V sweep.

    Parameters
    ----------
    V_values, throughput : array_like, shape [n]
        Penalty weights (> 0) and the measured throughput at each [tokens/s]; n >= 3.

    Returns
    -------
    dict
        ``g_inf`` [tokens/s] and ``b`` [tokens/s x V] of the fit, ``r2`` (share of the variance of
        ``G`` it explains), ``max_abs_residual`` [tokens/s], and ``gap_at`` (the fitted gap
        ``b / V`` at each V). The law holds in the sweep when ``b >= 0`` (the gap shrinks as V grows)
        and ``r2`` is close to 1.
    """
    V = np.asarray(V_values, float)
    G = np.asarray(throughput, float)
    if V.ndim != 1 or V.shape != G.shape or V.size < 3:
        raise ValidationError("V_values and throughput must be 1-D arrays of the same length, at least 3")
    if not (np.all(np.isfinite(V)) and np.all(V > 0) and np.all(np.isfinite(G))):
        raise ValidationError("V_values must be finite and > 0, throughput finite")
    A = np.vstack([np.ones_like(V), -1.0 / V]).T
    (g_inf, b), *_ = np.linalg.lstsq(A, G, rcond=None)
    res = G - A @ np.array([g_inf, b])
    ss = float(np.sum((G - G.mean()) ** 2))
    r2 = 1.0 - float(np.sum(res ** 2)) / ss if ss > 0 else 1.0
    return {"g_inf": float(g_inf), "b": float(b), "r2": r2, "max_abs_residual": float(np.max(np.abs(res))),
            "gap_at": (b / V).tolist()}


def _gelato_setting(pair: str, *, rounds: int, users: int, L_max: int, delay_s: float, energy: str, fading: str):
    """GELATO's arena setting (notebook 10, section 5): the pair's timings and traces, an exponential
    delay, a Rayleigh-faded 200 kHz uplink at 5 dB carrying a top-128 distribution per drafted token."""
    tim = pair_timings(pair)
    em = energy_preset(energy, tim["t_d"])
    common = dict(rounds=rounds, users=users, L_max=L_max, delay=Delay("exponential", delay_s), energy=em,
                  fading=Fading(fading), bits_per_token=16.0 * 128, bandwidth_hz=2e5, snr_db=5.0, **tim)
    return tim, em, pair_streams(pair), common


def _fixed_lengths(streams, common: dict, L_max: int, seed: int, n_seeds: int):
    """Tokens per round, round time [s], energy per round [J] and throughput [token/s], each a list over
    the fixed lengths ``1..L_max``."""
    fixed = run_arena(_fixed_specs(L_max), streams, ArenaConfig(**common), seed=seed, n_seeds=n_seeds, oracles=False)
    return _fixed_columns(fixed, L_max)


def _fixed_specs(L_max: int) -> list:
    return [cspec("fixed", L=L) for L in range(1, L_max + 1)]


def _fixed_columns(fixed: ArenaResult, L_max: int):
    """:func:`_fixed_lengths`' four lists from an arena result of :func:`_fixed_specs`."""
    fs = fixed.summary()
    col = lambda c: [float(fs.loc[f"fixed:L={L}", c]) for L in range(1, L_max + 1)]  # noqa: E731
    return col("tokens_per_round"), col("round_time_s"), col("energy_per_round_j"), col("user_goodput_tokens_per_s")


def budget_between(E, tokens_per_s, frac: float) -> float:
    """An energy budget [J/round] ``frac`` of the way from the energy of ``L = 1`` to that of the fixed
    length with the highest throughput (below it the budget binds)."""
    L_best = int(np.argmax(tokens_per_s))
    return float(E[0] + frac * (E[L_best] - E[0]))


def _settings(cell: dict, pair: str, rounds: int, users: int) -> tuple[str, int, int]:
    """A claim-map point's settings: ``pair``, ``rounds`` and ``users`` from single-valued axes of ``cell``
    where present, else the point function's defaults."""
    return str(cell.get("pair", pair)), int(cell.get("rounds", rounds)), int(cell.get("users", users))


def gelato_gain_point(cell: dict, seed: int, *, pair: str = "qwen-coder", rounds: int = 2000, users: int = 6,
                      L_max: int = 8, V: float = 1.0, eta: float = 3.0) -> dict:
    """GELATO against fixed-length SD (L = 4) and the best energy-feasible mixture of two fixed lengths
    at one point of (energy budget, mean delay), for a claim map (:mod:`spinlib.maps`).

    ``cell``: ``budget_fraction`` (:func:`budget_between`) and ``delay_ms``; ``pair``, ``rounds``,
    ``users``, ``V`` and ``eta`` may come as single-valued axes. Returns ``gain_tput`` (GELATO's
    throughput over fixed L = 4, minus 1), ``gain_energy`` (1 - its energy per token over L = 4's),
    ``gap_mixture`` (its throughput over the best feasible mixture's, minus 1), ``debt_j`` (its energy
    debt per user at the end) and ``budget_j``.
    """
    check_axes("gelato_gain_point", cell, {"budget_fraction", "delay_ms", "pair", "rounds", "users", "V", "eta"})
    pair, rounds, users = _settings(cell, pair, rounds, users)
    V, eta = float(cell.get("V", V)), float(cell.get("eta", eta))
    _, _, streams, common = _gelato_setting(pair, rounds=rounds, users=users, L_max=L_max,
                                            delay_s=float(cell.get("delay_ms", 100.0)) / 1e3, energy="phone-soc",
                                            fading="rayleigh")
    N, T, E, thr = _fixed_lengths(streams, common, L_max, int(seed), 1)
    budget = budget_between(E, thr, float(cell.get("budget_fraction", 0.6)))
    mixture, _ = best_feasible_mixture(N, T, E, budget)
    g, f4 = cspec("gelato", V=V, eta=eta), cspec("fixed", L=4)
    summ = run_arena([g, f4], streams, ArenaConfig(energy_budget_j=budget, **common), seed=int(seed), n_seeds=1,
                     oracles=False).summary()
    G, F = summ.loc[g.title], summ.loc[f4.title]
    return {"gain_tput": float(G["user_goodput_tokens_per_s"] / F["user_goodput_tokens_per_s"] - 1),
            "gain_energy": float(1 - G["energy_per_token_j"] / F["energy_per_token_j"]),
            "gap_mixture": float(G["user_goodput_tokens_per_s"] / mixture - 1), "debt_j": float(G["energy_debt_j"]),
            "budget_j": budget}


def gelato_study(pair: str, *, V_values, budget_fractions, V_front: float, eta: float, rounds: int, users: int,
                 n_seeds: int, seed: int, delay_s: float, L_max: int = 8, energy: str = "phone-soc",
                 fading: str = "rayleigh", n_jobs: int | None = None) -> dict:
    """GELATO on the pair's traces under a Rayleigh-faded uplink: the V sweep at the middle budget, the
    energy-throughput front over budgets, and every fixed length (for the feasible mixture).

    Budgets are fractions of the way from the energy per round of ``L = 1`` to that of the fixed length
    with the highest throughput (below it the budget binds). Every arena run is an :func:`arena_study` (the
    same seeds in each).
    """
    tim, em, _, common = _gelato_setting(pair, rounds=rounds, users=users, L_max=L_max, delay_s=delay_s,
                                         energy=energy, fading=fading)
    N, T, E, thr = _fixed_columns(arena_study("gelato-fixed", pair, _fixed_specs(L_max), ArenaConfig(**common),
                                              n_seeds=n_seeds, seed=seed, oracles=False, n_jobs=n_jobs), L_max)
    out = {"timings": tim, "energy_model": {"draft_j_per_token": em.draft_j_per_token, "tx_power_w": em.tx_power_w,
                                            "idle_power_w": em.idle_power_w},
           "fixed": {"N": N, "T": T, "E": E, "user_goodput_tokens_per_s": thr},
           "budgets": {}}
    for frac in budget_fractions:
        budget = budget_between(E, out["fixed"]["user_goodput_tokens_per_s"], frac)
        best, arg = best_feasible_mixture(N, T, E, budget)
        Vs = V_values if frac == budget_fractions[len(budget_fractions) // 2] else [V_front]
        specs = [cspec("gelato", V=V, eta=eta) for V in Vs] + [cspec("lyapunov-only", V=V_front),
                                                             cspec("entropy-only", eta=eta),
                                                             cspec("fixed", L=4), cspec("fixed", L=0)]
        if V_front not in Vs:
            specs.insert(0, cspec("gelato", V=V_front, eta=eta))
        res = arena_study("gelato", pair, specs, ArenaConfig(energy_budget_j=budget, **common), n_seeds=n_seeds,
                          seed=seed, oracles=False, n_jobs=n_jobs)
        summ = res.summary()
        out["budgets"][str(frac)] = {"budget_j": budget, "best_feasible_mixture_tokens_per_s": best,
                                     "mixture": list(arg), "V_values": list(Vs),
                                     "summary": {lab: summ.loc[lab].to_dict() for lab in res.labels}}
    return out


def specstop_margin_point(cell: dict, seed: int, *, pair: str = "qwen-coder", rounds: int = 2000, users: int = 6,
                          L_max: int = 8, h: float = 0.7) -> dict:
    """UCB-SpecStop's margins at one point of (mean delay, draft cost), for a claim map
    (:mod:`spinlib.maps`): one arena run of UCB-SpecStop, SpecDec++'s per-token rule (threshold
    ``h``), naive UCB and the best fixed length in hindsight on the pair's traces, exponential delay.

    ``cell``: ``delay_ms`` (mean delay [ms]) and ``draft_cost_ratio`` (the draft's time per token
    over the target's one-token verification, ``t_d / (t0 + 2 t1)``, with the pair's measured
    ``t0, t1``); either may be absent (the pair's measured value). ``pair``, ``rounds`` and
    ``users`` may also come as single-valued axes (settings). Returns the relative throughput
    margins ``ucb / other - 1`` (positive: UCB-SpecStop faster) and ``gap_best_fixed``.
    """
    check_axes("specstop_margin_point", cell, {"delay_ms", "draft_cost_ratio", "pair", "rounds", "users"})
    pair, rounds, users = _settings(cell, pair, rounds, users)
    tim = dict(pair_timings(pair))
    if "draft_cost_ratio" in cell:
        tim["t_d"] = float(cell["draft_cost_ratio"]) * (tim["t0"] + 2 * tim["t1"])
    D = float(cell.get("delay_ms", 100.0)) / 1e3
    cfg = ArenaConfig(rounds=rounds, users=users, L_max=L_max, delay=Delay("exponential", D), **tim)
    specs = [cspec("ucb-specstop"), cspec("specdec++", h=h), cspec("naive-ucb")]
    res = run_arena(specs, pair_streams(pair), cfg, seed=int(seed), n_seeds=1)
    summ = res.summary()
    th = {sp.name: float(summ.loc[sp.title, "user_goodput_tokens_per_s"]) for sp in specs}
    best = float(summ.loc[specs[0].title, "best_fixed_tokens_per_s"])
    return {"margin_specdecpp": th["ucb-specstop"] / th["specdec++"] - 1, "margin_naive": th["ucb-specstop"]
            / th["naive-ucb"] - 1, "gap_best_fixed": th["ucb-specstop"] / best - 1,
            "specdecpp_vs_best_fixed": th["specdec++"] / best - 1}


def _map_costs(cell: dict, seed: int, pair: str) -> tuple:
    """Round costs of an analytic claim-map point: the pair's measured one-token verification
    ``T = t0 + 2 t1`` [s] sets the scale, ``cell["draft_cost_ratio"]`` gives ``t_d = ratio T`` and the
    seed draws the verification's split, ``t1 = u T / 2`` with ``u ~ U(0, 0.5)`` (``t0 = T - 2 t1``).
    Returns ``(RoundCosts at D = 0, T)``."""
    tim = pair_timings(str(cell.get("pair", pair)))
    T = tim["t0"] + 2 * tim["t1"]
    u = float(np.random.default_rng(seed).uniform(0.0, 0.5))
    t1 = u * T / 2
    return RoundCosts(float(cell.get("draft_cost_ratio", tim["t_d"] / T)) * T, T - 2 * t1, t1, 0.0), T


def critical_delay_point(cell: dict, seed: int, *, pair: str = "qwen-coder", L_max: int = 12) -> dict:
    """UCB-SpecStop's critical delay at one point of (acceptance ``alpha``, draft cost ``t_d / T``),
    for a claim map (:mod:`spinlib.maps`); costs from :func:`_map_costs` (the seed draws ``t1``).

    The closed form ``D_c`` (:func:`~spinlib.online.stopping.critical_delay_iid`) against the
    brute-force optimum on the i.i.d. survival: ``flip_agrees`` is 1.0 when ``L* = 1`` at
    ``D = 0, D_c / 2`` and just below ``D_c`` and ``L* >= 2`` just above it (when ``D_c <= 0``: ``L* >= 2``
    at ``D = 0``), else 0.0. ``D_c_rel = D_c / T`` (> 0: a critical delay exists, below which one
    drafted token is optimal) and ``D_c_ms``.
    """
    check_axes("critical_delay_point", cell, {"alpha", "draft_cost_ratio", "pair"})
    alpha = float(cell["alpha"])
    base, T = _map_costs(cell, seed, pair)
    S = iid_survival(alpha, L_max)
    Dc = critical_delay_iid(alpha, base)
    at = lambda D: brute_force_length(S, RoundCosts(base.t_d, base.t0, base.t1, float(D)))[0]  # noqa: E731
    eps = 1e-6 * T
    if Dc > eps:
        ok = all(at(D) == 1 for D in (0.0, Dc / 2, Dc - eps)) and at(Dc + eps) >= 2
    else:
        ok = at(0.0) >= 2
    return {"D_c_rel": float(Dc / T), "D_c_ms": float(1e3 * Dc), "flip_agrees": float(ok)}


def log_growth_point(cell: dict, seed: int, *, pair: str = "qwen-coder", L_cap: int = 400,
                     D_range=(10.0, 1e4), n_delays: int = 13) -> dict:
    """UCB-SpecStop's "the optimal length grows logarithmically with the delay" at one point of
    (acceptance ``alpha``, draft cost ``t_d / T``), for a claim map; costs from :func:`_map_costs`.

    ``L*(D)`` (:func:`~spinlib.online.stopping.optimal_stopping`, i.i.d. survival up to ``L_cap``) on
    ``n_delays`` delays geometric over ``D_range`` (in units of ``T``), its least-squares slope
    against ``ln D`` and the law's ``1 / ln(1/alpha)``: ``slope_ratio`` = fitted / law (1: the law's
    growth), ``L_last`` (``L*`` at the largest delay)."""
    check_axes("log_growth_point", cell, {"alpha", "draft_cost_ratio", "pair"})
    alpha = float(cell["alpha"])
    base, T = _map_costs(cell, seed, pair)
    S = iid_survival(alpha, L_cap)
    D = T * np.geomspace(D_range[0], D_range[1], n_delays)
    L = [optimal_stopping(S, RoundCosts(base.t_d, base.t0, base.t1, float(d)))[0] for d in D]
    if max(L) >= L_cap:
        raise ValidationError(f"log_growth_point: L* reached L_cap = {L_cap} at alpha = {alpha}; raise L_cap")
    slope = float(np.polyfit(np.log(D), L, 1)[0])
    return {"slope_ratio": slope * math.log(1.0 / alpha), "L_last": int(L[-1])}


def regret_growth_point(cell: dict, seed: int, *, pair: str = "qwen-coder", rounds: int = 4000, users: int = 6,
                        L_max: int = 8) -> dict:
    """The growth of UCB-SpecStop's regret at one point of (bonus weight ``c``, mean delay), for a claim map:
    one arena run (exponential delay, the pair's traces and timings); the regret against the best fixed
    length in hindsight at 40 geometric rounds, fitted by ``a + b t^p`` (:func:`regret_exponent`'s fit,
    on this seed's curve). ``cell``: ``c`` and ``delay_ms``; ``pair``, ``rounds``, ``users`` may come as
    single-valued axes. Returns ``p``, the final regret ``regret_s`` [s/user] and ``user_goodput_tokens_per_s``."""
    check_axes("regret_growth_point", cell, {"c", "delay_ms", "pair", "rounds", "users"})
    pair, rounds, users = _settings(cell, pair, rounds, users)
    c = float(cell.get("c", 1.0))
    spec = cspec("ucb-specstop", c=c)
    cfg = ArenaConfig(rounds=rounds, users=users, L_max=L_max,
                      delay=Delay("exponential", float(cell.get("delay_ms", 100.0)) / 1e3), **pair_timings(pair))
    res = run_arena([spec], pair_streams(pair), cfg, seed=int(seed), n_seeds=1)
    points = np.array(curve_points(rounds))
    curve = np.asarray(res.regret_fixed[spec.title], float)[0]
    p = _growth_fitter(points + 1.0, 1 / 32)(curve[points])
    summ = res.summary()
    return {"p": p, "regret_s": float(curve[-1]), "user_goodput_tokens_per_s": float(summ.loc[spec.title, "user_goodput_tokens_per_s"])}


def gelato_v_point(cell: dict, seed: int, *, pair: str = "qwen-coder", rounds: int = 2000, users: int = 6,
                   L_max: int = 8, eta: float = 3.0, V_values=(0.1, 0.3, 1.0, 3.0, 10.0, 30.0)) -> dict:
    """GELATO's drift-plus-penalty trade-off at one point of (energy budget, mean delay), for a claim map:
    one arena run of GELATO at every ``V`` in ``V_values`` under the budget of :func:`budget_between`
    (setting of :func:`gelato_gain_point`). ``cell``: ``budget_fraction`` and ``delay_ms``; ``pair``,
    ``rounds``, ``users``, ``eta`` may come as single-valued axes.

    Returns ``debt_slope``: the log-log slope of the final energy debt [J/user] against ``V`` over the
    ``V`` with positive debt (0.0 when fewer than two have any: the debt stays bounded), O(V) means a
    slope of at most 1; ``tput_rise``: throughput at the largest ``V`` over the smallest, minus 1
    (throughput approaching its limit from below as ``V`` grows: >= 0); ``debt_max_j``.
    """
    check_axes("gelato_v_point", cell, {"budget_fraction", "delay_ms", "pair", "rounds", "users", "eta"})
    pair, rounds, users = _settings(cell, pair, rounds, users)
    eta = float(cell.get("eta", eta))
    _, _, streams, common = _gelato_setting(pair, rounds=rounds, users=users, L_max=L_max,
                                            delay_s=float(cell.get("delay_ms", 100.0)) / 1e3, energy="phone-soc",
                                            fading="rayleigh")
    _, _, E, thr = _fixed_lengths(streams, common, L_max, int(seed), 1)
    budget = budget_between(E, thr, float(cell.get("budget_fraction", 0.6)))
    specs = [cspec("gelato", V=float(V), eta=eta) for V in V_values]
    summ = run_arena(specs, streams, ArenaConfig(energy_budget_j=budget, **common), seed=int(seed), n_seeds=1,
                     oracles=False).summary()
    debt = np.array([float(summ.loc[sp.title, "energy_debt_j"]) for sp in specs])
    G = np.array([float(summ.loc[sp.title, "user_goodput_tokens_per_s"]) for sp in specs])
    V = np.asarray(V_values, float)
    pos = debt > 0
    slope = float(np.polyfit(np.log(V[pos]), np.log(debt[pos]), 1)[0]) if pos.sum() >= 2 else 0.0
    return {"debt_slope": slope, "tput_rise": float(G[-1] / G[0] - 1), "debt_max_j": float(debt.max()),
            "budget_j": budget}


__all__ = ["pair_timings", "pair_streams", "pooled_survival", "critical_delay_study", "log_growth_study",
           "ArenaReplicate", "arena_study", "curve_points",
           "regret_study", "regret_exponent", "drift_study", "comm_dominated_study", "context_study", "best_feasible_mixture", "fit_inverse_v", "gelato_study",
           "specstop_margin_point", "gelato_gain_point", "budget_between", "critical_delay_point",
           "log_growth_point", "regret_growth_point", "gelato_v_point"]
