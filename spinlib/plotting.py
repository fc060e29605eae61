"""One figure style for every notebook: seaborn, colour-blind palette, marker + line style per series."""
from __future__ import annotations

import itertools
import os
import re
import tempfile
from pathlib import Path

import matplotlib
import numpy as np

from .jsonio import open_append
from .paths import FIGURES
from .validation import ValidationError

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


#: a number that failed to compute, shown as one: any "nan", or a signed or percent "inf" ("+inf", "-inf %");
#: a parameter set to infinity ("eta = inf") is a value, not a fault
_NON_FINITE = re.compile(r"(?<![\w\\])([-+]?nan(?!\w)|[-+]inf(?!\w)|inf\s*%)", re.I)


def _style(line) -> tuple:
    """What tells a line apart without colour: its marker and its dash pattern (not only the style name, which
    reads '--' for every custom dash tuple)."""
    dash = getattr(line, "_unscaled_dash_pattern", None)  # matplotlib keeps no public getter for the pattern
    return str(line.get_marker()), str(line.get_linestyle()), repr(dash)


def _points_inside(line, box, clip) -> int:
    """How many of ``line``'s drawn markers (inside the axes' box ``clip``) fall inside the display box ``box``."""
    if not line.get_visible() or str(line.get_marker()) in ("None", "", " ", "none"):
        return 0
    xy = line.get_transform().transform(np.column_stack(line.get_data()).astype(float))
    xy = xy[np.all(np.isfinite(xy), axis=1)]
    seen = (xy[:, 0] >= clip.x0) & (xy[:, 0] <= clip.x1) & (xy[:, 1] >= clip.y0) & (xy[:, 1] <= clip.y1)
    inside = (xy[:, 0] > box.x0) & (xy[:, 0] < box.x1) & (xy[:, 1] > box.y0) & (xy[:, 1] < box.y1)
    return int((seen & inside).sum())


def _intersection(a, b, clip) -> bool:
    """Whether boxes ``a`` (clipped to the axes' box ``clip``) and ``b`` share an area (not just an edge)."""
    x0, x1 = max(a.x0, b.x0, clip.x0), min(a.x1, b.x1, clip.x1)
    y0, y1 = max(a.y0, b.y0, clip.y0), min(a.y1, b.y1, clip.y1)
    return x1 - x0 > 0.5 and y1 - y0 > 0.5


