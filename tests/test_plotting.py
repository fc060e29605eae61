"""The figure check (spinlib.plotting.figure_faults, run by save_figure): each fault class is found on a
figure built to have it, nothing is found on one built without it, and save_figure refuses a faulty
figure in one line (writing nothing) unless $SPINLIB_FIGURE_CHECK says record."""
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from spinlib import plotting  # noqa: E402
from spinlib.validation import ValidationError  # noqa: E402


def _fig():
    fig, ax = plt.subplots(figsize=(5, 3.5))
    x = np.linspace(0, 1, 9)
    ax.plot(x, x, marker="o", linestyle="-", label="a")
    ax.plot(x, x ** 2, marker="s", linestyle="--", label="b")
    ax.set_ylim(-0.5, 3.0)
    ax.legend(loc="upper left")
    ax.set_title("clean")
    return fig, ax


def test_a_clean_figure_has_no_faults():
    fig, ax = _fig()
    ax.annotate("one", (0.2, 2.5))
    ax.annotate("two", (0.8, 2.5))
    assert plotting.figure_faults(fig) == []
    plt.close(fig)


@pytest.mark.parametrize("fault, needle", [
    ("nan-label", "non-finite text"), ("nan-annotation", "non-finite text"), ("inf-title", "non-finite text"),
    ("colour-only", "differ by colour only"), ("overlap", "overlaps"), ("legend-over-data", "legend covers"),
    ("errorbar-colour-only", "differ by colour only"), ("suptitle-nan", "non-finite text"),
    ("figure-legend-over-data", "figure's legend covers")])
def test_each_fault_is_found(fault, needle):
    fig, ax = _fig()
    x = np.linspace(0, 1, 9)
    if fault == "nan-label":
        ax.plot(x, x + 0.5, marker="^", linestyle=":", label=f"gain {float('nan'):+.1%}")
        ax.legend(loc="upper left")
    elif fault == "nan-annotation":
        ax.annotate(f"{float('nan'):.2f} ms", (0.5, 2.0))
    elif fault == "inf-title":
        ax.set_title(f"gain {float('inf'):+.1%}")
    elif fault == "colour-only":
        ax.plot(x, x + 0.1, marker="o", linestyle="-", label="c")
    elif fault == "overlap":
        ax.annotate("a long label here", (0.5, 2.0))
        ax.annotate("another long label", (0.52, 2.02))
    elif fault == "errorbar-colour-only":
        ax.errorbar(x, x + 0.3, yerr=0.05, fmt="^", label="e1")
        ax.errorbar(x, x + 0.6, yerr=0.05, fmt="^", label="e2")
    elif fault == "suptitle-nan":
        fig.suptitle("mean nan")
    elif fault == "figure-legend-over-data":
        ax.get_legend().remove()
        fig.legend(loc="center")
        ax.plot([0.5], [1.25], marker="v", linestyle="none", label="middle")
    elif fault == "legend-over-data":
        ax.plot([0.02], [2.9], marker="D", linestyle="none", label="corner")
        ax.legend(loc="upper left")
    faults = plotting.figure_faults(fig)
    assert any(needle in f for f in faults), faults
    plt.close(fig)


def test_what_reads_is_not_a_fault():
    """A parameter at infinity, custom dash patterns, points hidden outside the view under a legend placed
    beside the axes, and a figure legend below the axes are not faults."""
    fig, ax = plt.subplots()
    x = np.linspace(0, 1, 5)
    ax.plot(x, x, marker="o", linestyle="--", label="GELATO (V = 10, eta = inf)")
    ax.plot(x, x + 1, marker="o", linestyle=(0, (1, 1)), label="dotted")
    ax.plot([1.5, 1.6], [1.0, 1.2], marker="s", linestyle="none", label="hidden")
    ax.set_xlim(0, 1.05)
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.legend(loc="upper center", bbox_to_anchor=(0.5, 0.0))
    assert plotting.figure_faults(fig) == []
    plt.close(fig)


