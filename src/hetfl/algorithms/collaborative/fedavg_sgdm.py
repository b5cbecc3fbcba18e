"""FedAvg with the All-for-one experiments' training setting (SGD, momentum, weight decay, StepLR).

McMahan et al., AISTATS 2017, as run by Philippenko et al., arXiv:2507.06844, 2025
(docs/papers/all_for_one.md §2.9.2, the code's ``fedavg_training``): each epoch every client starts from the
global model w, runs I = ``local_steps`` steps of its client optimizer (config/README.md; the code's
``torch.optim.SGD`` + ``StepLR``), and the server averages w ← Σ_i p_i θ_i, p_i = n_i / Σ_j n_j
(``client_weights: samples``, the default here as in the code) or 1/N (``uniform``). Unlike the shared
``fedavg``, whose stateless clients restart their momentum every round, a client's momentum buffer is kept
across rounds, as each client keeps its optimizer in the code. Every client is evaluated with w. Without
momentum, and with the same other options and ``client_weights``, it equals the shared ``fedavg`` with all
clients and ``local_steps`` = I.

Its collaboration matrix (recorded once, for the weight figures): every row is p.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import torch

from hetfl.algorithms.collaborative.common import (
    CollaborativeAlgorithm,
    CollaborativeHyperparameters,
)
from hetfl.engine.aggregation import aggregate, aggregation_weights
from hetfl.engine.grad import local_sgd
from hetfl.engine.optim import client_optimizer, scheduled_lr
from hetfl.engine.params import Params


@dataclasses.dataclass(frozen=True)
class FedAvgSGDMHyperparameters(CollaborativeHyperparameters):
    """``client_weights`` (``samples`` n_i/Σn_j, the code; ``uniform`` 1/N) and the shared setting."""

    client_weights: Literal["uniform", "samples"] = "samples"


class FedAvgSGDM(CollaborativeAlgorithm):
    """FedAvg with per-client SGD state. State: ``w [1, ...]``, ``theta [N, ...]`` (last local models)."""

    name = "fedavg_sgdm"
    Hyperparameters = FedAvgSGDMHyperparameters
    models = ("global", "personal")
    weighted = True

    def __init__(self, fed, hp, seed, sampling="epoch"):
        super().__init__(fed, hp, seed, sampling)
        self.w = self.fed.initial_model(self.seed)
        self.theta = fed.states.stack(self.w, fed.num_clients, idle=False)
        self.opt = client_optimizer(self.fed, self.hp, self.theta)
        self.clients = fed.all_clients()
        p = aggregation_weights(self.fed, self.hp, self.clients)
        p = torch.full((fed.num_clients,), 1.0 / fed.num_clients, dtype=torch.float64) if p is None else p
        self.record(p.unsqueeze(0).expand(fed.num_clients, -1).clone())

    def round(self, t, sampled) -> None:
        with torch.no_grad():
            for k, v in self.theta.items():
                v.copy_(self.w[k].expand_as(v))  # θ_i ← w (momentum buffers kept)
        super().round(t, sampled)  # I local steps
        self.w = aggregate(self.fed, self.hp, self.theta, self.clients)  # w ← Σ_i p_i θ_i

    def step(self, t: int) -> None:
        # one step of every client's optimizer on its next minibatch, chunk by chunk under a
        # memory budget (the N clients' gradients never resident at once)
        lr = scheduled_lr(self.hp.lr, t, self.hp, self.rounds)
        local_sgd(self.fed, self.sampler, self.theta, self.clients, 1, lr, optimizer=self.opt)

    def eval_models(self) -> dict[str, Params]:
        return {"global": self.w, "personal": self.w}


ALGORITHMS = {"fedavg_sgdm": FedAvgSGDM}
