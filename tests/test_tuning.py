"""Hyper-parameter selection on validation data: the grid, the choice, and that test data never decide."""

from __future__ import annotations

import copy
import json

import numpy as np
import pandas as pd
import pytest

from hetfl.errors import ConfigError
from hetfl.pipeline.config import build_suite
from hetfl.pipeline.train import apply_choice
from hetfl.pipeline.tuning import parse_tune, select

SEEDS = [7, 8]


def records(curves: dict[str, dict[str, list[float]]], diverged: set[tuple[str, int]] = frozenset()):
    """``long, status`` of points whose metric ``m`` follows ``curves[point][m]`` (rounds 0, 1, ...) on
    every seed, seed 8 shifted by +0.01 (a loss: −0.01)."""
    rows, status = [], []
    for point, metrics in curves.items():
        for seed in SEEDS:
            bad = (point, seed) in diverged
            status.append(
                {"study": "s", "run": point, "algorithm": "a", "seed": seed, "status": "diverged" if bad else "ok",
                 "diverged_round": 1 if bad else None, "wall_time_s": 1.0}
            )  # fmt: skip
            for metric, values in metrics.items():
                shift = (0.01 if "acc" in metric else -0.01) * (seed == 8)
                rows += [
                    {"study": "s", "run": point, "algorithm": "a", "seed": seed, "round": r, "metric": metric,
                     "value": v + shift}
                    for r, v in enumerate(values)
                ]  # fmt: skip
    long = pd.DataFrame(rows)
    status = pd.DataFrame(status).astype({"diverged_round": "Int64"})
    return long, status


def tuning(at="final", metric="val_acc_global", grid=None):
    return parse_tune(
        {"grid": grid or {"lr": [0.01, 0.1, 1.0]}, "metric": metric, "at": at}, "fedavg", SEEDS, "k"
    )


# validation says lr = 0.1; the test metric, were it read, would say lr = 1.0
CURVES = {
    "fedavg@lr=0.01": {"val_acc_global": [0.1, 0.5, 0.6], "test_acc_global": [0.1, 0.5, 0.6]},
    "fedavg@lr=0.1": {"val_acc_global": [0.1, 0.7, 0.8], "test_acc_global": [0.1, 0.6, 0.7]},
    "fedavg@lr=1.0": {"val_acc_global": [0.1, 0.9, 0.7], "test_acc_global": [0.1, 0.95, 0.99]},
}


def test_the_best_validation_score_is_chosen_and_tabled():
    table, choice = select(tuning(), *records(CURVES))
    assert choice["point"] == "fedavg@lr=0.1" and choice["hyperparameters"] == {"lr": 0.1}
    assert choice["score"] == pytest.approx(0.805)  # mean over the two seeds of the final value
    assert table["chosen"].tolist() == ["no", "yes", "no"]
    assert table["lr"].tolist() == [0.01, 0.1, 1.0] and table["n_seeds"].tolist() == [2, 2, 2]
    assert table["score"].tolist() == pytest.approx([0.605, 0.805, 0.705])


@pytest.mark.parametrize(
    "at,point", [("final", "fedavg@lr=0.1"), ("best", "fedavg@lr=1.0"), ("last2", "fedavg@lr=1.0")]
)
def test_the_round_rule_decides_which_value_counts(at, point):
    assert select(tuning(at), *records(CURVES))[1]["point"] == point


def test_the_test_set_never_decides():
    long, status = records(CURVES)
    reference = select(tuning(), long, status)
    for corrupt in (np.inf, -np.inf, np.nan, 1e9):
        poisoned = long.assign(value=long["value"].where(~long["metric"].str.startswith("test_"), corrupt))
        table, choice = select(tuning(), poisoned, status)
        assert choice == reference[1]
        pd.testing.assert_frame_equal(table, reference[0])
    no_test = long[~long["metric"].str.startswith("test_")]
    assert select(tuning(), no_test, status)[1] == reference[1]  # and it needs none


