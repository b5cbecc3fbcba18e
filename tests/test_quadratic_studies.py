"""The FFGG quadratic studies: the config files resolve, the paper-scale file mirrors the default one, a
training job on the problem writes its records (a diverging run is recorded, not raised), bad
hyper-parameters are rejected with the key."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hetfl.errors import ConfigError
from hetfl.pipeline.config import build_suite, load_config
from hetfl.pipeline.train import RunOutputs, train
from tests.quadratic_helpers import TINY

CONFIG = Path(__file__).resolve().parents[1] / "config"


def _quadratic(path: Path) -> dict:
    """The studies of a config file that run on the FFGG quadratic problem."""
    studies = load_config([path], root=path.parents[1])["studies"]
    return {k: v for k, v in studies.items() if v.get("problem", {}).get("name") == "ffgg_quadratic"}


DEFAULT = _quadratic(CONFIG / "config.yaml")
PAPER = _quadratic(CONFIG / "paper.yaml")
SCALE_KEYS = {"rounds", "seeds", "description", "eval_every"}


def test_both_files_resolve():
    default = build_suite({"studies": DEFAULT}).studies
    paper = build_suite({"studies": PAPER}).studies
    assert set(default) == {n.removesuffix("_paper") for n in paper} - {"ffgg_async_tuning"}
    assert all(s.problem["name"] == "ffgg_quadratic" for s in [*default.values(), *paper.values()])
    assert len(paper["ffgg_async_tuning_paper"].runs) == 2 * 4 * 5 * 5


@pytest.mark.parametrize("name", sorted(DEFAULT))
def test_paper_scale_mirrors_the_default_study(name):
    default, paper = DEFAULT[name], PAPER[f"{name}_paper"]
    for key in set(default) | set(paper):
        if key in SCALE_KEYS:
            continue
        if key in ("runs", "figures"):  # the paper scale may add runs and figures, never change one
            extra = paper[key] if key == "figures" else list(paper[key].values())
            kept = default[key] if key == "figures" else list(default[key].values())
            assert all(item in extra for item in kept), key
        else:
            assert paper[key] == default[key], key
    assert paper["rounds"] >= default["rounds"] and len(paper["seeds"]) >= len(default["seeds"])


def _study(runs: dict, rounds: int = 6, **problem) -> dict:
    return {
        "problem": {"name": "ffgg_quadratic", **TINY, **problem},
        "rounds": rounds,
        "seeds": [0],
        "eval_every": 2,
        "dtype": "float64",
        "runs": runs,
        "figures": [{"name": "f", "metrics": ["F_norm_sq"], "x": "grad_evals", "logy": True}],
    }


def _train(tmp_path: Path, study: dict, label: str):
    s = build_suite({"studies": {"q": study}}).studies["q"]
    out = RunOutputs(*(tmp_path / n for n in ("m.csv", "c.csv", "run.json", "final.pt", "a.npz")))
    info = train(json.loads(s.run_json(label)), 0, None, None, out)
    return info, pd.read_csv(out.metrics), out


def test_a_training_job_writes_the_metrics_and_artifacts(tmp_path):
    study = _study({"a": {"algorithm": "ffgg_async", "local_steps": 3}})
    info, metrics, out = _train(tmp_path, study, "a")
    assert info.status == "ok" and info.num_clients == 4
    assert set(metrics["metric"]) == {
        "F_norm_sq", "F_norm", "theta_dist_sq", "loss", "grad_evals", "comm_rounds",
        "directions", "time", "delay_max", "delay_mean",
    }  # fmt: skip
    directions = metrics[metrics["metric"] == "directions"].set_index("round")["value"]
    assert directions[6] == 6 * 4
    artifacts = np.load(out.artifacts)
    assert len(artifacts["delay"]) == 24 and artifacts["worker_speed"].shape == (4,)
    clients = pd.read_csv(out.client_metrics)
    assert set(clients["client"]) == {0, 1, 2, 3} and set(clients["metric"]) == {"F_norm_sq"}


def test_a_diverging_run_is_recorded_as_diverged(tmp_path):
    study = _study(
        {"l": {"algorithm": "l2gd", "local_steps": 10, "stepsize_rule": "literal"}}, rounds=200, n=2000
    )
    info, metrics, _ = _train(tmp_path, study, "l")
    assert info.status == "diverged" and info.diverged_round < 200
    assert not np.isfinite(metrics[metrics["round"] == info.diverged_round]["value"]).all()


@pytest.mark.parametrize(
    "run,key,fragment",
    [
        ({"algorithm": "ffgg", "lr_theta": 0.1, "lr_theta_factor": 2.0}, "lr_theta_factor", "set explicitly"),
        ({"algorithm": "ffgg", "fine_tuner": "newton"}, "fine_tuner", "one of gd, cg, exact"),
        ({"algorithm": "l2gd", "local_steps": 1}, "local_steps", "τ ≥ 2"),
        ({"algorithm": "ffgg_byzantine", "bucket_size": 0}, "bucket_size", "> 0"),
        (
            {"algorithm": "ffgg_async", "mode": "sync", "workers": 2, "clients_per_round": 3},
            "clients_per_round",
            "S ≤ K",
        ),
        ({"algorithm": "scaffold", "control_variate": "option3"}, "control_variate", "option1, option2"),
        ({"algorithm": "ffgg", "tau": 5}, "tau", "allowed:"),
        ({"algorithm": "fedavg"}, "algorithm", "does not run on problem 'ffgg_quadratic'"),
    ],
)
def test_bad_hyperparameters_name_the_key(run, key, fragment):
    with pytest.raises(ConfigError) as info:
        build_suite({"studies": {"q": _study({"r": run})}})
    assert info.value.key == f"studies.q.runs.r.{key}" and fragment in str(info.value)
