"""Figures of a study: metric curves over rounds, mean over seeds with a ±1 sd band.

A study's config lists its figures; each entry is a metric name (one figure of that metric, every
run that reports it) or a mapping::

    figures:
      - test_acc_personal
      - name: mnist_mlr                          # file name: figures/{study}/mnist_mlr.png
        metrics: [train_loss_global, test_acc_personal]   # one panel each
        runs: [pfedme, perfedavg, fedavg]        # default: every run that has the metrics
        labels: {pfedme: "pFedMe (PM)"}
        title: "μ-strongly convex"
        logy: false                              # or true, auto (default), or a list of the metrics
        ylim: [0.86, 0.95]                       # stored units; or {metric: [low, high]}
        yfit: late                               # automatic y-range: late (default) or all
        smooth: 20                               # moving average over evaluated rounds
        x: round                                 # or a metric, e.g. grad_evals: curves against it
      - name: weights                            # kind heatmap: an N×N matrix recorded by the runs
        kind: heatmap
        runs: [a41_bin, a41_cont]                # one row of panels per run
        artifact: alpha                          # the array in each run's artifacts.npz ([U, N, N])
        at: [1, 10, 100]                         # rounds: the last matrix recorded in or before each
        seed: 127                                # default: the smallest seed of the run

Drawing uses matplotlib's Agg canvas directly (no pyplot state, no display needed). Line figures are
drawn for print: accuracies (metrics named ``*_acc_*``) in %, the automatic y-range fit to the late
phase of the curves (:func:`fit_ylim`), losses spanning decades on a log axis, a (color, line style,
marker) per run (:func:`line_styles`), titles wrapped to the figure's width, and the seed count and
band meaning in the legend.
"""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hetfl.errors import ConfigError
from hetfl.metrics import parse_metric

if TYPE_CHECKING:  # pandas, seaborn and matplotlib are imported where a figure is drawn, so that
    # validating a config (every training job does) does not pay for them
    import pandas as pd
    from matplotlib.figure import Figure

FIGURE_KEYS = ("name", "kind", "metrics", "runs", "labels", "title", "logy", "ylim", "yfit", "smooth", "x")
KINDS = ("heatmap", "lines")  # what draw() can draw: metric curves (plot_figure), matrices (plot_heatmap)
HEATMAP_KEYS = ("name", "kind", "runs", "labels", "title", "artifact", "at", "seed")
X_AXES = ("round",)  # or the name of any metric the study reports
LOGY = ("auto", "false", "true")  # or a list of the figure's metrics drawn on a log axis
YFITS = ("all", "late")
LATE_FRACTION = 0.5
"""``yfit: late``: the automatic y-range fits the last half of each run's evaluated rounds."""
AUTO_LOG_DECADES = 2.0
"""``logy: auto``: a loss panel is drawn on a log axis when its curves span this many decades."""
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
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.=+-]{0,99}")
"""A figure name is a file name: letters, digits and ``_ . = + -``, not starting with a dot."""

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


def _names(value: object, allowed: list[str], key: str, what: str) -> list[str]:
    """A non-empty list of names from ``allowed`` (a single string counts as a list of one)."""
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise ConfigError(key, f"expected a non-empty list of {what}s", allowed=allowed)
    unknown = [v for v in values if v not in allowed]
    if unknown:
        raise ConfigError(key, f"unknown {what}(s) {', '.join(unknown)}", allowed=allowed)
    return list(dict.fromkeys(values))


