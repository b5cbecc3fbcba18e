"""Local: every client trains alone on its own data, no communication.

The standard lower/upper reference of personalized FL (docs/papers/pfedme.md §2.6: on Synthetic it beats every
federated method). Each "round" every client runs τ local SGD steps from where it stopped, so a
round costs each client what one FedAvg round costs a sampled client.
"""

from __future__ import annotations

import dataclasses

from torch import Tensor

from hetfl.algorithms.base import FederatedAlgorithm
from hetfl.algorithms.hyperparameters import LocalTraining
from hetfl.engine.grad import local_sgd
from hetfl.engine.params import Params, broadcast


@dataclasses.dataclass(frozen=True)
class LocalHyperparameters(LocalTraining):
    """``lr`` η, ``local_steps`` τ per round, ``batch_size`` |D|."""


class Local(FederatedAlgorithm):
    """Local training. State: per-client models ``theta: [N, ...]``, all starting from the common w_0."""

    name = "local"
    Hyperparameters = LocalHyperparameters
    models = ("personal",)

    def __init__(self, fed, hp, seed, sampling="epoch"):
        super().__init__(fed, hp, seed, sampling)
        self.theta = broadcast(self.initial_model(), fed.num_clients)

    def round(self, t: int, sampled: Tensor) -> None:
        clients = self.fed.all_clients()
        self.theta = local_sgd(self.fed, self.sampler, self.theta, clients, self.hp.local_steps, self.hp.lr)

    def eval_models(self) -> dict[str, Params]:
        return {"personal": self.theta}


ALGORITHMS = {"local": Local}
