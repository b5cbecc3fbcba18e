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
        logy: false
        ylim: [0.86, 0.95]
        smooth: 20                               # moving average over evaluated rounds
        x: round                                 # or a metric, e.g. grad_evals: curves against it
      - name: weights                            # kind heatmap: an N×N matrix recorded by the runs
        kind: heatmap
        runs: [a41_bin, a41_cont]                # one row of panels per run
        artifact: alpha                          # the array in each run's artifacts.npz ([U, N, N])
        at: [1, 10, 100]                         # rounds: the last matrix recorded in or before each
        seed: 127                                # default: the smallest seed of the run

Drawing uses matplotlib's Agg canvas directly (no pyplot state, no display needed).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hetfl.errors import ConfigError

if TYPE_CHECKING:  # pandas, seaborn and matplotlib are imported where a figure is drawn, so that
    # validating a config (every training job does) does not pay for them
    import pandas as pd
    from matplotlib.figure import Figure

FIGURE_KEYS = ("name", "kind", "metrics", "runs", "labels", "title", "logy", "ylim", "smooth", "x")
KINDS = ("heatmap", "lines")  # what draw() can draw: metric curves (plot_figure), matrices (plot_heatmap)
HEATMAP_KEYS = ("name", "kind", "runs", "labels", "title", "artifact", "at", "seed")
X_AXES = ("round",)  # or the name of any metric the study reports
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.=+-]{0,99}")
"""A figure name is a file name: letters, digits and ``_ . = + -``, not starting with a dot."""

_STAT_WORDS = {"acc": "accuracy", "loss": "loss"}


def metric_label(name: str) -> str:
    """Axis label of a metric: ``test_acc_personal`` → ``Test accuracy (personal)``."""
    parts = name.split("_")
    if len(parts) == 3 and parts[0] in ("train", "test") and parts[1] in _STAT_WORDS:
        return f"{parts[0].capitalize()} {_STAT_WORDS[parts[1]]} ({parts[2]})"
    return name.replace("_", " ")


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
    fig["logy"] = entry.get("logy", False)
    if not isinstance(fig["logy"], bool):
        raise ConfigError(f"{key}.logy", "expected true or false")
    ylim = entry.get("ylim")
    if ylim is not None and not (
        isinstance(ylim, list)
        and len(ylim) == 2
        and all(isinstance(v, int | float) and not isinstance(v, bool) and np.isfinite(v) for v in ylim)
        and ylim[0] < ylim[1]
        and (not fig["logy"] or ylim[0] > 0)
    ):
        raise ConfigError(
            f"{key}.ylim", "expected [low, high] finite numbers with low < high (low > 0 with logy)"
        )
    fig["ylim"] = None if ylim is None else [float(v) for v in ylim]
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
        that reports the metrics), labels ({run: label}), title (str), logy (bool), ylim
        ([lo, hi] or None), smooth (int window >= 1), x (``round`` or a metric name).

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


def _diverged(long: pd.DataFrame, status: pd.DataFrame | None) -> pd.DataFrame:
    """Per run: seeds (n) and diverged seeds (k), from ``status`` or, without it, from the seeds
    that recorded a non-finite value."""
    if status is None:
        flags = long.assign(diverged=~np.isfinite(long["value"])).groupby(["run", "seed"])["diverged"].any()
    else:
        flags = status.set_index(["run", "seed"])["status"].eq("diverged")
    return flags.groupby("run").agg(k="sum", n="size")


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
    (a run with diverged seeds reads ``label (diverged k/n)``), below the panels.

    Args:
        long: the tidy table of :func:`hetfl.aggregate.load_runs`.
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
    import seaborn as sns
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    data = _select(long, fig)
    data = data[np.isfinite(data["value"])]
    if data.empty:
        raise ValueError(
            f"figure {fig['name']!r}: no finite values of {', '.join(fig['metrics'])}"
            f" for runs {', '.join(fig.get('runs') or ['(all)'])}"
        )
    labels = run_labels(long, fig, status)
    data = data.sort_values(["run", "seed", "metric", "round"], kind="mergesort")
    x = fig.get("x", "round")
    if x != "round":
        xs = long[long["metric"] == x].groupby(["run", "round"])["value"].mean().rename("_x")
        data = data.join(xs, on=["run", "round"]).dropna(subset=["_x"])
    smooth = fig.get("smooth", 1)
    data = data.assign(
        label=data["run"].map(labels),
        value=data.groupby(["run", "seed", "metric"])["value"].transform(
            lambda v: v.rolling(smooth, min_periods=1).mean()
        ),
    )
    palette = dict(zip(labels.values(), sns.color_palette(n_colors=len(labels)), strict=True))

    figure = Figure(figsize=(4.2 * len(fig["metrics"]), 3.4), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(1, len(fig["metrics"]), squeeze=False)[0]
    for ax, metric in zip(axes, fig["metrics"], strict=True):
        panel = data[data["metric"] == metric]
        if panel.empty:
            ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center")
        else:
            order = [label for label in palette if label in set(panel["label"])]
            sns.lineplot(
                data=panel,
                x="round" if x == "round" else "_x",
                y="value",
                hue="label",
                hue_order=order,
                palette=palette,
                estimator="mean",
                errorbar="sd",
                sort=False,  # rows are in round order: a curve against a metric keeps its trajectory
                legend=False,
                ax=ax,
            )
        ax.set_xlabel("Round" if x == "round" else metric_label(x))
        ax.set_ylabel(metric_label(metric))
        if fig.get("logy"):
            ax.set_yscale("log")
        if fig.get("ylim"):
            ax.set_ylim(*fig["ylim"])
        ax.grid(alpha=0.3)
    handles = [Line2D([], [], color=color, label=label) for label, color in palette.items()]
    figure.legend(
        handles=handles,
        loc="outside lower center",
        ncol=min(len(handles), 2 * len(fig["metrics"])),
        frameon=False,
    )
    title = " ".join(t for t in (title_prefix, fig.get("title", "")) if t)
    if title:
        figure.suptitle(title)
    for path in (out_png, out_pdf):
        if path is not None:
            figure.savefig(path, dpi=150)
    return figure


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
        long, status: the study's tables (:func:`hetfl.aggregate.load_runs`).
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
    index) when the run recorded ``cluster``, with the cluster boundaries drawn.

    Args:
        fig: a ``kind: heatmap`` figure from :func:`normalize_figures`.
        artifacts: (run, seed) -> the run's ``artifacts.npz``.

    Returns:
        The matplotlib ``Figure`` (already saved).

    Raises:
        ValueError: see :func:`heatmap_matrices`.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    matrices = heatmap_matrices(fig, artifacts)
    rows, cols = len(matrices), len(fig["at"])
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
    title = " ".join(t for t in (title_prefix, fig.get("title", "")) if t)
    if title:
        figure.suptitle(title)
    for path in (out_png, out_pdf):
        if path is not None:
            figure.savefig(path, dpi=150)
    return figure
