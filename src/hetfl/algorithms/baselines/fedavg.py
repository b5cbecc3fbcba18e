"""FedAvg: Federated Averaging.

McMahan, Moore, Ramage, Hampson, Agüera y Arcas, "Communication-Efficient Learning of Deep Networks
from Decentralized Data", AISTATS 2017, Algorithm 1. https://arxiv.org/abs/1602.05629

Each round the server samples S clients; each runs τ steps of minibatch SGD from the global model
w_t; the server replaces w_t by the (weighted) mean of their models. The FedAvg paper weights by
n_k / m_t (``client_weights: samples``, as in pFedMe's official code); the default here is uniform 1/S,
the weighting of pFedMe's Algorithm 1, so that both are compared with the same server rule.
FedAvg has no personalization: its ``personal`` model is the global one (an alias, evaluated once).

Client optimizer (``momentum``, ``weight_decay``, ``clip_norm``, ``lr_schedule``: config/README.md): every
local step is a step of the client's optimizer at the round's step size; clients start each round from w_t
with zero momentum (stateless clients). The defaults are the paper's plain SGD at a constant ``lr``.
"""

from __future__ import annotations

import dataclasses

from torch import Tensor

from hetfl.algorithms.base import FederatedAlgorithm
from hetfl.algorithms.hyperparameters import Federated
from hetfl.engine.grad import local_sgd
from hetfl.engine.params import Params, broadcast


@dataclasses.dataclass(frozen=True)
class FedAvgHyperparameters(Federated):
    """``lr`` η, ``local_steps`` τ, ``batch_size`` |D|, ``clients_per_round`` S, ``client_weights``, and the
    client optimizer (``ClientOptimization``)."""


class FedAvg(FederatedAlgorithm):
    """FedAvg. State: the global model ``w: [1, ...]``."""

    name = "fedavg"
    Hyperparameters = FedAvgHyperparameters
    models = ("global", "personal")

    def __init__(self, fed, hp, seed, sampling="epoch"):
        super().__init__(fed, hp, seed, sampling)
        self.w = self.initial_model()

    def round(self, t: int, sampled: Tensor) -> None:
        local = broadcast(self.w, len(sampled))  # line 8: w ← w_t for each k ∈ S_t
        opt = self.client_optimizer(local)  # stateless clients: zero momentum each round
        local_sgd(
            self.fed, self.sampler, local, sampled, self.hp.local_steps, self.lr_at(t), optimizer=opt
        )  # ClientUpdate
        self.w = self.aggregate(local, sampled)  # w_{t+1} ← Σ_k (n_k/m_t) w^k_{t+1}

    def eval_models(self) -> dict[str, Params]:
        return {"global": self.w, "personal": self.w}


ALGORITHMS = {"fedavg": FedAvg}
