"""q-FedAvg (Li et al., ICLR 2020, Algorithm 2): equal to its sequential per-client reference loop, FedAvg at
q = 0, and the q-FFL weighting, which leans the server step towards the clients with the larger loss."""

import pytest
import torch

from hetfl.algorithms import get_algorithm
from hetfl.engine.participation import participation_schedule
from hetfl.errors import ConfigError
from hetfl.reference.qfedavg import qfedavg
from hetfl.testing import follow_reference, tiny_federation

HP = {"lr": 0.1, "local_steps": 3, "batch_size": 4, "clients_per_round": 3}
CASES = {  # name -> (hyper-parameters, minibatch sampling)
    "q1": ({**HP, "q": 1.0}, "epoch"),
    "q0-all-clients": ({**HP, "q": 0.0, "clients_per_round": None}, "sequential"),
    "q5-lipschitz-offset": ({**HP, "q": 5.0, "lipschitz": 20.0, "loss_offset": 1e-10}, "replacement"),
    "q0.5-spread-sequential-sum": (
        {
            **HP,
            "q": 0.5,
            "local_steps_per_client": "spread",
            "local_steps_min": 1,
            "aggregation": "sequential",
        },
        "epoch",
    ),
    "q2-epochs-server-adam": (
        {**HP, "q": 2.0, "local_steps": 1, "local_steps_unit": "epochs", "server_optimizer": "adam"},
        "epoch",
    ),
    "q1-momentum-clip-cosine": (
        {**HP, "momentum": 0.9, "clip_norm": 0.5, "lr_schedule": "cosine", "lr_min": 0.01},
        "epoch",
    ),
}


@pytest.mark.parametrize("model", ["mlr", "dnn", "cnn"])
@pytest.mark.parametrize("hp,sampling", [pytest.param(*case, id=name) for name, case in CASES.items()])
def test_matches_the_reference(hp, sampling, model):
    follow_reference(tiny_federation(model), "qfedavg", hp, qfedavg, sampling=sampling, seed=3)


def test_float32_matches_the_reference():
    fed = tiny_federation("dnn", dtype=torch.float32)
    follow_reference(fed, "qfedavg", CASES["q1"][0], qfedavg, seed=1, atol=1e-5)


def _train(name: str, hp: dict, rounds: int = 4, seed: int = 0, fed=None):
    fed = fed or tiny_federation("dnn")
    cls = get_algorithm(name)
    algorithm = cls(fed, cls.Hyperparameters.from_dict(hp, "test"), seed)
    schedule = participation_schedule(fed.num_clients, algorithm.clients_per_round, rounds, seed)
    for t in range(1, rounds + 1):
        algorithm.round(t, schedule[t - 1])
    return algorithm


def test_q_zero_is_fedavg():
    """q = 0: h_k = L and Δ_k = L(w_t − w̄_k), so w_{t+1} is the uniform mean of the local models (the paper:
    q-FFL with q = 0 is FedAvg's objective; Algorithm 2 is then FedAvg)."""
    fedavg = _train("fedavg", HP).eval_models()["global"]
    ours = _train("qfedavg", {**HP, "q": 0.0}).eval_models()["global"]
    for k in fedavg:
        torch.testing.assert_close(ours[k], fedavg[k], rtol=0, atol=1e-12)


def test_a_larger_q_leans_the_step_towards_the_clients_with_the_larger_loss():
    """One round from the same w_0 with every client: the larger q, the more the step lowers the largest
    client loss relative to the smallest (q-FFL's reweighting F_k^q)."""

    def spread(q: float) -> float:
        algorithm = _train("qfedavg", {**HP, "clients_per_round": None, "q": q}, rounds=1)
        loss = algorithm.evaluator.client_scores(algorithm.w, torch.arange(4)).loss
        return float(loss.max() - loss.min())

    spreads = [spread(q) for q in (0.0, 2.0, 8.0)]
    assert spreads[0] > spreads[1] > spreads[2], spreads


@pytest.mark.parametrize(
    "values,key,fragment",
    [
        ({"q": -1.0}, "q", "≥ 0"),
        ({"lipschitz": 0.0}, "lipschitz", "> 0"),
        ({"loss_offset": -1e-3}, "loss_offset", "≥ 0"),
        ({"client_weights": "samples"}, "client_weights", "no client weights"),
    ],
)
def test_bad_values_name_the_key(values, key, fragment):
    with pytest.raises(ConfigError) as err:
        get_algorithm("qfedavg").Hyperparameters.from_dict(values, "studies.s.runs.r")
    assert err.value.key == f"studies.s.runs.r.{key}" and fragment in str(err.value)
