"""Tiny ``ffgg_quadratic`` problems and algorithm builders shared by the ``test_quadratic_*`` tests."""

from __future__ import annotations

import torch

from hetfl.algorithms import get_algorithm
from hetfl.engine.participation import participation_schedule
from hetfl.problems import build_problem, normalize_problem_spec

TINY = {"num_clients": 4, "n": 30, "d_theta": 5, "d_w": 3}


def tiny_problem(run_seed: int = 0, dtype: torch.dtype = torch.float64, **options):
    """A small Example 1 problem (defaults: 4 clients, n = 30, d_θ = 5, d_w = 3) for run seed ``run_seed``."""
    spec = normalize_problem_spec({"name": "ffgg_quadratic", **TINY, **options}, "problem")
    return build_problem(spec, run_seed, torch.device("cpu"), dtype)


def make(name: str, problem, seed: int = 0, **hp):
    """Algorithm ``name`` on ``problem`` with hyper-parameters ``hp`` (validated)."""
    cls = get_algorithm(name, environment="ffgg_quadratic")
    return cls(problem, cls.Hyperparameters.from_dict(hp, "test"), seed)


def schedule_for(algorithm, rounds: int, seed: int = 0):
    """The participation schedule the training job would draw."""
    return participation_schedule(algorithm.problem.num_clients, algorithm.clients_per_round, rounds, seed)


def run(algorithm, rounds: int, seed: int = 0, every: int = 1):
    """Run ``rounds`` rounds; return the evaluated rows (dicts) every ``every`` rounds, round 0 included."""
    schedule = schedule_for(algorithm, rounds, seed)
    out = [dict(algorithm.evaluate()[0])]
    for t in range(1, rounds + 1):
        algorithm.round(t, schedule[t - 1])
        if t % every == 0:
            out.append(dict(algorithm.evaluate()[0]))
    return out
