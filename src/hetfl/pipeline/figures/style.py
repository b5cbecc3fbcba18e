"""The look of every figure: matplotlib settings, a (color, line style, marker) per curve, axis labels from
metric names, the legend's note on seeds, titles wrapped to the figure's width, and byte-stable files."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from hetfl.metrics import parse_metric

PLAIN_RUNS = 6
"""Up to this many runs, lines are solid (color and marker tell runs apart); beyond, dashes vary too."""
LINESTYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
MARKERS_PER_LINE = 8
STYLE = {
    "font.size": 9.0,
    "axes.labelsize": 10.0,
    "axes.titlesize": 10.0,
    "xtick.labelsize": 9.0,
    "ytick.labelsize": 9.0,
    "legend.fontsize": 8.5,
    "legend.title_fontsize": 8.5,
    "figure.titlesize": 11.0,
    "lines.linewidth": 1.4,
    "lines.markersize": 4.0,
    "pdf.fonttype": 42,  # TrueType in PDFs (editable text; journals refuse Type 3 fonts)
    "ps.fonttype": 42,
}
"""matplotlib settings of every figure (sizes in points, for a 4.2-inch panel printed at scale)."""

_STAT_WORDS = {"acc": "accuracy", "loss": "loss"}


def metric_label(name: str) -> str:
    """Axis label of a metric: ``test_acc_personal`` → ``Test accuracy (personal)``."""
    parsed = parse_metric(name)
    if parsed.split in ("train", "test") and len(parsed.words) == 3:
        return f"{parsed.split.capitalize()} {_STAT_WORDS[parsed.statistic]} ({parsed.model})"
    return name.replace("_", " ")


def axis_label(name: str, unit: bool = True) -> str:
    """The axis label of a metric, capitalized (unless its first word is a single letter, a variable):
    ``train_loss_global`` → ``Train loss (global)``, ``train_loss_minimax_global`` → ``Train loss
    minimax (global)``, ``y_max`` → ``y max``; an accuracy with its unit (``unit``, the default):
    ``test_acc_personal`` → ``Test accuracy, personal (%)``, ``test_acc_at_y_global`` → ``Test
    accuracy at y, global (%)``."""
    words = list(parse_metric(name).words)
    model = words.pop() if len(words) > 1 and words[-1] in ("personal", "global", "local") else ""
    if parse_metric(name).is_accuracy:
        words[words.index("acc")] = "accuracy"
        text = " ".join(words) + (f", {model}" if model else "") + (" (%)" if unit else "")
    elif model:
        text = metric_label(name) if len(words) == 2 and words[1] in _STAT_WORDS else " ".join(words)
        text = text if text.endswith(")") else f"{text} ({model})"
    else:
        text = metric_label(name)
    return text if len(words[0]) == 1 else text[:1].upper() + text[1:]


def line_styles(labels: Sequence[str]) -> dict[str, dict[str, object]]:
    """A distinct look per curve, readable in grey print and by color-blind readers.

    Every curve has its own marker (drawn sparsely along the line). Up to ``PLAIN_RUNS`` curves, lines
    are solid with distinct colors; beyond, the line style cycles too (``LINESTYLES``), so that the
    (color, line style, marker) triples stay distinct for up to 40 curves (10 colors × 4 × 8 markers,
    cycled together), the grids of a config included.

    Args:
        labels: the curves' legend labels, in drawing order.

    Returns:
        label -> ``{"color": (r, g, b), "linestyle": str, "marker": str}`` (keyword arguments of
        ``Axes.plot``).
    """
    import seaborn as sns

    colors = sns.color_palette(n_colors=10)
    plain = len(labels) <= PLAIN_RUNS
    return {
        label: {
            "color": colors[i % len(colors)],
            "linestyle": "-" if plain else LINESTYLES[i % len(LINESTYLES)],
            "marker": MARKERS[i % len(MARKERS)],
        }
        for i, label in enumerate(labels)
    }


def seeds_note(seeds: Sequence[int]) -> str:
    """What the lines and bands of a figure are, given the number of seeds of each run drawn:
    ``Mean of 3 seeds; band: ±1 sd over seeds`` (or the range of counts when runs differ)."""
    counts = sorted(set(int(n) for n in seeds))
    if counts == [1]:
        return "A single seed per run (no band)"
    if len(counts) == 1:
        return f"Mean of {counts[0]} seeds; band: ±1 sd over seeds"
    return f"Mean of {counts[0]}–{counts[-1]} seeds (per run in the legend); band: ±1 sd over seeds"


def fit_text(text: str, artist, width_px: float, renderer) -> str:
    """Wrap ``text`` on word boundaries so that ``artist`` showing it is at most ``width_px`` wide; sets
    and returns the wrapped text (a line that cannot be broken stays whole)."""
    artist.set_text(text)
    width = artist.get_window_extent(renderer).width
    if width <= width_px:
        return text
    lines = text.split("\n")
    chars = max(int(max(len(line) for line in lines) * width_px / width) + 1, 8)
    wrapped = text
    while chars >= 8:
        wrapped = "\n".join(textwrap.fill(line, chars, break_long_words=False) for line in lines)
        artist.set_text(wrapped)
        if artist.get_window_extent(renderer).width <= width_px:
            break
        chars -= 1
    return wrapped


def figure_title(prefix: str, fig: dict) -> str:
    """The figure's title after ``prefix`` (a prefix ending in ``:`` loses it when there is no title)."""
    title = fig.get("title", "")
    return f"{prefix} {title}".strip() if title else prefix.rstrip(":")


def save(figure, *paths) -> None:
    """Write ``figure`` to each of ``paths`` (None skipped) at 150 dpi; a PDF without its creation date,
    so that the same figure is the same bytes on every run."""
    for path in paths:
        if path is not None:
            pdf = str(path).endswith(".pdf")
            figure.savefig(path, dpi=150, metadata={"CreationDate": None} if pdf else None)