def _heatmap(entry: dict, runs: list[str], key: str) -> dict:
    """Normalize a ``kind: heatmap`` entry (keys ``HEATMAP_KEYS``)."""
    unknown = sorted(set(entry) - set(HEATMAP_KEYS))
    if unknown:
        raise ConfigError(key, f"unknown key(s) {', '.join(unknown)} for kind heatmap", allowed=HEATMAP_KEYS)
    fig = {"kind": "heatmap", "metrics": [], "runs": _names(entry.get("runs"), runs, f"{key}.runs", "run")}
    fig["name"] = entry.get("name", f"heatmap-{'-'.join(fig['runs'])}")
    if not isinstance(fig["name"], str) or not SAFE_NAME.fullmatch(fig["name"]):
        raise ConfigError(f"{key}.name", f"{fig['name']!r} is not a safe file name")
    labels = entry.get("labels") or {}
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise ConfigError(f"{key}.labels", "expected a mapping run -> label")
    if labels:
        _names(list(labels), fig["runs"], f"{key}.labels", "run")
    fig["labels"] = {str(k): v for k, v in labels.items()}
    fig["title"] = str(entry.get("title", ""))
    fig["artifact"] = entry.get("artifact", "alpha")
    if not isinstance(fig["artifact"], str) or not fig["artifact"].isidentifier():
        raise ConfigError(
            f"{key}.artifact", f"expected the name of a recorded array, got {fig['artifact']!r}"
        )
    at = entry.get("at")
    if not (
        isinstance(at, list) and at and all(type(r) is int and r >= 0 for r in at) and at == sorted(set(at))
    ):
        raise ConfigError(f"{key}.at", f"expected a non-empty increasing list of rounds >= 0, got {at!r}")
    fig["at"] = at
    seed = entry.get("seed")
    if seed is not None and (type(seed) is not int or seed < 0):
        raise ConfigError(f"{key}.seed", f"expected a seed of the study (an integer >= 0), got {seed!r}")
    fig["seed"] = seed
    return fig


def _logy(value: object, metrics: list[str], key: str) -> bool | str | list[str]:
    """``logy``: true, false, ``auto`` or a non-empty list of the figure's metrics."""
    if isinstance(value, bool) or value == "auto":
        return value
    if isinstance(value, list) and value and all(isinstance(m, str) for m in value):
        return _names(value, metrics, key, "metric")
    raise ConfigError(
        key,
        f"expected true or false, auto, or a list of the figure's metrics, got {value!r}",
        allowed=[*LOGY, *metrics],
    )


def log_panel(fig: dict, metric: str) -> bool | None:
    """Whether ``fig`` draws ``metric`` on a log axis: True or False when its ``logy`` decides, None when
    ``logy`` is ``auto`` (the data decide: :func:`plot_figure`)."""
    logy = fig.get("logy", "auto")
    if isinstance(logy, list):
        return metric in logy
    return None if logy == "auto" else bool(logy)


def _ylim(value: object, metrics: list[str], logy: object, key: str) -> list[float] | dict | None:
    """``ylim``: [low, high] for every panel, or {metric: [low, high]} for some; low > 0 on a log axis."""

    def pair(v: object, metric: str | None, where: str) -> list[float]:
        log = any(log_panel({"logy": logy}, m) for m in ([metric] if metric else metrics))
        if not (
            isinstance(v, list)
            and len(v) == 2
            and all(isinstance(x, int | float) and not isinstance(x, bool) and np.isfinite(x) for x in v)
            and v[0] < v[1]
            and (not log or v[0] > 0)
        ):
            raise ConfigError(
                where,
                f"expected [low, high] finite numbers with low < high (low > 0 with logy), got {v!r}",
            )
        return [float(x) for x in v]

    if value is None:
        return None
    if isinstance(value, dict):
        _names(list(value), metrics, key, "metric")
        return {str(m): pair(v, str(m), f"{key}.{m}") for m, v in value.items()}
    return pair(value, None, key)


def _figure(entry: dict, runs: list[str], metrics: list[str], key: str) -> dict:
    if entry.get("kind") == "heatmap":
        return _heatmap(entry, runs, key)
    unknown = sorted(set(entry) - set(FIGURE_KEYS))
    if unknown:
        raise ConfigError(key, f"unknown key(s) {', '.join(unknown)}", allowed=FIGURE_KEYS)
    fig = {
        "metrics": _names(entry.get("metrics"), metrics, f"{key}.metrics", "metric"),
        "runs": None if entry.get("runs") is None else _names(entry["runs"], runs, f"{key}.runs", "run"),
    }
    fig["name"] = entry.get("name", "-".join(fig["metrics"]))
    if not isinstance(fig["name"], str) or not SAFE_NAME.fullmatch(fig["name"]):
        raise ConfigError(
            f"{key}.name",
            f"{fig['name']!r} is not a safe file name "
            "(letters, digits, _ . = + -; at most 100; no leading dot)",
        )
    labels = entry.get("labels") or {}
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise ConfigError(f"{key}.labels", "expected a mapping run -> label")
    if labels:
        _names(list(labels), fig["runs"] or runs, f"{key}.labels", "run")
    fig["labels"] = {str(k): v for k, v in labels.items()}
    fig["title"] = str(entry.get("title", ""))
    fig["logy"] = _logy(entry.get("logy", "auto"), fig["metrics"], f"{key}.logy")
    fig["ylim"] = _ylim(entry.get("ylim"), fig["metrics"], fig["logy"], f"{key}.ylim")
    fig["yfit"] = entry.get("yfit", "late")
    if fig["yfit"] not in YFITS:
        raise ConfigError(f"{key}.yfit", f"unknown y-range rule {fig['yfit']!r}", allowed=YFITS)
    fig["smooth"] = entry.get("smooth", 1)
    if type(fig["smooth"]) is not int or fig["smooth"] < 1:
        raise ConfigError(f"{key}.smooth", "expected an integer window >= 1")
    fig["kind"] = entry.get("kind", "lines")
    if fig["kind"] not in KINDS:
        raise ConfigError(f"{key}.kind", f"unknown figure kind {fig['kind']!r}", allowed=KINDS)
    fig["x"] = entry.get("x", "round")
    if fig["x"] not in X_AXES and fig["x"] not in metrics:
        raise ConfigError(f"{key}.x", f"unknown x axis {fig['x']!r}", allowed=[*X_AXES, *metrics])
    return fig


