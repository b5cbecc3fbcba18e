"""Regression (least squares): float targets, squared loss, loss-only metrics, the synthetic_lsr dataset."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from hetfl.algorithms import get_algorithm
from hetfl.data import dataset_info, load_dataset, make_partition
from hetfl.engine.evaluate import Evaluator
from hetfl.engine.federation import ClientSplit, Federation
from hetfl.engine.participation import participation_schedule
from hetfl.errors import ConfigError
from hetfl.models import BatchedModel, build_model, normalize_model_spec
from hetfl.pipeline.config import build_suite
from hetfl.pipeline.train import RunOutputs, train
from hetfl.reference import references
from tests.test_engine import assert_preact_grads

LSR = {"name": "synthetic_lsr", "num_users": 6, "dimension": 3, "samples_per_user": 60, "seed": 1}


def regression_federation(model="linear", bias=False, outputs=1, seed=0) -> Federation:
    rng = np.random.default_rng(seed)
    sizes = (7, 12, 3, 9)

    def split(scale):
        xs = [rng.normal(size=(max(1, int(n * scale)), 4)) for n in sizes]
        ys = [rng.normal(size=(len(x), outputs)) for x in xs]
        return ClientSplit(xs, ys, torch.device("cpu"), torch.float64)

    options = {"bias": bias} if model == "linear" else {"hidden": 5}
    spec = normalize_model_spec({"name": model, **options}, "m")
    return Federation(split(1.0), split(0.5), build_model(spec, (4,), outputs, "regression"))


@pytest.mark.parametrize("model,bias,outputs", [("linear", False, 1), ("linear", True, 2), ("dnn", True, 1)])
@pytest.mark.parametrize("masked", [False, True])
def test_squared_loss_gradients_match_autograd(model, bias, outputs, masked):
    fed = regression_federation(model, bias, outputs)
    g = torch.Generator().manual_seed(0)
    params = {
        k: v.expand(4, *v.shape[1:]) + 0.1 * torch.randn(4, *v.shape[1:], generator=g, dtype=v.dtype)
        for k, v in fed.model.init(g, torch.float64).items()
    }
    x = torch.randn(4, 5, 4, generator=g, dtype=torch.float64)
    y = torch.randn(4, 5, outputs, generator=g, dtype=torch.float64)
    mask = (torch.rand(4, 5, generator=g) > 0.3) | (torch.arange(5) == 0) if masked else None
    loss, grads = fed.model.loss_grads(params, x, y, mask)
    ref_loss, ref_grads = BatchedModel.loss_grads(fed.model, params, x, y, mask)
    torch.testing.assert_close(loss, ref_loss, rtol=0, atol=1e-12)
    for k in params:
        torch.testing.assert_close(grads[k], ref_grads[k], rtol=0, atol=1e-12)
    assert ("fc1.bias" in params) == bias or model == "dnn"
    assert_preact_grads(fed.model, params, x, y, mask, ref_loss, ref_grads)


@pytest.mark.parametrize("name", ["fedavg", "local", "pfedme"])
def test_batched_algorithms_match_the_reference_on_regression(name):
    fed = regression_federation("linear", bias=True, outputs=2)
    cls = get_algorithm(name)
    hp = cls.Hyperparameters.from_dict(
        {
            "lr": 0.05,
            "local_steps": 3,
            "batch_size": 4,
            **({} if name == "local" else {"clients_per_round": 3}),
        },
        "t",
    )
    alg = cls(fed, hp, 0, "epoch")
    schedule = participation_schedule(4, alg.clients_per_round, 3, 0)
    reference = references()[name](fed, hp, 0, schedule, "epoch")
    for t in range(1, 4):
        alg.round(t, schedule[t - 1])
        ref = next(reference)
    for model, states in ref.items():
        states = [states] if isinstance(states, dict) else states
        for i, state in enumerate(states):
            for k, v in state.items():
                torch.testing.assert_close(alg.eval_models()[model][k][i], v, rtol=0, atol=1e-10)


def test_evaluator_reports_squared_error_and_no_accuracy():
    fed = regression_federation("linear", bias=True, outputs=2)
    params = fed.model.init(torch.Generator().manual_seed(0), torch.float64)
    scores = Evaluator(fed, budget=16).scores(params, "test")
    assert not scores.has_acc and np.isnan(scores.weighted()[1])
    w, b = params["fc1.weight"][0], params["fc1.bias"][0]
    for i in range(4):
        a, z = int(fed.test.offsets[i]), int(fed.test.offsets[i + 1])
        err = ((fed.test.x[a:z] @ w.T + b - fed.test.y[a:z]) ** 2).mean(1).sum()
        assert scores.loss_sum[i].item() == pytest.approx(err.item(), rel=1e-12)


def test_synthetic_lsr_is_noise_free_and_clustered(tmp_path):
    from hetfl.data.synthetic_lsr import optima

    ds = load_dataset(LSR, tmp_path)
    assert ds.task == "regression" and ds.x.dtype == np.float64 and ds.targets.shape == (360, 1)
    spec = {**LSR, "num_clusters": 2, "center_range": 5.0}
    theta = optima(spec)
    for u in range(6):
        rows = ds.users == u
        np.testing.assert_allclose(ds.x[rows] @ theta[u % 2], ds.targets[rows, 0], rtol=0, atol=1e-12)
    part = make_partition({"scheme": "natural", "test_fraction": 0.2}, ds, 0)
    assert list(part.cluster) == [0, 1, 0, 1, 0, 1]
    info = dataset_info(LSR)
    assert info.task == "regression" and list(info.user_clusters) == [0, 1, 0, 1, 0, 1]


def test_regression_study_config():
    study = {
        "dataset": LSR,
        "partition": {"scheme": "natural", "test_fraction": 0.2},
        "model": {"name": "linear", "bias": False},
        "rounds": 3,
        "seeds": [0],
        "runs": {"fedavg": {"algorithm": "fedavg"}},
    }
    s = build_suite({"studies": {"r": study}}).studies["r"]
    assert s.metrics == {"train_loss_global", "test_loss_global", "train_loss_personal", "test_loss_personal"}
    for bad, key in (
        ({"partition": {"scheme": "dirichlet", "clients": 6}}, "partition.scheme"),
        ({"figures": ["test_acc_global"]}, "figures[0].metrics"),
    ):
        with pytest.raises(ConfigError) as err:
            build_suite({"studies": {"r": {**study, **bad}}})
        assert err.value.key.endswith(key)


def test_fedavg_plateaus_on_two_clusters_while_local_converges(tmp_path):
    """All-for-one's premise (Figure 2): noise-free LSR, two clusters. Each client's excess loss goes to 0 when
    it trains alone (its own optimum), while FedAvg's single model stalls between the two cluster optima."""
    study = {
        "dataset": {**LSR, "samples_per_user": 400},
        "partition": {"scheme": "natural", "test_fraction": 0.2},
        "model": {"name": "linear", "bias": False},
        "rounds": 100,
        "seeds": [0],
        "eval_every": 100,
        "dtype": "float64",
        "defaults": {"lr": 0.1, "local_steps": 1, "batch_size": 2},
        "runs": {"fedavg": {"algorithm": "fedavg"}, "local": {"algorithm": "local"}},
    }
    s = build_suite({"studies": {"r": study}}).studies["r"]
    data = load_dataset(s.dataset, tmp_path)
    data.save(tmp_path / "d.npz")
    make_partition(s.partition, data, 0).save(tmp_path / "p.npz")
    final = {}
    for run, model in (("fedavg", "global"), ("local", "personal")):
        out = RunOutputs(*(tmp_path / f"{run}.{n}" for n in ("csv", "c.csv", "json", "pt")))
        train(json.loads(s.run_json(run)), 0, tmp_path / "d.npz", tmp_path / "p.npz", out)
        m = pd.read_csv(out.metrics)
        final[run] = m[(m["metric"] == f"test_loss_{model}") & (m["round"] == 100)]["value"].item()
    assert final["local"] < 1e-6
    assert final["fedavg"] > 1.0  # half the clients are far from the average optimum
