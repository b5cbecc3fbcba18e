"""Local training with the All-for-one experiments' training setting (SGD, momentum, weight decay, StepLR).

Philippenko et al., arXiv:2507.06844, 2025, §5 baseline "Local" (docs/papers/all_for_one.md §2.9.1): every
client runs I = ``local_steps`` steps of its client optimizer per epoch on its own batches, α = I_N; the
paper code's ``torch.optim.SGD(lr, momentum, weight_decay)`` + ``StepLR`` per client is the shared client
optimizer (config/README.md) with ``lr_schedule: step``, its momentum buffers kept across rounds. It equals
the shared ``local`` with the same options, batch for batch; it has the family's defaults and metrics
(``CollaborativeAlgorithm``), so that every run of a study shares one setting.
"""

from __future__ import annotations

import dataclasses

import torch

from hetfl.algorithms.collaborative.common import (
    CollaborativeAlgorithm,
    CollaborativeHyperparameters,
)
from hetfl.engine.grad import local_sgd
from hetfl.engine.optim import client_optimizer, scheduled_lr
from hetfl.engine.params import Params


@dataclasses.dataclass(frozen=True)
class LocalSGDMHyperparameters(CollaborativeHyperparameters):
    """The shared training setting only."""


class LocalSGDM(CollaborativeAlgorithm):
    """Local SGD with momentum. State: ``theta [N, ...]``; ``alpha`` = I_N (recorded once)."""

    name = "local_sgdm"
    Hyperparameters = LocalSGDMHyperparameters
    weighted = True

    def __init__(self, fed, hp, seed, sampling="epoch"):
        super().__init__(fed, hp, seed, sampling)
        self.theta = fed.states.stack(self.fed.initial_model(self.seed), fed.num_clients, idle=False)
        self.opt = client_optimizer(self.fed, self.hp, self.theta)
        self.clients = fed.all_clients()
        self.record(torch.eye(fed.num_clients, dtype=torch.float64))

    def step(self, t: int) -> None:
        # θ_i ← θ_i − η_t ∇ℓ(θ_i; B_i) (a step of the client's optimizer), chunk by chunk under a memory
        # budget: the N clients' gradients are never resident at once
        lr = scheduled_lr(self.hp.lr, t, self.hp, self.rounds)
        local_sgd(self.fed, self.sampler, self.theta, self.clients, 1, lr, optimizer=self.opt)

    def eval_models(self) -> dict[str, Params]:
        return {"personal": self.theta}


ALGORITHMS = {"local_sgdm": LocalSGDM}
