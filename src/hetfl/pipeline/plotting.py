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

import dataclasses
import re
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from hetfl.config_options import REQUIRED, ConfigOptions, option
from hetfl.errors import ConfigError

if TYPE_CHECKING:  # pandas, seaborn and matplotlib are imported where a figure is drawn, so that
    # validating a config (every training job does) does not pay for them
    import pandas as pd
    from matplotlib.figure import Figure

X_AXES = ("round",)  # or the name of any metric the study reports
LOGY = ("auto", "false", "true")  # or a list of the figure's metrics drawn on a log axis
LATE_FRACTION = 0.5
"""``yfit: late``: the automatic y-range fits the last half of each run's evaluated rounds."""
AUTO_LOG_DECADES = 2.0
"""``logy: auto``: a loss panel is drawn on a log axis when its curves span this many decades."""
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.=+-]{0,99}")
"""A figure name is a file name: letters, digits and ``_ . = + -``, not starting with a dot."""


def _names(value: object, allowed: list[str], key: str, what: str) -> list[str]:
    """A non-empty list of names from ``allowed`` (a single string counts as a list of one)."""
    values = _name_list(value, key, what, allowed)
    unknown = [v for v in values if v not in allowed]
    if unknown:
        raise ConfigError(key, f"unknown {what}(s) {', '.join(unknown)}", allowed=allowed)
    return list(dict.fromkeys(values))


def _name_list(value: object, key: str, what: str, allowed: list[str] | None = None) -> list[str]:
    """A non-empty list of strings (a single string counts as a list of one)."""
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise ConfigError(key, f"expected a non-empty list of {what}s", allowed=allowed)
    return values


def _safe_name(value: object, key: str) -> str:
    if not isinstance(value, str) or not SAFE_NAME.fullmatch(value):
        raise ConfigError(
            key,
            f"{value!r} is not a safe file name (letters, digits, _ . = + -; at most 100; no leading dot)",
        )
    return value


def _labels(value: object, key: str) -> dict[str, str]:
    labels = value or {}
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise ConfigError(key, "expected a mapping run -> label")
    return {str(k): v for k, v in labels.items()}


def _logy_form(value: object, key: str) -> bool | str | list[str]:
    """``logy``'s form: true, false, ``auto`` or a non-empty list of metric names (which the figure's are is
    checked with the figure: :func:`_logy`)."""
    if isinstance(value, bool) or value == "auto":
        return value
    if isinstance(value, list) and value and all(isinstance(m, str) for m in value):
        return value
    raise ConfigError(
        key, f"expected true or false, auto, or a list of the figure's metrics, got {value!r}", allowed=LOGY
    )


def _rounds(value: object, key: str) -> list[int]:
    if not (
        isinstance(value, list)
        and value
        and all(type(r) is int and r >= 0 for r in value)
        and value == sorted(set(value))
    ):
        raise ConfigError(key, f"expected a non-empty increasing list of rounds >= 0, got {value!r}")
    return value


def _artifact(value: object, key: str) -> str:
    if not isinstance(value, str) or not value.isidentifier():
        raise ConfigError(key, f"expected the name of a recorded array, got {value!r}")
    return value


@dataclasses.dataclass(frozen=True)
class LinesFigure(ConfigOptions):
    """A figure of metric curves (``kind: lines``, the default), as the config writes it (module docstring): the
    form of each value. Which runs and metrics it may name is the study's (:func:`normalize_figures`)."""

    metrics: list = option(REQUIRED, check=lambda v, k: _name_list(v, k, "metric"))
    runs: list | None = option(None, check=lambda v, k: None if v is None else _name_list(v, k, "run"))
    name: str | None = option(None, check=_safe_name)
    kind: Literal["lines", "heatmap"] = "lines"
    labels: dict = option({}, check=_labels)
    title: str = option("", check=lambda v, k: str(v))
    logy: bool | str | list = option("auto", check=_logy_form)
    ylim: object = None  # [low, high] or {metric: [low, high]}: checked with the figure (:func:`_ylim`)
    yfit: Literal["all", "late"] = "late"
    smooth: int = option(1, lo=1, expected="an integer window >= 1")
    x: str = "round"


