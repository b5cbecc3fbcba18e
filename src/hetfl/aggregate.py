"""Aggregate the per-seed training records of a study: the tidy long table, per-seed statistics,
the across-seed summary and its Markdown table.

Inputs are what every training job writes (``runs/{study}/{run}/seed={s}/``): ``metrics.csv`` with
columns ``round, metric, value`` (tidy long, one row per measurement) and ``run.json`` (study, run,
algorithm, seed, status ``ok|diverged``, diverged_round, wall_time_s).

**Diverged seeds.** One rule everywhere (summary, claims, figure legends): a seed whose ``run.json``
says ``diverged`` contributes no value to any statistic; statistics are computed over the seeds
that finished, and ``n_diverged`` says how many were left out. A run whose seeds all diverged
has ``nan`` statistics. Values of ``±inf`` are treated as missing (``nan``).

Reporting conventions (pFedMe's, docs/papers/pfedme.md §2.7):

- ``final``: the value at each seed's last evaluated round.
- ``best``: each seed's best value over rounds (max for accuracies, min for losses), then the
  mean over seeds: the pFedMe paper's table metric. The paper's ``±`` is ``np.std`` with ddof=0;
  ours is ddof=1 (``std_paper = std * sqrt((n - 1) / n)``).
- ``last10``: the mean of each seed's last 10 evaluated rounds.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from hetfl.errors import ConfigError

LOWER_BETTER = ("loss", "error", "dist", "gap", "norm")
"""A metric whose name contains one of these is lower-better; every other metric is higher-better."""

LONG_COLUMNS = ["study", "run", "algorithm", "seed", "round", "metric", "value"]
STATUS_COLUMNS = ["study", "run", "algorithm", "seed", "status", "diverged_round", "wall_time_s"]
STATISTICS = ("final", "best", "last", "at", "diverged")
"""Per-seed statistics known to :func:`seed_values`."""

_KEYS = ["study", "run", "metric"]


def metric_direction(name: str) -> str:
    """``"min"`` if ``name`` contains loss, error, dist, gap or norm (lower is better), else ``"max"``."""
    return "min" if any(token in name for token in LOWER_BETTER) else "max"


def _read_info(path: str | Path) -> dict:
    info = json.loads(Path(path).read_text())
    missing = [k for k in ("study", "run", "algorithm", "seed", "status") if k not in info]
    if missing:
        raise ValueError(f"{path}: run.json lacks {', '.join(missing)}")
    if info["status"] not in ("ok", "diverged"):
        raise ValueError(f"{path}: status {info['status']!r} is not one of ok, diverged")
    return info


def _read_metrics(path: str | Path) -> pd.DataFrame:
    """``round, metric, value``; rows of a per-client breakdown (non-empty ``client``) are dropped."""
    frame = pd.read_csv(path, dtype={"metric": str})
    missing = {"round", "metric", "value"} - set(frame.columns)
    if missing:
        raise ValueError(f"{path}: metrics.csv lacks column(s) {', '.join(sorted(missing))}")
    if "client" in frame.columns:
        frame = frame[frame["client"].isna()]
    return frame[["round", "metric", "value"]].astype({"round": "int64", "value": "float64"})


def _sort(frame: pd.DataFrame, by: list[str], run_order: dict[str, int]) -> pd.DataFrame:
    """Sort by ``by``, runs in ``run_order`` (their order of first appearance), stable."""
    ranked = frame.sort_values(
        by, key=lambda col: col.map(run_order) if col.name == "run" else col, kind="mergesort"
    )
    return ranked.reset_index(drop=True)


def load_runs(entries: Iterable[dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read the records of a set of (run, seed) training jobs.

    Args:
        entries: dicts with keys ``run`` (label), ``seed`` (int), ``metrics`` (path to metrics.csv)
            and ``info`` (path to run.json).

    Returns:
        ``(long, status)``. ``long`` has columns study, run, algorithm, seed, round, metric, value
        (raw values, ``nan``/``inf`` kept), sorted by study, run (in the order of ``entries``),
        seed, metric, round. ``status`` has one row per entry: study, run, algorithm, seed, status
        (``ok``/``diverged``), diverged_round (nullable int), wall_time_s (seconds).

    Raises:
        ValueError: a run.json lacks a field, has an unknown status, or disagrees with its entry
            on run or seed; a metrics.csv lacks a column.
    """
    longs, infos = [], []
    for entry in entries:
        info = _read_info(entry["info"])
        if str(info["run"]) != str(entry["run"]) or int(info["seed"]) != int(entry["seed"]):
            raise ValueError(
                f"{entry['info']}: run.json is for run {info['run']!r} seed {info['seed']}, "
                f"expected run {entry['run']!r} seed {entry['seed']}"
            )
        ids = {
            "study": str(info["study"]),
            "run": str(entry["run"]),
            "algorithm": str(info["algorithm"]),
            "seed": int(entry["seed"]),
        }
        longs.append(_read_metrics(entry["metrics"]).assign(**ids))
        infos.append(
            {
                **ids,
                "status": info["status"],
                "diverged_round": info.get("diverged_round"),
                "wall_time_s": info.get("wall_time_s"),
            }
        )
    status = pd.DataFrame(infos, columns=STATUS_COLUMNS).astype(
        {"seed": "int64", "diverged_round": "Int64", "wall_time_s": "float64"}
    )
    long = pd.concat(longs, ignore_index=True) if longs else pd.DataFrame(columns=LONG_COLUMNS)
    long = long[LONG_COLUMNS].astype({"seed": "int64", "round": "int64", "value": "float64"})
    run_order = {run: i for i, run in enumerate(dict.fromkeys(status["run"]))}
    long = _sort(long, ["study", "run", "seed", "metric", "round"], run_order)
    status = _sort(status, ["study", "run", "seed"], run_order)
    return long, status


