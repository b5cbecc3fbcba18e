"""LG-FedAvg: local representations (personal body), a global model on top of them (shared head).

Liang, Liu, Ziyin, Allen, Auerbach, Brent, Salakhutdinov, Morency, "Think Locally, Act Globally: Federated
Learning with Local and Global Representations", NeurIPS 2019 Workshop on Federated Learning,
arXiv:2001.01523, Algorithm 1 (LG-FedAvg). https://arxiv.org/abs/2001.01523 (official code:
github.com/pliang279/LG-FedAvg, ``main_lg.py``).

Each client m has a local model ℓ_m(·; θ^l_m) that maps its inputs to a representation H (hetfl: the model's
first layer, ``model: {split: input}``, ``hetfl.algorithms.personalized.layers``) and shares the global
model g(·; θ^g) on top (every other layer). Round t:

    server samples M_t and sends θ^g_t
    client m ∈ M_t: for each minibatch (X, Y): H = ℓ_m(X; θ^l_m), loss of g(H; θ^g) against Y,
                    θ^l_m and θ^g updated together (one step on the whole model);
                    keeps θ^l_m (never sent), sends θ^g_m
    server: θ^g_{t+1} = mean_{m∈M_t} θ^g_m                                    (``client_weights: uniform``)

The server average touches only the global model: the local representations never leave the clients.
(The paper's optional auxiliary objectives on the local representations, and its evaluation of new devices
by an ensemble of local models, are not implemented.)

In hetfl's terms this **is FedSim** (Pillutla et al. 2022, ``fedsim``: joint steps on the global and the
personal part) on the ``input`` split with ``stateful: true``, ``server_lr: 1`` and ``finetune_steps: 0``;
the class is FedSim's with those fixed, and tests/test_personal_layers.py checks the two agree byte for
byte. The split is the first layer: a personal body and a shared output layer on a two-layer model (``dnn``);
on deeper ones (``cnn``) the shared part is every layer after the first, LG-FedAvg with L − 1 global layers
(the official code's ``num_layers_keep``: 3 for its MNIST MLP, 2 for its CIFAR-10 CNN). hetfl has no split
that keeps more than the first layer personal; one-layer models and other splits are refused, naming the key.

Hyper-parameters (``LGFedAvgHyperparameters``; hetfl counts steps, the paper local epochs): ``lr`` η (0.05),
``local_steps`` (60: one epoch of an MNIST client's 600 samples), ``batch_size`` (10), as the official MNIST
runs (``--lr 0.05 --local_ep 1 --local_bs 10 --frac 0.1``; CIFAR-10: lr 0.1, batch 50), ``clients_per_round``
(null: all; the paper samples 10 %), ``client_weights`` (``uniform``: ``main_lg.py`` divides the sum by the
m sampled clients), ``finetune_steps`` (0), ``finetune_lr`` (null: ``lr``), and the client optimizer. The
paper starts LG-FedAvg from a FedAvg-trained model (``--load_fed``): give the run ``init_from: <a fedavg
run>``.

Client optimizer (config/README.md): the joint steps are steps of one optimizer over the whole model at the
round's scheduled ``lr``; the global part's momentum starts at zero each round, the local body's carries on
with it across the client's rounds (momentum buffers follow the model). The official code builds a new
``torch.optim.SGD(momentum=0.5)`` every round (its body buffers restart); with plain steps (the default)
the two agree.

Evaluated: ``personal``, each client's local body with the current global model (after ``finetune_steps``
steps on the body).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from hetfl.algorithms.personalized.fedsim import FedSim
from hetfl.algorithms.personalized.layers import PersonalLayers
from hetfl.algorithms.personalized.partial import PartialHyperparameters
from hetfl.options import option


@dataclasses.dataclass(frozen=True)
class LGFedAvgHyperparameters(PartialHyperparameters):
    """``lr`` η, ``local_steps`` (joint steps per round), ``batch_size``, ``clients_per_round``,
    ``client_weights`` (``uniform``), ``finetune_steps`` (0), ``finetune_lr`` and the client optimizer (its
    schedule scales ``lr``). FedSim's ``stateful`` and ``server_lr`` are fixed (class constants, not
    options): local bodies are kept, the server averages the global model."""

    lr: float = option(0.05, lo=0, lo_open=True)
    local_steps: int = option(60, lo=0, lo_open=True)
    batch_size: int = 10
    finetune_steps: int = 0

    stateful: ClassVar[bool] = True  # FedSim's option: each client keeps its local representation
    server_lr: ClassVar[float] = 1.0  # FedSim's option: θ^g_{t+1} = mean θ^g_m

    def step_sizes(self) -> tuple[str, ...]:
        return ("lr",)


class LGFedAvg(PersonalLayers, FedSim):
    """LG-FedAvg (Liang et al. 2020, Algorithm 1): stateful FedSim on the personal body. State: the global
    model θ^g ``[1, ...]`` (the layers after the first), every client's body ``personal [N, ...]`` (and its
    momentum buffers)."""

    name = "lg_fedavg"
    Hyperparameters = LGFedAvgHyperparameters
    part = "body"


ALGORITHMS = {"lg_fedavg": LGFedAvg}