@dataclasses.dataclass(frozen=True)
class HeatmapFigure(ConfigOptions):
    """A figure of an N×N matrix recorded by the runs (``kind: heatmap``), as the config writes it (module
    docstring)."""

    runs: list = option(REQUIRED, check=lambda v, k: _name_list(v, k, "run"))
    at: list = option(REQUIRED, check=_rounds)
    name: str | None = option(None, check=_safe_name)
    kind: Literal["heatmap"] = "heatmap"
    labels: dict = option({}, check=_labels)
    title: str = option("", check=lambda v, k: str(v))
    artifact: str = option("alpha", check=_artifact)
    seed: int | None = option(None, lo=0, expected="a seed of the study (an integer >= 0)")


def _heatmap(entry: dict, runs: list[str], key: str) -> dict:
    """Normalize a ``kind: heatmap`` entry (:class:`HeatmapFigure`)."""
    spec = HeatmapFigure.from_dict(entry, key)
    fig = {"kind": "heatmap", "metrics": [], "runs": _names(spec.runs, runs, f"{key}.runs", "run")}
    fig["name"] = spec.name or f"heatmap-{'-'.join(fig['runs'])}"
    _safe_name(fig["name"], f"{key}.name")
    if spec.labels:
        _names(list(spec.labels), fig["runs"], f"{key}.labels", "run")
    fig.update(labels=spec.labels, title=spec.title, artifact=spec.artifact, at=spec.at, seed=spec.seed)
    return fig


def _logy(value: bool | str | list[str], metrics: list[str], key: str) -> bool | str | list[str]:
    """``logy``: true, false, ``auto`` or a non-empty list of the figure's metrics."""
    return _names(value, metrics, key, "metric") if isinstance(value, list) else value


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
    """Normalize a figure entry (:class:`LinesFigure` or :class:`HeatmapFigure`) against the study's runs and
    metrics."""
    if entry.get("kind") == "heatmap":
        return _heatmap(entry, runs, key)
    spec = LinesFigure.from_dict(entry, key)
    fig = {
        "metrics": _names(spec.metrics, metrics, f"{key}.metrics", "metric"),
        "runs": None if spec.runs is None else _names(spec.runs, runs, f"{key}.runs", "run"),
    }
    fig["name"] = spec.name or "-".join(fig["metrics"])
    _safe_name(fig["name"], f"{key}.name")
    if spec.labels:
        _names(list(spec.labels), fig["runs"] or runs, f"{key}.labels", "run")
    fig["labels"] = spec.labels
    fig["title"] = spec.title
    fig["logy"] = _logy(spec.logy, fig["metrics"], f"{key}.logy")
    fig["ylim"] = _ylim(spec.ylim, fig["metrics"], fig["logy"], f"{key}.ylim")
    fig["yfit"] = spec.yfit
    fig["smooth"] = spec.smooth
    fig["kind"] = spec.kind
    if spec.x not in X_AXES and spec.x not in metrics:
        raise ConfigError(f"{key}.x", f"unknown x axis {spec.x!r}", allowed=[*X_AXES, *metrics])
    fig["x"] = spec.x
    return fig


def normalize_figures(figures: list, runs: list[str], metrics: set[str], key: str) -> list[dict]:
    """Validate a study's ``figures`` and bring each entry to one form.

    Args:
        figures: the config list: metric names or mappings (:class:`LinesFigure`).
        runs: the study's run labels; metrics: the metric names its runs report.
        key: the dotted config key of the list, e.g. ``studies.pfedme_mnist.figures``.

    Returns:
        One dict per figure with keys name, metrics (list), runs (list, or None for every run
        that reports the metrics), labels ({run: label}), title (str), logy (True, False, ``auto``
        or a list of metrics), ylim ([lo, hi], {metric: [lo, hi]} or None, in the metrics' stored
        units), yfit (``late`` or ``all``), smooth (int window >= 1), x (``round`` or a metric name).
        A ``kind: heatmap`` entry (:class:`HeatmapFigure`) has its keys, and ``metrics`` empty.

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
