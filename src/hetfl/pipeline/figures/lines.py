"""Line figures (``kind: lines``, the default): a panel per metric, the mean over seeds against rounds (or
another metric) with a ±1 sd band, y-ranges fit for print (:func:`fit_ylim`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hetfl.metrics import parse_metric
from hetfl.pipeline.figures.style import (
    MARKERS_PER_LINE,
    PLAIN_RUNS,
    STYLE,
    axis_label,
    figure_title,
    fit_text,
    line_styles,
    save,
    seeds_note,
)
from hetfl.pipeline.plotting import AUTO_LOG_DECADES, LATE_FRACTION, log_panel

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure


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


def log_ticks(ax, low: float, high: float, percent: bool) -> None:
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
    its :func:`~hetfl.pipeline.figures.style.line_styles` look; the legend's title gives the number of seeds and the band's
    meaning (:func:`~hetfl.pipeline.figures.style.seeds_note`), and when runs differ in seed count each label gives its own.

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
        fig: a figure from :func:`hetfl.pipeline.plotting.normalize_figures`.
        out_png: path of the PNG; out_pdf: optional path of a PDF of the same figure.
        title_prefix: put before the figure's title (e.g. the study name).
        status: the status table of ``load_runs``; when absent, a seed counts as diverged if it
            recorded a non-finite value.

    Returns:
        The matplotlib ``Figure`` (already saved).

    Raises:
        ValueError: there are no finite values of the figure's metrics for its runs.
    """
    selected = _select(long, fig)
    data = selected[np.isfinite(selected["value"])]
    if data.empty:
        raise ValueError(
            f"figure {fig['name']!r}: no finite values of {', '.join(fig['metrics'])}"
            f" for runs {', '.join(fig.get('runs') or ['(all)'])}"
        )
    labels, seeds = _legend_labels(long, selected, fig, status)
    data = _plotted_rows(long, selected, data, fig, labels, status)
    return _draw_figure(data, fig, labels, seeds, figure_title(title_prefix, fig), out_png, out_pdf)


def _draw_figure(
    data: pd.DataFrame,
    fig: dict,
    labels: dict[str, str],
    seeds: list[int],
    title: str,
    out_png: str | Path,
    out_pdf: str | Path | None,
) -> Figure:
    """Draw and save the figure of the rows ``data`` (:func:`_plotted_rows`): its panels, then its legend
    (the runs' ``labels``; its title: :func:`~hetfl.pipeline.figures.style.seeds_note` of ``seeds``) and
    ``title``."""
    import matplotlib as mpl
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    x = fig.get("x", "round")
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
        note = seeds_note(seeds)
        if clipped:
            part = "half" if LATE_FRACTION == 0.5 else f"{LATE_FRACTION:.0%}"
            note += f"\ny-axis fit to the last {part} of the rounds (earlier values lie outside)"
        _legend_and_title(figure, renderer, styles, note, title, n_panels)
        save(figure, out_png, out_pdf)
    return figure


def _legend_labels(
    long: pd.DataFrame, selected: pd.DataFrame, fig: dict, status: pd.DataFrame | None
) -> tuple[dict[str, str], list[int]]:
    """The legend label of each run drawn (:func:`run_labels`; each with its own seed count when the runs
    differ in it) and the runs' seed counts, in drawing order."""
    labels = run_labels(long, fig, status)
    counts = _diverged(selected, status).reindex(list(labels), fill_value=0)
    seeds = selected.groupby("run")["seed"].nunique().reindex(list(labels))
    counts["n"] = counts["n"].where(counts["n"] > 0, seeds)  # a run the status table lacks
    if counts["n"].nunique() > 1:  # runs differ in seeds: each label gives its own count
        for run in labels:
            k, n = counts.loc[run, "k"], counts.loc[run, "n"]
            labels[run] += "" if k else f" ({n} seed{'s' if n > 1 else ''})"
    return labels, counts["n"].tolist()


def _plotted_rows(
    long: pd.DataFrame,
    selected: pd.DataFrame,
    data: pd.DataFrame,
    fig: dict,
    labels: dict[str, str],
    status: pd.DataFrame | None,
) -> pd.DataFrame:
    """The finite rows ``data`` of the figure's ``selected`` rows as drawn: sorted, with the x coordinate
    (``_x``) when ``x`` is a metric, their run's legend ``label``, whether their seed is ``healthy`` (did
    not diverge) and ``value`` smoothed per seed (``smooth``)."""
    diverged = _seed_flags(selected, status)
    diverged = set(diverged.index[diverged.to_numpy()])
    data = data.sort_values(["run", "seed", "metric", "round"], kind="mergesort")
    x = fig.get("x", "round")
    if x != "round":
        xs = long[long["metric"] == x].groupby(["run", "round"])["value"].mean().rename("_x")
        data = data.join(xs, on=["run", "round"]).dropna(subset=["_x"])
    smooth = fig.get("smooth", 1)
    return data.assign(
        label=data["run"].map(labels),
        healthy=[key not in diverged for key in zip(data["run"], data["seed"], strict=True)],
        value=data.groupby(["run", "seed", "metric"])["value"].transform(
            lambda v: v.rolling(smooth, min_periods=1).mean()
        ),
    )


def _legend_and_title(figure: Figure, renderer, styles: dict, note: str, title: str, n_panels: int) -> None:
    """Put the legend below the panels (titled ``note``: the fewest rows that fit the figure's width, columns
    balanced) and the title above, both wrapped to the width, and size the figure to hold them."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], label=label, **style) for label, style in styles.items()]
    width = figure.bbox.width * 0.98
    for rows in range(1, len(handles) + 1):
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
        fit_text(note, legend.get_title(), width, renderer)
        if ncol == 1 or legend.get_window_extent(renderer).width <= width:
            break
        legend.remove()
    extra = legend.get_window_extent(renderer).height / figure.dpi
    if title:
        text = figure.suptitle(title)
        fit_text(title, text, width, renderer)
        extra += text.get_window_extent(renderer).height / figure.dpi + 0.1
    figure.set_size_inches(4.2 * n_panels, 2.9 + extra)


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
    ax.set_xlabel("Round" if x == "round" else axis_label(x, unit=False))
    ax.set_ylabel(axis_label(metric))
    ax.grid(alpha=0.3, linewidth=0.6)
    if panel.empty:
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center")
        return False
    _draw_curves(ax, curves, styles)
    if x == "round":
        rounds = panel["round"]
        if rounds.max() > rounds.min():
            ax.set_xlim(rounds.min(), rounds.max())
    return _set_yaxis(ax, fit, fig, metric, x, log)


def _draw_curves(ax, curves: dict, styles: dict) -> None:
    """Each curve's mean in its style, markers spread along it (staggered between curves), and its ±1 sd
    band when it has one (more than one seed)."""
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


def _set_yaxis(ax, fit: dict, fig: dict, metric: str, x: str, log: bool) -> bool:
    """A panel's y-axis: log or linear, its range (the config's ``ylim``, else :func:`fit_ylim` over the
    ``fit`` curves) and tick labels; returns whether the late-phase range leaves some of the curves outside."""
    percent = parse_metric(metric).is_accuracy
    explicit = _explicit_ylim(fig, metric)
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
        log_ticks(ax, *ax.get_ylim(), percent)
    else:
        ax.ticklabel_format(axis="y", useOffset=False)
    return clipped
