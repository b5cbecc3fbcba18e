"""Generalized federated SGDA on client data: the model is x, the objective's y is extra state.

The server holds x^(t) (the model, ``[1, ...]``) and y^(t) (``[1, ...]``: a perturbation or class
weights); p_i = n_i/N (``client_weights: samples``, the paper's "relative sample size") or 1/n.
Evaluation adds the objective's metrics (``objectives.METRICS``; for the fair objective Φ and Φ̃, the latter
with :func:`surrogate_weights`) to the clean ``{train,test}_{loss,acc}_global``
of the global x, plus ``tau_eff`` (τ_eff of the last round, in steps), ``client_steps`` (local SGD
steps so far, all clients) and ``rounds_to_target`` (the first evaluated round whose test accuracy
reached ``target_acc``; NaN before, and without a target).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

import torch
from torch import Tensor

from hetfl.algorithms.base import FederatedAlgorithm
from hetfl.algorithms.minimax.common import GeneralizedSGDA, SGDAHyperparameters
from hetfl.algorithms.minimax.local_work import LocalWork
from hetfl.algorithms.minimax.objectives import METRICS, OBJECTIVES
from hetfl.engine.chunks import stitch
from hetfl.engine.grad import row_batches
from hetfl.engine.params import Params, rows
from hetfl.errors import ConfigError
from hetfl.metrics import metric_names
from hetfl.options import option

RUN_METRICS = ("tau_eff", "client_steps", "rounds_to_target")
DISTANCE_METRICS = ("dist_saddle_global", "dist_surrogate_global")
REFERENCE_KEYS = (
    "objective",
    "fair_lambda",
    "l2_x",
    "client_weights",
    "active_clients",
    "tau_min",
    "tau_max",
    "tau_draw",
    "tau_redraw",
    "tau_unit",
    "batch_size",
    "momentum",
)
"""The hyper-parameters that define F and F̃ (the objective, the clients' weights, their local work): a run with
``reference_from`` and its reference run must agree on them (``hetfl.pipeline.config``)."""
"""With a reference run (``reference_from``): the distance to the saddle point of F and to that of F̃."""


@dataclasses.dataclass(frozen=True)
class FederatedSGDAHyperparameters(SGDAHyperparameters):
    """Adds, on client data: ``batch_size`` (32), ``client_weights`` p_i (``samples`` n_i/N |
    ``uniform``), ``tau_unit`` (``epochs``: τ_i⌈n_i/B⌉ steps, the paper | ``steps``), ``objective``
    (``robust`` | ``fair`` | ``standard``), ``radius`` r of the robust ℓ2 ball (1), ``fair_lambda`` λ
    (0.1), ``attack_steps`` (20) and ``attack_lr`` (0.1, in units of r) of the robust-accuracy attack and
    of the robust objective's Φ, Φ̃ estimates, ``phi_steps`` (null: ``attack_steps``; 0: no estimate) and
    ``phi_restarts`` (0) (the robust objective only: the estimates' ascent steps and their starts on the
    sphere ‖y‖ = r beside the current y, ``objectives.Robust.phi``),
    ``active_clients`` (null; n: only clients 0..n−1 form the federation, all of them every round;
    Fig. 9's "n"), ``target_acc`` (null; for ``rounds_to_target``), ``l2_x`` μ (0; the fair objective only:
    (μ/2)‖x‖² added to every f_i, so that with a linear model F is strongly convex in x and its saddle point
    unique, ``hetfl.algorithms.minimax.saddle``)."""

    batch_size: int = option(32, lo=0, lo_open=True)
    client_weights: Literal["samples", "uniform"] = "samples"
    tau_unit: Literal["epochs", "steps"] = "epochs"
    objective: Literal["robust", "fair", "standard"] = "robust"
    radius: float = option(1.0, lo=0, lo_open=True)
    fair_lambda: float = option(0.1, lo=0)
    attack_steps: int = option(20, lo=0)
    attack_lr: float = option(0.1, lo=0, lo_open=True)
    phi_steps: int | None = option(None, lo=0)
    phi_restarts: int = option(0, lo=0)
    active_clients: int | None = option(None, lo=0, lo_open=True)
    target_acc: float | None = option(None, lo=0, lo_open=True)
    l2_x: float = option(0.0, lo=0)

    def check(self, key: str) -> None:
        super().check(key)
        if self.l2_x > 0 and self.objective != "fair":
            raise ConfigError(
                f"{key}.l2_x", f"only the fair objective takes it (objective: {self.objective})"
            )
        if self.active_clients is not None and self.clients_per_round is not None:
            raise ConfigError(
                f"{key}.clients_per_round", "active_clients means all n active clients every round; set null"
            )
        if self.target_acc is not None and self.target_acc > 1:
            raise ConfigError(f"{key}.target_acc", f"an accuracy in (0, 1], got {self.target_acc}")


def surrogate_weights(p: Tensor, work: LocalWork, hp) -> Tensor:
    """w̃_i = p_i E‖ā_i‖₁ / Σ_j p_j E‖ā_j‖₁ ``[n]`` (float64): the weights of the surrogate F̃ = Σ_i w̃_i f_i whose
    stationary point naive aggregation (Local SGDA, with momentum ``hp.momentum``) reaches (Theorem 1, Eq. (2);
    Corollary 1.1), the expectation over this run's local work (the actual ‖ā_i‖₁ with ``tau_redraw: fixed``)."""
    weight = p * work.expected_a_l1(hp.momentum)
    return weight / weight.sum()


def federated_objective(fed, hp, rng):
    """The federated objective of a run: ``(p, work, objective)``, the client weights p_i ``[n]`` (float64, Σ = 1:
    n_i/N or 1/n), the clients' local work (``LocalWork``, τ_i drawn from ``rng``, the run's ``algorithm``
    stream, so that every algorithm of a seed draws the same τ_i) and the objective (``objectives.OBJECTIVES``)
    over the n = ``active_clients`` (or all) clients, with the surrogate weights of :func:`surrogate_weights`.

    Raises:
        ConfigError: ``active_clients`` exceeds the federation's clients.
    """
    n = hp.active_clients or fed.num_clients
    if n > fed.num_clients:
        raise ConfigError("active_clients", f"{n} clients but the federation has {fed.num_clients}")
    sizes = fed.train.sizes[:n]
    p = (
        sizes.double() / sizes.sum()
        if hp.client_weights == "samples"
        else torch.full((n,), 1.0 / n, dtype=torch.float64)
    )
    unit = -(-sizes // hp.batch_size) if hp.tau_unit == "epochs" else torch.ones(n, dtype=torch.long)
    work = LocalWork(unit, hp.tau_min, hp.tau_max, hp.tau_draw, hp.tau_redraw, rng)
    return p, work, OBJECTIVES[hp.objective](fed, n, p, hp, surrogate_weights(p, work, hp))


class FederatedMinimax(GeneralizedSGDA, FederatedAlgorithm):
    """Base of the minimax algorithms on client data. State: ``x [1, ...]`` (model), ``y [1, ...]``.

    ``reference`` (set by ``hetfl.pipeline.train.build`` for a run with ``reference_from``): the saddle points of
    F and of Local SGDA's surrogate F̃, the models ``saddle`` and ``surrogate_saddle`` of a ``minimax_saddle``
    run of the same seed (``hetfl.algorithms.minimax.saddle``); evaluation then adds ``dist_saddle_global`` and
    ``dist_surrogate_global``, the distance √(‖x − x*‖² + ‖y − y*‖²) of the server's (x, y) to each.

    Raises:
        ConfigError: ``active_clients`` exceeds the federation's clients.
    """

    models = ("global",)
    reference_models = ("saddle", "surrogate_saddle")
    reference_keys = REFERENCE_KEYS
    reference_metrics = DISTANCE_METRICS  # reported by a run with reference_from only
    reference: dict[str, Params] | None = None

    def __init__(self, fed, hp, seed, sampling="epoch"):
        super().__init__(fed, hp, seed, sampling)
        self.p, self.work, self.objective = federated_objective(fed, hp, self.rng)
        self.used = torch.arange(len(self.p))
        self.x = self.fed.initial_model(self.seed)
        self.y = self.objective.init_y()
        self.t = 0
        self.reached: int | None = None

    @classmethod
    def metric_names(cls, hp=None) -> list[str]:
        """The models' metrics, those of the run's objective (``hp.objective``: ``Objective.metrics``; every
        objective's with ``hp`` None), the run metrics and the distances to the saddle points (reported by a
        run with ``reference_from`` only: the config drops them from a run without one)."""
        own = METRICS if hp is None else OBJECTIVES[hp.objective].reported(hp)
        return metric_names(cls.models) + list(own) + list(RUN_METRICS) + list(DISTANCE_METRICS)

    def participants(self, sampled: Tensor) -> Tensor:
        return self.used if self.hp.active_clients else sampled.cpu()

    def round(self, t: int, sampled: Tensor) -> None:
        self.t = t
        super().round(t, sampled)

    def client_grads(self, x: Params, y: Tensor, clients: Tensor) -> tuple[Params, Tensor]:
        """ξ_i^(t,k), one minibatch of each client for both gradients, drawn for all of ``clients`` at once
        and gathered and differentiated a chunk of clients at a time under a memory budget (the same
        numbers: ``hetfl.engine.grad.row_batches``)."""

        def grads(s: slice, batch) -> tuple[Params, Tensor]:
            x_hat = None
            if self.plus:
                x_hat = {k: v.expand(s.stop - s.start, *v.shape[1:]) for k, v in self.x_hat.items()}
            return self.objective.grads(rows(x, s), y[s], batch, x_hat)

        parts = ((s, grads(s, batch)) for s, batch in row_batches(self.fed, self.sampler, clients))
        return stitch(parts, len(clients))

    def project(self, y: Tensor) -> Tensor:
        return self.objective.project(y)

    def eval_models(self) -> dict[str, Params]:
        return {"global": self.x}

    def evaluate(self):
        rows, client_rows = super().evaluate()
        rows += self.objective.evaluate(self.x, self.y)
        acc = dict(rows)["test_acc_global"]
        if self.reached is None and self.hp.target_acc is not None and acc >= self.hp.target_acc:
            self.reached = self.t
        rows += [
            ("tau_eff", self.tau_eff_last),
            ("client_steps", float(self.client_steps)),
            ("rounds_to_target", math.nan if self.reached is None else float(self.reached)),
        ]
        if self.reference is not None:
            rows += [
                (metric, saddle_distance(self.x, self.y, self.reference[model]))
                for metric, model in zip(DISTANCE_METRICS, self.reference_models, strict=True)
            ]
        return rows, client_rows

    def state_dict(self) -> dict[str, Tensor]:
        return {**super().state_dict(), "global/y": self.y.detach().cpu()}


def saddle_distance(x: Params, y: Tensor, saddle: Params) -> float:
    """√(‖x − x*‖² + ‖y − y*‖²) in float64 for the server's ``x [1, ...]``, ``y [1, ...]`` and a saddle point
    ``saddle`` (the model's parameters and ``y``, each ``[1, ...]``, as ``minimax_saddle`` stores them)."""
    total = sum(float((x[k].double() - saddle[k].double()).pow(2).sum()) for k in x)
    total += float((y.double() - saddle["y"].double()).pow(2).sum())
    return math.sqrt(total)
