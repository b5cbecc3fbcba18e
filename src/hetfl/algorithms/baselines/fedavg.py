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

Shared with the other FedAvg-like algorithms (config/README.md): unequal numbers of local steps τ_i
(``local_steps_per_client``, ``local_steps_min``, ``local_steps_unit``; with unequal τ_i FedAvg converges
to a stationary point of the surrogate Σ_i p_i τ_i f_i / Σ_i p_i τ_i, not of Σ_i p_i f_i: Wang et al.,
NeurIPS 2020, Theorem 1) and the server optimizer (``server_optimizer``, ``server_lr``, ...: FedAvg with a
server learning rate, FedAvgM, FedAdagrad, FedAdam, FedYogi of Reddi et al., ICLR 2021) and the order of the
server's sums (``aggregation``: ``batched``, torch's reduction over the S models, or ``sequential``, a running
sum in client order that lets a round under a memory budget train, add and drop a chunk of clients at a
time: ``hetfl.engine.aggregation``). The defaults (every client ``local_steps``, ``sgd`` at ``server_lr`` 1,
``batched``) are FedAvg, bit for bit.
"""

from __future__ import annotations

import dataclasses

from hetfl.algorithms.baselines.common import FedAvgLike
from hetfl.algorithms.hyperparameters import FedAvgFamily


@dataclasses.dataclass(frozen=True)
class FedAvgHyperparameters(FedAvgFamily):
    """``lr`` η, ``local_steps`` τ, ``batch_size`` |D|, ``clients_per_round`` S, ``client_weights``, the
    client optimizer (``ClientOptimization``), the clients' local steps (``HeterogeneousSteps``), the
    server optimizer (``ServerOptimization``) and ``aggregation`` (``Aggregation``)."""


class FedAvg(FedAvgLike):
    """FedAvg. State: the global model ``w: [1, ...]``."""

    name = "fedavg"
    Hyperparameters = FedAvgHyperparameters

    # round: FedAvgLike's (Algorithm 1, lines 5-9), without a correction


ALGORITHMS = {"fedavg": FedAvg}
