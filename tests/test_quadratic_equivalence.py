"""Every algorithm on ``ffgg_quadratic`` matches its sequential per-client reference loop on the n-row data."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hetfl.reference.async_ffgg import async_ffgg
from hetfl.reference.byzantine_ffgg import byzantine_ffgg
from hetfl.reference.ffgg import ffgg
from hetfl.reference.l2gd import l2gd
from hetfl.reference.local_gd import local_gd
from hetfl.reference.scaffold import scaffold
from tests.quadratic_helpers import make, schedule_for, tiny_problem

ROUNDS = 4
ATOL = 1e-10


def close(a, b, atol=ATOL):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=atol)


@pytest.mark.parametrize(
    "hp",
    [
        {"fine_tuner": "gd", "local_steps": 7},
        {"fine_tuner": "gd", "local_steps": 3, "clients_per_round": 2, "w_init": "zero", "lr_w_factor": 0.5},
        {"fine_tuner": "cg", "local_steps": 2},
        {"fine_tuner": "cg", "local_steps": 5, "clients_per_round": 3, "lr_theta_factor": 2.0},
        {"fine_tuner": "exact"},
    ],
)
def test_ffgg(hp):
    problem = tiny_problem()
    alg = make("ffgg", problem, seed=3, **hp)
    schedule = schedule_for(alg, ROUNDS, 3)
    for t, theta in enumerate(ffgg(problem, alg.hp, 3, schedule), start=1):
        alg.round(t, schedule[t - 1])
        close(alg.theta, theta)
    assert alg.grad_evals == sum(len(s) for s in schedule) * alg.fine_tune.cost + schedule.numel()


@pytest.mark.parametrize("options", [{}, {"matrices": "zeta", "zeta": 3.0, "targets": "shared"}])
def test_ffgg_on_other_generations(options):
    problem = tiny_problem(**options)
    alg = make("ffgg", problem, seed=1, fine_tuner="gd", local_steps=4)
    schedule = schedule_for(alg, ROUNDS, 1)
    for t, theta in enumerate(ffgg(problem, alg.hp, 1, schedule), start=1):
        alg.round(t, schedule[t - 1])
        close(alg.theta, theta)


@pytest.mark.parametrize(
    "hp",
    [
        {"byzantine": 2, "aggregator": "cm", "bucket_size": 2, "fine_tuner": "exact"},
        {"byzantine": 3, "aggregator": "cm", "bucket_size": 1, "fine_tuner": "gd", "local_steps": 3},
        {
            "byzantine": 2,
            "aggregator": "cm",
            "bucket_size": 4,
            "fine_tuner": "exact",
        },  # a partial last bucket
        {"byzantine": 5, "aggregator": "mean", "fine_tuner": "exact", "clients_per_round": 3},  # B > S
        {"byzantine": 0, "aggregator": "mean", "fine_tuner": "cg", "local_steps": 2},
    ],
)
def test_byzantine_ffgg(hp):
    problem = tiny_problem(num_clients=6, targets="overpersonalized", noise=0.0)
    alg = make("ffgg_byzantine", problem, seed=2, **hp)
    schedule = schedule_for(alg, ROUNDS, 2)
    for t, theta in enumerate(byzantine_ffgg(problem, alg.hp, 2, schedule), start=1):
        alg.round(t, schedule[t - 1])
        close(alg.theta, theta)


@pytest.mark.parametrize("hp", [{"local_steps": 5}, {"local_steps": 2, "clients_per_round": 2, "lr": 0.01}])
def test_local_gd(hp):
    problem = tiny_problem()
    alg = make("local_gd", problem, **hp)
    schedule = schedule_for(alg, ROUNDS)
    for t, x in enumerate(local_gd(problem, alg.hp, 0, schedule), start=1):
        alg.round(t, schedule[t - 1])
        close(alg.x, x)


@pytest.mark.parametrize(
    "hp",
    [
        {"local_steps": 5},
        {"local_steps": 3, "control_variate": "option2", "clients_per_round": 2},
        {"local_steps": 4, "clients_per_round": 3, "lr_global": 1.0, "lr": 0.02},
    ],
)
def test_scaffold(hp):
    problem = tiny_problem()
    alg = make("scaffold", problem, **hp)
    schedule = schedule_for(alg, ROUNDS)
    for t, (x, c, c_i) in enumerate(scaffold(problem, alg.hp, 0, schedule), start=1):
        alg.round(t, schedule[t - 1])
        close(alg.x, x)
        close(alg.c, c)
        close(alg.c_i, np.array(c_i))


@pytest.mark.parametrize(
    "hp", [{"local_steps": 3}, {"local_steps": 2, "lam": 1.0}, {"local_steps": 5, "lr": 0.3}]
)
def test_l2gd(hp):
    problem = tiny_problem()
    alg = make("l2gd", problem, seed=5, **hp)
    schedule = schedule_for(alg, 6, 5)
    for t, x in enumerate(l2gd(problem, alg.hp, 5, schedule), start=1):
        alg.round(t, schedule[t - 1])
        close(alg.x, x)
    assert alg.iterations >= 6 and alg.comm_rounds == 6


@pytest.mark.parametrize(
    "hp",
    [
        {"mode": "async", "fine_tuner": "gd", "local_steps": 3},
        {
            "mode": "async",
            "fine_tuner": "cg",
            "local_steps": 2,
            "assignment": "fixed",
            "lr_theta_factor": 4.0,
        },
        {"mode": "async", "fine_tuner": "exact", "workers": 3, "speed_spread": 1.0, "tau_max": 9},
        {"mode": "sync", "fine_tuner": "gd", "local_steps": 3},
        {
            "mode": "sync",
            "fine_tuner": "gd",
            "local_steps": 2,
            "sync_aggregate": "sum",
            "clients_per_round": 2,
        },
    ],
)
def test_async_ffgg(hp):
    problem = tiny_problem()
    alg = make("ffgg_async", problem, seed=4, **hp)
    schedule = schedule_for(alg, ROUNDS, 4)
    for t, (theta, delays, time) in enumerate(async_ffgg(problem, alg.hp, 4, schedule), start=1):
        alg.round(t, schedule[t - 1])
        close(alg.theta, theta)
        assert alg.time == pytest.approx(time, rel=1e-12)
        assert alg.artifacts()["delay"].tolist() == delays  # empty in sync mode


def test_float32_follows_float64():
    """The same run in float32 stays within float32 accuracy of float64 (the problem is built in float64)."""
    runs = []
    for dtype in (torch.float64, torch.float32):
        alg = make("ffgg", tiny_problem(dtype=dtype), fine_tuner="gd", local_steps=5)
        schedule = schedule_for(alg, ROUNDS)
        for t in range(1, ROUNDS + 1):
            alg.round(t, schedule[t - 1])
        runs.append(alg.theta.double())
    close(runs[1], runs[0], atol=1e-4)
