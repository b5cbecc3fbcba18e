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

This module holds what a figure spec may say (:func:`normalize_figures`) and the figure stage's entry
point, :func:`draw`; the drawing itself is in :mod:`hetfl.pipeline.figures`. Drawing uses matplotlib's Agg
canvas directly (no pyplot state, no display needed). Line figures are drawn for print: accuracies (metrics
named ``*_acc_*``) in %, the automatic y-range fit to the late phase of the curves
(:func:`hetfl.pipeline.figures.lines.fit_ylim`), losses spanning decades on a log axis, a (color, line
style, marker) per run (:func:`hetfl.pipeline.figures.style.line_styles`), titles wrapped to the figure's
width, and the seed count and band meaning in the legend.
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
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.=+-]{0,99}")
"""A figure name is a file name: letters, digits and ``_ . = + -``, not starting with a dot."""


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
    ``logy`` is ``auto`` (the data decide: :func:`hetfl.pipeline.figures.lines.plot_figure`)."""
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
    # imported here: the drawing modules read this module's spec constants (LATE_FRACTION, log_panel)
    from hetfl.pipeline.figures.heatmap import plot_heatmap
    from hetfl.pipeline.figures.lines import plot_figure

    if fig.get("kind", "lines") == "lines":
        return plot_figure(long, fig, out_png, out_pdf, title_prefix=title_prefix, status=status)
    if fig["kind"] == "heatmap":
        return plot_heatmap(fig, artifacts, out_png, out_pdf, title_prefix=title_prefix)
    raise ValueError(f"unknown figure kind {fig['kind']!r}")
