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

from hetfl.pipeline.aggregate.clients import (
    CLIENT_AT,
    CLIENT_ROUNDS_COLUMNS,
    CLIENT_STATS,
    CLIENTS_COLUMNS,
    WORST_FRACTION,
    client_round_stats,
    client_seed_stats,
    client_stat_values,
    client_summary,
)
from hetfl.pipeline.aggregate.files import (
    CLIENT_LONG_COLUMNS,
    LONG_COLUMNS,
    STATUS_COLUMNS,
    load_clients,
    load_runs,
    write_csv,
)
from hetfl.pipeline.aggregate.markdown import (
    CLIENTS_LEGEND,
    SUMMARY_LEGEND,
    client_metrics_order,
    client_tables,
    clients_markdown,
    format_number,
    format_stat,
    summary_markdown,
    summary_table,
)
from hetfl.pipeline.aggregate.statistics import (
    STATISTICS,
    SUMMARY_COLUMNS,
    seed_values,
    summarize,
    val_selected_values,
)

__all__ = [
    "CLIENTS_COLUMNS",
    "CLIENTS_LEGEND",
    "CLIENT_AT",
    "CLIENT_LONG_COLUMNS",
    "CLIENT_ROUNDS_COLUMNS",
    "CLIENT_STATS",
    "LONG_COLUMNS",
    "STATISTICS",
    "STATUS_COLUMNS",
    "SUMMARY_COLUMNS",
    "SUMMARY_LEGEND",
    "WORST_FRACTION",
    "client_metrics_order",
    "client_round_stats",
    "client_seed_stats",
    "client_stat_values",
    "client_summary",
    "client_tables",
    "clients_markdown",
    "format_number",
    "format_stat",
    "load_clients",
    "load_runs",
    "seed_values",
    "summarize",
    "summary_markdown",
    "summary_table",
    "val_selected_values",
    "write_csv",
]
