"""Every collaborative algorithm matches its sequential per-client (per-pair) reference loop on a tiny problem."""

from __future__ import annotations

import pytest
import torch

from hetfl.algorithms import get_algorithm
from hetfl.engine.participation import participation_schedule
from hetfl.reference.all_for_one import all_for_one, all_for_one_oracle
from hetfl.reference.apfl import apfl
from hetfl.reference.cobo import cobo
from hetfl.reference.ditto import ditto
from hetfl.reference.fedavg_sgdm import fedavg_sgdm
from hetfl.reference.local_sgdm import local_sgdm
from hetfl.reference.wga_bc import wga_bc
from tests.conftest import tiny_federation
from tests.test_regression import regression_federation

REFERENCES = {
    "all_for_one": all_for_one,
    "all_for_one_oracle": all_for_one_oracle,
    "local_sgdm": local_sgdm,
    "fedavg_sgdm": fedavg_sgdm,
    "ditto": ditto,
    "apfl": apfl,
    "cobo": cobo,
    "wga_bc": wga_bc,
}
ROUNDS = 3
OPT = {"momentum": 0.9, "weight_decay": 0.01, "lr_step_size": 2, "lr_gamma": 0.5}

CASES = [
    ("all_for_one", {"lr": 0.2, "local_steps": 2, "batch_size": 3, "b_alpha": 4}),
    (
        "all_for_one",
        {"lr": 0.1, "local_steps": 3, "batch_size": 4, "b_alpha": 2, "tau": 2, "lam": 0.3, **OPT},
    ),
    (
        "all_for_one",
        {
            "lr": 0.05,
            "local_steps": 2,
            "batch_size": 3,
            "b_alpha": 5,
            "tau": "round",
            "rule": "continuous",
            "weights": "theory",
            "client_size": "samples",
            "ratio_numerator": "norm",
        },
    ),
    ("all_for_one", {"lr": 0.1, "local_steps": 2, "batch_size": 3, "b_alpha": 3, "weights": "theory"}),
    ("all_for_one_oracle", {"lr": 0.2, "local_steps": 2, "batch_size": 3, **OPT}),
    ("all_for_one_oracle", {"lr": 0.2, "local_steps": 2, "batch_size": 5, "client_size": "samples"}),
    ("local_sgdm", {"lr": 0.2, "local_steps": 3, "batch_size": 4, **OPT}),
    ("fedavg_sgdm", {"lr": 0.2, "local_steps": 3, "batch_size": 4, **OPT}),
    ("fedavg_sgdm", {"lr": 0.2, "local_steps": 2, "batch_size": 5, "client_weights": "uniform"}),
    ("ditto", {"lr": 0.1, "local_steps": 2, "batch_size": 3, "lam": 0.5, **OPT}),
    ("apfl", {"lr": 0.1, "local_steps": 2, "batch_size": 3, **OPT}),
    (
        "apfl",
        {
            "lr": 0.1,
            "local_steps": 2,
            "batch_size": 4,
            "adaptive": True,
            "mix_lr": 0.5,
            "client_weights": "samples",
        },
    ),
    ("cobo", {"lr": 0.1, "local_steps": 2, "batch_size": 3, "b_alpha": 4, "gamma_c": 0.5, **OPT}),
    ("cobo", {"lr": 0.1, "local_steps": 3, "batch_size": 3, "b_alpha": 2, "tau": 2, "rho": 0.3}),
    ("wga_bc", {"lr": 0.1, "local_steps": 2, "batch_size": 3, **OPT}),
    ("wga_bc", {"lr": 0.1, "local_steps": 2, "batch_size": 4, "weight": 0.1, "beta": 0.5}),
]


def _check(alg, ref: dict, atol: float) -> None:
    models = alg.eval_models()
    for name, expected in ref.items():
        if name == "alpha":
            torch.testing.assert_close(
                alg.alpha, torch.tensor(expected, dtype=torch.float64), rtol=0, atol=1e-12
            )
            continue
        if name == "mix":
            torch.testing.assert_close(alg.mix, expected.to(alg.mix.dtype), rtol=0, atol=atol)
            continue
        states = [expected] if isinstance(expected, dict) else expected
        for i, state in enumerate(states):
            for k, v in state.items():
                torch.testing.assert_close(models[name][k][i], v, rtol=0, atol=atol)


def run_both(name, hp, fed, sampling="epoch", seed=3, atol=1e-10):
    cls = get_algorithm(name)
    params = cls.Hyperparameters.from_dict(hp, "test")
    alg = cls(fed, params, seed, sampling)
    schedule = participation_schedule(fed.num_clients, alg.clients_per_round, ROUNDS, seed)
    reference = REFERENCES[name](fed, params, seed, schedule, sampling)
    for t in range(1, ROUNDS + 1):
        alg.round(t, schedule[t - 1])
        _check(alg, next(reference), atol)
    return alg


@pytest.mark.parametrize("model", ["mlr", "cnn"])
@pytest.mark.parametrize("name,hp", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_batched_matches_reference(name, hp, model):
    fed = tiny_federation(model)
    fed.cluster = torch.tensor([0, 1, 0, 1])
    run_both(name, hp, fed)


@pytest.mark.parametrize("name,hp", [CASES[0], CASES[2], CASES[4], CASES[12], CASES[14]])
def test_regression_and_other_samplings(name, hp):
    fed = regression_federation("linear", bias=True, outputs=2)
    fed.cluster = torch.tensor([0, 0, 1, 1])
    for sampling in ("sequential", "replacement"):
        run_both(name, hp, fed, sampling)


def test_float32_matches_reference():
    run_both("all_for_one", CASES[1][1], tiny_federation("dnn", dtype=torch.float32), atol=1e-5)


def test_all_for_one_skips_pairs_without_weight():
    """With binary weights some α_ik are 0 on random data: those pairs draw no batch and cost no gradient."""
    alg = run_both("all_for_one", CASES[1][1], tiny_federation("mlr"))
    assert (alg.alpha == 0).any()
