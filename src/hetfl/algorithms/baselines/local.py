"""Local: every client trains alone on its own data, no communication.

The standard lower/upper reference of personalized FL (docs/papers/pfedme.md §2.6: on Synthetic it beats every
federated method). Each "round" every client runs τ local SGD steps from where it stopped, so a
round costs each client what one FedAvg round costs a sampled client.

Client optimizer (config/README.md): every step is a step of the client's optimizer at the round's step
size; each client keeps its model, and so its momentum buffers, across rounds.
"""

from __future__ import annotations

import dataclasses

from torch import Tensor

from hetfl.algorithms.base import FederatedAlgorithm
from hetfl.algorithms.hyperparameters import LocalTraining
from hetfl.engine.grad import local_sgd
from hetfl.engine.optim import client_optimizer, scheduled_lr
from hetfl.engine.params import Params


@dataclasses.dataclass(frozen=True)
class LocalHyperparameters(LocalTraining):
    """``lr`` η, ``local_steps`` τ per round, ``batch_size`` |D|, and the client optimizer."""


class Local(FederatedAlgorithm):
    """Local training. State: per-client models ``theta: [N, ...]``, all starting from the common w_0, and
    their optimizer ``opt`` (momentum buffers ``[N, ...]``)."""

    name = "local"
    Hyperparameters = LocalHyperparameters
    models = ("personal",)

    def __init__(self, fed, hp, seed, sampling="epoch"):
        super().__init__(fed, hp, seed, sampling)
        self.theta = fed.states.stack(self.fed.initial_model(self.seed), fed.num_clients, idle=False)
        self.opt = client_optimizer(self.fed, self.hp, self.theta)  # kept across rounds, as the models are

    def round(self, t: int, sampled: Tensor) -> None:
        clients = self.fed.all_clients()
        lr = scheduled_lr(self.hp.lr, t, self.hp, self.rounds)
        local_sgd(self.fed, self.sampler, self.theta, clients, self.hp.local_steps, lr, optimizer=self.opt)

    def eval_models(self) -> dict[str, Params]:
        return {"personal": self.theta}


ALGORITHMS = {"local": Local}