def normalize_figures(figures: list, runs: list[str], metrics: set[str], key: str) -> list[dict]:
    """Validate a study's ``figures`` and bring each entry to one form.

    Args:
        figures: the config list: metric names or mappings (keys in ``FIGURE_KEYS``).
        runs: the study's run labels; metrics: the metric names its runs report.
        key: the dotted config key of the list, e.g. ``studies.pfedme_mnist.figures``.

    Returns:
        One dict per figure with keys name, metrics (list), runs (list, or None for every run
        that reports the metrics), labels ({run: label}), title (str), logy (True, False, ``auto``
        or a list of metrics), ylim ([lo, hi], {metric: [lo, hi]} or None, in the metrics' stored
        units), yfit (``late`` or ``all``), smooth (int window >= 1), x (``round`` or a metric name).
        A ``kind: heatmap`` entry has the keys of ``HEATMAP_KEYS`` instead.

    Raises:
        ConfigError: naming ``{key}[i]`` or ``{key}[i].<field>``: an unknown key, metric or run
            (with the allowed values), a name that is not a safe file name, a duplicate name, or
            a malformed value.
    """
    if not isinstance(figures, list):
        raise ConfigError(key, "figures must be a list")
    runs, metric_names = list(runs), sorted(metrics)
    out, seen = [], set()
    for i, entry in enumerate(figures):
        where = f"{key}[{i}]"
        if isinstance(entry, str):
            entry = {"metrics": [entry], "name": entry}
        if not isinstance(entry, dict):
            raise ConfigError(where, "a figure is a metric name or a mapping")
        fig = _figure(entry, runs, metric_names, where)
        if fig["name"] in seen:
            raise ConfigError(f"{where}.name", f"duplicate figure name {fig['name']!r}")
        seen.add(fig["name"])
        out.append(fig)
    return out


def _seed_flags(long: pd.DataFrame, status: pd.DataFrame | None) -> pd.Series:
    """Per (run, seed): whether it diverged, from ``status`` or, without it, whether it recorded a
    non-finite value."""
    if status is None:
        return long.assign(diverged=~np.isfinite(long["value"])).groupby(["run", "seed"])["diverged"].any()
    return status.set_index(["run", "seed"])["status"].eq("diverged")


def _diverged(long: pd.DataFrame, status: pd.DataFrame | None) -> pd.DataFrame:
    """Per run: seeds (n) and diverged seeds (k), from ``status`` or, without it, from the seeds
    that recorded a non-finite value."""
    return _seed_flags(long, status).groupby("run").agg(k="sum", n="size")


def _select(long: pd.DataFrame, fig: dict) -> pd.DataFrame:
    """The rows of the figure's metrics and runs."""
    data = long[long["metric"].isin(fig["metrics"])]
    return data[data["run"].isin(fig["runs"])] if fig.get("runs") else data


