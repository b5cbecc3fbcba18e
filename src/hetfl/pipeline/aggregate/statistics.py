"""Per-seed statistics of a study's runs (:func:`seed_values`, :func:`val_selected_values`) and their
summary across seeds (:func:`summarize`: ``summary.csv``); see :mod:`hetfl.pipeline.aggregate` for the
conventions (diverged seeds, ``final``, ``best``, ``last10``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from hetfl.metrics import parse_metric
from hetfl.pipeline.aggregate.files import sort_runs

STATISTICS = ("final", "best", "last", "at", "diverged")
"""Per-seed statistics known to :func:`seed_values`."""

KEYS = ["study", "run", "metric"]
"""The keys of a statistic's row (then ``seed`` for a per-seed one)."""


def metric_sign(metric: str) -> float:
    """+1 for a higher-better metric, -1 for a lower-better one (``hetfl.metrics.parse_metric``)."""
    return parse_metric(metric).sign


def metric_direction(metric: str) -> str:
    """``max`` or ``min``: the metric's better direction (``hetfl.metrics.parse_metric``)."""
    return parse_metric(metric).direction


def seed_values(
    long: pd.DataFrame, status: pd.DataFrame, stat: str = "final", arg: int | None = None
) -> pd.DataFrame:
    """One statistic per (study, run, metric, seed).

    Args:
        long, status: as returned by :func:`~hetfl.pipeline.aggregate.files.load_runs`.
        stat: ``final`` (value at the seed's last evaluated round), ``best`` (best over rounds by
            the metric's direction (``hetfl.metrics.parse_metric``), the pFedMe paper's metric), ``last`` (mean of the last ``arg``
            evaluated rounds), ``at`` (value at round ``arg``), ``diverged`` (1.0 if the seed
            diverged, else 0.0).
        arg: ``k`` for ``last``, the round for ``at``.

    Returns:
        Columns study, run, metric, seed, value: a row for every seed in ``status`` of every
        (run, metric) in ``long``. ``value`` is ``nan`` for a diverged seed (except for
        ``diverged``), a seed without that metric, or a round that was not evaluated.

    Raises:
        ValueError: unknown ``stat``, or ``arg`` missing for ``last``/``at``.
    """
    if stat not in STATISTICS:
        raise ValueError(f"unknown statistic {stat!r}; allowed: {', '.join(STATISTICS)}")
    if stat in ("last", "at") and arg is None:
        raise ValueError(f"statistic {stat!r} needs an argument")
    keys = KEYS + ["seed"]
    index = long[KEYS].drop_duplicates().merge(status[["study", "run", "seed"]], on=["study", "run"])
    if stat == "diverged":
        flags = status.assign(value=(status["status"] == "diverged").astype(float))
        return index.merge(flags[["study", "run", "seed", "value"]], on=["study", "run", "seed"])
    finished = status.loc[status["status"] != "diverged", ["study", "run", "seed"]]
    data = long.merge(finished, on=["study", "run", "seed"])
    data = data.assign(value=data["value"].where(np.isfinite(data["value"])))
    data = data.sort_values(keys + ["round"], kind="mergesort")
    if stat == "final":
        values = data.drop_duplicates(keys, keep="last")
    elif stat == "at":
        values = data[data["round"] == arg].drop_duplicates(keys, keep="last")
    elif stat == "last":
        tail = data.groupby(keys, sort=False).tail(arg)
        values = tail.groupby(keys, sort=False)["value"].agg(lambda v: v.to_numpy().mean()).reset_index()
    else:  # best: sort each group best-first by the signed value (nan last), keep the first
        sign = data["metric"].map(metric_sign).to_numpy()
        ranked = data.assign(signed=data["value"] * sign).sort_values(
            "signed", ascending=False, na_position="last", kind="mergesort"
        )
        values = ranked.drop_duplicates(keys, keep="first")
    return index.merge(values[keys + ["value"]], on=keys, how="left")


def _across_seeds(values: pd.DataFrame, prefix: str) -> pd.DataFrame:
    """Mean, std (ddof=1) and t-based 95% CI half-width of ``value`` over seeds, per (study, run, metric)."""
    grouped = values.groupby(KEYS, sort=False)["value"]
    out = pd.DataFrame({"mean": grouped.mean(), "std": grouped.std(ddof=1), "n": grouped.count()})
    dof = (out["n"] - 1).where(out["n"] >= 2)
    out["ci95"] = stats.t.ppf(0.975, dof) * out["std"] / np.sqrt(out["n"])
    return out.drop(columns="n").add_prefix(f"{prefix}_")


