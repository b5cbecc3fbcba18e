"""Studies on generated problems: resolution, environment checks, and a training job without data files."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from hetfl import algorithms, problems
from hetfl.errors import ConfigError
from hetfl.fingerprint import closure
from hetfl.pipeline.config import build_suite, train_fingerprint
from hetfl.pipeline.train import RunOutputs, train
from tests.test_config import BASE
from tests.toy_problem import ToyGD, ToyProblem


@pytest.fixture(autouse=True)
def toy(monkeypatch):
    monkeypatch.setitem(problems.registry(), "toy", ToyProblem)  # the cached registries
    monkeypatch.setitem(algorithms.registry(), "toy_gd", {"toy": ToyGD})


def study(**changes):
    s = {
        "problem": {"name": "toy", "num_clients": 5},
        "rounds": 6,
        "seeds": [0],
        "eval_every": 3,
        "runs": {"gd": {"algorithm": "toy_gd", "clients_per_round": 2}, "full": {"algorithm": "toy_gd"}},
        "figures": [{"name": "dist", "metrics": ["dist_sq"], "logy": True}],
        "claims": ["full.dist_sq < gd.dist_sq + 1"],
    }
    s.update(changes)
    return {"studies": {"p": s}}


def test_problem_study_resolves():
    s = build_suite(study()).studies["p"]
    assert s.environment == "toy" and s.num_clients == 5 and s.dataset is None
    spec = json.loads(s.run_json("gd"))
    assert spec["problem"] == {"name": "toy", "num_clients": 5, "dim": 3}
    assert "dataset" not in spec and "model" not in spec
    assert s.metrics == {"dist_sq", "loss"}
    assert "tests.toy_problem" in closure(
        ["tests.toy_problem", "hetfl.pipeline.train"]
    )  # plugins outside hetfl count
    assert len(train_fingerprint("toy_gd", "toy")) == 16


@pytest.mark.parametrize(
    "cfg,key,fragment",
    [
        (
            study(runs={"x": {"algorithm": "fedavg"}}),
            "studies.p.runs.x.algorithm",
            "does not run on problem 'toy'",
        ),
        (study(problem={"name": "toy", "dims": 3}), "studies.p.problem.dims", "allowed: dim, num_clients"),
        (study(problem={"name": "quad"}), "studies.p.problem.name", "allowed:"),
        (study(model={"name": "mlr"}), "studies.p.model", "no dataset, partition or model"),
        (
            study(runs={"x": {"algorithm": "toy_gd", "clients_per_round": 9}}),
            "studies.p.runs.x.clients_per_round",
            "the run has 5 clients",
        ),
    ],
)
def test_problem_study_errors(cfg, key, fragment):
    with pytest.raises(ConfigError) as info:
        build_suite(cfg)
    assert info.value.key == key and fragment in str(info.value)


def test_data_study_rejects_a_problem_algorithm():
    cfg = json.loads(json.dumps(BASE))
    cfg["studies"]["s"]["runs"] = {"x": {"algorithm": "toy_gd"}}
    cfg["studies"]["s"].pop("claims")
    with pytest.raises(ConfigError, match="does not run on client data") as err:
        build_suite(cfg)
    assert {"fedavg", "local", "pfedme"} <= set(err.value.allowed) and "toy_gd" not in err.value.allowed


def test_training_a_problem_needs_no_files(tmp_path):
    s = build_suite(study()).studies["p"]
    out = RunOutputs(*(tmp_path / n for n in ("m.csv", "c.csv", "run.json", "final.pt")))
    info = train(json.loads(s.run_json("full")), 0, None, None, out)
    assert info.status == "ok" and info.num_clients == 5
    metrics = pd.read_csv(out.metrics)
    assert sorted(metrics["round"].unique()) == [0, 3, 6]
    dist = metrics[metrics["metric"] == "dist_sq"].set_index("round")["value"]
    assert dist[6] < 1e-3 * dist[0]  # full participation, lr 0.5: converges to the mean target
