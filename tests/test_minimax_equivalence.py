"""The batched minimax algorithms match their sequential per-client reference loops (float64).

Cases are named (``DATA_CASES["local_sgda-robust"]``); the names are the test ids.
"""

from __future__ import annotations

import pytest
import torch

from hetfl.algorithms import get_algorithm
from hetfl.engine.participation import participation_schedule
from hetfl.problems import build_problem, normalize_problem_spec
from hetfl.reference.fed_norm_sgda import fed_norm_sgda
from hetfl.reference.local_sgda import local_sgda
from hetfl.testing import follow_reference, tiny_federation

ROUNDS = 3
BASE = {"lr_x": 0.05, "lr_y": 0.08, "batch_size": 4, "tau_min": 1, "tau_max": 3, "tau_unit": "steps"}

DATA_CASES = {  # name -> (algorithm, hyper-parameters over BASE, sampling)
    "local_sgda-robust": ("local_sgda", {"objective": "robust", "radius": 0.5}, "epoch"),
    "local_sgda-fair-momentum": (
        "local_sgda",
        {"objective": "fair", "momentum": 0.9, "clients_per_round": 2},
        "epoch",
    ),
    "local_sgda_plus-robust-epochs-sequential": (
        "local_sgda_plus",
        {"objective": "robust", "tau_unit": "epochs", "tau_max": 2, "snapshot_period": 2},
        "sequential",
    ),
    "local_sgda_plus-fair-momentum-replacement": (
        "local_sgda_plus",
        {"objective": "fair", "momentum": 0.5, "client_weights": "uniform"},
        "replacement",
    ),
    "fed_norm_sgda-fair-milestones": (
        "fed_norm_sgda",
        {"objective": "fair", "clients_per_round": 3, "lr_milestones": [1], "fair_lambda": 0.5},
        "epoch",
    ),
    "fed_norm_sgda-standard-fixed-tau": (
        "fed_norm_sgda",
        {"objective": "standard", "tau_redraw": "fixed", "tau_eff": "participants"},
        "epoch",
    ),
    "fed_norm_sgda-robust-epochs-server-lr": (
        "fed_norm_sgda",
        {"objective": "robust", "tau_unit": "epochs", "tau_eff": "expected", "server_lr": 0.7},
        "epoch",
    ),
    "fed_norm_sgda_plus-robust-momentum": (
        "fed_norm_sgda_plus",
        {"objective": "robust", "radius": 0.3, "clients_per_round": 2, "momentum": 0.9},
        "epoch",
    ),
    "fed_norm_sgda_plus-fair-spread": (
        "fed_norm_sgda_plus",
        {"objective": "fair", "active_clients": 3, "tau_draw": "spread"},
        "epoch",
    ),
}


def _close(batched: torch.Tensor, ref: torch.Tensor):
    torch.testing.assert_close(batched.reshape(ref.shape), ref, atol=1e-10, rtol=0)


def _data_reference(name: str):
    """The reference of algorithm ``name`` in ``follow_reference``'s form: its min player x as the model
    ``global`` (the batched ``eval_models()``), its max player y beside it."""
    reference = {"local": local_sgda, "fed": fed_norm_sgda}[name.split("_")[0]]
    plus = get_algorithm(name).plus

    def rounds(fed, hp, seed, schedule, sampling):
        for ref in reference(fed, hp, seed, schedule, sampling, plus=plus):
            yield {"global": ref["x"], "y": ref["y"]}

    return rounds


def _same_y(algorithm, ref: dict, t: int) -> None:
    _close(algorithm.y[0], ref["y"])


@pytest.mark.parametrize("model", ["mlr", "dnn", "cnn"])
@pytest.mark.parametrize("name,hp,sampling", [pytest.param(*c, id=n) for n, c in DATA_CASES.items()])
def test_data_algorithms_match_reference(name, hp, sampling, model):
    algorithm = follow_reference(
        tiny_federation(model),
        name,
        {**BASE, **hp},
        _data_reference(name),
        sampling=sampling,
        seed=5,
        rounds=ROUNDS,
        check=_same_y,
    )
    assert algorithm.y.abs().sum() > 0 or hp["objective"] == "standard"  # y moved: the test has teeth


GAME = {"name": "quadratic_game", "num_clients": 5, "dim_x": 3, "dim_y": 2, "weights": "lognormal"}
GAME_CASES = {  # name -> (algorithm, hyper-parameters, problem options over GAME)
    "local_sgda": ("local_sgda", {}, {}),
    "local_sgda_plus-momentum-noise": (
        "local_sgda_plus",
        {"momentum": 0.9, "clients_per_round": 3, "snapshot_period": 2},
        {"noise": 0.3},
    ),
    "fed_norm_sgda-expected-noise": (
        "fed_norm_sgda",
        {"clients_per_round": 2, "tau_eff": "expected"},
        {"noise": 0.1},
    ),
    "fed_norm_sgda_plus-spread-milestones": (
        "fed_norm_sgda_plus",
        {"momentum": 0.5, "tau_draw": "spread", "lr_milestones": [2]},
        {},
    ),
}


@pytest.mark.parametrize("name,hp,problem", [pytest.param(*c, id=n) for n, c in GAME_CASES.items()])
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
