"""The Markdown tables of the aggregate stage, ``summary.md`` and ``clients.md``, and the numbers as every
table shows them (:func:`format_number`, :func:`format_stat`; the report's HTML pages reuse the tables:
``hetfl.pipeline.report``)."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from hetfl.errors import ConfigError
from hetfl.metrics import parse_metric
from hetfl.pipeline.aggregate.clients import CLIENT_AT, CLIENT_STATS


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
        summary: as returned by :func:`~hetfl.pipeline.aggregate.statistics.summarize`.
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
    runs = summary[["study", "run", "algorithm", "n_seeds", "n_diverged"]].drop_duplicates(["study", "run"])
    table = _summary_runs(summary, runs, tuned)
    has_valsel = "valsel_mean" in summary and summary["valsel_mean"].notna().any()
    for metric in metrics:
        _add_metric_columns(table, summary, runs, metric, paper, has_valsel)
    return table, _summary_legend(runs, tuned, has_valsel)


def _summary_runs(summary: pd.DataFrame, runs: pd.DataFrame, tuned: dict[str, dict]) -> pd.DataFrame:
    """The summary table's first columns: run (marked ``‡`` when tuned, ``†`` with diverged seeds), study
    (when the summary has several), algorithm and seeds."""
    marks = [(" ‡" if r.run in tuned else "") + (" †" if r.n_diverged else "") for r in runs.itertuples()]
    table = pd.DataFrame({"run": [f"{r.run}{m}" for r, m in zip(runs.itertuples(), marks, strict=True)]})
    if summary["study"].nunique() > 1:
        table.insert(0, "study", runs["study"].to_numpy())
    table["algorithm"] = runs["algorithm"].to_numpy()
    table["seeds"] = [
        f"{r.n_seeds} ({r.n_diverged}/{r.n_seeds} diverged)" if r.n_diverged else str(r.n_seeds)
        for r in runs.itertuples()
    ]
    return table


def _add_metric_columns(
    table: pd.DataFrame,
    summary: pd.DataFrame,
    runs: pd.DataFrame,
    metric: str,
    paper: dict[str, dict[str, float]],
    has_valsel: bool,
) -> None:
    """Add one metric's columns to the summary ``table``: final, best, val-selected (a metric with
    validation data) and paper (where ``paper`` gives the metric)."""
    cells = summary.set_index(["study", "run", "metric"])
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


def _summary_legend(runs: pd.DataFrame, tuned: dict[str, dict], has_valsel: bool) -> list[str]:
    """:data:`SUMMARY_LEGEND`, then lines on validation-selected rounds, tuned runs and diverged seeds where
    they occur."""
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
    return legend


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
        summary: as returned by :func:`~hetfl.pipeline.aggregate.statistics.summarize`.
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
        table: as returned by :func:`~hetfl.pipeline.aggregate.clients.client_summary`.

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
    """A Markdown section per metric of :func:`~hetfl.pipeline.aggregate.clients.client_summary` (``clients.md``), then its legend.

    Args:
        table: as returned by :func:`~hetfl.pipeline.aggregate.clients.client_summary`.

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
