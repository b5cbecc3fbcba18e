"""Properties the personalized-FL papers claim, on a tiny heterogeneous problem (each could fail).

Clients in two clusters see the same three Gaussian blobs with the labels rotated in cluster 1
(``permuted_blobs``): no single model fits both, a shared representation with a personal output layer does.
"""

from __future__ import annotations

import pytest
import torch

from hetfl.engine.evaluate import Evaluator
from hetfl.engine.participation import participation_schedule
from tests.test_algorithm_properties import make, permuted_blobs

ROUNDS = 40


def accuracy(alg, fed, model, split="test"):
    return Evaluator(fed).scores(alg.eval_models()[model], split).weighted()[1]


def train(name, split="none", rounds=ROUNDS, **hp):
    fed = permuted_blobs(model={"name": "dnn", "hidden": 8, "split": split})
    alg = make(name, fed, clients_per_round=6, batch_size=10, **hp)
    schedule = participation_schedule(6, 6, rounds, 0)
    for t in range(1, rounds + 1):
        alg.round(t, schedule[t - 1])
    return alg, fed


@pytest.fixture(scope="module")
def fedavg_accuracy():
    alg, fed = train("fedavg", lr=0.1, local_steps=10)
    return accuracy(alg, fed, "global")


def test_perfedavg_one_step_personalizes(fedavg_accuracy):
    """Per-FedAvg (Fallah et al. 2020): the meta-model is a starting point from which one local step
    (α on a training batch) gives each client a good personal model; the global model alone is not."""
    alg, fed = train("perfedavg", lr=0.3, beta=0.1, local_steps=10)
    assert accuracy(alg, fed, "personal") > accuracy(alg, fed, "global") + 0.2
    assert accuracy(alg, fed, "personal") > fedavg_accuracy + 0.2


def test_fedavg_ft_fine_tuning_beats_the_global_model(fedavg_accuracy):
    alg, fed = train("fedavg_ft", lr=0.1, local_steps=10, finetune_steps=20, finetune_lr=0.3)
    assert accuracy(alg, fed, "personal") > fedavg_accuracy + 0.2


@pytest.mark.parametrize(
    "name,hp",
    [
        ("ffgg", {"lr_theta": 0.5, "lr_w": 0.3, "tau": 20, "finetune_steps": 20}),
        ("ffgg", {"lr_theta": 0.1, "lr_w": 0.3, "tau": 20, "local_theta_steps": 5, "finetune_steps": 20}),
        ("fedalt", {"lr": 0.3, "local_steps": 10, "finetune_steps": 20}),
        ("fedsim", {"lr": 0.3, "local_steps": 10, "finetune_steps": 20}),
    ],
)
def test_partial_personalization_fits_what_one_model_cannot(name, hp, fedavg_accuracy):
    """FFGG (TMLR 2025, Sec. 5.3 / Table 2) and FedAlt/FedSim (Pillutla et al. 2022): a global
    representation with a personal output layer fits clients whose labelings conflict, where FedAvg's
    single model cannot (the overpersonalized regime: train accuracy near 1)."""
    alg, fed = train(name, split="output", **hp)
    assert fedavg_accuracy < 0.8
    assert accuracy(alg, fed, "personal") > 0.9
    assert accuracy(alg, fed, "personal", "train") > 0.9


def test_ffgg_clients_are_stateless_and_stateful_fedalt_keeps_its_clients():
    """FFGG keeps no client state (TMLR Table 1, "Stateless"): only θ changes across rounds. Stateful
    FedAlt stores the personal part of the clients it trained and leaves the others untouched."""
    alg, _ = train("ffgg", split="output", rounds=2, lr_theta=0.5, lr_w=0.3, tau=5)
    assert not hasattr(alg, "personal") or getattr(alg, "personal", None) is None
    alg, fed = train("fedalt", split="output", rounds=1, lr=0.3, local_steps=5, stateful=True)
    before = {k: v.clone() for k, v in alg.personal.items()}
    alg.round(2, torch.tensor([0, 2]))
    for k, v in alg.personal.items():
        assert not torch.equal(v[[0, 2]], before[k][[0, 2]])
        torch.testing.assert_close(v[[1, 3, 4, 5]], before[k][[1, 3, 4, 5]], rtol=0, atol=0)