def test_save_figure_refuses_a_faulty_figure_and_records_on_request(tmp_path, monkeypatch):
    fig, ax = _fig()
    ax.set_xlabel("delay nan ms")
    monkeypatch.delenv("SPINLIB_FIGURE_CHECK", raising=False)
    with pytest.raises(ValidationError) as e:
        plotting.save_figure(fig, "bad", tmp_path)
    assert "\n" not in str(e.value) and "'bad'" in str(e.value)
    assert not list(tmp_path.glob("bad.*"))
    monkeypatch.setenv("SPINLIB_FIGURE_CHECK", "record")
    new = tmp_path / "new"  # a folder not made yet
    plotting.save_figure(fig, "bad", new)
    rec = [json.loads(line) for line in (new / "FAULTS.jsonl").read_text().splitlines()]
    assert rec[0]["figure"] == "bad" and any("non-finite" in f for f in rec[0]["faults"])
    assert (new / "bad.png").exists() and (new / "bad.pdf").exists()
    monkeypatch.setenv("SPINLIB_FIGURE_CHECK", "maybe")
    with pytest.raises(ValidationError, match="SPINLIB_FIGURE_CHECK must be one of"):
        plotting.save_figure(fig, "bad", tmp_path)
    plt.close(fig)


def test_a_claim_map_cell_without_a_value_says_so():
    """A cell no seed gave a value (a NaN mean) reads "no data", never "+nan" (spinlib.maps.plot_map)."""
    import pandas as pd

    from spinlib.maps import plot_map

    ver = pd.DataFrame({"a": [1, 2, 1, 2], "b": [10, 10, 20, 20], "mean": [0.5, float("nan"), -0.2, 0.1],
                        "verdict": ["holds", "undecided", "fails", "holds"]})
    fig, ax = plt.subplots()
    plot_map(ax, ver, "a", "b", label="x", fmt="{:+.1f}", center=0.0)
    assert plotting.figure_faults(fig) == []
    assert sorted(t.get_text() for t in ax.texts) == ["?\nno data", "o\n+0.1", "o\n+0.5", "x\n-0.2"]
    plt.close(fig)


def test_labels_of_two_axes_printed_over_each_other_are_a_fault():
    """The class of 10_claim_map_margins' fault: one axes' label or title over another's (a colour bar's
    included); the same figure laid out without the clash reads."""
    import matplotlib.pyplot as plt

    from spinlib.plotting import figure_faults

    fig = plt.figure(figsize=(6, 3))
    a = fig.add_axes([0.1, 0.15, 0.38, 0.7])
    b = fig.add_axes([0.52, 0.15, 0.38, 0.7])
    a.set_title("a title far too long for the left panel alone")
    b.set_title("the right panel's title")
    faults = figure_faults(fig)
    assert any("labels printed over each other" in f for f in faults), faults
    a.set_title("left")
    assert not [f for f in figure_faults(fig) if "labels printed" in f]
    plt.close(fig)
    fig, axes = plt.subplots(1, 2, figsize=(6, 3), layout="constrained")
    for ax in axes:
        fig.colorbar(ax.imshow([[0, 1], [1, 0]], aspect="auto"), ax=ax, label="a colour bar's label")
        ax.set(ylabel="an axis label", xlabel="x")
    assert not [f for f in figure_faults(fig) if "labels printed" in f]
    plt.close(fig)


def test_a_legend_over_bars_is_a_fault():
    """The class of 06_engine_bits_vs_model's fault: a legend drawn over bars; outside the axes it reads."""
    import matplotlib.pyplot as plt

    from spinlib.plotting import figure_faults

    fig, ax = plt.subplots(figsize=(5, 3))
    ax.bar([0, 1, 2], [5, 9, 4], hatch="/", label="engine")
    ax.bar([0.4, 1.4, 2.4], [5, 9, 4], width=0.4, label="model")
    ax.legend(loc="center")
    assert any("covers" in f and "bar" in f for f in figure_faults(fig))
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    assert not [f for f in figure_faults(fig) if "bar" in f]
    plt.close(fig)


def test_a_tick_label_outside_the_view_is_not_a_label_overlap():
    """A colour bar keeps labels for ticks beyond its range that are never drawn: a long title passing where one
    of them would sit is not a fault (the false positive 03_claim_map_gain showed)."""
    import matplotlib.pyplot as plt
    import numpy as np

    from spinlib.plotting import figure_faults

    fig, ax = plt.subplots(figsize=(7, 4))
    im = ax.imshow(np.linspace(0.04, 0.33, 30).reshape(5, 6), aspect="auto")
    fig.colorbar(im, ax=ax, label="mean gain over the agnostic baseline")
    ax.set_title("Gain of heterogeneous L, sync (A) over heterogeneity-agnostic (A) (o: > 5%, x: below, ?: undecided)")
    assert not [f for f in figure_faults(fig) if "labels printed" in f], figure_faults(fig)
    plt.close(fig)
