"""Config resolution: defaults, precedence, grids, and errors that name the key and the allowed values."""

from __future__ import annotations

import copy
import json

import pytest

from hetfl.errors import ConfigError
from hetfl.pipeline.config import build_suite, train_fingerprint

BASE = {
    "studies": {
        "s": {
            "dataset": {"name": "digits"},
            "partition": {"scheme": "pathological", "clients": 6, "labels_per_client": 2},
            "model": {"name": "mlr"},
            "rounds": 3,
            "seeds": [0, 1],
            "defaults": {"lr": 0.05, "batch_size": 8, "local_steps": 2, "clients_per_round": 3},
            "runs": {
                "fedavg": {"algorithm": "fedavg"},
                "pfedme": {"algorithm": "pfedme", "K": 2, "lr": 0.01},
                "local": {"algorithm": "local", "eval_every": 2},
            },
            "claims": ["pfedme.test_acc_personal > fedavg.test_acc_global"],
        }
    }
}


def config(**changes):
    """BASE with ``changes`` applied to study ``s`` (a value None deletes the key)."""
    cfg = copy.deepcopy(BASE)
    for key, value in changes.items():
        if value is None:
            del cfg["studies"]["s"][key]
        else:
            cfg["studies"]["s"][key] = value
    return cfg


def error(cfg) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        build_suite(cfg)
    return info.value


def test_resolved_runs_take_defaults_then_their_own_values():
    study = build_suite(config()).studies["s"]
    pfedme = json.loads(study.run_json("pfedme"))
    assert pfedme["hyperparameters"]["lr"] == 0.01  # the run's own value wins
    assert pfedme["hyperparameters"]["batch_size"] == 8  # from defaults
    assert pfedme["hyperparameters"]["lam"] == 15.0  # the algorithm's default
    assert (
        "clients_per_round" not in json.loads(study.run_json("local"))["hyperparameters"]
    )  # local ignores it
    assert json.loads(study.run_json("local"))["eval_every"] == 2
    assert json.loads(study.run_json("fedavg"))["eval_every"] == 1
    assert {"test_acc_personal", "test_acc_global", "test_acc_local", "train_loss_global"} <= study.metrics
    assert study.run_json("fedavg") == build_suite(config()).studies["s"].run_json("fedavg")  # stable params


def test_a_run_may_switch_model():
    cfg = config(model={"name": "dnn", "hidden": 7})
    cfg["studies"]["s"]["runs"]["mlr"] = {"algorithm": "fedavg", "model": {"name": "mlr"}}
    cfg["studies"]["s"]["runs"]["wide"] = {"algorithm": "fedavg", "model": {"hidden": 9}}
    study = build_suite(cfg).studies["s"]
    split = {"split": "none", "adapter_rank": 4}
    assert json.loads(study.run_json("mlr"))["model"] == {"name": "mlr", **split}
    assert json.loads(study.run_json("wide"))["model"] == {"name": "dnn", "hidden": 9, **split}
    assert json.loads(study.run_json("fedavg"))["model"] == {"name": "dnn", "hidden": 7, **split}


def test_grid_expands_runs_with_readable_labels():
    study = build_suite(config(grid={"pfedme": {"lam": [5, 15], "K": [1, 3]}}, claims=None)).studies["s"]
    labels = [r for r in study.runs if r.startswith("pfedme")]
    assert labels == ["pfedme-lam=5-K=1", "pfedme-lam=5-K=3", "pfedme-lam=15-K=1", "pfedme-lam=15-K=3"]
    assert json.loads(study.run_json("pfedme-lam=5-K=3"))["hyperparameters"]["K"] == 3


def test_partition_seed_follows_the_run_seed_unless_fixed():
    study = build_suite(config()).studies["s"]
    assert [study.partition_seed(s) for s in (0, 1)] == [0, 1]
    fixed = build_suite(config(partition={**BASE["studies"]["s"]["partition"], "seed": 7})).studies["s"]
    assert [fixed.partition_seed(s) for s in (0, 1)] == [7, 7]
    assert fixed.partition_id == study.partition_id  # the seed is in the path, not the id


