"""FedRep: a shared representation and personal heads, the head trained first, then the representation.

Collins, Hassani, Mokhtari, Shakkottai, "Exploiting Shared Representations for Personalized Federated
Learning", ICML 2021, Algorithm 1 (FedRep). https://arxiv.org/abs/2102.07078 (official code:
github.com/lgcollins/FedRep, ``models/Update.py``).

The model is a representation φ (global; hetfl: every layer but the last) and a head h_i (personal: the last
layer, ``model: {split: output}``, ``hetfl.algorithms.personalized.layers``). Round t:

    server samples I^t (rn clients; hetfl: S = clients_per_round) and sends φ^t
    client i ∈ I^t:  h_i ← h_i^{t−1} (its own head, kept across rounds)
                     τ_h steps:  h_i ← GRD(f_i(h_i, φ^t), h_i, α)          head first, φ^t fixed
                     τ steps:    φ_i ← GRD(f_i(h_i, φ_i), φ_i, α)          from φ^t, at the new head h_i
                     sends φ_i
    server: φ^{t+1} = (1/rn) Σ_{i∈I^t} φ_i                                  (``client_weights: uniform``)

GRD is one gradient step on a minibatch (hetfl: the client optimizer, plain SGD by default).

In hetfl's terms this **is FedAlt** (Pillutla et al. 2022, ``fedalt``: personal steps first, then global
steps) on the ``output`` split with ``stateful: true`` (FedRep's heads stay on the clients; FedAlt's default
restarts them from the initial model each round), ``server_lr: 1`` and ``finetune_steps: 0``, its step
counts aligned by name: FedRep's τ_h is FedAlt's ``personal_steps`` and τ its ``local_steps``. The class is
FedAlt's with those fixed; tests/test_personal_layers.py checks the two agree byte for byte, and that the
representation's steps see the head after its τ_h steps.

Hyper-parameters (``FedRepHyperparameters``; hetfl counts steps, the paper local epochs): ``lr`` α (0.01),
``personal_steps`` τ_h (500: the paper's 10 head epochs), ``local_steps`` τ (50: its 1 representation epoch),
``batch_size`` (10), each as in the paper's CIFAR-10 runs (500 samples per client, batch 10: an epoch is 50
steps; official scripts ``FedRep_cifar10_*.sh``: ``--lr 0.01 --local_bs 10 --local_ep 11 --local_rep_ep 1``;
FEMNIST: 5 representation epochs), ``clients_per_round`` (null: all; the paper samples r = 0.1),
``client_weights`` (``uniform``: 1/rn), ``finetune_steps`` (0), ``finetune_lr`` (null: ``lr``), and the client
optimizer.

Client optimizer (config/README.md): the head's steps and the representation's are steps of one optimizer
each, at the round's scheduled ``lr``; the representation's momentum starts at zero each round, the head's
carries on with the head across the client's rounds (momentum buffers follow the model, as for stateful
FedAlt). The official code builds one ``torch.optim.SGD(momentum=0.5, weight_decay=1e-4)`` per round over
both parts: its head buffers restart every round, and in the PyTorch of its time (``zero_grad`` left zero
gradients on the frozen head) momentum and weight decay kept moving the head during the representation
epochs. The paper's GRD and hetfl's default are plain steps, where all of these agree.

Evaluated: ``personal``, each client's head with the current φ (after ``finetune_steps`` steps on the head).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from hetfl.algorithms.personalized.fedalt import FedAlt
from hetfl.algorithms.personalized.layers import PersonalLayers
from hetfl.algorithms.personalized.partial import PartialHyperparameters
from hetfl.options import option


@dataclasses.dataclass(frozen=True)
class FedRepHyperparameters(PartialHyperparameters):
    """``lr`` α, ``personal_steps`` τ_h (head steps, first), ``local_steps`` τ (representation steps, then),
    ``batch_size``, ``clients_per_round``, ``client_weights`` (``uniform``), ``finetune_steps`` (0),
    ``finetune_lr`` and the client optimizer (its schedule scales ``lr``). FedAlt's ``stateful`` and
    ``server_lr`` are fixed (class constants, not options): heads are kept, the server averages."""

    lr: float = option(0.01, lo=0, lo_open=True)
    personal_steps: int = option(500, lo=0, lo_open=True)
    local_steps: int = option(50, lo=0, lo_open=True)
    batch_size: int = 10
    finetune_steps: int = 0

    stateful: ClassVar[bool] = True  # FedAlt's option: each client keeps its head
    server_lr: ClassVar[float] = 1.0  # FedAlt's option: φ^{t+1} = mean φ_i

    def step_sizes(self) -> tuple[str, ...]:
        return ("lr",)


class FedRep(PersonalLayers, FedAlt):
    """FedRep (Collins et al. 2021, Algorithm 1): stateful FedAlt on the personal head, τ_h head steps then τ
    representation steps. State: φ ``[1, ...]``, every client's head ``personal [N, ...]`` (and its momentum
    buffers)."""

    name = "fedrep"
    Hyperparameters = FedRepHyperparameters
    part = "head"


ALGORITHMS = {"fedrep": FedRep}
