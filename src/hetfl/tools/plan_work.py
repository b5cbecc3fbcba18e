"""The work of a training job, the size the cost model of :mod:`hetfl.tools.plan` scales by:
``W = R · S · τ · B · U + E · N · U / 3`` work units (:func:`job_work`; the model's parameters and FLOPs:
:func:`model_cost`), and what makes two runs the same for the cost (:func:`cost_key`)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from typing import Any

from hetfl.algorithms import FEDERATION, get_algorithm
from hetfl.data import dataset_info
from hetfl.engine.execution import forward_flops
from hetfl.ids import canonical_json
from hetfl.models import build_model
from hetfl.pipeline.config import data_of

EVAL_COST = 1 / 3
"""Work of evaluating one sample relative to training on it (a forward pass of forward + backward)."""
SCALE_KEYS = ("rounds", "eval_every", "device", "study", "run", "execution", "precision")
"""Spec keys a paper study may change in a measured run without changing the run (:func:`cost_key`); the
execution path and precision are the hardware's side of the fit instead (``hetfl.tools.plan_fit.path_of``)."""


@cache
def model_cost(model_json: str, dataset_json: str) -> tuple[int, int, tuple[int, ...]]:
    """``(P, F, sample_shape)`` of a model spec on a dataset spec (both canonical JSON).

    P: parameters (every one: global, personal, adapters); F: forward FLOPs per sample (multiply-adds
    count 2: ``hetfl.engine.execution.forward_flops``).
    """
    info = dataset_info(json.loads(dataset_json))
    model = build_model(
        json.loads(model_json), tuple(info.sample_shape), info.num_outputs or info.num_classes, info.task
    )
    params = sum(math.prod(shape) for shape, _ in model.shapes().values())
    return int(params), forward_flops(model), tuple(int(d) for d in info.sample_shape)


@dataclass(frozen=True)
class Work:
    """The size of one training job (see the module docstring).

    Attributes:
        rounds: R. clients: S, trained per round. steps: τ, local steps per client and round.
        batch: B, samples per step. units: U, parameters (or problem dimension) per sample.
        evaluations: E. eval_samples: N, samples evaluated per evaluation.
        flops: forward FLOPs per sample of the model (0 on a generated problem).
        model: what the fit matches analogs on: ``"<model name> <input shape> (<P> params)"``, or
            ``"problem <name>"`` (any size of the problem).
    """

    rounds: int
    clients: int
    steps: float
    batch: float
    units: float
    evaluations: int
    eval_samples: float
    flops: float
    model: str

    def total(self, units: float | None = None) -> float:
        """W in work units (sample-parameters), with ``units`` in place of U if given."""
        u = self.units if units is None else units
        return (
            self.rounds * self.clients * self.steps * self.batch * u
            + self.evaluations * self.eval_samples * u * EVAL_COST
        )


def _local_steps(algorithm: str, hp: dict[str, Any], samples: float, batch: float) -> float:
    """τ: local steps per trained client and round (module docstring), at least 1."""
    if "tau_min" in hp and "tau_max" in hp:  # minimax: τ_i drawn from tau_min..tau_max
        steps = (hp["tau_min"] + hp["tau_max"]) / 2
        if hp.get("tau_unit", "steps") == "epochs":
            steps *= math.ceil(samples / batch)
        return max(1.0, steps)
    tau = hp.get("local_steps") or 0
    if hp.get("local_steps_per_client", "equal") != "equal":  # spread / uniform: mean of tau_min..tau
        tau = (tau + (hp.get("local_steps_min") or 1)) / 2
    if hp.get("local_steps_unit", "steps") == "epochs":  # tau_i = u_i ceil(n_i / B)
        tau *= math.ceil(samples / batch)
    steps = tau * (hp.get("K") or 1)  # pFedMe: K inner steps per local step
    steps += (hp.get("personal_steps") or 0) + (hp.get("local_theta_steps") or 0)
    if algorithm == "ffgg" and "lr_w" in hp and "batch_size" in hp:  # FFGG on client data: τ fine-tuner steps
        steps += hp.get("tau") or 0
    return max(1.0, float(steps))


def _trained_clients(hp: dict[str, Any], clients: int) -> int:
    """S: clients trained per round (pFedMe's ``train_clients: all`` trains every client)."""
    if hp.get("train_clients") == "all":
        return clients
    return min(clients, hp.get("clients_per_round") or clients, hp.get("active_clients") or clients)


def job_work(spec: dict[str, Any]) -> Work:
    """The :class:`Work` of a training job whose resolved run spec is ``spec`` (``Study.run_json``, or
    the ``spec`` of a ``run.json``)."""
    hp = spec["hyperparameters"]
    rounds = int(spec["rounds"])
    evaluations = rounds // int(spec.get("eval_every", 1)) + 1
    if "problem" in spec:
        problem = spec["problem"]
        clients = int(problem.get("num_clients", 1))
        dims = (
            ("d_theta", "d_w") if "d_theta" in problem else ("dim_x", "dim_y") if "dim_x" in problem else ()
        )
        dimension = float(sum(problem[d] for d in dims) if dims else problem.get("dimension", 1))
        return Work(
            rounds=rounds,
            clients=_trained_clients(hp, clients),
            steps=_local_steps(spec["algorithm"], hp, 1, 1),
            batch=1.0,
            units=dimension**2,  # a step: products with the client's D × D Gram matrices
            evaluations=evaluations,
            eval_samples=float(clients),
            flops=0.0,
            model=f"problem {problem['name']}",
        )
    dataset = data_of(spec["dataset"], 0)[0]  # with seed: run, one seed's draw stands for every seed's sizes
    params, flops, shape = model_cost(canonical_json(spec["model"]), canonical_json(dataset))
    info = dataset_info(dataset)
    clients = int(spec["partition"]["clients"])
    per_client = info.num_samples * (1 - float(spec["partition"].get("test_fraction") or 0)) / clients
    batch = float(hp.get("batch_size") or per_client)  # None: full-batch gradients
    return Work(
        rounds=rounds,
        clients=_trained_clients(hp, clients),
        steps=_local_steps(spec["algorithm"], hp, per_client, batch),
        batch=batch,
        units=float(params),
        evaluations=evaluations,
        eval_samples=float(info.num_samples),
        flops=float(flops),
        model=f"{spec['model']['name']} {'x'.join(map(str, shape))} ({params} params)",
    )


def environment(spec: dict[str, Any]) -> str:
    """``federation`` or the problem's name."""
    return spec["problem"]["name"] if "problem" in spec else FEDERATION


def family(algorithm: str, env: str) -> str:
    """The algorithm's family: its package under ``hetfl.algorithms`` (``personalized``, ``minimax``...)."""
    return get_algorithm(algorithm, environment=env).__module__.split(".")[2]


def cost_key(spec: dict[str, Any]) -> str:
    """What makes two runs the same for the cost: the spec without :data:`SCALE_KEYS` (rounds,
    ``eval_every``, device, study and run names, execution path and precision), as canonical JSON."""
    return canonical_json({k: v for k, v in spec.items() if k not in SCALE_KEYS})