def test_a_loss_is_minimized_ties_go_to_the_first_point_and_diverged_points_are_never_chosen():
    curves = {
        "fedavg@lr=0.01": {"val_loss_global": [2.0, 1.0, 0.5]},
        "fedavg@lr=0.1": {"val_loss_global": [2.0, 0.8, 0.5]},
        "fedavg@lr=1.0": {"val_loss_global": [2.0, 0.1, 0.1]},
    }
    t = tuning(metric="val_loss_global")
    assert select(t, *records(curves))[1]["point"] == "fedavg@lr=1.0"
    table, choice = select(t, *records(curves, diverged={("fedavg@lr=1.0", 8)}))
    assert choice["point"] == "fedavg@lr=0.01"  # tied with lr = 0.1: grid order
    assert table.set_index("point").loc["fedavg@lr=1.0", "n_diverged"] == 1
    every = {(p, s) for p in curves for s in SEEDS}
    with pytest.raises(ValueError, match="no grid point"):
        select(t, *records(curves, diverged=every))


def test_grid_points_and_apply_choice():
    t = tuning(grid={"lr": [0.01, 0.1], "local_steps": [5, 10]})
    assert list(t.points) == [
        "fedavg@lr=0.01-local_steps=5",
        "fedavg@lr=0.01-local_steps=10",
        "fedavg@lr=0.1-local_steps=5",
        "fedavg@lr=0.1-local_steps=10",
    ]
    spec = {"run": "fedavg", "hyperparameters": {"lr": 0.5, "local_steps": 20, "batch_size": 4}}
    choice = {"point": "fedavg@lr=0.1-local_steps=5", "hyperparameters": {"lr": 0.1, "local_steps": 5},
              "score": 0.8, "metric": "val_acc_global", "at": "final"}  # fmt: skip
    tuned = apply_choice(spec, choice)
    assert tuned["hyperparameters"] == {"lr": 0.1, "local_steps": 5, "batch_size": 4}
    assert tuned["tuned"]["point"] == choice["point"] and spec["hyperparameters"]["lr"] == 0.5
    with pytest.raises(ValueError, match="unknown"):
        apply_choice(spec, {**choice, "hyperparameters": {"momentum": 0.9}})


STUDY = {
    "dataset": {"name": "digits"},
    "partition": {"scheme": "pathological", "clients": 6, "labels_per_client": 2, "val_fraction": 0.2},
    "model": {"name": "mlr"},
    "rounds": 3,
    "seeds": [0, 1],
    "defaults": {"lr": 0.05, "batch_size": 8, "local_steps": 2},
    "runs": {
        "fedavg": {"algorithm": "fedavg", "tune": {"grid": {"lr": [0.01, 0.1]}, "metric": "val_acc_global"}},
        "local": {"algorithm": "local"},
    },
}


def suite(**changes):
    study = copy.deepcopy(STUDY)
    for path, value in changes.items():
        *parents, last = path.split(".")
        node = study
        for p in parents:
            node = node[p]
        if value is None:
            del node[last]
        else:
            node[last] = value
    return build_suite({"studies": {"s": study}})


def test_a_tuned_run_has_its_points_on_the_tuning_seeds():
    s = suite(**{"runs.fedavg.tune.seeds": [5, 6]}).studies["s"]
    assert set(s.runs) == {"fedavg", "local"} and list(s.points) == ["fedavg@lr=0.01", "fedavg@lr=0.1"]
    assert s.points["fedavg@lr=0.1"].hyperparameters["lr"] == 0.1
    assert s.points["fedavg@lr=0.1"].hyperparameters["batch_size"] == 8  # the run's other values
    assert s.seeds_of("fedavg@lr=0.1") == [5, 6] and s.seeds_of("fedavg") == [0, 1]
    spec = json.loads(s.run_json("fedavg"))
    assert spec["tune"] == {
        "grid": {"lr": [0.01, 0.1]},
        "seeds": [5, 6],
        "metric": "val_acc_global",
        "at": "final",
    }
    assert "tune" not in json.loads(s.run_json("local"))
    default_seeds = suite().studies["s"]
    assert default_seeds.tuning["fedavg"].seeds == [0, 1]