def run_labels(long: pd.DataFrame, fig: dict, status: pd.DataFrame | None = None) -> dict[str, str]:
    """Legend label of each run drawn in ``fig``, in drawing order (the figure's ``runs``, else
    the order of ``long``): the pretty label from ``fig["labels"]`` (default: the run label),
    followed by `` (diverged k/n)`` when k of the run's n seeds diverged. Runs without a finite
    value of the figure's metrics are left out. ``status`` as in :func:`plot_figure`."""
    import pandas as pd

    data = _select(long, fig)
    counts = _diverged(data, status).reindex(pd.unique(data["run"]), fill_value=0)
    present = set(data.loc[np.isfinite(data["value"]), "run"])
    labels = {}
    for run in fig.get("runs") or pd.unique(data["run"]):
        if run in present:
            k, n = counts.loc[run, "k"], counts.loc[run, "n"]
            labels[run] = fig.get("labels", {}).get(run, run) + (f" (diverged {k}/{n})" if k else "")
    return labels


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


def fit_ylim(
    curves: Sequence[tuple[np.ndarray, np.ndarray]],
    log: bool = False,
    late: float | None = None,
    percent: bool = False,
) -> tuple[float, float] | None:
    """The automatic y-range of a panel: the extent of the curves (the seed means), with a margin of
    10 % of it on either side. Bands are left out: a wide band must not flatten the differences of
    the means (it is cut by the frame, which shows).

    Args:
        curves: one ``(rounds, mean)`` pair of equal-length arrays per curve, in round order
            (non-finite means are ignored).
        log: the axis is logarithmic: only positive values count and the margin is 5 % of the
            decades spanned.
        late: fit the late phase only: each curve's points with ``round >= first + (1 - late) * (last -
            first)`` of its own finite rounds (a curve that stopped early is fit by its own late
            phase); None: every point, as when the late phase is flat (every curve at one value).
        percent: values are percentages: the range does not reach below 0 or above 100 unless the
            values do (a curve at 100 % keeps its margin).

    Returns:
        ``(low, high)`` with low < high, or None when no finite value (positive, on a log axis) is left.
    """
    values = []
    for rounds, mean in curves:
        rounds, mean = np.asarray(rounds, dtype=np.float64), np.asarray(mean, dtype=np.float64)
        keep = np.isfinite(mean) & (mean > 0 if log else True)
        if late is not None and keep.any():
            first, last = rounds[keep][0], rounds[keep][-1]
            keep &= rounds >= first + (1.0 - late) * (last - first)
        values.append(mean[keep])
    values = np.concatenate(values or [[]])
    if not values.size:
        return None
    lo, hi = float(values.min()), float(values.max())
    if late is not None and hi - lo <= 1e-9 * max(abs(lo), abs(hi)):
        return fit_ylim(curves, log, None, percent)  # a flat late phase: show how it was reached
    if log:
        a, b = math.log10(lo), math.log10(hi)
        pad = max(0.05 * (b - a), 0.02)
        return 10 ** (a - pad), 10 ** (b + pad)
    span = hi - lo
    pad = 0.1 * span if span > 1e-9 * max(abs(lo), abs(hi), 1e-300) else max(0.05 * abs(hi), 1e-3)
    low, high = lo - pad, hi + pad
    if percent:
        low = max(low, 0.0) if lo >= 0 else low
        high = min(high, 100.0) if hi < 100 else high
    return low, high


def _curves(panel: pd.DataFrame, x: str) -> dict[str, pd.DataFrame]:
    """label -> a frame indexed by round: ``x`` (the x coordinate), ``mean`` and ``sd`` (NaN with a
    single seed) of ``value`` over the seeds."""
    import pandas as pd

    out = {}
    for label, rows in panel.groupby("label", sort=False):
        by_round = rows.groupby("round", sort=True)
        out[label] = pd.DataFrame(
            {"x": by_round[x].first(), "mean": by_round["value"].mean(), "sd": by_round["value"].std()}
        )
    return out


def _spans_decades(curves: dict[str, pd.DataFrame]) -> bool:
    """Whether the curves' means are all positive and span ``AUTO_LOG_DECADES`` decades or more."""
    values = np.concatenate([c["mean"].to_numpy() for c in curves.values()] or [[]])
    values = values[np.isfinite(values)]
    return bool(
        values.size and values.min() > 0 and math.log10(values.max() / values.min()) >= AUTO_LOG_DECADES
    )


def _explicit_ylim(fig: dict, metric: str) -> list[float] | None:
    """The config's ``ylim`` of a panel, or None."""
    ylim = fig.get("ylim")
    return ylim.get(metric) if isinstance(ylim, dict) else ylim


