"""One figure style for every notebook: seaborn, colour-blind palette, marker + line style per series."""
from __future__ import annotations

import itertools
import os
from pathlib import Path

import matplotlib

from .paths import FIGURES

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1)), (0, (1, 1)), (0, (5, 5)))
HATCHES = ("", "//", "..", "xx", "\\\\", "++", "oo", "--")  # bars: told apart without colour too


def set_style(context: str = "paper") -> None:
    """Apply the shared style (no TeX needed)."""
    import seaborn as sns

    sns.set_theme(context=context, style="whitegrid", palette="colorblind", font_scale=1.1)
    matplotlib.rcParams.update(
        {
            "figure.figsize": (5.5, 3.6),
            "figure.dpi": 110,
            "savefig.dpi": 200,
            "savefig.bbox": "tight",
            "axes.spines.top": False,
            "axes.spines.right": False,
            "legend.frameon": False,
            "lines.linewidth": 1.8,
            "lines.markersize": 5,
        }
    )


def series_styles():
    """Infinite iterator of ``dict(color, marker, linestyle)``, one per series."""
    import seaborn as sns

    colors = sns.color_palette("colorblind")
    for i in itertools.count():
        yield {
            "color": colors[i % len(colors)],
            "marker": MARKERS[i % len(MARKERS)],
            "linestyle": LINESTYLES[i % len(LINESTYLES)],
        }


def bar_styles():
    """Infinite iterator of ``dict(color, hatch)`` for ``ax.bar``: bars told apart by hatch as well
    as by colour (a reader without colour, or a grey print, still can)."""
    for i, sty in enumerate(series_styles()):
        yield {"color": sty["color"], "hatch": HATCHES[i % len(HATCHES)]}


def layered_styles(names) -> dict:
    """Line styles for series that may coincide (e.g. a policy equal to its reference): the first
    name is drawn widest with the largest hollow markers at the back, each later one narrower and
    in front, so every series stays visible where the curves are identical. ``{name: style}``
    (keys ``color, marker, linestyle, linewidth, markersize, markerfacecolor, zorder``)."""
    names = list(names)
    out = {}
    for i, (name, sty) in enumerate(zip(names, series_styles())):
        back = len(names) - 1 - i
        out[name] = {**sty, "linewidth": 1.4 + 1.2 * back, "markersize": 4 + 2.5 * back,
                     "markerfacecolor": "none" if back else sty["color"], "zorder": 2 + i}
    return out


#: readable names of registered controllers and re-planners in legends (the registry keys are for code)
DISPLAY_NAMES = {
    "ucb-specstop": "UCB-SpecStop", "naive-ucb": "naive UCB", "specdec++": "SpecDec++",
    "hf-heuristic": "HF heuristic", "hf-confidence": "HF confidence", "fixed": "fixed", "gelato": "GELATO",
    "lyapunov-only": "Lyapunov only", "entropy-only": "entropy only", "plan-on-average": "plan on average",
    "server-only": "server only", "replan-bandwidth": "re-plan: bandwidth", "replan-drop": "re-plan: drop users",
    "replan-coordinate": "re-plan: coordinate", "replan-ratio": "re-plan: ratio",
    "replan-dinkelbach": "re-plan: Dinkelbach", "energy-queue": "energy queue",
    "homogeneous": "homogeneous optimum", "heterogeneous-sync": "heterogeneous lengths (sync)",
    "heterogeneous-async": "heterogeneous lengths (async)", "uldl-optimal": "adaptive UL/DL modes",
    "agnostic": "heterogeneity-agnostic",
}


def display_label(key: str) -> str:
    """A legend label for a spec key: ``"fixed:L=4"`` -> ``"fixed (L = 4)"``,
    ``"gelato:V=1.0,eta=3.0"`` -> ``"GELATO (V = 1, eta = 3)"``; unknown names are kept as they are."""
    name, _, params = str(key).partition(":")
    text = DISPLAY_NAMES.get(name, name)
    if not params:
        return text
    parts = []
    for item in params.split(","):
        k, _, v = item.partition("=")
        try:
            v = f"{float(v):g}"
        except ValueError:
            pass
        parts.append(f"{k} = {v}")
    return f"{text} ({', '.join(parts)})"


def save_figure(fig, name: str, directory: Path | None = None) -> None:
    """Save ``fig`` as ``<name>.pdf`` and ``<name>.png`` under ``results/figures`` (or ``directory``).

    Returns nothing (a notebook cell ending in this call shows the figure, not a list of paths); the
    figure is left open so that the inline backend displays it.
    """
    directory = Path(directory or FIGURES)
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / f"{name}.{ext}" for ext in ("pdf", "png")]
    for p in paths:
        # written to a temporary file and renamed: an interrupted run never leaves a torn figure;
        # no creation date in the PDF: the same run gives the same bytes
        tmp = p.with_name(f".{p.name}.tmp")
        try:
            fig.savefig(tmp, format=p.suffix[1:], metadata={"CreationDate": None} if p.suffix == ".pdf" else None)
            os.replace(tmp, p)
        finally:
            if tmp.exists():
                tmp.unlink()


#: seed of seaborn's bootstrap confidence bands: without one, every run draws other resamples, so a
#: figure's bands (and its bytes) change from run to run while its data do not
BOOTSTRAP_SEED = 0


def plot_policies(ax, long_df, policies, *, x="x", y="goodput", labels=None, errorbar=("ci", 95),
                  log_x: bool = False, seed: int = BOOTSTRAP_SEED):
    """Mean goodput vs ``x`` per policy (95 % bootstrap CI bands), one style per series.

    ``log_x`` puts x on a log scale with the sweep values as plain-number ticks. ``seed`` seeds the
    bootstrap (:data:`BOOTSTRAP_SEED`): the same data give the same bands and the same figure bytes.
    """
    import seaborn as sns

    labels = labels or {}
    for pol, style in zip(policies, series_styles()):
        d = long_df[long_df["policy"] == pol]
        sns.lineplot(data=d, x=x, y=y, ax=ax, errorbar=errorbar, label=labels.get(pol, pol),
                     color=style["color"], marker=style["marker"], linestyle=style["linestyle"],
                     err_kws={"alpha": 0.15}, seed=seed)
    if log_x:
        from matplotlib.ticker import NullFormatter, ScalarFormatter

        vals = sorted(long_df[x].unique())
        ax.set_xscale("log")
        ax.set_xticks(vals)
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
    return ax