def seed_values(
    long: pd.DataFrame, status: pd.DataFrame, stat: str = "final", arg: int | None = None
) -> pd.DataFrame:
    """One statistic per (study, run, metric, seed).

    Args:
        long, status: as returned by :func:`load_runs`.
        stat: ``final`` (value at the seed's last evaluated round), ``best`` (best over rounds by
            :func:`metric_direction`, the pFedMe paper's metric), ``last`` (mean of the last ``arg``
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
    keys = _KEYS + ["seed"]
    index = long[_KEYS].drop_duplicates().merge(status[["study", "run", "seed"]], on=["study", "run"])
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
        sign = np.where(data["metric"].map(metric_direction) == "max", 1.0, -1.0)
        ranked = data.assign(signed=data["value"] * sign).sort_values(
            "signed", ascending=False, na_position="last", kind="mergesort"
        )
        values = ranked.drop_duplicates(keys, keep="first")
    return index.merge(values[keys + ["value"]], on=keys, how="left")


def _across_seeds(values: pd.DataFrame, prefix: str) -> pd.DataFrame:
    """Mean, std (ddof=1) and t-based 95% CI half-width of ``value`` over seeds, per (study, run, metric)."""
    grouped = values.groupby(_KEYS, sort=False)["value"]
    out = pd.DataFrame({"mean": grouped.mean(), "std": grouped.std(ddof=1), "n": grouped.count()})
    dof = (out["n"] - 1).where(out["n"] >= 2)
    out["ci95"] = stats.t.ppf(0.975, dof) * out["std"] / np.sqrt(out["n"])
    return out.drop(columns="n").add_prefix(f"{prefix}_")


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
]


def summarize(long: pd.DataFrame, status: pd.DataFrame) -> pd.DataFrame:
    """Across-seed statistics, one row per (study, run, metric).

    Columns: study, run, algorithm, metric, direction (``min``/``max``), n_seeds (seeds of the run
    in ``status``), n_diverged, final_round (last evaluated round over the finished seeds),
    final_mean/final_std/final_ci95, best_mean/best_std, last10_mean/last10_std. Values are in the
    metric's own units (accuracies as fractions).

    Statistics are over the seeds that finished (a diverged seed is left out; see the module
    docstring); std uses ddof=1 and is ``nan`` with fewer than two seeds, as is ci95 (the
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
    last_round = finished.groupby(_KEYS, sort=False)["round"].max().to_frame("final_round")
    parts = [
        _across_seeds(seed_values(long, status, stat, arg), name)
        for name, stat, arg in (("final", "final", None), ("best", "best", None), ("last10", "last", 10))
    ]
    out = long[_KEYS].drop_duplicates().set_index(_KEYS).join([last_round, *parts]).reset_index()
    out = out.merge(seeds.reset_index(), on=["study", "run"])
    out["direction"] = out["metric"].map(metric_direction)
    out["final_round"] = out["final_round"].astype("Int64")
    run_order = {run: i for i, run in enumerate(dict.fromkeys(status["run"]))}
    return _sort(out[SUMMARY_COLUMNS], ["study", "run", "metric"], run_order)


def write_csv(frame: pd.DataFrame, path: str | Path, float_format: str = "%.6g") -> None:
    """Write ``frame`` without its index, floats as ``float_format``, ``\\n`` line ends: a rerun on
    the same inputs writes identical bytes."""
    frame.to_csv(path, index=False, float_format=float_format, lineterminator="\n")


def _num(x: float) -> str:
    return "–" if pd.isna(x) else f"{x:.4g}"


def _cell(row: pd.Series) -> str:
    """``final mean ± std (best)``; ``diverged`` when no seed finished."""
    if row["n_diverged"] == row["n_seeds"]:
        return "diverged"
    text = _num(row["final_mean"])
    if pd.notna(row["final_std"]):
        text += f" ± {_num(row['final_std'])}"
    return f"{text} ({_num(row['best_mean'])})"


def summary_table(
    summary: pd.DataFrame, metrics: list[str] | None = None, paper: dict[str, dict[str, float]] | None = None
) -> tuple[pd.DataFrame, str]:
    """The table of :func:`summary_markdown` as a DataFrame of strings, and its note (one line).

    Raises:
        ConfigError: a requested metric is not in the summary (key ``metrics``).
    """
    known = sorted(summary["metric"].unique())
    metrics = list(metrics) if metrics is not None else known
    unknown = [m for m in metrics if m not in known]
    if unknown:
        raise ConfigError("metrics", f"unknown metric(s) {', '.join(unknown)}", allowed=known)
    paper = paper or {}
    rows_key = ["study", "run"]
    runs = summary[rows_key + ["algorithm", "n_seeds", "n_diverged"]].drop_duplicates(rows_key)
    table = pd.DataFrame({"run": [f"{r.run} †" if r.n_diverged else r.run for r in runs.itertuples()]})
    if summary["study"].nunique() > 1:
        table.insert(0, "study", runs["study"].to_numpy())
    table["algorithm"] = runs["algorithm"].to_numpy()
    table["seeds"] = [
        f"{r.n_seeds} ({r.n_diverged}/{r.n_seeds} diverged)" if r.n_diverged else str(r.n_seeds)
        for r in runs.itertuples()
    ]
    cells = summary.set_index(rows_key + ["metric"])
    for metric in metrics:
        table[metric] = [
            _cell(cells.loc[(s, r, metric)]) if (s, r, metric) in cells.index else ""
            for s, r in zip(runs["study"], runs["run"], strict=True)
        ]
        if any(metric in values for values in paper.values()):
            table[f"{metric} (paper)"] = [_num(paper.get(r, {}).get(metric)) for r in runs["run"]]
    notes = "Cells: final mean ± std over seeds (std ddof=1), best over rounds in parentheses."
    if runs["n_diverged"].any():
        notes += " † some seeds diverged; statistics are over the seeds that finished."
    return table, notes


def summary_markdown(
    summary: pd.DataFrame, metrics: list[str] | None = None, paper: dict[str, dict[str, float]] | None = None
) -> str:
    """A Markdown table of a summary: runs as rows, ``metrics`` as columns.

    Cells read ``final mean ± std (best)`` over seeds; a run with diverged seeds is marked ``†``
    with ``k/n diverged`` in its seeds column. ``paper`` ({run: {metric: value}}, the paper's
    reported numbers, in whatever units the paper used) adds a ``metric (paper)`` column beside
    each metric it mentions.

    Args:
        summary: as returned by :func:`summarize`.
        metrics: the columns, in order (default: every metric of the summary, sorted).
        paper: optional reference numbers.

    Raises:
        ConfigError: a requested metric is not in the summary (key ``metrics``).
    """
    table, notes = summary_table(summary, metrics, paper)
    return table.to_markdown(index=False) + "\n\n" + notes + "\n"