def test_tune_val_fraction_holds_validation_out_of_the_grid_points_only():
    s = suite(**{"partition.val_fraction": None, "runs.fedavg.tune.val_fraction": 0.25}).studies["s"]
    run, point = s.runs["fedavg"], s.points["fedavg@lr=0.1"]
    assert "val_fraction" not in run.partition and point.partition["val_fraction"] == 0.25
    assert {k: v for k, v in point.partition.items() if k != "val_fraction"} == run.partition
    assert run.partition_id == s.runs["local"].partition_id != point.partition_id
    assert "val_acc_global" in point.metrics and not [m for m in run.metrics if m.startswith("val_")]
    assert json.loads(s.run_json("fedavg"))["tune"]["val_fraction"] == 0.25
    # over the study's own share, the tune block's share is the points'
    both = suite(**{"runs.fedavg.tune.val_fraction": 0.4}).studies["s"]
    assert both.points["fedavg@lr=0.1"].partition["val_fraction"] == 0.4
    assert both.runs["fedavg"].partition["val_fraction"] == 0.2


def test_tune_val_fraction_on_a_generated_problem_is_refused():
    study = {
        "problem": {"name": "quadratic_game", "num_clients": 4, "dim_x": 2, "dim_y": 2},
        "rounds": 2,
        "seeds": [0],
        "runs": {"gda": {"algorithm": "local_sgda", "tune": {"grid": {"lr": [0.1]}, "metric": "val_loss_global",
                                                             "val_fraction": 0.2}}},
    }  # fmt: skip
    with pytest.raises(ConfigError) as err:
        build_suite({"studies": {"q": study}})
    assert err.value.key == "studies.q.runs.gda.tune.val_fraction" and "no partition" in str(err.value)


@pytest.mark.parametrize(
    "change,key,message",
    [
        ({"partition.val_fraction": None}, "studies.s.runs.fedavg.tune.metric", "val_fraction"),
        ({"runs.fedavg.tune.val_fraction": 0.0}, "studies.s.runs.fedavg.tune.val_fraction", "(0.0, 1.0)"),
        ({"runs.fedavg.tune.val_fraction": 1.0}, "studies.s.runs.fedavg.tune.val_fraction", "(0.0, 1.0)"),
        (
            {"runs.fedavg.tune.val_fraction": float("nan")},
            "studies.s.runs.fedavg.tune.val_fraction",
            "finite",
        ),
        ({"runs.fedavg.tune.val_fraction": True}, "studies.s.runs.fedavg.tune.val_fraction", "number"),
        (
            {"runs.fedavg.tune.metric": "test_acc_global"},
            "studies.s.runs.fedavg.tune.metric",
            "never reads test",
        ),
        (
            {"runs.fedavg.tune.metric": "val_acc_local"},
            "studies.s.runs.fedavg.tune.metric",
            "val_acc_global",
        ),
        ({"runs.fedavg.tune.at": "median"}, "studies.s.runs.fedavg.tune.at", "last<k>"),
        ({"runs.fedavg.tune.seeds": []}, "studies.s.runs.fedavg.tune.seeds", "non-empty"),
        ({"runs.fedavg.tune.grid": {}}, "studies.s.runs.fedavg.tune.grid", "hyper-parameter"),
        ({"runs.fedavg.tune.grid": {"lr": []}}, "studies.s.runs.fedavg.tune.grid.lr", "non-empty"),
        (
            {"runs.fedavg.tune.grid": {"lamda": [1]}},
            "studies.s.runs.fedavg.tune.grid.lamda",
            "unknown option",
        ),
        (
            {"runs.fedavg.tune.grid": {"lr": [0.1, float("nan")]}},
            "studies.s.runs.fedavg.tune.grid.lr",
            "finite",
        ),
        ({"runs.fedavg.tune.budget": 3}, "studies.s.runs.fedavg.tune.budget", "unknown option"),
    ],
)
def test_bad_tune_blocks_name_the_key(change, key, message):
    with pytest.raises(ConfigError) as err:
        suite(**change)
    assert err.value.key == key and message in str(err.value)