def figure_faults(fig) -> list[str]:
    """What a reader could not read in ``fig`` (one line each; empty when it reads):

    * **non-finite text**: a (sup)title, axis label, tick label, legend entry or annotation that shows
      ``nan`` or a signed ``inf`` (a number that failed to compute, printed as if it were one);
    * **series told apart by colour only**: two labelled lines or error-bar series of one axes with the
      same marker and dash pattern (a colour-blind or grey-scale reader cannot tell them apart);
    * **overlapping text**: two annotations, or an annotation and the legend, whose drawn bounding
      boxes (matplotlib's window extents) intersect;
    * **a legend over the data**: an axes' or the figure's legend whose box covers a drawn marker or a bar;
    * **labels printed over each other**: an axis label or title of one axes (a colour bar's included) whose
      box intersects an axis label, title or tick label of another.
    """
    faults: list[str] = []
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for t in fig.texts:
        if t.get_visible() and _NON_FINITE.search(t.get_text() or ""):
            faults.append(f"figure text: non-finite text {t.get_text()!r}")
    sup = getattr(fig, "_suptitle", None)
    if sup is not None and _NON_FINITE.search(sup.get_text() or ""):
        faults.append(f"suptitle: non-finite text {sup.get_text()!r}")
    for ax in fig.axes:
        where = f"axes {ax.get_title() or ax.get_ylabel() or fig.axes.index(ax)!r}"
        texts = [ax.xaxis.label, ax.yaxis.label, *ax.get_xticklabels(), *ax.get_yticklabels(), *ax.texts]
        strings = [ax.get_title(loc=loc) for loc in ("left", "center", "right")]
        legend = ax.get_legend()
        if legend is not None:
            texts += list(legend.get_texts()) + [legend.get_title()]
        strings += [t.get_text() for t in texts if t.get_visible()]
        for text in strings:
            if _NON_FINITE.search(text or ""):
                faults.append(f"{where}: non-finite text {text!r}")
        series = [(line.get_label(), line) for line in ax.get_lines()]
        series += [(c.get_label(), c.lines[0]) for c in ax.containers
                   if type(c).__name__ == "ErrorbarContainer" and c.lines[0] is not None]
        styles: dict = {}
        for lab, line in series:
            if not lab or lab.startswith("_") or not line.get_visible():
                continue
            key = _style(line)
            if key in styles and styles[key] != lab:
                faults.append(f"{where}: series {styles[key]!r} and {lab!r} differ by colour only "
                              f"(marker {key[0]!r}, line style {key[1]!r})")
            styles.setdefault(key, lab)
        boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in ax.texts if t.get_visible() and t.get_text()]
        if legend is not None and legend.get_visible():
            boxes.append(("the legend", legend.get_window_extent(renderer)))
        for i in range(len(boxes)):
            for j in range(i + 1, len(boxes)):
                if boxes[i][1].overlaps(boxes[j][1]):
                    faults.append(f"{where}: {boxes[i][0]!r} overlaps {boxes[j][0]!r}")
        legends = [lg for lg in [legend, *fig.legends] if lg is not None and lg.get_visible()]
        for lg in legends:
            box = lg.get_window_extent(renderer)
            who = "the legend" if lg is legend else "the figure's legend"
            for line in ax.get_lines():
                n = _points_inside(line, box, ax.bbox)
                if n:
                    faults.append(f"{where}: {who} covers {n} point(s) of {line.get_label()!r}")
                    break
            bars = [p for p in ax.patches if type(p).__name__ == "Rectangle" and p.get_visible()
                    and p.get_width() and p.get_height()]
            covered = [p for p in bars if _intersection(p.get_window_extent(renderer), box, ax.bbox)]
            if covered:
                faults.append(f"{where}: {who} covers {len(covered)} bar(s)")
    faults += _label_overlaps(fig, renderer)
    return faults


#: labels of two axes whose boxes share less than this many pixels in each direction only touch (a tick label at a
#: colour bar's top edge beneath a long title): not a fault
LABEL_TOLERANCE_PX = 3.0


def _shared(a, b) -> float:
    """The smaller side of the intersection of boxes ``a`` and ``b`` [px] (0 when they do not meet)."""
    return max(0.0, min(min(a.x1, b.x1) - max(a.x0, b.x0), min(a.y1, b.y1) - max(a.y0, b.y0)))


def _label_overlaps(fig, renderer) -> list[str]:
    """Axis labels and titles of one axes that intersect the labels, titles or tick labels of another."""
    def boxes(ax, ticks: bool):
        texts = [ax.xaxis.label, ax.yaxis.label, ax.title, ax._left_title, ax._right_title]
        out = [(t.get_text(), t.get_window_extent(renderer)) for t in texts if t.get_visible() and t.get_text()]
        if ticks:  # only the tick labels drawn: a tick outside the view limits keeps a label that is never shown
            frame = ax.get_window_extent(renderer)
            for axis, lo, hi, centre in ((ax.get_xticklabels(), frame.x0, frame.x1, lambda b: (b.x0 + b.x1) / 2),
                                         (ax.get_yticklabels(), frame.y0, frame.y1, lambda b: (b.y0 + b.y1) / 2)):
                for t in axis:
                    if t.get_visible() and t.get_text():
                        box = t.get_window_extent(renderer)
                        if lo - 0.5 <= centre(box) <= hi + 0.5:
                            out.append((t.get_text(), box))
        return out

    out = []
    axes = [ax for ax in fig.axes if ax.get_visible()]
    for i, a in enumerate(axes):
        for j, b in enumerate(axes):
            if i == j:
                continue
            for name_a, box_a in boxes(a, False):
                for name_b, box_b in boxes(b, True):
                    if _shared(box_a, box_b) > LABEL_TOLERANCE_PX and \
                            (j > i or (name_b, name_a) not in [(x, y) for x, y, *_ in out]):
                        out.append((name_a, name_b, i, j))
    seen, faults = set(), []
    for name_a, name_b, i, j in out:
        key = frozenset((name_a, name_b))
        if key not in seen:
            seen.add(key)
            faults.append(f"labels printed over each other: {name_a!r} (axes {i}) and {name_b!r} (axes {j})")
    return faults


