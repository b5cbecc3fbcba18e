"""Aggregate the per-seed training records of a study: the tidy long table, per-seed statistics,
the across-seed summary and its Markdown table, and the distribution of each metric over clients.

Inputs are what every training job writes (``runs/{study}/{run}/seed={s}/``): ``metrics.csv`` with
columns ``round, metric, value`` (tidy long, one row per measurement), ``metrics_clients.csv``
(``round, client, metric, value``: every per-client metric the run records, e.g. the ``*_personal``
and ``*_global`` accuracies and losses) and ``run.json`` (study, run, algorithm, seed, status
``ok|diverged``, diverged_round, wall_time_s).

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

Tables (:func:`summary_markdown`, :func:`clients_markdown`) show accuracies in % with two decimals and
other metrics with 4 significant digits (:func:`format_number`); the CSV files keep full precision in
the metrics' own units.

Per-client distribution (:func:`client_seed_stats`, :func:`client_summary`): per run, seed and
metric, over clients at the final round and at the round ``best`` selects: the unweighted mean, the
std across clients (ddof=0) and the worst 10 % (the mean of the ``ceil(0.1 * n_clients)`` worst
clients by the metric's direction (``hetfl.metrics.parse_metric``)), then mean and std of each over seeds.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from hetfl.errors import ConfigError
from hetfl.metrics import parse_metric
from hetfl.pipeline.records import RunRecord

LONG_COLUMNS = ["study", "run", "algorithm", "seed", "round", "metric", "value"]
STATUS_COLUMNS = ["study", "run", "algorithm", "seed", "status", "diverged_round", "wall_time_s"]
STATISTICS = ("final", "best", "last", "at", "diverged")
"""Per-seed statistics known to :func:`seed_values`."""

_KEYS = ["study", "run", "metric"]


def _sign(metric: str) -> float:
    return parse_metric(metric).sign


def _direction(metric: str) -> str:
    return parse_metric(metric).direction


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
        info = RunRecord.read(entry["info"])
        if str(info.run) != str(entry["run"]) or int(info.seed) != int(entry["seed"]):
            raise ValueError(
                f"{entry['info']}: run.json is for run {info.run!r} seed {info.seed}, "
                f"expected run {entry['run']!r} seed {entry['seed']}"
            )
        ids = {
            "study": str(info.study),
            "run": str(entry["run"]),
            "algorithm": str(info.algorithm),
            "seed": int(entry["seed"]),
        }
        longs.append(_read_metrics(entry["metrics"]).assign(**ids))
        infos.append(
            {
                **ids,
                "status": info.status,
                "diverged_round": info.diverged_round,
                "wall_time_s": info.wall_time_s,
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
        sign = data["metric"].map(_sign).to_numpy()
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


def val_selected_values(long: pd.DataFrame, status: pd.DataFrame) -> pd.DataFrame:
    """Each ``test_*`` metric at the round where its validation twin (``val_*``, same stat and model) is
    best, per seed: the protocol that picks the round on validation data, never on the test set.

    Args:
        long, status: as returned by :func:`load_runs`.

    Returns:
        Columns study, run, metric (the test metric), seed, value; only metrics with a twin; a diverged
        seed has ``nan`` (as :func:`seed_values`). Ties go to the earliest round.
    """
    finished = status.loc[status["status"] != "diverged", ["study", "run", "seed"]]
    data = long.merge(finished, on=["study", "run", "seed"])
    data = data.assign(value=data["value"].where(np.isfinite(data["value"])))
    val = data[data["metric"].map(lambda m: parse_metric(m).split == "val").astype(bool)]
    if val.empty:
        return pd.DataFrame(columns=[*_KEYS, "seed", "value"])
    sign = val["metric"].map(_sign).to_numpy()
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
    index = long.loc[long["metric"].isin(set(best["metric"])), _KEYS].drop_duplicates()
    index = index.merge(status[["study", "run", "seed"]], on=["study", "run"])
    return index.merge(values[[*_KEYS, "seed", "value"]], on=[*_KEYS, "seed"], how="left")


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
        long, status: as returned by :func:`load_runs`.
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
    last_round = finished.groupby(_KEYS, sort=False)["round"].max().to_frame("final_round")
    parts = [
        _across_seeds(seed_values(long, status, stat, arg), name)
        for name, stat, arg in (("final", "final", None), ("best", "best", None), ("last10", "last", 10))
    ]
    parts.append(_across_seeds(val_selected_values(long, status), "valsel")[["valsel_mean", "valsel_std"]])
    out = long[_KEYS].drop_duplicates().set_index(_KEYS).join([last_round, *parts]).reset_index()
    out = out.merge(seeds.reset_index(), on=["study", "run"])
    out["direction"] = out["metric"].map(_direction)
    out["final_round"] = out["final_round"].astype("Int64")
    paper = paper or {}
    out["paper"] = [
        float(paper.get(r, {}).get(m, np.nan)) for r, m in zip(out["run"], out["metric"], strict=True)
    ]
    run_order = {run: i for i, run in enumerate(dict.fromkeys(status["run"]))}
    return _sort(out[SUMMARY_COLUMNS], ["study", "run", "metric"], run_order)


def write_csv(frame: pd.DataFrame, path: str | Path, float_format: str = "%.6g") -> None:
    """Write ``frame`` without its index, floats as ``float_format``, ``\\n`` line ends: a rerun on
    the same inputs writes identical bytes."""
    frame.to_csv(path, index=False, float_format=float_format, lineterminator="\n")


def _significant(x: float, digits: int) -> str:
    """``x`` with ``digits`` significant digits (trailing zeros kept, none after a whole number);
    scientific below 1e-3 and from 1e5 in magnitude."""
    if x == 0:
        return "0"
    if abs(x) < 1e-3 or abs(x) >= 1e5:
        return f"{x:.{digits - 1}e}"
    if x == round(x):
        return f"{x:.0f}"  # a count or a whole number: 20, not 20.00
    return f"{x:#.{digits}g}".rstrip(".")  # trailing zeros kept: 0.050 has two significant digits


def format_number(x: float, metric: str, std: bool = False) -> str:
    """One number of ``metric`` as the tables show it.

    Accuracies (``hetfl.metrics.parse_metric``, fractions in the records) in % with two decimals (``0.8988`` ->
    ``89.88``); other metrics with 4 significant digits (a std: 2; trailing zeros kept, ``0.050``), a
    whole number without decimals (``200``), scientific below 1e-3 and from 1e5 in magnitude
    (``1.234e-05``). ``nan`` (or ``None``) is ``–``.

    Args:
        x: the value, in the metric's own units.
        metric: the metric's name (decides the units).
        std: ``x`` is a standard deviation (fewer significant digits for a non-accuracy).
    """
    if x is None or pd.isna(x):
        return "–"
    if parse_metric(metric).is_accuracy:
        return f"{100 * x:.2f}"
    return _significant(float(x), 2 if std else 4)


def format_stat(mean: float, std: float, metric: str) -> str:
    """``mean ± std`` as :func:`format_number` writes them; the mean alone when ``std`` is ``nan`` (one
    seed); ``–`` when ``mean`` is ``nan``."""
    if pd.isna(mean):
        return "–"
    text = format_number(mean, metric)
    return text if pd.isna(std) else f"{text} ± {format_number(std, metric, std=True)}"


def _paper_cell(x: float | None, metric: str) -> str:
    """A paper's number in the units of ours: an accuracy in % (:func:`format_number`), another metric
    with the digits the paper gave (``-0.41``, not ``-0.4100``)."""
    if x is None or pd.isna(x) or parse_metric(metric).is_accuracy:
        return format_number(x, metric)
    return f"{x:.6g}"


def _header(metric: str, part: str) -> str:
    return f"{metric} {'val-selected' if part == 'valsel' else part}" + (
        " (%)" if parse_metric(metric).is_accuracy else ""
    )


SUMMARY_LEGEND = (
    "final = value at the last round; best = best test value over rounds (the papers' protocol: it "
    "selects the round on the test set), each seed's best (max accuracy, min loss; for a training metric "
    "its best training value), then over seeds. Cells: mean ± std over seeds (std ddof=1; no ± with one "
    "seed).",
    "Accuracies (%) with two decimals; other metrics with 4 significant digits (std 2), scientific below "
    "1e-3 and from 1e5. paper = the number the paper reports (the study's `paper:`), in the same units "
    "(other metrics with the paper's own digits).",
)
"""The legend under the summary table (one entry a line); a note on diverged seeds follows when needed."""


def summary_table(
    summary: pd.DataFrame,
    metrics: list[str] | None = None,
    paper: dict[str, dict[str, float]] | None = None,
    tuned: dict[str, dict] | None = None,
) -> tuple[pd.DataFrame, list[str]]:
    """The table of :func:`summary_markdown` as a DataFrame of strings, and its legend lines.

    Args:
        summary: as returned by :func:`summarize`.
        metrics, paper, tuned: as for :func:`summary_markdown`.

    Returns:
        ``(table, legend)``: columns run (and study when the summary has several), algorithm, seeds,
        then per metric ``<metric> final``, ``<metric> best``, ``<metric> val-selected`` (a test metric
        with validation data) and, where ``paper`` gives the metric, ``<metric> paper`` (accuracy headers
        end with `` (%)``); ``legend`` is :data:`SUMMARY_LEGEND` plus lines on validation-selected
        rounds, tuned runs (marked ``‡``) and diverged seeds where they occur.

    Raises:
        ConfigError: a requested metric is not in the summary (key ``metrics``).
    """
    known = sorted(summary["metric"].unique())
    metrics = list(metrics) if metrics is not None else known
    unknown = [m for m in metrics if m not in known]
    if unknown:
        raise ConfigError("metrics", f"unknown metric(s) {', '.join(unknown)}", allowed=known)
    paper = paper or {}
    tuned = tuned or {}
    rows_key = ["study", "run"]
    runs = summary[rows_key + ["algorithm", "n_seeds", "n_diverged"]].drop_duplicates(rows_key)
    marks = [(" ‡" if r.run in tuned else "") + (" †" if r.n_diverged else "") for r in runs.itertuples()]
    table = pd.DataFrame({"run": [f"{r.run}{m}" for r, m in zip(runs.itertuples(), marks, strict=True)]})
    if summary["study"].nunique() > 1:
        table.insert(0, "study", runs["study"].to_numpy())
    table["algorithm"] = runs["algorithm"].to_numpy()
    table["seeds"] = [
        f"{r.n_seeds} ({r.n_diverged}/{r.n_seeds} diverged)" if r.n_diverged else str(r.n_seeds)
        for r in runs.itertuples()
    ]
    cells = summary.set_index(rows_key + ["metric"])
    has_valsel = "valsel_mean" in summary and summary["valsel_mean"].notna().any()
    for metric in metrics:
        parts = ["final", "best"]
        if has_valsel and summary.loc[summary["metric"] == metric, "valsel_mean"].notna().any():
            parts.append("valsel")
        for part in parts:
            column = []
            for s, r in zip(runs["study"], runs["run"], strict=True):
                if (s, r, metric) not in cells.index:
                    column.append("")
                    continue
                row = cells.loc[(s, r, metric)]
                dead = row["n_diverged"] == row["n_seeds"]
                mean, std = row.get(f"{part}_mean"), row.get(f"{part}_std")
                column.append("diverged" if dead else format_stat(mean, std, metric))
            table[_header(metric, part)] = column
        if any(metric in values for values in paper.values()):
            table[_header(metric, "paper")] = [
                _paper_cell(paper.get(r, {}).get(metric), metric) for r in runs["run"]
            ]
    legend = list(SUMMARY_LEGEND)
    if has_valsel:
        legend.append(
            "val-selected = the test value at the round where its validation twin (val_…) is best, per "
            "seed, then over seeds: the round is chosen on validation data, never on the test set."
        )
    for run, block in tuned.items():
        legend.append(
            f"‡ {run}: hyper-parameters chosen on validation data ({block['metric']}, {block['at']}, tuning "
            f"seeds {', '.join(map(str, block['seeds']))}; every grid point's score in tuning.csv), then "
            "trained on the study's seeds."
        )
    if runs["n_diverged"].any():
        legend.append("† some seeds diverged; statistics are over the seeds that finished.")
    return table, legend


def summary_markdown(
    summary: pd.DataFrame,
    metrics: list[str] | None = None,
    paper: dict[str, dict[str, float]] | None = None,
    tuned: dict[str, dict] | None = None,
) -> str:
    """A Markdown table of a summary: runs as rows, a final and a best column per metric, then its legend.

    Cells read ``mean ± std`` over seeds at the precision of :func:`format_number` (accuracies in %);
    a run with diverged seeds is marked ``†`` with ``k/n diverged`` in its seeds column, and ``diverged``
    where every seed did. ``paper`` ({run: {metric: value}}, the paper's reported numbers in the
    metric's own units, accuracies as fractions) adds a ``<metric> paper`` column beside each metric it
    mentions, shown in the same units as ours (:func:`_paper_cell`). The legend (one ``- `` line each) says which protocol
    each column follows (:data:`SUMMARY_LEGEND`).

    Args:
        summary: as returned by :func:`summarize`.
        metrics: the metrics, in order (default: every metric of the summary, sorted).
        paper: optional reference numbers.
        tuned: ``{run: its tune block}`` of the runs whose hyper-parameters were chosen on validation
            data (``hetfl.pipeline.tuning``): marked ``‡``, with a legend line each.

    Raises:
        ConfigError: a requested metric is not in the summary (key ``metrics``).
    """
    table, legend = summary_table(summary, metrics, paper, tuned)
    return (
        table.to_markdown(index=False, disable_numparse=True)
        + "\n\n"
        + "".join(f"- {line}\n" for line in legend)
    )


# --- Per-client distribution -----------------------------------------------------------------------

CLIENT_LONG_COLUMNS = ["run", "seed", "round", "client", "metric", "value"]
WORST_FRACTION = 0.1
"""The worst decile: the ``ceil(WORST_FRACTION * n_clients)`` worst clients (at least one)."""
CLIENT_STATS = ("client_mean", "client_std", "worst10")
"""Per-seed statistics over clients: the unweighted mean, the std (ddof=0) and the worst-decile mean."""
CLIENT_AT = ("final", "best")


def load_clients(entries: Iterable[dict]) -> pd.DataFrame:
    """Read the per-client records (``metrics_clients.csv``) of a set of (run, seed) training jobs.

    Args:
        entries: dicts with keys ``run`` (label), ``seed`` (int) and ``clients`` (path to a
            metrics_clients.csv with columns round, client, metric, value; header only when the run
            records no per-client metric).

    Returns:
        Columns run, seed, round, client, metric, value (raw values, ``nan``/``inf`` kept), in the
        order of ``entries``, then metric, round, client.

    Raises:
        ValueError: a metrics_clients.csv lacks a column.
    """
    frames = []
    for entry in entries:
        frame = pd.read_csv(entry["clients"], dtype={"metric": str})
        missing = {"round", "client", "metric", "value"} - set(frame.columns)
        if missing:
            raise ValueError(
                f"{entry['clients']}: metrics_clients.csv lacks column(s) {', '.join(sorted(missing))}"
            )
        frame = frame.sort_values(["metric", "round", "client"], kind="mergesort")
        frames.append(frame.assign(run=str(entry["run"]), seed=int(entry["seed"]))[CLIENT_LONG_COLUMNS])
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=CLIENT_LONG_COLUMNS)
    return out.astype({"seed": "int64", "round": "int64", "client": "int64", "value": "float64"})


def client_seed_stats(clients: pd.DataFrame, long: pd.DataFrame, status: pd.DataFrame) -> pd.DataFrame:
    """The distribution over clients of each metric, per (run, metric, seed), at two rounds.

    Rounds (``at``): ``final``, the seed's last round with per-client values; ``best``, the round the
    summary's ``best`` selects: among the rounds with per-client values, the one where the seed's pooled
    value of the metric (``long``, metrics.csv) is best by the metric's direction (``hetfl.metrics.parse_metric``), or, for a metric
    recorded only per client, where the unweighted mean over clients is best (ties: the earliest round).
    Over the clients with a finite value at that round: ``client_mean`` (unweighted: every client
    counts the same, unlike the pooled metric, which weighs clients by samples), ``client_std`` (ddof=0:
    the clients are the whole federation, not a sample) and ``worst10``, the mean of the worst
    ``k = ceil(0.1 * n_clients)`` clients (lowest values of a higher-better metric such as an accuracy,
    highest of a lower-better one such as a loss). Diverged seeds are left out; ``±inf`` is missing.

    Args:
        clients: as returned by :func:`load_clients`.
        long, status: as returned by :func:`load_runs` (the same jobs).

    Returns:
        Columns study, run, metric, seed, at (``final``/``best``), round, n_clients, worst_k,
        client_mean, client_std, worst10: one row per finished seed, metric and ``at``.
    """
    columns = ["study", "run", "metric", "seed", "at", "round", "n_clients", "worst_k", *CLIENT_STATS]
    keys = ["study", "run", "metric", "seed"]
    finished = status.loc[status["status"] != "diverged", ["study", "run", "seed"]]
    data = clients.merge(finished, on=["run", "seed"])
    if data.empty:
        return pd.DataFrame(columns=columns)
    data = data.assign(value=data["value"].where(np.isfinite(data["value"])))
    sign = data["metric"].map(_sign)
    data = data.assign(signed=data["value"] * sign)
    # candidate rounds: those with per-client rows; the score that picks the best one
    rounds = data.groupby(keys + ["round"], sort=True)["signed"].mean().rename("client_score").reset_index()
    pooled = long[np.isfinite(long["value"])].assign(
        pooled_score=lambda f: f["value"] * f["metric"].map(_sign)
    )
    rounds = rounds.merge(pooled[keys + ["round", "pooled_score"]], on=keys + ["round"], how="left")
    has_pooled = rounds.groupby(keys, sort=False)["pooled_score"].transform("count") > 0
    rounds["score"] = rounds["pooled_score"].where(has_pooled, rounds["client_score"])
    final = rounds.drop_duplicates(keys, keep="last").assign(at="final")
    best = rounds.sort_values("score", ascending=False, na_position="last", kind="mergesort")
    best = best.drop_duplicates(keys, keep="first").assign(at="best")
    chosen = pd.concat([final, best], ignore_index=True)[keys + ["at", "round"]]
    # the clients at the chosen rounds, worst first
    at = chosen.merge(data.dropna(subset=["value"]), on=keys + ["round"])
    at = at.sort_values([*keys, "at", "signed"], kind="mergesort")
    groups = keys + ["at", "round"]
    n = at.groupby(groups, sort=False)["value"].transform("size")
    worst_k = np.ceil(WORST_FRACTION * n).astype("int64")
    worst = at[at.groupby(groups, sort=False).cumcount() < worst_k]
    grouped = at.groupby(groups, sort=False)["value"]
    stats_ = pd.DataFrame(
        {
            "n_clients": grouped.size(),
            "client_mean": grouped.mean(),
            "client_std": grouped.std(ddof=0),
            "worst10": worst.groupby(groups, sort=False)["value"].mean(),
        }
    ).reset_index()
    stats_["worst_k"] = np.ceil(WORST_FRACTION * stats_["n_clients"]).astype("int64")
    out = chosen.merge(stats_, on=groups, how="left")
    out["n_clients"] = out["n_clients"].fillna(0).astype("int64")
    out["worst_k"] = out["worst_k"].fillna(0).astype("int64")
    order = {a: i for i, a in enumerate(CLIENT_AT)}
    out = out.sort_values(
        keys + ["at"], key=lambda c: c.map(order) if c.name == "at" else c, kind="mergesort"
    )
    return out[columns].reset_index(drop=True)


CLIENT_ROUNDS_COLUMNS = ["study", "run", "metric", "seed", "round", "n_clients", "worst_k", *CLIENT_STATS]
"""Columns of ``clients_rounds.csv`` (:func:`client_round_stats`)."""


def client_round_stats(clients: pd.DataFrame, status: pd.DataFrame) -> pd.DataFrame:
    """The distribution over clients of each per-client metric at every round that records it, per seed:
    ``clients_rounds.csv``, what the claims' ``client_mean``, ``client_std`` and ``worst10`` read
    (``hetfl.pipeline.claims``).

    Over the clients with a finite value at that round, the statistics of :func:`client_seed_stats`:
    ``client_mean`` (unweighted), ``client_std`` (ddof=0) and ``worst10`` (the mean of the worst
    ``ceil(0.1 * n_clients)`` clients by the metric's direction (``hetfl.metrics.parse_metric``)); ``n_clients`` counts them. Diverged seeds
    are left out; ``±inf`` is missing (a round whose values are all missing has ``nan`` statistics).

    Args:
        clients: as returned by :func:`load_clients`.
        status: as returned by :func:`load_runs` (the same jobs).

    Returns:
        Columns :data:`CLIENT_ROUNDS_COLUMNS`, one row per finished seed, metric and round with per-client
        values, sorted by study, run (in ``status``'s order), metric, seed, round.
    """
    keys = ["study", "run", "metric", "seed", "round"]
    finished = status.loc[status["status"] != "diverged", ["study", "run", "seed"]]
    data = clients.merge(finished, on=["run", "seed"])
    if data.empty:
        return pd.DataFrame(columns=CLIENT_ROUNDS_COLUMNS)
    data = data.assign(value=data["value"].where(np.isfinite(data["value"])))
    sign = data["metric"].map(_sign)
    data = data.assign(signed=data["value"] * sign).sort_values(
        [*keys, "signed"], kind="mergesort"
    )  # nan last
    grouped = data.groupby(keys, sort=False)["value"]
    finite = grouped.transform("count")
    worst = data[data.groupby(keys, sort=False).cumcount() < np.ceil(WORST_FRACTION * finite)]
    out = pd.DataFrame(
        {
            "n_clients": grouped.count(),
            "client_mean": grouped.mean(),
            "client_std": grouped.std(ddof=0),
            "worst10": worst.groupby(keys, sort=False)["value"].mean(),
        }
    ).reset_index()
    out["worst_k"] = np.ceil(WORST_FRACTION * out["n_clients"]).astype("int64")
    run_order = {run: i for i, run in enumerate(dict.fromkeys(status["run"]))}
    return _sort(out[CLIENT_ROUNDS_COLUMNS], keys, run_order)


def client_stat_values(
    rounds: pd.DataFrame,
    long: pd.DataFrame,
    status: pd.DataFrame,
    client_stat: str,
    stat: str = "final",
    arg: int | None = None,
) -> pd.DataFrame:
    """One statistic over clients (``client_stat``: ``client_mean``, ``client_std``, ``worst10``) per
    (study, run, metric, seed), at the rounds a per-seed statistic selects: the claims' ``worst10(x)``.

    Args:
        rounds: as returned by :func:`client_round_stats`.
        long, status: as returned by :func:`load_runs` (the same jobs).
        client_stat: the statistic over clients.
        stat: ``final`` (the seed's last round with per-client values), ``best`` (the round the summary's
            ``best`` selects, as :func:`client_seed_stats`: the best pooled value of the metric over those
            rounds, or the best ``client_mean`` for a metric recorded only per client; ties: the earliest),
            ``at`` (round ``arg``) or ``last`` (the mean over the seed's last ``arg`` such rounds).
        arg: the round for ``at``, k for ``last``.

    Returns:
        Columns study, run, metric, seed, value: a row for every seed in ``status`` of every (run, metric) in
        ``rounds``; ``nan`` for a diverged seed, or a round without per-client values.

    Raises:
        ValueError: an unknown ``client_stat`` or ``stat``, or ``arg`` missing for ``at``/``last``.
    """
    if client_stat not in CLIENT_STATS:
        raise ValueError(
            f"unknown statistic over clients {client_stat!r}; allowed: {', '.join(CLIENT_STATS)}"
        )
    if stat not in ("final", "best", "at", "last"):
        raise ValueError(f"unknown statistic {stat!r} over clients; allowed: final, best, at, last")
    if stat in ("last", "at") and arg is None:
        raise ValueError(f"statistic {stat!r} needs an argument")
    keys = [*_KEYS, "seed"]
    index = rounds[_KEYS].drop_duplicates().merge(status[["study", "run", "seed"]], on=["study", "run"])
    data = rounds.sort_values([*keys, "round"], kind="mergesort")
    data = data.assign(value=data[client_stat].astype(float))
    if stat == "final":
        values = data.drop_duplicates(keys, keep="last")
    elif stat == "at":
        values = data[data["round"] == arg]
    elif stat == "last":
        tail = data.groupby(keys, sort=False).tail(arg)
        values = tail.groupby(keys, sort=False)["value"].agg(lambda v: v.to_numpy().mean()).reset_index()
    else:  # best: the round of the best pooled value (else the best client mean), earliest on ties
        pooled = long[np.isfinite(long["value"])][[*keys, "round", "value"]].rename(
            columns={"value": "pooled"}
        )
        scored = data.merge(pooled, on=[*keys, "round"], how="left")
        sign = scored["metric"].map(_sign).to_numpy()
        has_pooled = scored.groupby(keys, sort=False)["pooled"].transform("count") > 0
        score = scored["pooled"].where(has_pooled, scored["client_mean"]) * sign
        ranked = scored.assign(score=score).sort_values(
            "score", ascending=False, na_position="last", kind="mergesort"
        )
        values = ranked.drop_duplicates(keys, keep="first")
    return index.merge(values[[*keys, "value"]], on=keys, how="left")


CLIENTS_COLUMNS = [
    "study",
    "run",
    "algorithm",
    "metric",
    "direction",
    "n_seeds",
    "n_diverged",
    "n_clients",
    "worst_k",
    "final_round",
    *[f"{at}_{stat}{suffix}" for at in CLIENT_AT for stat in CLIENT_STATS for suffix in ("", "_std")],
]
"""Columns of ``clients.csv`` (:func:`client_summary`)."""


def client_summary(clients: pd.DataFrame, long: pd.DataFrame, status: pd.DataFrame) -> pd.DataFrame:
    """The per-client distribution of every per-client metric, aggregated over seeds: ``clients.csv``.

    Args:
        clients: as returned by :func:`load_clients`.
        long, status: as returned by :func:`load_runs` (the same jobs).

    Returns:
        One row per (study, run, metric) of ``clients`` (columns :data:`CLIENTS_COLUMNS`): algorithm,
        direction, n_seeds and n_diverged (as in :func:`summarize`), n_clients (the most clients with a
        value at the final round over the seeds), worst_k (``ceil(0.1 * n_clients)``), final_round (the
        last such round over the seeds) and, for ``at`` in final/best and each statistic of
        :func:`client_seed_stats` (client_mean, client_std, worst10), ``<at>_<stat>`` (mean over the
        seeds that finished) and ``<at>_<stat>_std`` (std over them, ddof=1, ``nan`` with one seed).
        Values in the metric's own units (accuracies as fractions).
    """
    per_seed = client_seed_stats(clients, long, status)
    run_order = {run: i for i, run in enumerate(dict.fromkeys(status["run"]))}
    if per_seed.empty:
        return pd.DataFrame(columns=CLIENTS_COLUMNS)
    grouped = per_seed.groupby(["study", "run", "metric", "at"], sort=False)[list(CLIENT_STATS)]
    across = grouped.mean().join(grouped.std(ddof=1).add_suffix("_std")).unstack("at")
    across.columns = [f"{at}_{stat}" for stat, at in across.columns]
    final = per_seed[per_seed["at"] == "final"].groupby(_KEYS, sort=False)
    sizes = pd.DataFrame({"n_clients": final["n_clients"].max(), "final_round": final["round"].max()})
    seeds = status.groupby(["study", "run"], sort=False).agg(
        algorithm=("algorithm", "first"),
        n_seeds=("seed", "size"),
        n_diverged=("status", lambda s: int((s == "diverged").sum())),
    )
    out = sizes.join(across).reset_index().merge(seeds.reset_index(), on=["study", "run"])
    out["direction"] = out["metric"].map(_direction)
    out["worst_k"] = np.ceil(WORST_FRACTION * out["n_clients"]).astype("int64")
    out["final_round"] = out["final_round"].astype("Int64")
    return _sort(out[CLIENTS_COLUMNS], ["study", "run", "metric"], run_order)


CLIENTS_LEGEND = (
    "Over the clients of each run and seed (metrics_clients.csv; every client counts the same, unlike the "
    "pooled metrics of the summary, which weigh clients by samples): mean, std across clients (ddof=0) and "
    "worst 10 % (the mean of the worst ceil(0.1 × clients) clients: lowest accuracy, highest loss); then "
    "mean ± std of each over seeds (ddof=1).",
    "final = at the last round; best = at the round the summary's best selects (the best pooled test "
    "value over rounds, the papers' protocol: it selects the round on the test set).",
    "Accuracies and their spreads in % (points); other metrics with 4 significant digits (std 2).",
)
"""The legend of ``clients.md`` (one entry a line)."""


def client_metrics_order(metrics: Iterable[str]) -> list[str]:
    """Per-client metrics in table order: personalized (``*_personal``) first, then the others, each sorted."""
    metrics = sorted(set(metrics))
    return [m for m in metrics if m.endswith("_personal")] + [
        m for m in metrics if not m.endswith("_personal")
    ]


def client_tables(table: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The tables of :func:`clients_markdown`: one per metric, runs as rows, cells as strings.

    Args:
        table: as returned by :func:`client_summary`.

    Returns:
        ``[(heading, frame)]`` in :func:`client_metrics_order`: ``heading`` names the metric, its
        direction (what "worst" means) and units; ``frame`` has columns run (and study when several),
        seeds, clients (``n (worst k)``), then ``final mean``, ``final std across clients``, ``final
        worst 10 %`` and the same three for ``best``, each ``mean ± std`` over seeds.
    """
    out = []
    several = table["study"].nunique() > 1
    for metric in client_metrics_order(table["metric"]):
        rows = table[table["metric"] == metric]
        worst = "lowest" if parse_metric(metric).direction == "max" else "highest"
        unit = ", in %" if parse_metric(metric).is_accuracy else ""
        heading = f"{metric} (worst = {worst}{unit})"
        frame = pd.DataFrame({"run": [f"{r.run} †" if r.n_diverged else r.run for r in rows.itertuples()]})
        if several:
            frame.insert(0, "study", rows["study"].to_numpy())
        frame["seeds"] = [
            f"{r.n_seeds} ({r.n_diverged} diverged)" if r.n_diverged else str(r.n_seeds)
            for r in rows.itertuples()
        ]
        frame["clients"] = [f"{r.n_clients} (worst {r.worst_k})" for r in rows.itertuples()]
        for at in CLIENT_AT:
            for stat, label in zip(CLIENT_STATS, ("mean", "std across clients", "worst 10 %"), strict=True):
                frame[f"{at} {label}"] = [
                    "diverged"
                    if r["n_diverged"] == r["n_seeds"]
                    else format_stat(r[f"{at}_{stat}"], r[f"{at}_{stat}_std"], metric)
                    for _, r in rows.iterrows()
                ]
        out.append((heading, frame))
    return out


def clients_markdown(table: pd.DataFrame) -> str:
    """A Markdown section per metric of :func:`client_summary` (``clients.md``), then its legend.

    Args:
        table: as returned by :func:`client_summary`.

    Returns:
        ``### <metric> (worst = lowest|highest[, in %])`` and a table per metric (see
        :func:`client_tables`), then the legend (:data:`CLIENTS_LEGEND`, one ``- `` line each); a
        sentence saying so when no run records a per-client metric.
    """
    tables = client_tables(table)
    if not tables:
        return "No run of this study records a per-client metric.\n"
    parts = [
        f"### {heading}\n\n{frame.to_markdown(index=False, disable_numparse=True)}\n"
        for heading, frame in tables
    ]
    return "\n".join(parts) + "\n" + "".join(f"- {line}\n" for line in CLIENTS_LEGEND)
