"""Local training with the client optimizer of the All-for-one experiments (SGD, momentum, weight decay, StepLR).

Philippenko et al., arXiv:2507.06844, 2025, §5 baseline "Local" (docs/papers/all_for_one.md §2.9.1): every
client runs I = ``local_steps`` SGD steps per epoch on its own batches, α = I_N. The same as the shared
``local`` (which it equals exactly, batch for batch, with ``momentum: 0`` and no weight decay or scheduler),
with the paper code's ``torch.optim.SGD(lr, momentum, weight_decay)`` + ``StepLR`` per client, so that every
run of a study shares one optimizer.
"""

from __future__ import annotations

import dataclasses

import torch

from hetfl.algorithms.collaborative.common import (
    ClientSGD,
    CollaborativeAlgorithm,
    CollaborativeHyperparameters,
)
from hetfl.engine.grad import client_grads
from hetfl.engine.params import Params, broadcast


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
        self.theta = broadcast(self.initial_model(), fed.num_clients)
        self.opt = ClientSGD(hp, self.theta)
        self.clients = fed.all_clients()
        self.record(torch.eye(fed.num_clients, dtype=torch.float64))

    def step(self, t: int) -> None:
        _, grads = client_grads(self.fed.model, self.theta, self.fed.batch(self.sampler, self.clients))
        self.opt.step(self.theta, grads, t)  # θ_i ← θ_i − η_t ∇ℓ(θ_i; B_i)

    def eval_models(self) -> dict[str, Params]:
        return {"personal": self.theta}


ALGORITHMS = {"local_sgdm": LocalSGDM}