#: $SPINLIB_FIGURE_CHECK: what save_figure does with a figure's faults (figure_faults): "raise" (the default)
#: or "record" (append them to FAULTS.jsonl beside the figures and save the figure: a survey)
FIGURE_CHECKS = ("raise", "record")


def save_figure(fig, name: str, directory: Path | None = None) -> None:
    """Save ``fig`` as ``<name>.pdf`` and ``<name>.png`` under ``results/figures`` (or ``directory``), after
    :func:`figure_faults` finds nothing (else one line naming the figure and its first faults).

    Returns nothing (a notebook cell ending in this call shows the figure, not a list of paths); the
    figure is left open so that the inline backend displays it.
    """
    mode = os.environ.get("SPINLIB_FIGURE_CHECK", "raise")
    if mode not in FIGURE_CHECKS:
        raise ValidationError(f"SPINLIB_FIGURE_CHECK must be one of {FIGURE_CHECKS}, got {mode!r}")
    faults = figure_faults(fig)
    if faults and mode == "record":
        import json

        Path(directory or FIGURES).mkdir(parents=True, exist_ok=True)
        with open_append(Path(directory or FIGURES) / "FAULTS.jsonl") as f:  # never through a link
            f.write(json.dumps({"figure": name, "faults": faults}) + "\n")
    elif faults:
        raise ValidationError(f"figure {name!r} does not read: {'; '.join(faults[:3])}"
                              + (f" (and {len(faults) - 3} more)" if len(faults) > 3 else ""))
    directory = Path(directory or FIGURES)
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / f"{name}.{ext}" for ext in ("pdf", "png")]
    for p in paths:
        # written to a fresh temporary file (mkstemp: no name to plant a link at) and renamed: an interrupted run
        # never leaves a torn figure; no creation date in the PDF: the same run gives the same bytes
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{p.name}.", suffix=".tmp")
        os.close(fd)
        tmp = Path(tmp)
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
                  log_x: bool = False, seed: int = BOOTSTRAP_SEED, dodge: float = 0.0):
    """Mean goodput vs ``x`` per policy (95 % bootstrap CI bands), one style per series.

    ``log_x`` puts x on a log scale with the sweep values as plain-number ticks. ``seed`` seeds the
    bootstrap (:data:`BOOTSTRAP_SEED`): the same data give the same bands and the same figure bytes.
    ``dodge``: shift series ``i`` of ``n`` sideways by ``(i - (n - 1) / 2) dodge`` (a share of a decade on a log
    axis, of the x range otherwise), so that series which coincide stay visible (say so on the axis).
    """
    import seaborn as sns

    labels = labels or {}
    n = len(policies)
    span = (float(long_df[x].max() - long_df[x].min()) or 1.0) if dodge and not log_x else 1.0
    for i, (pol, style) in enumerate(zip(policies, series_styles())):
        d = long_df[long_df["policy"] == pol]
        if dodge:
            shift = (i - (n - 1) / 2) * dodge
            d = d.assign(**{x: d[x] * 10 ** shift if log_x else d[x] + shift * span})
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
