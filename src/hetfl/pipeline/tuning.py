"""Hyper-parameter selection on validation data (a run's ``tune:`` block), never on the test set.

A run declares::

    runs:
      fedavg:
        algorithm: fedavg
        tune:
          grid: {lr: [0.01, 0.03, 0.1], local_steps: [10, 20]}   # its hyper-parameters' candidates
          seeds: [100, 101]          # the tuning seeds (default: the study's seeds)
          metric: val_acc_global     # a validation metric (partition.val_fraction > 0, or val_fraction below)
          at: final                  # round rule: final | best | last<k> (mean of the last k evaluations)
          val_fraction: 0.2          # optional: the grid points hold this share of each client's training
                                     # samples out (the run itself trains on all of them)

Every grid point is an ordinary training run, labelled ``fedavg@lr=0.01-local_steps=10`` (``@`` cannot
appear in a user's run label), trained on each tuning seed. The ``tune`` stage scores each point by the
declared validation metric under the round rule, averaged over the tuning seeds, and picks the best
(highest, or lowest for a loss; the first in grid order on ties; a point that diverged on any seed is
never picked); the run then trains on the study's seeds with the chosen values. With ``val_fraction``, only the
grid points hold a validation share out of each client's training samples (their partition is the run's with
that ``val_fraction``): the run then trains, with the chosen values, on all of its training samples, as one
retrains on the whole training set after choosing on a held-out part. That suits clients with few samples (a
hospital with 30 patients), whose final models should not give up a tenth of them. The selection reads only
the rows of the declared validation metric: test data never decide anything. The scores of every point
and the choice are ``results/tables/<study>/tuning.csv``. Changing the grid trains only the new points
and reruns the selection and the run.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hetfl.config_options import REQUIRED, ConfigOptions, option
from hetfl.errors import ConfigError
from hetfl.metrics import parse_metric

if TYPE_CHECKING:  # pandas and hetfl.pipeline.aggregate are imported where the selection runs
    import pandas as pd

SEPARATOR = "@"
"""Between a tuned run's label and its grid point, in the point's run label."""
TABLE_COLUMNS = [
    "run",
    "point",
    "metric",
    "at",
    "seeds",
    "score",
    "score_std",
    "n_seeds",
    "n_diverged",
    "chosen",
]


@dataclass
class Tuning:
    """A run's validated ``tune:`` block and its grid points.

    Attributes:
        run: the tuned run's label.
        grid: hyper-parameter -> candidate values, in the config's order.
        seeds: the tuning seeds.
        metric: the validation metric that decides (``val_*``).
        at: ``final``, ``best`` or ``last<k>``.
        points: point label -> its hyper-parameter values (one per combination of ``grid``).
        val_fraction: the validation share the grid points alone hold out (their partition's
            ``val_fraction``), or None: the points train on the run's own partition.
    """

    run: str
    grid: dict[str, list[Any]]
    seeds: list[int]
    metric: str
    at: str
    points: dict[str, dict[str, Any]] = field(default_factory=dict)
    val_fraction: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """The block as the run's spec carries it (JSON-serializable; ``val_fraction`` only when set, so that a
        block without it is recorded as before)."""
        out = {"grid": self.grid, "seeds": self.seeds, "metric": self.metric, "at": self.at}
        return out if self.val_fraction is None else {**out, "val_fraction": self.val_fraction}


def _value_text(value: Any) -> str:
    return str(value).replace(" ", "").replace("/", "_")


def _grid(value: object, key: str) -> dict[str, list[Any]]:
    if not isinstance(value, dict) or not value:
        raise ConfigError(key, "expected a mapping hyper-parameter -> non-empty list of values")
    for name, values in value.items():
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{key}.{name}", "expected a non-empty list of values")
    return dict(value)


def _seeds(value: object, key: str) -> list[int]:
    if not (
        isinstance(value, list)
        and value
        and len(set(value)) == len(value)
        and all(type(s) is int and s >= 0 for s in value)
    ):
        raise ConfigError(key, f"expected a non-empty list of distinct non-negative integers, got {value!r}")
    return list(value)


def _validation_metric(value: object, key: str) -> str:
    if not isinstance(value, str) or parse_metric(value).split != "val":
        raise ConfigError(
            key, f"expected a validation metric (val_*), got {value!r}: selection never reads test data"
        )
    return value


def _round_rule(value: object, key: str) -> str:
    at = str(value)
    if at not in ("final", "best") and not re.fullmatch(r"last[1-9]\d*", at):
        raise ConfigError(key, f"unknown round rule {at!r}", allowed=("best", "final", "last<k>"))
    return at


@dataclasses.dataclass(frozen=True)
class TuneSpec(ConfigOptions):
    """A ``tune:`` block as the config writes it (module docstring): ``grid`` (hyper-parameter -> non-empty
    list of candidates; which hyper-parameters the run's algorithm has is checked with the run), ``metric`` (a
    validation metric; that the run reports it is checked later), ``seeds`` (null: the study's) and ``at``
    (``final`` | ``best`` | ``last<k>``) and ``val_fraction`` (null, or in (0, 1): the share of each client's
    training samples the grid points alone hold out)."""

    grid: dict = option(REQUIRED, check=_grid)
    metric: str = option(REQUIRED, check=_validation_metric)
    seeds: list | None = option(None, check=lambda v, k: None if v is None else _seeds(v, k))
    at: str = option("final", check=_round_rule)
    val_fraction: float | None = option(None, lo=0.0, hi=1.0, lo_open=True, hi_open=True)


def parse_tune(value: Any, run: str, study_seeds: list[int], key: str) -> Tuning:
    """Validate a ``tune:`` block (:class:`TuneSpec`; its metric is checked later, against the run's metrics)
    and lay out its grid points.

    Raises:
        ConfigError: naming ``key`` or ``key.<grid|seeds|metric|at|val_fraction>``: not a mapping, an unknown
            key, an empty grid or value list, bad seeds, a metric that is not a validation metric, an unknown
            rule, a validation share outside (0, 1).
    """
    if not isinstance(value, dict):
        raise ConfigError(
            key,
            "expected a mapping with grid, metric and optionally seeds, at, val_fraction",
            allowed=TuneSpec.names(),
        )
    spec = TuneSpec.from_dict(value, key)
    seeds = spec.seeds if spec.seeds is not None else _seeds(study_seeds, f"{key}.seeds")
    tuning = Tuning(run, spec.grid, seeds, spec.metric, spec.at, val_fraction=spec.val_fraction)
    for combo in itertools.product(*spec.grid.values()):
        values = dict(zip(spec.grid, combo, strict=True))
        label = run + SEPARATOR + "-".join(f"{k}={_value_text(v)}" for k, v in values.items())
        tuning.points[label] = values
    return tuning


def _statistic(at: str) -> tuple[str, int | None]:
    return ("last", int(at[4:])) if at.startswith("last") else (at, None)


def select(tuning: Tuning, long: pd.DataFrame, status: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Score every grid point on the validation metric and choose one.

    Args:
        tuning: the run's tuning.
        long, status: the points' records (``hetfl.pipeline.aggregate.load_runs`` over every point and tuning seed).
            Only rows of ``tuning.metric`` are looked at.

    Returns:
        ``(table, choice)``: one row per point (columns :data:`TABLE_COLUMNS` plus one per grid key:
        score = mean over seeds of the round rule's value, its std over seeds, how many seeds diverged,
        chosen ``yes``/``no``), and ``{"point", "hyperparameters", "score", "metric", "at", "seeds"}``.

    Raises:
        ValueError: no point has a score on every seed (all diverged or the metric is missing).
    """
    import numpy as np
    import pandas as pd

    from hetfl.pipeline.aggregate import seed_values

    val = long[long["metric"] == tuning.metric]  # the only rows selection reads
    values = seed_values(val, status, *_statistic(tuning.at))
    rows = []
    for label, hp in tuning.points.items():
        per_seed = values[values["run"] == label].set_index("seed")["value"].reindex(tuning.seeds)
        diverged = int((status[status["run"] == label]["status"] == "diverged").sum())
        scores = per_seed.to_numpy(float)
        rows.append(
            {
                "run": tuning.run,
                "point": label,
                **{k: v for k, v in hp.items()},
                "metric": tuning.metric,
                "at": tuning.at,
                "seeds": " ".join(map(str, tuning.seeds)),
                "score": float(np.nanmean(scores)) if np.isfinite(scores).any() else np.nan,
                "score_std": float(np.nanstd(scores, ddof=1)) if np.isfinite(scores).sum() > 1 else np.nan,
                "n_seeds": int(np.isfinite(scores).sum()),
                "n_diverged": diverged,
            }
        )
    table = pd.DataFrame(rows)
    eligible = table[(table["n_seeds"] == len(tuning.seeds)) & (table["n_diverged"] == 0)]
    if eligible.empty:
        raise ValueError(
            f"run {tuning.run!r}: no grid point has a {tuning.metric} on every tuning seed without diverging"
        )
    sign = parse_metric(tuning.metric).sign
    best = (eligible["score"] * sign).idxmax()  # the first maximum: grid order on ties
    table["chosen"] = np.where(table.index == best, "yes", "no")
    table = table[[*TABLE_COLUMNS[:2], *tuning.grid, *TABLE_COLUMNS[2:]]]
    choice = {
        "point": str(table.loc[best, "point"]),
        "hyperparameters": tuning.points[str(table.loc[best, "point"])],
        "score": float(table.loc[best, "score"]),
        **tuning.as_dict(),
    }
    return table, choice
