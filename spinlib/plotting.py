"""One figure style for every notebook: seaborn, colour-blind palette, marker + line style per series."""
from __future__ import annotations

import itertools
import os
from pathlib import Path

import matplotlib

from .paths import FIGURES

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1)), (0, (1, 1)), (0, (5, 5)))


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


def plot_policies(ax, long_df, policies, *, x="x", y="goodput", labels=None, errorbar=("ci", 95),
                  log_x: bool = False):
    """Mean goodput vs ``x`` per policy (95 % bootstrap CI bands), one style per series.

    ``log_x`` puts x on a log scale with the sweep values as plain-number ticks.
    """
    import seaborn as sns

    labels = labels or {}
    for pol, style in zip(policies, series_styles()):
        d = long_df[long_df["policy"] == pol]
        sns.lineplot(data=d, x=x, y=y, ax=ax, errorbar=errorbar, label=labels.get(pol, pol),
                     color=style["color"], marker=style["marker"], linestyle=style["linestyle"],
                     err_kws={"alpha": 0.15})
    if log_x:
        from matplotlib.ticker import NullFormatter, ScalarFormatter

        vals = sorted(long_df[x].unique())
        ax.set_xscale("log")
        ax.set_xticks(vals)
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
    return ax