def val_selected_values(long: pd.DataFrame, status: pd.DataFrame) -> pd.DataFrame:
    """Each ``test_*`` metric at the round where its validation twin (``val_*``, same stat and model) is
    best, per seed: the protocol that picks the round on validation data, never on the test set.

    Args:
        long, status: as returned by :func:`~hetfl.pipeline.aggregate.files.load_runs`.

    Returns:
        Columns study, run, metric (the test metric), seed, value; only metrics with a twin; a diverged
        seed has ``nan`` (as :func:`seed_values`). Ties go to the earliest round.
    """
    finished = status.loc[status["status"] != "diverged", ["study", "run", "seed"]]
    data = long.merge(finished, on=["study", "run", "seed"])
    data = data.assign(value=data["value"].where(np.isfinite(data["value"])))
    val = data[data["metric"].map(lambda m: parse_metric(m).split == "val").astype(bool)]
    if val.empty:
        return pd.DataFrame(columns=[*KEYS, "seed", "value"])
    sign = val["metric"].map(metric_sign).to_numpy()
    ranked = val.assign(signed=val["value"] * sign).sort_values(
        ["study", "run", "seed", "metric", "signed", "round"],
        ascending=[True, True, True, True, False, True],
        na_position="last",
        kind="mergesort",
    )
    best = ranked.drop_duplicates(["study", "run", "seed", "metric"], keep="first")
    best = best.assign(metric="test_" + best["metric"].str[len("val_") :])[
        ["study", "run", "seed", "metric", "round"]
    ]
    values = best.merge(data, on=["study", "run", "seed", "metric", "round"], how="left")
    index = long.loc[long["metric"].isin(set(best["metric"])), KEYS].drop_duplicates()
    index = index.merge(status[["study", "run", "seed"]], on=["study", "run"])
    return index.merge(values[[*KEYS, "seed", "value"]], on=[*KEYS, "seed"], how="left")


SUMMARY_COLUMNS = [
    "study",
    "run",
    "algorithm",
    "metric",
    "direction",
    "n_seeds",
    "n_diverged",
    "final_round",
    "final_mean",
    "final_std",
    "final_ci95",
    "best_mean",
    "best_std",
    "last10_mean",
    "last10_std",
    "best_ci95",
    "valsel_mean",
    "valsel_std",
    "paper",
]


def summarize(
    long: pd.DataFrame, status: pd.DataFrame, paper: dict[str, dict[str, float]] | None = None
) -> pd.DataFrame:
    """Across-seed statistics, one row per (study, run, metric).

    Args:
        long, status: as returned by :func:`~hetfl.pipeline.aggregate.files.load_runs`.
        paper: optional ``{run: {metric: value}}``, the paper's reported numbers (the study's ``paper``).

    Returns:
        Columns study, run, algorithm, metric, direction (``min``/``max``), n_seeds (seeds of the run
        in ``status``), n_diverged, final_round (last evaluated round over the finished seeds),
        final_mean/final_std/final_ci95, best_mean/best_std, last10_mean/last10_std, best_ci95,
        valsel_mean/valsel_std (a test metric at the round its validation twin is best,
        :func:`val_selected_values`; ``nan`` without validation data) and paper (the paper's number
        for this run and metric, else ``nan``). Values are in the metric's
        own units (accuracies as fractions), at full precision.

    Statistics are over the seeds that finished (a diverged seed is left out; see the module
    docstring); std uses ddof=1 and is ``nan`` with fewer than two seeds, as are the ci95 (the
    half-width ``t_{0.975, n-1} * std / sqrt(n)``). ``best`` follows the pFedMe paper (max over
    rounds per seed, then mean over seeds) except for the std's ddof.
    """
    seeds = status.groupby(["study", "run"], sort=False).agg(
        algorithm=("algorithm", "first"),
        n_seeds=("seed", "size"),
        n_diverged=("status", lambda s: int((s == "diverged").sum())),
    )
    finished = long.merge(
        status.loc[status["status"] != "diverged", ["study", "run", "seed"]], on=["study", "run", "seed"]
    )
    last_round = finished.groupby(KEYS, sort=False)["round"].max().to_frame("final_round")
    parts = [
        _across_seeds(seed_values(long, status, stat, arg), name)
        for name, stat, arg in (("final", "final", None), ("best", "best", None), ("last10", "last", 10))
    ]
    parts.append(_across_seeds(val_selected_values(long, status), "valsel")[["valsel_mean", "valsel_std"]])
    out = long[KEYS].drop_duplicates().set_index(KEYS).join([last_round, *parts]).reset_index()
    out = out.merge(seeds.reset_index(), on=["study", "run"])
    out["direction"] = out["metric"].map(metric_direction)
    out["final_round"] = out["final_round"].astype("Int64")
    paper = paper or {}
    out["paper"] = [
        float(paper.get(r, {}).get(m, np.nan)) for r, m in zip(out["run"], out["metric"], strict=True)
    ]
    run_order = {run: i for i, run in enumerate(dict.fromkeys(status["run"]))}
    return sort_runs(out[SUMMARY_COLUMNS], ["study", "run", "metric"], run_order)
