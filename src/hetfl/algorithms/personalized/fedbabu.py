"""FedBABU: federated averaging with body aggregation and body update; the head is fine-tuned only after.

Oh, Kim, Yun, "FedBABU: Toward Enhanced Representation for Federated Image Classification", ICLR 2022,
Algorithm 1 (training) and its personalization by fine-tuning. https://openreview.net/forum?id=HuaYQfggn5u
(official code: github.com/jhoon-oh/FedBABU, ``main_fed.py --local_upt_part body --aggr_part body``).

The model is a body (the extractor, global; hetfl: every layer but the last) and a head (the classifier: the
last layer, ``model: {split: output}``, ``hetfl.algorithms.personalized.layers``). The head is drawn once at
random (the initial model's) and **never trained during federated training**: every client uses that same
head, and only the body is updated and aggregated. Round k:

    server samples C^k and sends the body θ_ext^{k−1}; the head is θ_cls^0 for everyone
    client i: τ steps on the body only:  θ_ext ← θ_ext − α ∇_ext f_i(θ_ext, θ_cls^0)      (head step size 0)
    server:   θ_ext^k ← mean_i θ_ext,i                                   (``client_weights``; official: 1/m)

Personalization (evaluation): each client fine-tunes the global model (θ_ext^k, θ_cls^0) on its own
training data for τ_f epochs (hetfl: ``finetune_steps``), the whole model by default (``finetune: all``,
the official evaluation: body and head at one learning rate), or the head only (``finetune: personal``).

With ``finetune: personal`` this **is FedAlt** (Pillutla et al. 2022, ``fedalt``) on the ``output`` split with
``stateful: false`` (the head restarts from the initial one every round), ``personal_steps: 0`` (the head is
never trained) and ``server_lr: 1``: both evaluate the initial head fine-tuned with the current body. Their
models agree to rounding (1e-12 in float64): FedAlt's server steps θ − 1·(θ − mean), FedBABU's takes the mean
(tests/test_personal_layers.py). It is also FedAvg+FT (``fedavg_ft``) whose clients do not train the head.

Hyper-parameters (``FedBABUHyperparameters``; hetfl counts steps, the paper local epochs): ``lr`` α (0.1),
``local_steps`` τ (10: one epoch of a client's 500 CIFAR samples at batch 50, the paper's τ = 1; it also runs
τ = 4, 10), ``batch_size`` (50), ``clients_per_round`` (null: all; the paper's f = 1.0, also f = 0.1),
``client_weights`` (``uniform``), ``finetune_steps`` (50: the paper's τ_f = 5 fine-tuning epochs),
``finetune_lr`` (null: ``lr``; the official evaluation fine-tunes at 0.001 with momentum 0.9), ``finetune``
(``all`` | ``personal``), the client optimizer, and FedAvg's other options (its round is FedAvg's on the body:
unequal local steps, the server optimizer, ``aggregation``; config/README.md). The paper trains with momentum 0.9 and divides the step
size by 10 at half and at three quarters of the rounds: set ``momentum: 0.9`` (the defaults are plain SGD).

Client optimizer (config/README.md): every body step is a step of the client's optimizer (zero momentum each
round; weight decay and clipping on the body only: the head is not among its parameters) at the round's
scheduled ``lr``; the fine-tuning as FedAvg+FT's, from zero momentum at the constant ``finetune_lr``.

Evaluated: ``global``, the body with the initial head (the paper's "initial" accuracy), and ``personal``,
each client's fine-tuned model.
"""

from __future__ import annotations

import dataclasses

from hetfl.algorithms.personalized.fedavg_ft import FedAvgFT, FedAvgFTHyperparameters
from hetfl.algorithms.personalized.layers import PersonalLayers


@dataclasses.dataclass(frozen=True)
class FedBABUHyperparameters(FedAvgFTHyperparameters):
    """``lr`` α, ``local_steps`` τ (body steps), ``batch_size``, ``clients_per_round``, ``client_weights``,
    ``finetune_steps`` (τ_f), ``finetune_lr`` (null: ``lr``), ``finetune`` (``all``: the whole model;
    ``personal``: the head), the client optimizer (its schedule scales ``lr``) and FedAvg's others
    (``FedAvgFamily``)."""

    lr: float = 0.1
    local_steps: int = 10
    batch_size: int = 50
    finetune_steps: int = 50


class FedBABU(PersonalLayers, FedAvgFT):
    """FedBABU (Oh et al. 2022): FedAvg on the body, the head frozen at its initialization, fine-tuning at
    evaluation. State: the global model ``w [1, ...]`` (its head: the initial one, bitwise)."""

    name = "fedbabu"
    Hyperparameters = FedBABUHyperparameters
    part = "head"

    def __init__(self, fed, hp, seed, sampling="epoch"):
        super().__init__(fed, hp, seed, sampling)
        head = set(fed.model.personal_keys())
        self.body_keys = [k for k in self.w if k not in head]

    def trained_keys(self) -> list[str]:
        """The body: the clients step it (the head's step size is 0) and the server averages it; the head is
        neither stepped nor averaged (it stays the initial tensor). The round is FedAvg's
        (``FedAvgLike.round``)."""
        return self.body_keys


ALGORITHMS = {"fedbabu": FedBABU}
