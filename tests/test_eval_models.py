"""``eval_models``: a run scores only the models it lists (config/README.md, run settings).

What it changes: the metrics a run reports (the others are absent, and a figure or claim that needs them is
a config error), not the training or the kept metrics' values (byte for byte), nor ``final.pt``.
"""

from __future__ import annotations

import copy
import json

import pandas as pd
import pytest
import torch

from hetfl.data import load_dataset, make_partition
from hetfl.errors import ConfigError
from hetfl.pipeline.config import build_suite
from hetfl.pipeline.train import RunOutputs, train
from tests.conftest import TINY_STUDY
from tests.quadratic_helpers import TINY


def suite_with(eval_models, label="pfedme", **study):
    config = {"studies": {"t": {**copy.deepcopy(TINY_STUDY), **study}}}
    config["studies"]["t"]["runs"][label]["eval_models"] = eval_models
    return build_suite(config)


def error(*args, **kwargs) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        suite_with(*args, **kwargs)
    return info.value


def test_the_run_reports_the_metrics_of_its_models_only_in_the_algorithms_order():
    study = suite_with(["local", "global"]).studies["t"]
    spec = study.runs["pfedme"]
    assert {m.rsplit("_", 1)[1] for m in spec.metrics} == {"global", "local"}
    assert "test_acc_local" in spec.metrics and "test_acc_personal" not in spec.metrics
    assert json.loads(study.run_json("pfedme"))["eval_models"] == ["global", "local"]
    assert "eval_models" not in json.loads(study.run_json("fedavg"))  # unset: not in the spec (ids unchanged)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (["foo"], "pfedme has no model 'foo'"),
        ([], "non-empty list"),
        ("global", "non-empty list"),
        (["global", 3], "non-empty list"),
    ],
)
def test_a_bad_list_is_an_error_naming_the_key_and_the_models(value, says):
    err = error(value)
    assert err.key == "studies.t.runs.pfedme.eval_models" and says in err.message
    assert sorted(err.allowed) == ["global", "local", "personal"]


def test_a_figure_or_claim_needing_a_model_left_out_is_an_error():
    err = error(["global"], figures=[{"metrics": ["test_acc_personal"], "runs": ["pfedme"]}])
    assert err.key == "studies.t.figures[0]"
    err = error(["global"], claims=["pfedme.test_acc_local > fedavg.test_acc_global"])
    assert err.key.startswith("studies.t.claims[0]") and "test_acc_local" in str(err)


def test_a_model_the_algorithm_computes_its_metrics_from_is_kept():
    study = {**copy.deepcopy(TINY_STUDY)}
    study["runs"] = {"ditto": {"algorithm": "ditto", "lam": 0.1}}
    err = error(["global"], label="ditto", runs=study["runs"])
    assert err.key == "studies.t.runs.ditto.eval_models" and "'personal'" in err.message


def test_a_generated_problem_has_no_models_to_choose():
    problem = {
        "problem": {"name": "ffgg_quadratic", **TINY},
        "rounds": 2,
        "seeds": [0],
        "runs": {"ffgg": {"algorithm": "ffgg", "eval_models": ["global"]}},
    }
    with pytest.raises(ConfigError) as info:
        build_suite({"studies": {"q": problem}})
    assert info.value.key == "studies.q.runs.ffgg.eval_models"


def test_training_and_the_kept_metrics_are_unchanged_byte_for_byte(tmp_path):
    outputs = {}
    for name, models in (("all", None), ("some", ["local", "global"])):
        study = (suite_with(models) if models else build_suite({"studies": {"t": TINY_STUDY}})).studies["t"]
        dataset = load_dataset(study.dataset, tmp_path)
        dataset.save(data := tmp_path / "data.npz")
        make_partition(study.partition, dataset, study.partition_seed(0)).save(part := tmp_path / "part.npz")
        out = tmp_path / name
        out.mkdir()
        paths = RunOutputs(out / "metrics.csv", out / "clients.csv", out / "run.json", out / "final.pt")
        train(json.loads(study.run_json("pfedme")), 0, data, part, paths)
        outputs[name] = paths
    full, some = (pd.read_csv(outputs[k].metrics) for k in ("all", "some"))
    assert set(full["metric"]) - set(some["metric"]) == {
        f"{split}_{stat}_personal" for split in ("train", "test") for stat in ("loss", "acc")
    }
    kept = full[~full["metric"].str.endswith("_personal")].reset_index(drop=True)
    pd.testing.assert_frame_equal(kept, some, check_exact=True)
    clients_full, clients_some = (pd.read_csv(outputs[k].client_metrics) for k in ("all", "some"))
    assert not clients_some["metric"].str.endswith("_personal").any()
    kept = clients_full[~clients_full["metric"].str.endswith("_personal")].reset_index(drop=True)
    pd.testing.assert_frame_equal(kept, clients_some, check_exact=True)
    a, b = (torch.load(outputs[k].model, weights_only=True) for k in ("all", "some"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)  # every model saved