@pytest.mark.parametrize(
    "changes,key,fragment",
    [
        ({"rounds": 0}, "studies.s.rounds", "positive integer"),
        ({"seeds": [1, 1]}, "studies.s.seeds", "distinct"),
        ({"epochs": 3}, "studies.s.epochs", "allowed: claims, dataset"),
        ({"model": None}, "studies.s.model", "missing required"),
        (
            {"dataset": {"name": "cifar100"}},
            "studies.s.dataset.name",
            "unknown dataset 'cifar100'",
        ),
        ({"model": {"name": "resnet"}}, "studies.s.model.name", "unknown model 'resnet'; allowed: "),
        (
            {"model": {"name": "dnn", "width": 3}},
            "studies.s.model.width",
            "allowed: adapter_rank, hidden, name, split",
        ),
        (
            {"partition": {"scheme": "shards", "clients": 6}},
            "studies.s.partition.scheme",
            "allowed: clusters",
        ),
        ({"partition": {"scheme": "iid", "clients": 5000}}, "studies.s.partition", "clients"),
        (
            {"partition": {"scheme": "dirichlet", "clients": 100, "alpha": 0.5, "min_size": 30}},
            "studies.s.partition.min_size",
            "",
        ),
        (
            {"runs": {"x": {"algorithm": "fedbogus"}}},
            "studies.s.runs.x.algorithm",
            "unknown algorithm 'fedbogus'",
        ),
        (
            {"runs": {"x": {"algorithm": "pfedme", "lamda": 15}}},
            "studies.s.runs.x.lamda",
            "allowed: K, batch_size",
        ),
        ({"runs": {"x": {"algorithm": "pfedme", "K": 2.5}}}, "studies.s.runs.x.K", "expected int"),
        ({"runs": {"x": {"algorithm": "fedavg", "lr": -1}}}, "studies.s.runs.x.lr", "> 0"),
        (
            {"runs": {"x": {"algorithm": "fedavg", "client_weights": "size"}}},
            "studies.s.runs.x.client_weights",
            "one of uniform, samples",
        ),
        (
            {"runs": {"x": {"algorithm": "fedavg", "clients_per_round": 9}}},
            "studies.s.runs.x.clients_per_round",
            "the run has 6 clients",
        ),
        (
            {"runs": {"x": {"algorithm": "fedavg", "sampling": "shuffle"}}},
            "studies.s.runs.x.sampling",
            "allowed: epoch, replacement, sequential",
        ),
        (
            {
                "model": {"name": "dnn", "hidden": 4},
                "runs": {
                    "x": {"algorithm": "ffgg", "model": {"split": "output"}, "server_optimizer": "adam"}
                },
            },
            "studies.s.runs.x.server_optimizer",
            "needs Algorithm 4",
        ),
        (
            {
                "model": {"name": "dnn", "hidden": 4},
                "runs": {
                    "x": {
                        "algorithm": "fedsim",
                        "model": {"split": "input"},
                        "lr_schedule": "linear",
                        "lr_warmup": 1.0,
                    }
                },
            },
            "studies.s.runs.x.lr_warmup",
            "[0, 1)",
        ),
        (
            {"runs": {"x": {"algorithm": "fedavg", "lr_warmup": 0.2}}},
            "studies.s.runs.x.lr_warmup",
            "lr_schedule",
        ),
        (
            {
                "model": {"name": "dnn", "hidden": 4},
                "runs": {
                    "x": {"algorithm": "fedalt", "model": {"split": "output"}, "server_optimizer": "lamb"}
                },
            },
            "studies.s.runs.x.server_optimizer",
            "adam",
        ),
        (
            {
                "model": {"name": "dnn", "hidden": 4},
                "runs": {"x": {"algorithm": "fedsim", "model": {"split": "input"}, "server_beta2": 1.0}},
            },
            "studies.s.runs.x.server_beta2",
            "[0, 1)",
        ),
        ({"runs": {"a/b": {"algorithm": "fedavg"}}}, "studies.s.runs.a/b", "only letters"),
        # a study-level setting: named where it is set, not under the first run that takes it
        ({"sampling": "shuffle"}, "studies.s.sampling", "allowed: epoch, replacement, sequential"),
        ({"eval_every": 0}, "studies.s.eval_every", "positive integer"),
        ({"device": "tpu"}, "studies.s.device", "allowed: auto, cpu, cuda"),
        ({"dtype": "float16"}, "studies.s.dtype", "allowed: float32, float64"),
        ({"memory_budget": float("nan")}, "studies.s.memory_budget", "finite number of MiB"),
        ({"defaults": {"lamda": 1}}, "studies.s.defaults.lamda", "no run of this study uses"),
        ({"grid": {"fedsim": {"lr": [1]}}}, "studies.s.grid.fedsim", "allowed: fedavg, local, pfedme"),
        ({"figures": ["test_acc_personnal"]}, "studies.s.figures[0]", "test_acc_personal"),
        (
            {"claims": ["pfedme.test_acc_personal > fedprox.test_acc_global"]},
            "studies.s.claims[0].check",
            "fedprox",
        ),
    ],
)
def test_bad_input_names_the_key(changes, key, fragment):
    err = error(config(**changes))
    assert err.key.startswith(key), err
    assert fragment in str(err)
    if key.endswith(".algorithm"):
        assert {"fedavg", "local", "pfedme"} <= set(err.allowed)


