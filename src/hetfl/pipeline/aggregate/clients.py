"""The distribution of each per-client metric over the clients (``metrics_clients.csv``): per seed at the
rounds the summary reads (:func:`client_seed_stats`), at every round (:func:`client_round_stats`:
``clients_rounds.csv``, for the claims), and over seeds (:func:`client_summary`: ``clients.csv``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hetfl.pipeline.aggregate.files import sort_runs
from hetfl.pipeline.aggregate.statistics import KEYS, metric_direction, metric_sign

WORST_FRACTION = 0.1
"""The worst decile: the ``ceil(WORST_FRACTION * n_clients)`` worst clients (at least one)."""
CLIENT_STATS = ("client_mean", "client_std", "worst10")
"""Per-seed statistics over clients: the unweighted mean, the std (ddof=0) and the worst-decile mean."""
CLIENT_AT = ("final", "best")


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
        clients: as returned by :func:`~hetfl.pipeline.aggregate.files.load_clients`.
        long, status: as returned by :func:`~hetfl.pipeline.aggregate.files.load_runs` (the same jobs).

    Returns:
        Columns study, run, metric, seed, at (``final``/``best``), round, n_clients, worst_k,
        client_mean, client_std, worst10: one row per finished seed, metric and ``at``.
    """
    columns = ["study", "run", "metric", "seed", "at", "round", "n_clients", "worst_k", *CLIENT_STATS]
    keys = ["study", "run", "metric", "seed"]
    data = _finished_values(clients, status)
    if data.empty:
        return pd.DataFrame(columns=columns)
    chosen = _chosen_rounds(data, long, keys)
    out = chosen.merge(_over_clients(chosen, data, keys), on=[*keys, "at", "round"], how="left")
    out["n_clients"] = out["n_clients"].fillna(0).astype("int64")
    out["worst_k"] = out["worst_k"].fillna(0).astype("int64")
    order = {a: i for i, a in enumerate(CLIENT_AT)}
    out = out.sort_values(
        keys + ["at"], key=lambda c: c.map(order) if c.name == "at" else c, kind="mergesort"
    )
    return out[columns].reset_index(drop=True)


def _finished_values(clients: pd.DataFrame, status: pd.DataFrame) -> pd.DataFrame:
    """The per-client rows of the seeds that did not diverge, with their study (from ``status``), ``value``
    missing where it is not finite and ``signed`` = value × the metric's sign (larger is better)."""
    finished = status.loc[status["status"] != "diverged", ["study", "run", "seed"]]
    data = clients.merge(finished, on=["run", "seed"])
    data = data.assign(value=data["value"].where(np.isfinite(data["value"])))
    return data.assign(signed=data["value"] * data["metric"].map(metric_sign))