def seeds_note(seeds: Sequence[int]) -> str:
    """What the lines and bands of a figure are, given the number of seeds of each run drawn:
    ``Mean of 3 seeds; band: ±1 sd over seeds`` (or the range of counts when runs differ)."""
    counts = sorted(set(int(n) for n in seeds))
    if counts == [1]:
        return "A single seed per run (no band)"
    if len(counts) == 1:
        return f"Mean of {counts[0]} seeds; band: ±1 sd over seeds"
    return f"Mean of {counts[0]}–{counts[-1]} seeds (per run in the legend); band: ±1 sd over seeds"


def _fit_text(text: str, artist, width_px: float, renderer) -> str:
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


def _title(prefix: str, fig: dict) -> str:
    """The figure's title after ``prefix`` (a prefix ending in ``:`` loses it when there is no title)."""
    title = fig.get("title", "")
    return f"{prefix} {title}".strip() if title else prefix.rstrip(":")


def _log_ticks(ax, low: float, high: float, percent: bool) -> None:
    """Plain tick labels on a log axis where matplotlib's powers of ten read badly: one spanning less
    than a decade (ticks at round values; matplotlib would label a few minor ticks as 9×10^1), less
    than two decades (0.2, 0.5, 1, 2 rather than 2×10^-1 ... 2×10^0) and a percentage (10, 20, 50, 100
    rather than 10^1, 10^2)."""
    from matplotlib.ticker import FormatStrFormatter, LogLocator, MaxNLocator, NullFormatter

    if high / low < 10:
        ax.yaxis.set_major_locator(MaxNLocator(nbins=5))
    elif percent or high / low < 100:
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    else:
        return
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def plot_figure(
    long: pd.DataFrame,
    fig: dict,
    out_png: str | Path,
    out_pdf: str | Path | None = None,
    title_prefix: str = "",
    status: pd.DataFrame | None = None,
) -> Figure:
    """Draw one figure: a panel per metric, x = round, y = the mean over seeds with a ±1 sd band.

    With ``fig["x"]`` a metric (e.g. ``grad_evals``), each evaluated round is placed at the seeds' mean
    of that metric at that round, so seeds are still averaged point by point.

    A run with a single seed draws no band. Curves are smoothed per seed by a trailing moving
    average over ``fig["smooth"]`` evaluated rounds before averaging (the pFedMe code smooths the
    seed-mean curve, window 20; when seeds share their rounds the two orders agree). Non-finite
    values (a diverged seed's last rows) are not drawn; legend labels are :func:`run_labels`
    (a run with diverged seeds reads ``label (diverged k/n)``), below the panels, each curve with
    its :func:`line_styles` look; the legend's title gives the number of seeds and the band's
    meaning (:func:`seeds_note`), and when runs differ in seed count each label gives its own.

    Drawn for print: accuracies (``hetfl.metrics.parse_metric``) in % (``Test accuracy, personal (%)``); a
    panel's y-range is ``fig["ylim"]`` (stored units) when given, else :func:`fit_ylim` over the
    curves of the seeds that did not diverge (a blown-up seed does not flatten the others): on a
    linear axis against rounds with ``yfit: late``, each run's last ``LATE_FRACTION`` of rounds
    (the legend then says so when earlier values fall outside), else every point. ``logy: auto``
    draws the losses (``hetfl.metrics.parse_metric``: ``is_loss``) of a figure on log axes when the curves of one span
    ``AUTO_LOG_DECADES`` decades (a loss with a ``ylim``, or not positive, stays linear). The title
    is wrapped to the figure's width.

    Args:
        long: the tidy table of :func:`hetfl.pipeline.aggregate.load_runs`.
        fig: a figure from :func:`normalize_figures`.
        out_png: path of the PNG; out_pdf: optional path of a PDF of the same figure.
        title_prefix: put before the figure's title (e.g. the study name).
        status: the status table of ``load_runs``; when absent, a seed counts as diverged if it
            recorded a non-finite value.

    Returns:
        The matplotlib ``Figure`` (already saved).

    Raises:
        ValueError: there are no finite values of the figure's metrics for its runs.
    """
    import matplotlib as mpl
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    selected = _select(long, fig)
    data = selected[np.isfinite(selected["value"])]
    if data.empty:
        raise ValueError(
            f"figure {fig['name']!r}: no finite values of {', '.join(fig['metrics'])}"
            f" for runs {', '.join(fig.get('runs') or ['(all)'])}"
        )
    labels = run_labels(long, fig, status)
    counts = _diverged(selected, status).reindex(list(labels), fill_value=0)
    seeds = selected.groupby("run")["seed"].nunique().reindex(list(labels))
    counts["n"] = counts["n"].where(counts["n"] > 0, seeds)  # a run the status table lacks
    if counts["n"].nunique() > 1:  # runs differ in seeds: each label gives its own count
        for run in labels:
            k, n = counts.loc[run, "k"], counts.loc[run, "n"]
            labels[run] += "" if k else f" ({n} seed{'s' if n > 1 else ''})"
    diverged = _seed_flags(selected, status)
    diverged = set(diverged.index[diverged.to_numpy()])
    data = data.sort_values(["run", "seed", "metric", "round"], kind="mergesort")
    x = fig.get("x", "round")
    if x != "round":
        xs = long[long["metric"] == x].groupby(["run", "round"])["value"].mean().rename("_x")
        data = data.join(xs, on=["run", "round"]).dropna(subset=["_x"])
    smooth = fig.get("smooth", 1)
    data = data.assign(
        label=data["run"].map(labels),
        healthy=[key not in diverged for key in zip(data["run"], data["seed"], strict=True)],
        value=data.groupby(["run", "seed", "metric"])["value"].transform(
            lambda v: v.rolling(smooth, min_periods=1).mean()
        ),
    )
    styles = line_styles(list(labels.values()))
    n_panels = len(fig["metrics"])
    with mpl.rc_context(STYLE):
        figure = Figure(figsize=(4.2 * n_panels, 3.4), layout="constrained")
        FigureCanvasAgg(figure)
        renderer = figure.canvas.get_renderer()
        axes = figure.subplots(1, n_panels, squeeze=False)[0]
        panels = {
            metric: _panel_curves(data[data["metric"] == metric], metric, x) for metric in fig["metrics"]
        }
        logs = _panel_logs(fig, panels)
        clipped = False
        for ax, metric in zip(axes, fig["metrics"], strict=True):
            clipped |= _draw_panel(ax, panels[metric], fig, metric, x, styles, logs[metric])
        handles = [Line2D([], [], label=label, **style) for label, style in styles.items()]
        note = seeds_note(counts["n"].tolist())
        if clipped:
            part = "half" if LATE_FRACTION == 0.5 else f"{LATE_FRACTION:.0%}"
            note += f"\ny-axis fit to the last {part} of the rounds (earlier values lie outside)"
        width = figure.bbox.width * 0.98
        for rows in range(1, len(handles) + 1):  # the fewest rows that fit the width, columns balanced
            ncol = math.ceil(len(handles) / rows)
            if rows > 1 and ncol == math.ceil(len(handles) / (rows - 1)):
                continue  # the same layout as one row fewer
            legend = figure.legend(
                handles=handles,
                loc="outside lower center",
                ncol=ncol,
                frameon=False,
                title=note,
                columnspacing=1.2,
                handlelength=2.6,
            )
            _fit_text(note, legend.get_title(), width, renderer)
            if ncol == 1 or legend.get_window_extent(renderer).width <= width:
                break
            legend.remove()
        title = _title(title_prefix, fig)
        extra = legend.get_window_extent(renderer).height / figure.dpi
        if title:
            text = figure.suptitle(title)
            _fit_text(title, text, width, renderer)
            extra += text.get_window_extent(renderer).height / figure.dpi + 0.1
        figure.set_size_inches(4.2 * n_panels, 2.9 + extra)
        save(figure, out_png, out_pdf)
    return figure


