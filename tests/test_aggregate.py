"""Aggregation: loading training records, per-seed statistics, across-seed summary, Markdown."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from hetfl.aggregate import (
    format_number,
    format_stat,
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


def test_summarize_keeps_full_precision_and_the_paper(tables):
    summary = summarize(*tables, paper={"fedavg": {"test_acc_global": 0.9323}})
    acc = row(summary, "fedavg", "test_acc_global")
    assert acc["paper"] == 0.9323 and np.isnan(row(summary, "fedavg", "train_loss_global")["paper"])
    assert acc["best_ci95"] == pytest.approx(12.7062047 * math.sqrt(0.02) / math.sqrt(2))  # best: 0.9, 0.7


@pytest.mark.parametrize(
    "value, metric, std, text",
    [
        (0.8988, "test_acc_personal", False, "89.88"),  # accuracies in %, two decimals
        (0.005659, "test_acc_personal", True, "0.57"),
        (0.23142, "train_loss_global", False, "0.2314"),  # 4 significant digits
        (0.05021, "train_loss_global", True, "0.050"),  # a std: 2, trailing zero kept
        (1.2346e-05, "F_norm", False, "1.235e-05"),  # tiny: scientific
        (-3.2e-4, "grad_norm", True, "-3.2e-04"),
        (250000.0, "grad_evals", False, "2.500e+05"),
        (200.0, "comm_rounds", False, "200"),  # a whole number
        (float("nan"), "test_acc_global", False, "–"),
    ],
)
def test_format_number(value, metric, std, text):
    assert format_number(value, metric, std=std) == text


def test_format_stat():
    assert format_stat(0.8988, 0.005659, "test_acc_personal") == "89.88 ± 0.57"
    assert format_stat(0.8988, float("nan"), "test_acc_personal") == "89.88"  # one seed: no ±
    assert format_stat(float("nan"), 0.1, "train_loss_global") == "–"


def test_summary_markdown(tables):
    summary = summarize(*tables)
    md = summary_markdown(summary, metrics=["test_acc_global"], paper={"fedavg": {"test_acc_global": 0.9323}})
    lines = md.splitlines()
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header == [
        "run",
        "algorithm",
        "seeds",
        "test_acc_global final (%)",
        "test_acc_global best (%)",
        "test_acc_global paper (%)",
    ]
    fedavg = [
        cell.strip() for cell in next(line for line in lines if "fedavg †" in line).strip("|").split("|")
    ]
    # the finished seeds 0, 1 end at 0.8 and 0.6 (final), their best over rounds are 0.9 and 0.7
    assert fedavg[2:] == ["3 (1/3 diverged)", "70.00 ± 14.14", "80.00 ± 14.14", "93.23"]
    single = [
        cell.strip() for cell in next(line for line in lines if "pfedme-lam=15" in line).strip("|").split("|")
    ]
    assert single[3:] == ["70.00", "70.00", "–"]  # one seed: no ±; no paper number
    assert "diverged" in next(line for line in lines if "lam30" in line)
    assert "train_loss_global" not in md
    legend = md.split("\n\n", 1)[1]
    assert "final = value at the last round" in legend
    assert (
        "best = best test value over rounds (the papers' protocol: it selects the round on the test set)"
        in legend
    )
    assert "† some seeds diverged" in legend
    loss = summary_markdown(summary, metrics=["train_loss_global"])
    assert "| train_loss_global final " in loss and "(%)" not in loss.splitlines()[0]
    assert "0.8000 ± 0.14" in loss  # 0.7 and 0.9: 4 significant digits, std 2
    with pytest.raises(ConfigError, match="allowed: test_acc_global, train_loss_global"):
        summary_markdown(summary, metrics=["test_acc"])