def test_model_that_cannot_take_the_data():
    cfg = config(
        dataset={"name": "synthetic", "num_users": 10},
        partition={"scheme": "natural", "clients": 10},
        model={"name": "cnn"},
    )
    assert "image" in str(error(cfg))


def test_top_level_errors():
    assert error({"studies": {}}).key == "studies"
    assert error({**config(), "select": ["nope"]}).key == "select"
    assert error({**config(), "stuides": {}}).key == "stuides"
    assert build_suite({**config(), "select": "s"}).selected == ["s"]


def test_training_fingerprints_are_per_algorithm():
    assert train_fingerprint("fedavg") != train_fingerprint("pfedme")
    assert train_fingerprint("fedavg") == train_fingerprint("fedavg")


def test_init_from_and_per_run_rounds():
    cfg = config()
    cfg["studies"]["s"]["runs"]["tuned"] = {"algorithm": "fedavg", "init_from": "fedavg", "rounds": 7}
    study = build_suite(cfg).studies["s"]
    tuned = json.loads(study.run_json("tuned"))
    assert tuned["init_from"] == "fedavg" and tuned["rounds"] == 7
    assert (
        "init_from" not in json.loads(study.run_json("fedavg"))
        and json.loads(study.run_json("fedavg"))["rounds"] == 3
    )
    for run, where, fragment in (
        ({"algorithm": "fedavg", "init_from": "nope"}, "init_from", "unknown run 'nope'"),
        ({"algorithm": "fedavg", "init_from": "x"}, "init_from", "cycle"),
        ({"algorithm": "fedavg", "init_from": "local"}, "init_from", "no global model"),
        ({"algorithm": "fedavg", "rounds": 0}, "rounds", "positive integer"),
    ):
        cfg = config()
        cfg["studies"]["s"]["runs"]["x"] = run
        with pytest.raises(ConfigError) as err:
            build_suite(cfg)
        assert err.value.key == f"studies.s.runs.x.{where}" and fragment in str(err.value)


def test_a_run_may_use_its_own_partition():
    cfg = config()
    cfg["studies"]["s"]["runs"]["fewer"] = {"algorithm": "fedavg", "partition": {"clients": 4}}
    cfg["studies"]["s"]["runs"]["dirichlet"] = {
        "algorithm": "fedavg",
        "partition": {"scheme": "dirichlet", "clients": 5, "alpha": 0.3, "min_size": 5},
    }
    study = build_suite(cfg).studies["s"]
    base, fewer, dirichlet = (study.runs[r] for r in ("fedavg", "fewer", "dirichlet"))
    assert base.partition_id == study.partition_id and base.num_clients == 6
    assert fewer.partition == {**study.partition, "clients": 4} and fewer.num_clients == 4
    assert fewer.partition_id != study.partition_id
    assert json.loads(study.run_json("dirichlet"))["partition"]["scheme"] == "dirichlet"
    assert "labels_per_client" not in dirichlet.partition  # another scheme: not merged with the study's
    cfg["studies"]["s"]["runs"]["bad"] = {
        "algorithm": "fedavg",
        "clients_per_round": 5,
        "partition": {"clients": 4},
    }
    with pytest.raises(ConfigError, match="the run has 4 clients"):
        build_suite(cfg)