def save(figure, *paths) -> None:
    """Write ``figure`` to each of ``paths`` (None skipped) at 150 dpi; a PDF without its creation date,
    so that the same figure is the same bytes on every run."""
    for path in paths:
        if path is not None:
            pdf = str(path).endswith(".pdf")
            figure.savefig(path, dpi=150, metadata={"CreationDate": None} if pdf else None)


def _panel_curves(panel: pd.DataFrame, metric: str, x: str) -> tuple[pd.DataFrame, dict, dict]:
    """A panel's rows (an accuracy in %), its drawn curves (every seed) and the curves its y-range
    fits (the seeds that did not diverge; every seed when all did): see :func:`_curves`."""
    if parse_metric(metric).is_accuracy:
        panel = panel.assign(value=100.0 * panel["value"])
    curves = _curves(panel, "round" if x == "round" else "_x")
    fit = _curves(panel[panel["healthy"]], "round" if x == "round" else "_x") or curves
    return panel, curves, fit


def _panel_logs(fig: dict, panels: dict[str, tuple]) -> dict[str, bool]:
    """Whether each panel has a log axis: as ``logy`` says, and with ``auto``, the loss panels without
    a ``ylim`` whose curves are positive, all of them when one spans ``AUTO_LOG_DECADES`` (the losses
    of a figure share their kind of axis)."""
    decided = {metric: log_panel(fig, metric) for metric in panels}
    auto = [
        metric
        for metric, (_, _, fit) in panels.items()
        if decided[metric] is None
        and _explicit_ylim(fig, metric) is None
        and parse_metric(metric).is_loss
        and fit
        and all((c["mean"].dropna() > 0).all() for c in fit.values())
    ]
    wide = any(_spans_decades(panels[metric][2]) for metric in auto)
    return {
        metric: bool(log) if log is not None else wide and metric in auto for metric, log in decided.items()
    }


