"""Aggregation: loading training records, per-seed statistics, across-seed summary, Markdown."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from hetfl.errors import ConfigError
from hetfl.metrics import parse_metric
from hetfl.pipeline.aggregate import (
    CLIENT_AT,
    CLIENT_ROUNDS_COLUMNS,
    CLIENT_STATS,
    client_round_stats,
    client_seed_stats,
    client_stat_values,
    client_summary,
    clients_markdown,
    format_number,
    format_stat,
    load_clients,
    load_runs,
    seed_values,
    summarize,
    summary_markdown,
    write_csv,
)

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
    assert parse_metric("train_loss_global").direction == "min"
    assert parse_metric("dist_to_opt").direction == "min"
    assert parse_metric("grad_norm").direction == "min"
    assert parse_metric("test_acc_personal").direction == "max"


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
    md = summary_markdown(summary, metrics=["test_acc_global"], paper={"fedavg": {"test_acc_global": 0.932}})
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
    assert fedavg[2:] == ["3 (1/3 diverged)", "70.00 ± 14.14", "80.00 ± 14.14", "93.20"]  # as text: 93.20
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
    with_paper = summary_markdown(
        summary, metrics=["train_loss_global"], paper={"fedavg": {"train_loss_global": 0.41}}
    )
    assert "| 0.41 " in with_paper  # a paper's loss keeps the paper's digits
    with pytest.raises(ConfigError, match="allowed: test_acc_global, train_loss_global"):
        summary_markdown(summary, metrics=["test_acc"])


# Per-client records: run -> seed -> (status, pooled {metric: per round}, per client {metric: rows per round})
RNG = np.random.default_rng(0)
ACC = {r: RNG.uniform(0.3, 1.0, size=10) for r in range(3)}
ACC[2] = ACC[2] * 0 + ACC[1].mean() + 0.1  # round 2: a higher client mean than round 1, all clients equal
LOSS = {r: RNG.uniform(0.1, 2.0, size=10) for r in range(3)}
NORM = {0: np.full(10, 5.0), 1: RNG.uniform(0, 1, size=10), 2: RNG.uniform(2, 3, size=10)}
ELEVEN = {r: RNG.uniform(0.3, 1.0, size=11) for r in range(3)}
CLIENT_RUNS = {
    "pfl": {
        # the pooled accuracy is best at round 1 (weighted by samples, it need not follow the client mean)
        0: (
            "ok",
            {"test_acc_personal": [0.5, 0.9, 0.8], "test_loss_personal": [2.0, 0.4, 0.6]},
            {"test_acc_personal": ACC, "test_loss_personal": LOSS, "grad_norm": NORM},
        ),
        1: (
            "ok",
            {"test_acc_personal": [0.5, 0.9, 0.8], "test_loss_personal": [2.0, 0.4, 0.6]},
            {
                "test_acc_personal": {r: v + 0.05 for r, v in ACC.items()},
                "test_loss_personal": LOSS,
                "grad_norm": NORM,
            },
        ),
        2: (
            "diverged",
            {"test_acc_personal": [0.5, float("nan")]},
            {"test_acc_personal": {0: ACC[0], 1: np.full(10, float("nan"))}},
        ),
    },
    "eleven": {0: ("ok", {"test_acc_personal": [0.5, 0.6, 0.7]}, {"test_acc_personal": ELEVEN})},
}


def write_client_runs(root):
    """metrics.csv, metrics_clients.csv and run.json of CLIENT_RUNS; the entries for load_runs/load_clients."""
    runs = {
        run: {seed: (state, pooled) for seed, (state, pooled, _) in seeds.items()}
        for run, seeds in CLIENT_RUNS.items()
    }
    entries = write_runs(root, runs)
    for entry in entries:
        _, _, per_client = CLIENT_RUNS[entry["run"]][entry["seed"]]
        lines = ["round,client,metric,value"] + [
            f"{r},{c},{m},{v}"
            for m, rounds in per_client.items()
            for r, values in rounds.items()
            for c, v in enumerate(values)
        ]
        path = entry["metrics"].parent / "metrics_clients.csv"
        path.write_text("\n".join(lines) + "\n")
        entry["clients"] = path
    return entries


@pytest.fixture
def client_tables(tmp_path):
    entries = write_client_runs(tmp_path)
    long, status = load_runs(entries)
    return load_clients(entries), long, status


def spread(values, worst, k):
    """Mean, std across clients (ddof=0) and the mean of the k worst (lowest or highest), by numpy."""
    ordered = np.sort(values) if worst == "lowest" else np.sort(values)[::-1]
    return values.mean(), values.std(), ordered[:k].mean()


def test_client_stats_final_and_best_round(client_tables):
    per_seed = client_seed_stats(*client_tables).set_index(["run", "metric", "seed", "at"])
    assert ("pfl", "test_acc_personal", 2, "final") not in per_seed.index  # the diverged seed is left out
    final = per_seed.loc[("pfl", "test_acc_personal", 0, "final")]
    assert final["round"] == 2 and final["n_clients"] == 10 and final["worst_k"] == 1
    expected = spread(ACC[2], "lowest", 1)
    assert (final["client_mean"], final["client_std"], final["worst10"]) == tuple(
        map(pytest.approx, expected)
    )
    # best: the round where the pooled value is best (round 1), although the client mean peaks at round 2
    best = per_seed.loc[("pfl", "test_acc_personal", 0, "best")]
    assert best["round"] == 1
    expected = spread(ACC[1], "lowest", 1)
    assert (best["client_mean"], best["client_std"], best["worst10"]) == tuple(map(pytest.approx, expected))
    # a loss: worst = highest; pooled best (min) at round 1
    loss = per_seed.loc[("pfl", "test_loss_personal", 0, "best")]
    assert loss["round"] == 1 and loss["worst10"] == pytest.approx(LOSS[1].max())
    # recorded per client only: the best round by the client mean (min for a norm)
    norm = per_seed.loc[("pfl", "grad_norm", 0, "best")]
    assert norm["round"] == 1 and norm["client_mean"] == pytest.approx(NORM[1].mean())
    # 11 clients: the worst decile is ceil(1.1) = 2 clients
    eleven = per_seed.loc[("eleven", "test_acc_personal", 0, "final")]
    assert eleven["worst_k"] == 2 and eleven["worst10"] == pytest.approx(spread(ELEVEN[2], "lowest", 2)[2])


def test_statistics_over_clients_at_every_round_select_the_rounds_of_the_summary(client_tables):
    """clients_rounds.csv at final and best gives the numbers of clients.csv's per-seed statistics; at round r
    and over the last k rounds, the rows of those rounds."""
    clients, long, status = client_tables
    rounds = client_round_stats(clients, status)
    assert list(rounds.columns) == CLIENT_ROUNDS_COLUMNS
    assert 2 not in set(rounds[rounds["run"] == "pfl"]["seed"])  # the diverged seed
    per_seed = client_seed_stats(clients, long, status).set_index(["run", "metric", "seed", "at"])
    for stat in CLIENT_STATS:
        for at in CLIENT_AT:
            values = client_stat_values(rounds, long, status, stat, at).dropna(subset=["value"])
            for row in values.itertuples():
                assert row.value == pytest.approx(per_seed.loc[(row.run, row.metric, row.seed, at), stat])
            assert len(values) == len(per_seed.xs(at, level="at"))
    at1 = client_stat_values(rounds, long, status, "worst10", "at", 1).set_index(["run", "metric", "seed"])
    assert at1.loc[("pfl", "test_acc_personal", 0), "value"] == pytest.approx(ACC[1].min())
    assert np.isnan(at1.loc[("pfl", "test_acc_personal", 2), "value"])  # diverged: no value
    last2 = client_stat_values(rounds, long, status, "client_std", "last", 2)
    std = last2.set_index(["run", "metric", "seed"]).loc[("pfl", "test_acc_personal", 0), "value"]
    assert std == pytest.approx((ACC[1].std() + ACC[2].std()) / 2)


def test_client_summary_over_seeds(client_tables):
    table = client_summary(*client_tables)
    acc = table[(table["run"] == "pfl") & (table["metric"] == "test_acc_personal")].iloc[0]
    assert (acc["n_seeds"], acc["n_diverged"], acc["n_clients"], acc["worst_k"], acc["final_round"]) == (
        3,
        1,
        10,
        1,
        2,
    )
    assert acc["direction"] == "max"
    seeds = [spread(ACC[2], "lowest", 1), spread(ACC[2] + 0.05, "lowest", 1)]
    for i, stat in enumerate(("client_mean", "client_std", "worst10")):
        values = [s[i] for s in seeds]
        assert acc[f"final_{stat}"] == pytest.approx(np.mean(values))
        assert acc[f"final_{stat}_std"] == pytest.approx(np.std(values, ddof=1), abs=1e-12)
    assert acc["best_worst10"] == pytest.approx(ACC[1].min() + 0.025)
    single = table[table["run"] == "eleven"].iloc[0]
    assert np.isnan(single["final_client_mean_std"])  # one seed: no std over seeds
    assert list(table["run"].drop_duplicates()) == ["pfl", "eleven"]


def test_clients_markdown(client_tables):
    md = clients_markdown(client_summary(*client_tables))
    headings = [line for line in md.splitlines() if line.startswith("### ")]
    assert headings == [  # personalized metrics first
        "### test_acc_personal (worst = lowest, in %)",
        "### test_loss_personal (worst = highest)",
        "### grad_norm (worst = highest)",
    ]
    section = md.split("### test_acc_personal", 1)[1].split("###", 1)[0]
    assert "final worst 10 %" in section and "10 (worst 1)" in section and "pfl †" in section
    worst = [ACC[2].min(), ACC[2].min() + 0.05]
    assert f"{100 * np.mean(worst):.2f} ± {100 * np.std(worst, ddof=1):.2f}" in section
    assert "worst 10 % (the mean of the worst ceil(0.1 × clients) clients" in md
    assert "No run" in clients_markdown(client_summary(*client_tables).iloc[:0])


def test_load_clients_needs_its_columns(tmp_path):
    path = tmp_path / "metrics_clients.csv"
    path.write_text("round,metric,value\n0,acc,0.5\n")
    with pytest.raises(ValueError, match="lacks column\\(s\\) client"):
        load_clients([{"run": "r", "seed": 0, "clients": path}])
    path.write_text("round,client,metric,value\n")  # a run without per-client metrics
    assert load_clients([{"run": "r", "seed": 0, "clients": path}]).empty


def test_val_selected_takes_the_test_value_at_the_best_validation_round():
    from hetfl.pipeline.aggregate import summarize, val_selected_values

    rows = []
    curves = {  # seed -> (val acc, test acc) at rounds 0..3
        0: ([0.1, 0.6, 0.8, 0.7], [0.1, 0.5, 0.6, 0.9]),  # best val at round 2: test 0.6 (best test: 0.9)
        1: ([0.1, 0.9, 0.9, 0.2], [0.1, 0.4, 0.8, 0.3]),  # tie at rounds 1, 2: the earliest, test 0.4
    }
    for seed, (val, test) in curves.items():
        for metric, values in (("val_acc_global", val), ("test_acc_global", test)):
            rows += [("s", "r", "a", seed, t, metric, v) for t, v in enumerate(values)]
    long = pd.DataFrame(rows, columns=["study", "run", "algorithm", "seed", "round", "metric", "value"])
    status = pd.DataFrame(
        {"study": "s", "run": "r", "algorithm": "a", "seed": [0, 1], "status": "ok", "diverged_round": None,
         "wall_time_s": 1.0}
    ).astype({"diverged_round": "Int64"})  # fmt: skip
    values = val_selected_values(long, status)
    assert values.set_index("seed")["value"].to_dict() == {0: 0.6, 1: 0.4}
    assert set(values["metric"]) == {"test_acc_global"}
    row = summarize(long, status).set_index("metric").loc["test_acc_global"]
    assert row["valsel_mean"] == pytest.approx(0.5) and row["best_mean"] == pytest.approx(0.85)
