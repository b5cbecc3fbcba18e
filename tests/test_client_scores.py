"""``client_scores``: each sampled client's loss and accuracy of a model on its own data, batched, reading
only those clients' data (``hetfl.engine.evaluate.Evaluator.client_scores``,
``FederatedAlgorithm.client_scores``)."""

import pytest
import torch
import torch.nn.functional as F

from hetfl.algorithms import get_algorithm
from hetfl.engine.evaluate import Evaluator
from hetfl.engine.params import broadcast, select
from hetfl.reference.common import make_module, split_data
from hetfl.testing import tiny_federation

CLIENTS = torch.tensor([3, 0, 2])  # a round's sampled clients, in any order


def _models(fed, rows: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    init = fed.model.init(g, fed.dtype)
    return {k: v.expand(rows, *v.shape[1:]) + 0.3 * torch.randn(rows, *v.shape[1:], generator=g, dtype=v.dtype)
            for k, v in init.items()}  # fmt: skip


def _expected(fed, params, clients, split):
    data = split_data(fed, split)
    loss, acc = [], []
    for row, c in enumerate(clients.tolist()):
        state = {k: v[row if len(v) > 1 else 0] for k, v in params.items()}
        with torch.no_grad():
            out = make_module(fed, state)(data[c][0])
        loss.append(float(F.cross_entropy(out, data[c][1])))
        acc.append(float((out.argmax(1) == data[c][1]).double().mean()))
    return torch.tensor(loss, dtype=torch.float64), torch.tensor(acc, dtype=torch.float64)


@pytest.mark.parametrize("model", ["mlr", "dnn", "cnn"])
@pytest.mark.parametrize("split", ["train", "test"])
@pytest.mark.parametrize("shared", [True, False], ids=["server-model", "own-models"])
def test_each_clients_loss_and_accuracy_on_its_own_data(model, split, shared):
    fed = tiny_federation(model, sizes=(7, 12, 3, 9, 30))
    params = _models(fed, 1 if shared else len(CLIENTS))
    scores = Evaluator(fed).client_scores(params, CLIENTS, split)
    loss, acc = _expected(fed, params, CLIENTS, split)
    torch.testing.assert_close(scores.loss, loss, rtol=0, atol=1e-12)
    torch.testing.assert_close(scores.acc, acc, rtol=0, atol=1e-12)
    assert scores.count.tolist() == getattr(fed, split).sizes[CLIENTS].double().tolist()


@pytest.mark.parametrize("packed", [True, False], ids=["packed", "block-rows"])
def test_the_same_scores_as_the_evaluation_of_every_client(packed, monkeypatch):
    """Own models: the sampled clients' rows of the evaluation of all N clients (``Evaluator.scores``), in
    either layout of per-client models."""
    fed = tiny_federation("dnn", sizes=(7, 12, 3, 9, 30))
    evaluator = Evaluator(fed)
    monkeypatch.setattr(evaluator, "packing", lambda split: (4, 3) if packed else None)
    models = _models(fed, fed.num_clients)
    every = evaluator.scores(models, "train")
    some = evaluator.client_scores(select(models, CLIENTS), CLIENTS, "train")
    assert torch.equal(some.loss_sum, every.loss_sum[CLIENTS])
    assert torch.equal(some.correct, every.correct[CLIENTS])


def test_only_the_sampled_clients_data_are_read():
    fed = tiny_federation("mlr")
    off = fed.train.offsets
    fed.train.x[off[1] : off[2]] = float("nan")  # client 1 is not sampled
    for params in (_models(fed, 1), _models(fed, len(CLIENTS))):
        assert torch.isfinite(Evaluator(fed).client_scores(params, CLIENTS).loss).all()


def test_an_algorithm_scores_its_sampled_clients_at_the_server_model():
    fed = tiny_federation("dnn")
    cls = get_algorithm("fedavg")
    algorithm = cls(fed, cls.Hyperparameters.from_dict({}, "t"), 0)
    got = algorithm.evaluator.client_scores(algorithm.w, CLIENTS, "test")
    want = Evaluator(fed).client_scores(broadcast(algorithm.w, len(CLIENTS)), CLIENTS, "test")
    torch.testing.assert_close(got.loss, want.loss, rtol=0, atol=1e-12)


def test_repeated_clients_and_wrong_rows_are_refused():
    fed = tiny_federation("mlr")
    evaluator = Evaluator(fed)
    with pytest.raises(ValueError, match="repeated clients"):
        evaluator.client_scores(_models(fed, 1), torch.tensor([1, 1]))
    with pytest.raises(ValueError, match="expected 1 or the 3 clients"):
        evaluator.client_scores(_models(fed, 2), CLIENTS)
    with pytest.raises(ValueError, match="unknown split 'val'"):
        evaluator.client_scores(_models(fed, 1), CLIENTS, "val")