def _chosen_rounds(data: pd.DataFrame, long: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per ``keys`` (study, run, metric, seed), the round of each ``at`` (:data:`CLIENT_AT`) among the rounds
    with per-client rows (``data``): the last (``final``) and the best by the pooled value in ``long``, else
    by the mean over clients (``best``; ties: the earliest). Columns ``keys``, at, round."""
    rounds = data.groupby(keys + ["round"], sort=True)["signed"].mean().rename("client_score").reset_index()
    pooled = long[np.isfinite(long["value"])].assign(
        pooled_score=lambda f: f["value"] * f["metric"].map(metric_sign)
    )
    rounds = rounds.merge(pooled[keys + ["round", "pooled_score"]], on=keys + ["round"], how="left")
    has_pooled = rounds.groupby(keys, sort=False)["pooled_score"].transform("count") > 0
    rounds["score"] = rounds["pooled_score"].where(has_pooled, rounds["client_score"])
    final = rounds.drop_duplicates(keys, keep="last").assign(at="final")
    best = rounds.sort_values("score", ascending=False, na_position="last", kind="mergesort")
    best = best.drop_duplicates(keys, keep="first").assign(at="best")
    return pd.concat([final, best], ignore_index=True)[keys + ["at", "round"]]


def _over_clients(chosen: pd.DataFrame, data: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The statistics over the clients with a finite value (``data``) at the ``chosen`` rounds: n_clients,
    client_mean, client_std (ddof=0), worst10 (the mean of the worst ``ceil(WORST_FRACTION * n)``) and
    worst_k, per ``keys``, at and round."""
    at = chosen.merge(data.dropna(subset=["value"]), on=keys + ["round"])
    at = at.sort_values([*keys, "at", "signed"], kind="mergesort")  # worst first
    return _client_stats(at, keys + ["at", "round"])


def _client_stats(rows: pd.DataFrame, groups: list[str]) -> pd.DataFrame:
    """Per ``groups`` of ``rows`` (sorted worst first within each group, missing values last): n_clients (the
    finite values), client_mean, client_std (ddof=0), worst10 (the mean of the worst
    ``ceil(WORST_FRACTION * n_clients)``) and worst_k; columns ``groups`` and those."""
    grouped = rows.groupby(groups, sort=False)["value"]
    finite = grouped.transform("count")
    worst = rows[rows.groupby(groups, sort=False).cumcount() < np.ceil(WORST_FRACTION * finite)]
    out = pd.DataFrame(
        {
            "n_clients": grouped.count(),
            "client_mean": grouped.mean(),
            "client_std": grouped.std(ddof=0),
            "worst10": worst.groupby(groups, sort=False)["value"].mean(),
        }
    ).reset_index()
    out["worst_k"] = np.ceil(WORST_FRACTION * out["n_clients"]).astype("int64")
    return out


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
        clients: as returned by :func:`~hetfl.pipeline.aggregate.files.load_clients`.
        status: as returned by :func:`~hetfl.pipeline.aggregate.files.load_runs` (the same jobs).

    Returns:
        Columns :data:`CLIENT_ROUNDS_COLUMNS`, one row per finished seed, metric and round with per-client
        values, sorted by study, run (in ``status``'s order), metric, seed, round.
    """
    keys = ["study", "run", "metric", "seed", "round"]
    data = _finished_values(clients, status)
    if data.empty:
        return pd.DataFrame(columns=CLIENT_ROUNDS_COLUMNS)
    data = data.sort_values([*keys, "signed"], kind="mergesort")  # nan last
    out = _client_stats(data, keys)
    run_order = {run: i for i, run in enumerate(dict.fromkeys(status["run"]))}
    return sort_runs(out[CLIENT_ROUNDS_COLUMNS], keys, run_order)


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
        long, status: as returned by :func:`~hetfl.pipeline.aggregate.files.load_runs` (the same jobs).
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
    keys = [*KEYS, "seed"]
    index = rounds[KEYS].drop_duplicates().merge(status[["study", "run", "seed"]], on=["study", "run"])
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
        sign = scored["metric"].map(metric_sign).to_numpy()
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
        clients: as returned by :func:`~hetfl.pipeline.aggregate.files.load_clients`.
        long, status: as returned by :func:`~hetfl.pipeline.aggregate.files.load_runs` (the same jobs).

    Returns:
        One row per (study, run, metric) of ``clients`` (columns :data:`CLIENTS_COLUMNS`): algorithm,
        direction, n_seeds and n_diverged (as in :func:`~hetfl.pipeline.aggregate.statistics.summarize`), n_clients (the most clients with a
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
    final = per_seed[per_seed["at"] == "final"].groupby(KEYS, sort=False)
    sizes = pd.DataFrame({"n_clients": final["n_clients"].max(), "final_round": final["round"].max()})
    seeds = status.groupby(["study", "run"], sort=False).agg(
        algorithm=("algorithm", "first"),
        n_seeds=("seed", "size"),
        n_diverged=("status", lambda s: int((s == "diverged").sum())),
    )
    out = sizes.join(across).reset_index().merge(seeds.reset_index(), on=["study", "run"])
    out["direction"] = out["metric"].map(metric_direction)
    out["worst_k"] = np.ceil(WORST_FRACTION * out["n_clients"]).astype("int64")
    out["final_round"] = out["final_round"].astype("Int64")
    return sort_runs(out[CLIENTS_COLUMNS], ["study", "run", "metric"], run_order)