@pytest.mark.parametrize("path", ["config/config.yaml", "config/paper.yaml"])
def test_the_pfedme_studies_run_per_fedavg_in_the_form_their_beta_comes_from(path):
    """The pFedMe paper's Per-FedAvg β̂ belongs to the official code's sequential step (Per-FedAvg's
    module docstring); under the MAML form it would be the only step on the global model."""
    import pathlib

    from hetfl.pipeline.config import load_config

    root = pathlib.Path(__file__).parents[1]
    suite = build_suite(load_config([root / path], root=root))
    runs = [
        spec
        for name, study in suite.studies.items()
        if name.startswith("pfedme_")
        for spec in study.runs.values()
        if spec.algorithm == "perfedavg"
    ]
    assert len(runs) >= 8
    assert {spec.hyperparameters["step"] for spec in runs} == {"sequential"}


@pytest.mark.parametrize(
    "change,key,message",
    [
        (
            {"claims": ["local.test_acc_global > 0.5"]},  # local has no global model
            "studies.s.claims[0].check",
            "run 'local' does not report 'test_acc_global'; allowed: test_acc_personal",
        ),
        (
            {"figures": [{"name": "f", "metrics": ["test_acc_global"], "runs": ["fedavg", "local"]}]},
            "studies.s.figures[0]",
            "run 'local' reports none of ['test_acc_global']",
        ),
        (
            {
                "figures": [
                    {"name": "f", "metrics": ["test_acc_global", "train_loss_local"], "runs": ["fedavg"]}
                ]
            },
            "studies.s.figures[0]",
            "none of the figure's runs reports 'train_loss_local'",
        ),
    ],
)
def test_a_metric_a_run_does_not_report_is_an_error_not_a_dropped_run(change, key, message):
    cfg = config(**change)
    if "local" not in cfg["studies"]["s"]["runs"]:
        cfg["studies"]["s"]["runs"]["local"] = {"algorithm": "local"}
    err = error(cfg)
    assert err.key == key and message in str(err)


def test_a_defaults_key_some_runs_do_not_take_is_reported():
    study = build_suite(config()).studies["s"]
    assert study.notes == [
        "studies.s.defaults.clients_per_round: not used by run(s) local (algorithm(s) local take no such "
        "hyper-parameter)"
    ]


@pytest.mark.parametrize(
    "path", ["benchmarks/thousands_of_clients.yaml", "benchmarks/cuda/vgg11_digits.yaml"]
)
def test_the_benchmark_study_configs_validate_over_the_default_suite(path, tmp_path, monkeypatch):
    """The study files the scale and GPU checks of docs/scaling.md and docs/gpu.md run (``--configfile
    config/config.yaml <file>``)."""
    import importlib.util
    import pathlib

    import yaml

    from hetfl.pipeline.config import load_config

    root = pathlib.Path(__file__).resolve().parents[1]
    monkeypatch.chdir(tmp_path)  # the VGG-11 study reads results/digits32.npz, written by its script
    (tmp_path / "results").mkdir()
    spec = importlib.util.spec_from_file_location("digits32", root / "benchmarks/cuda/digits32.py")
    digits32 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(digits32)
    digits32.main("results/digits32.npz")
    config = load_config([root / "config/config.yaml", root / path], root=root)
    config["select"] = list(yaml.safe_load((root / path).read_text())["studies"])
    suite = build_suite(config)
    for name in config["select"]:
        assert suite.studies[name].runs and not suite.studies[name].claims  # scale checks: no claims
