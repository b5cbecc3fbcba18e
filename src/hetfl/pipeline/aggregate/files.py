"""The aggregate stage's files: reading what the training jobs wrote (``metrics.csv``, ``run.json``,
``metrics_clients.csv``) into tidy tables, and writing tables as CSV, the same bytes on every run."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from hetfl.pipeline.records import RunRecord

LONG_COLUMNS = ["study", "run", "algorithm", "seed", "round", "metric", "value"]
STATUS_COLUMNS = ["study", "run", "algorithm", "seed", "status", "diverged_round", "wall_time_s"]
CLIENT_LONG_COLUMNS = ["run", "seed", "round", "client", "metric", "value"]


def _read_metrics(path: str | Path) -> pd.DataFrame:
    """``round, metric, value``; rows of a per-client breakdown (non-empty ``client``) are dropped."""
    frame = pd.read_csv(path, dtype={"metric": str})
    missing = {"round", "metric", "value"} - set(frame.columns)
    if missing:
        raise ValueError(f"{path}: metrics.csv lacks column(s) {', '.join(sorted(missing))}")
    if "client" in frame.columns:
        frame = frame[frame["client"].isna()]
    return frame[["round", "metric", "value"]].astype({"round": "int64", "value": "float64"})


def sort_runs(frame: pd.DataFrame, by: list[str], run_order: dict[str, int]) -> pd.DataFrame:
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
    long = sort_runs(long, ["study", "run", "seed", "metric", "round"], run_order)
    status = sort_runs(status, ["study", "run", "seed"], run_order)
    return long, status


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


def write_csv(frame: pd.DataFrame, path: str | Path, float_format: str = "%.6g") -> None:
    """Write ``frame`` without its index, floats as ``float_format``, ``\\n`` line ends: a rerun on
    the same inputs writes identical bytes."""
    frame.to_csv(path, index=False, float_format=float_format, lineterminator="\n")