def _draw_panel(ax, panel: tuple, fig: dict, metric: str, x: str, styles: dict, log: bool) -> bool:
    """Draw one metric's curves (``panel``: :func:`_panel_curves`) on ``ax`` (see :func:`plot_figure`);
    returns whether the late-phase y-range leaves some of the curves outside."""
    panel, curves, fit = panel
    percent = parse_metric(metric).is_accuracy
    ax.set_xlabel("Round" if x == "round" else axis_label(x, unit=False))
    ax.set_ylabel(axis_label(metric))
    ax.grid(alpha=0.3, linewidth=0.6)
    if panel.empty:
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center")
        return False
    explicit = _explicit_ylim(fig, metric)
    for i, (label, style) in enumerate((k, v) for k, v in styles.items() if k in curves):
        curve = curves[label]
        step = max(1, math.ceil(len(curve) / MARKERS_PER_LINE))
        ax.plot(
            curve["x"].to_numpy(),
            curve["mean"].to_numpy(),
            markevery=(i * step // max(len(styles), 1) % step, step),
            label=label,
            **style,
        )
        if curve["sd"].notna().any():
            ax.fill_between(
                curve["x"].to_numpy(),
                (curve["mean"] - curve["sd"]).to_numpy(),
                (curve["mean"] + curve["sd"]).to_numpy(),
                color=style["color"],
                alpha=0.18 if len(styles) <= PLAIN_RUNS else 0.1,
                linewidth=0,
            )
    if x == "round":
        rounds = panel["round"]
        if rounds.max() > rounds.min():
            ax.set_xlim(rounds.min(), rounds.max())
    if log:
        ax.set_yscale("log")
    clipped = False
    if explicit is not None:
        limits = tuple(100.0 * v for v in explicit) if percent else tuple(explicit)
    else:
        late = LATE_FRACTION if fig.get("yfit", "late") == "late" and x == "round" and not log else None
        limits = fit_ylim(
            [(c.index.to_numpy(), c["mean"].to_numpy()) for c in fit.values()],
            log=log,
            late=late,
            percent=percent,
        )
        if limits is not None and late is not None:
            means = np.concatenate([c["mean"].to_numpy() for c in fit.values()])
            means = means[np.isfinite(means)]
            clipped = bool(((means < limits[0]) | (means > limits[1])).any())
    if limits is not None:
        ax.set_ylim(*limits)
    if log:
        _log_ticks(ax, *ax.get_ylim(), percent)
    else:
        ax.ticklabel_format(axis="y", useOffset=False)
    return clipped


def draw(
    fig: dict,
    long: pd.DataFrame,
    status: pd.DataFrame | None,
    artifacts: dict[tuple[str, int], Path],
    out_png: str | Path,
    out_pdf: str | Path | None = None,
    title_prefix: str = "",
) -> Figure:
    """Draw a figure of any kind (the figure stage's entry point).

    Args:
        fig: a figure from :func:`normalize_figures`.
        long, status: the study's tables (:func:`hetfl.pipeline.aggregate.load_runs`).
        artifacts: (run, seed) -> the run's ``artifacts.npz``, for kinds drawn from recorded arrays.

    Raises:
        ValueError: nothing to draw.
    """
    if fig.get("kind", "lines") == "lines":
        return plot_figure(long, fig, out_png, out_pdf, title_prefix=title_prefix, status=status)
    if fig["kind"] == "heatmap":
        return plot_heatmap(fig, artifacts, out_png, out_pdf, title_prefix=title_prefix)
    raise ValueError(f"unknown figure kind {fig['kind']!r}")


def heatmap_matrices(fig: dict, artifacts: dict[tuple[str, int], Path]) -> dict[str, tuple[int, list]]:
    """The matrices a heatmap figure draws: run -> (seed, [(round, matrix [N, N], cluster [N] or None)]).

    For each requested round r the matrix is the last one recorded in a round <= r (the weights in force
    during round r; ``<artifact>_round`` gives each record's round, else records are rounds 1, 2, ...);
    rounds before the first record take the first one.

    Raises:
        ValueError: a run has no artifacts for the seed, or its file lacks the array.
    """
    out = {}
    for run in fig["runs"]:
        seeds = sorted(seed for r, seed in artifacts if r == run)
        seed = fig.get("seed") if fig.get("seed") is not None else (seeds[0] if seeds else None)
        if seed not in seeds:
            raise ValueError(f"figure {fig['name']!r}: no artifacts of run {run!r} for seed {seed}")
        with np.load(artifacts[(run, seed)]) as data:
            name = fig["artifact"]
            if name not in data.files:
                raise ValueError(
                    f"figure {fig['name']!r}: run {run!r} recorded no {name!r} (it has: {', '.join(data.files)})"
                )
            stack = np.asarray(data[name], dtype=np.float64)
            stack = stack[None] if stack.ndim == 2 else stack
            rounds = data[f"{name}_round"] if f"{name}_round" in data.files else np.arange(1, len(stack) + 1)
            cluster = data["cluster"] if "cluster" in data.files else None
        picks = []
        for r in fig["at"]:
            index = max(int(np.searchsorted(rounds, r, side="right")) - 1, 0)
            picks.append((r, stack[index], cluster))
        out[run] = (seed, picks)
    return out


def plot_heatmap(
    fig: dict,
    artifacts: dict[tuple[str, int], Path],
    out_png: str | Path,
    out_pdf: str | Path | None = None,
    title_prefix: str = "",
) -> Figure:
    """Draw recorded N×N matrices (e.g. All-for-one's α_ik) as heatmaps: a row of panels per run, one panel
    per requested round; rows i (the client) and columns k, clients ordered by ground-truth cluster (then
    index) when the run recorded ``cluster``, with the cluster boundaries drawn. The title is wrapped to the
    figure's width.

    Args:
        fig: a ``kind: heatmap`` figure from :func:`normalize_figures`.
        artifacts: (run, seed) -> the run's ``artifacts.npz``.

    Returns:
        The matplotlib ``Figure`` (already saved).

    Raises:
        ValueError: see :func:`heatmap_matrices`.
    """
    import matplotlib as mpl
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    matrices = heatmap_matrices(fig, artifacts)
    rows, cols = len(matrices), len(fig["at"])
    with mpl.rc_context(STYLE):
        figure = Figure(figsize=(2.6 * cols + 0.8, 2.5 * rows + 0.6), layout="constrained")
        FigureCanvasAgg(figure)
        axes = figure.subplots(rows, cols, squeeze=False)
        vmax = max(float(np.nanmax(np.abs(m))) for _, picks in matrices.values() for _, m, _ in picks) or 1.0
        image = None
        for row, (run, (seed, picks)) in zip(axes, matrices.items(), strict=True):
            for ax, (r, matrix, cluster) in zip(row, picks, strict=True):
                order = (
                    np.lexsort((np.arange(len(matrix)), cluster))
                    if cluster is not None
                    else np.arange(len(matrix))
                )
                image = ax.imshow(matrix[np.ix_(order, order)], vmin=0.0, vmax=vmax, cmap="viridis")
                if cluster is not None:
                    for edge in np.flatnonzero(np.diff(cluster[order])) + 0.5:
                        ax.axhline(edge, color="white", lw=0.8)
                        ax.axvline(edge, color="white", lw=0.8)
                ax.set_title(f"{fig['labels'].get(run, run)}, round {r}", fontsize=8)
                ax.set_xticks([])
                ax.set_yticks([])
            row[0].set_ylabel(f"client i (seed {seed})", fontsize=8)
        for ax in axes[-1]:
            ax.set_xlabel("collaborator k", fontsize=8)
        figure.colorbar(image, ax=axes, shrink=0.8, label=fig["artifact"])
        title = _title(title_prefix, fig)
        if title:
            _fit_text(title, figure.suptitle(title), figure.bbox.width * 0.98, figure.canvas.get_renderer())
        save(figure, out_png, out_pdf)
    return figure
