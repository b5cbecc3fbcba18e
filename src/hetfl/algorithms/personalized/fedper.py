"""FedPer: federated learning with personalization layers (shared base, personal head, trained together).

Arivazhagan, Aggarwal, Singh, Choudhary, "Federated Learning with Personalization Layers", arXiv:1912.00818,
2019, Sec. 3 (FedPer's client and server procedures). https://arxiv.org/abs/1912.00818

The model is base layers W_B (global) then personalization layers W_P (the head; hetfl: the model's last
layer, ``model: {split: output}``, ``hetfl.algorithms.personalized.layers``). Round k:

    server sends W_B^(k−1) to the clients                                    (all N; S with clients_per_round)
    client j: (W_B,j, W_P,j) ← SGD on its data from (W_B^(k−1), W_P,j^(k−1)),  both parts at once, e epochs
              keeps W_P,j (never sent, never reset), sends W_B,j
    server:   W_B^(k) ← Σ_j γ_j W_B,j,   γ_j = n_j / Σ_j' n_j' (FedAvg's)    (``client_weights: samples``)

In hetfl's terms this **is FedSim** (Pillutla et al. 2022, ``fedsim``) on the ``output`` split with
``stateful: true`` (FedPer's personalization layers stay on the client across rounds; FedSim's default,
``stateful: false``, restarts them from the initial model every round: FFGG's "FedSim (Stateless)", not
FedPer), ``server_lr: 1`` (FedPer's server averages) and ``finetune_steps: 0`` (FedPer tests each client's
model as trained; FedSim's default fine-tunes its head first), with FedPer's ``client_weights: samples``.
The class is FedSim's with those fixed, and tests/test_personal_layers.py checks that the two agree byte
for byte with every optimizer option, and that stateless FedSim does not.

Hyper-parameters (``FedPerHyperparameters``): ``lr`` η (0.01), ``local_steps`` (20: joint SGD steps on base
and head per round; the paper runs e = 4 local epochs), ``batch_size`` b (128), ``clients_per_round`` (null:
all, as the paper's server), ``client_weights`` (``samples``: γ_j), ``finetune_steps`` (0), ``finetune_lr``
(null: ``lr``), and the client optimizer. The paper's CIFAR-10 runs (10 clients, all every round, SGD at
lr 0.01, batch 128, 4 local epochs; the settings of Flower's reproduction, ``baselines/fedper``) give the
other defaults; hetfl counts local steps, not epochs (4 epochs are 4·n_j/b steps).

Client optimizer (config/README.md): the joint steps are steps of one client optimizer over (W_B, W_P) at
the round's scheduled ``lr``; the base's momentum starts at zero each round (it starts from the server's
W_B), the head's carries on with the head across the client's rounds (momentum buffers follow the model, as
for stateful FedSim; the paper takes plain SGD steps, the default).

Evaluated: ``personal``, each client's W_P with the current W_B (after ``finetune_steps`` steps on W_P).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Literal

from hetfl.algorithms.personalized.fedsim import FedSim
from hetfl.algorithms.personalized.layers import PersonalLayers
from hetfl.algorithms.personalized.partial import PartialHyperparameters
from hetfl.options import option


@dataclasses.dataclass(frozen=True)
class FedPerHyperparameters(PartialHyperparameters):
    """``lr`` η, ``local_steps`` (joint steps per round), ``batch_size`` b, ``clients_per_round``,
    ``client_weights`` (``samples``: FedPer's γ_j), ``finetune_steps`` (0), ``finetune_lr`` and the client
    optimizer (its schedule scales ``lr``). FedSim's ``stateful`` and ``server_lr`` are fixed (class
    constants, not options): personal heads are kept, the server averages."""

    lr: float = option(0.01, lo=0, lo_open=True)
    local_steps: int = option(20, lo=0, lo_open=True)
    batch_size: int = 128
    client_weights: Literal["uniform", "samples"] = "samples"
    finetune_steps: int = 0

    stateful: ClassVar[bool] = True  # FedSim's option: each client keeps its personalization layers
    server_lr: ClassVar[float] = 1.0  # FedSim's option: W_B ← Σ_j γ_j W_B,j

    def step_sizes(self) -> tuple[str, ...]:
        return ("lr",)


class FedPer(PersonalLayers, FedSim):
    """FedPer (Arivazhagan et al. 2019): stateful FedSim on the personal head. State: the base
    θ ``[1, ...]``, every client's head ``personal [N, ...]`` (and its momentum buffers)."""

    name = "fedper"
    Hyperparameters = FedPerHyperparameters
    part = "head"


ALGORITHMS = {"fedper": FedPer}
