"""Aggregation: loading training records, per-seed statistics, across-seed summary, Markdown."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from hetfl.aggregate import (
    load_runs,
    metric_direction,
    seed_values,
    summarize,
    summary_markdown,
    write_csv,
)
from hetfl.errors import ConfigError

NAN, INF = float("nan"), float("inf")
# run -> seed -> (status, {metric: values at rounds 0, 1, ...})
RUNS = {
    "fedavg": {
        0: ("ok", {"test_acc_global": [0.1, 0.5, 0.9, 0.8], "train_loss_global": [2.0, 1.0, 0.5, 0.7]}),
        1: ("ok", {"test_acc_global": [0.2, 0.6, 0.7, 0.6], "train_loss_global": [2.0, 1.5, 1.2, 0.9]}),
        2: ("diverged", {"test_acc_global": [0.3, 0.4, NAN], "train_loss_global": [2.0, 9.0, INF]}),
    },
    "pfedme-lam=15": {0: ("ok", {"test_acc_global": [0.5, 0.7], "train_loss_global": [1.0, 0.6]})},
    "lam30": {0: ("diverged", {"test_acc_global": [0.1, NAN], "train_loss_global": [3.0, NAN]})},
}


def write_runs(root, runs=RUNS, study="toy"):
    """Write metrics.csv/run.json like the training jobs do; return the entries for load_runs."""
    entries = []
    for run, seeds in runs.items():
        for seed, (status, series) in seeds.items():
            d = root / run / f"seed={seed}"
            d.mkdir(parents=True)
            lines = ["round,metric,value"] + [
                f"{r},{m},{v}" for m, values in series.items() for r, v in enumerate(values)
            ]
            (d / "metrics.csv").write_text("\n".join(lines) + "\n")
            diverged_round = len(next(iter(series.values()))) - 1 if status == "diverged" else None
            info = {
                "study": study,
                "run": run,
                "algorithm": run.split("-")[0],
                "seed": seed,
                "status": status,
                "diverged_round": diverged_round,
                "wall_time_s": 1.5,
            }
            (d / "run.json").write_text(json.dumps(info))
            entries.append({"run": run, "seed": seed, "metrics": d / "metrics.csv", "info": d / "run.json"})
    return entries


@pytest.fixture
def tables(tmp_path):
    return load_runs(write_runs(tmp_path))


def row(summary, run, metric):
    sel = summary[(summary["run"] == run) & (summary["metric"] == metric)]
    assert len(sel) == 1
    return sel.iloc[0]


def test_metric_direction():
    assert metric_direction("train_loss_global") == "min"
    assert metric_direction("dist_to_opt") == "min"
    assert metric_direction("grad_norm") == "min"
    assert metric_direction("test_acc_personal") == "max"


def test_load_runs_columns_order_and_values(tables):
    long, status = tables
    assert list(long.columns) == ["study", "run", "algorithm", "seed", "round", "metric", "value"]
    assert list(status.columns) == [
        "study",
        "run",
        "algorithm",
        "seed",
        "status",
        "diverged_round",
        "wall_time_s",
    ]
    # runs keep the order of the entries; seeds, metrics, rounds ascending
    assert list(dict.fromkeys(long["run"])) == ["fedavg", "pfedme-lam=15", "lam30"]
    first = long[long["run"] == "fedavg"]
    assert list(first["seed"].drop_duplicates()) == [0, 1, 2]
    assert list(first[(first.seed == 0) & (first.metric == "test_acc_global")]["round"]) == [0, 1, 2, 3]
    # nan and inf are read as floats, not strings
    diverged = long[(long.run == "fedavg") & (long.seed == 2) & (long.metric == "train_loss_global")]
    assert diverged["value"].iloc[-1] == INF
    assert status.set_index(["run", "seed"]).loc[("fedavg", 2), "diverged_round"] == 2
    assert pd.isna(status.set_index(["run", "seed"]).loc[("fedavg", 0), "diverged_round"])


def test_load_runs_rejects_mismatched_entry(tmp_path):
    entries = write_runs(tmp_path, {"a": RUNS["fedavg"]})
    entries[0]["seed"] = 7
    with pytest.raises(ValueError, match="expected run 'a' seed 7"):
        load_runs(entries)


def test_load_runs_drops_per_client_rows(tmp_path):
    d = tmp_path / "r"
    d.mkdir()
    csv = "round,metric,value,client\n0,test_acc_local,0.5,\n0,test_acc_local,0.9,3\n"
    (d / "metrics.csv").write_text(csv)
    (d / "run.json").write_text(
        json.dumps(
            {
                "study": "s",
                "run": "r",
                "algorithm": "local",
                "seed": 0,
                "status": "ok",
                "diverged_round": None,
                "wall_time_s": 1,
            }
        )
    )
    long, _ = load_runs([{"run": "r", "seed": 0, "metrics": d / "metrics.csv", "info": d / "run.json"}])
    assert long["value"].tolist() == [0.5]


def test_summarize_excludes_diverged_seeds(tables):
    summary = summarize(*tables)
    acc = row(summary, "fedavg", "test_acc_global")
    assert (acc["n_seeds"], acc["n_diverged"], acc["final_round"]) == (3, 1, 3)
    assert acc["direction"] == "max"
    assert acc["final_mean"] == pytest.approx(0.7)
    assert acc["final_std"] == pytest.approx(math.sqrt(0.02))  # ddof=1 over the two finished seeds
    assert acc["final_ci95"] == pytest.approx(12.7062047 * math.sqrt(0.02) / math.sqrt(2))
    assert acc["best_mean"] == pytest.approx(0.8)  # max over rounds: 0.9 and 0.7
    assert acc["last10_mean"] == pytest.approx((0.575 + 0.525) / 2)
    loss = row(summary, "fedavg", "train_loss_global")
    assert loss["direction"] == "min"
    assert loss["best_mean"] == pytest.approx((0.5 + 0.9) / 2)  # min over rounds
    assert loss["final_mean"] == pytest.approx(0.8)


def test_summarize_single_seed_and_all_diverged(tables):
    summary = summarize(*tables)
    single = row(summary, "pfedme-lam=15", "test_acc_global")
    assert single["final_mean"] == pytest.approx(0.7)
    assert np.isnan(single["final_std"]) and np.isnan(single["final_ci95"]) and np.isnan(single["best_std"])
    dead = row(summary, "lam30", "train_loss_global")
    assert (dead["n_seeds"], dead["n_diverged"]) == (1, 1)
    assert np.isnan(dead["final_mean"]) and np.isnan(dead["best_mean"]) and pd.isna(dead["final_round"])
    assert list(summary["run"].drop_duplicates()) == ["fedavg", "pfedme-lam=15", "lam30"]


def test_seed_values_last_k_at_round_and_diverged(tables):
    long, status = tables

    def values(stat, arg=None):
        v = seed_values(long, status, stat, arg)
        v = v[(v.run == "fedavg") & (v.metric == "test_acc_global")]
        return dict(zip(v["seed"], v["value"], strict=True))

    last2 = values("last", 2)
    assert last2[0] == pytest.approx(0.85) and last2[1] == pytest.approx(0.65) and np.isnan(last2[2])
    at1 = values("at", 1)
    assert at1[0] == pytest.approx(0.5) and np.isnan(at1[2])
    assert np.isnan(values("at", 99)[0])  # round never evaluated
    assert values("diverged") == {0: 0.0, 1: 0.0, 2: 1.0}
    with pytest.raises(ValueError, match="unknown statistic"):
        seed_values(long, status, "median")


def test_write_csv_is_byte_identical(tables, tmp_path):
    summary = summarize(*tables)
    write_csv(summary, tmp_path / "a.csv")
    write_csv(summarize(*tables), tmp_path / "b.csv")
    text = (tmp_path / "a.csv").read_bytes()
    assert text == (tmp_path / "b.csv").read_bytes()
    assert b"0.141421," in text  # %.6g


def test_summary_markdown(tables):
    summary = summarize(*tables)
    md = summary_markdown(summary, metrics=["test_acc_global"], paper={"fedavg": {"test_acc_global": 93.23}})
    lines = md.splitlines()
    assert lines[0].startswith("| run") and "test_acc_global (paper)" in lines[0]
    fedavg = next(line for line in lines if "fedavg †" in line)
    assert "0.7 ± 0.1414 (0.8)" in fedavg and "93.23" in fedavg and "1/3 diverged" in fedavg
    assert "diverged" in next(line for line in lines if "lam30" in line)
    assert "train_loss_global" not in md
    with pytest.raises(ConfigError, match="allowed: test_acc_global, train_loss_global"):
        summary_markdown(summary, metrics=["test_acc"])
