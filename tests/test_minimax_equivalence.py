"""The batched minimax algorithms match their sequential per-client reference loops (float64)."""

from __future__ import annotations

import pytest
import torch

from hetfl.algorithms import get_algorithm
from hetfl.engine.participation import participation_schedule
from hetfl.problems import build_problem, normalize_problem_spec
from hetfl.reference.fed_norm_sgda import fed_norm_sgda
from hetfl.reference.local_sgda import local_sgda
from tests.conftest import tiny_federation

ROUNDS = 3
BASE = {"lr_x": 0.05, "lr_y": 0.08, "batch_size": 4, "tau_min": 1, "tau_max": 3, "tau_unit": "steps"}

DATA_CASES = [  # (algorithm, hyper-parameters, sampling)
    ("local_sgda", {"objective": "robust", "radius": 0.5}, "epoch"),
    ("local_sgda", {"objective": "fair", "momentum": 0.9, "clients_per_round": 2}, "epoch"),
    (
        "local_sgda_plus",
        {"objective": "robust", "tau_unit": "epochs", "tau_max": 2, "snapshot_period": 2},
        "sequential",
    ),
    ("local_sgda_plus", {"objective": "fair", "momentum": 0.5, "client_weights": "uniform"}, "replacement"),
    (
        "fed_norm_sgda",
        {"objective": "fair", "clients_per_round": 3, "lr_milestones": [1], "fair_lambda": 0.5},
        "epoch",
    ),
    ("fed_norm_sgda", {"objective": "standard", "tau_redraw": "fixed", "tau_eff": "participants"}, "epoch"),
    (
        "fed_norm_sgda",
        {"objective": "robust", "tau_unit": "epochs", "tau_eff": "expected", "server_lr": 0.7},
        "epoch",
    ),
    (
        "fed_norm_sgda_plus",
        {"objective": "robust", "radius": 0.3, "clients_per_round": 2, "momentum": 0.9},
        "epoch",
    ),
    ("fed_norm_sgda_plus", {"objective": "fair", "active_clients": 3, "tau_draw": "spread"}, "epoch"),
]


def _close(batched: torch.Tensor, ref: torch.Tensor):
    torch.testing.assert_close(batched.reshape(ref.shape), ref, atol=1e-10, rtol=0)


@pytest.mark.parametrize("model", ["mlr", "dnn", "cnn"])
@pytest.mark.parametrize("name,hp,sampling", DATA_CASES)
def test_data_algorithms_match_reference(name, hp, sampling, model):
    fed = tiny_federation(model)
    cls = get_algorithm(name)
    params = cls.Hyperparameters.from_dict({**BASE, **hp}, "test")
    algorithm = cls(fed, params, 5, sampling)
    schedule = participation_schedule(fed.num_clients, algorithm.clients_per_round, ROUNDS, 5)
    reference = {"local": local_sgda, "fed": fed_norm_sgda}[name.split("_")[0]]
    ref_rounds = reference(fed, params, 5, schedule, sampling, plus=cls.plus)
    for t in range(1, ROUNDS + 1):
        algorithm.round(t, schedule[t - 1])
        ref = next(ref_rounds)
        for k, v in ref["x"].items():
            _close(algorithm.x[k][0], v)
        _close(algorithm.y[0], ref["y"])
    assert algorithm.y.abs().sum() > 0 or hp["objective"] == "standard"  # y moved: the test has teeth


GAME = {"name": "quadratic_game", "num_clients": 5, "dim_x": 3, "dim_y": 2, "weights": "lognormal"}
GAME_CASES = [
    ("local_sgda", {}, {}),
    ("local_sgda_plus", {"momentum": 0.9, "clients_per_round": 3, "snapshot_period": 2}, {"noise": 0.3}),
    ("fed_norm_sgda", {"clients_per_round": 2, "tau_eff": "expected"}, {"noise": 0.1}),
    ("fed_norm_sgda_plus", {"momentum": 0.5, "tau_draw": "spread", "lr_milestones": [2]}, {}),
]


@pytest.mark.parametrize("name,hp,problem", GAME_CASES)
def test_game_algorithms_match_reference(name, hp, problem):
    env = build_problem(
        normalize_problem_spec({**GAME, **problem}, "p"), 2, torch.device("cpu"), torch.float64
    )
    cls = get_algorithm(name, environment="quadratic_game")
    params = cls.Hyperparameters.from_dict(
        {"lr_x": 0.05, "lr_y": 0.05, "tau_min": 1, "tau_max": 4, **hp}, "t"
    )
    algorithm = cls(env, params, 2)
    schedule = participation_schedule(env.num_clients, algorithm.clients_per_round, ROUNDS, 2)
    reference = {"local": local_sgda, "fed": fed_norm_sgda}[name.split("_")[0]]
    ref_rounds = reference(env, params, 2, schedule, plus=cls.plus, game=True)
    for t in range(1, ROUNDS + 1):
        algorithm.round(t, schedule[t - 1])
        ref = next(ref_rounds)
        _close(algorithm.x["x"][0], ref["x"]["x"])
        _close(algorithm.y[0], ref["y"])
