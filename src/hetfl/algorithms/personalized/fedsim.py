"""FedSim: simultaneous updates of the personal and the global part.

Pillutla et al., "Federated Learning with Partial Model Personalization", ICML 2022
(``pfl/optim/fedsim.py``; docs/papers/ffgg.md §3.5): each sampled client trains θ and w jointly for
``local_steps`` SGD steps from (θ^r, w_m); the server averages the θ's (server_lr 1: FedAvg). Stateless
(the default, as in FFGG's table) or stateful, as FedAlt.

Client optimizer (config/README.md): the joint steps are steps of one client optimizer over (θ, w) (the
clipping norm over both parts), at the round's scheduled ``lr``; θ's momentum starts at zero each round,
w's restarts with w (stateless) or carries on across rounds (stateful).
"""

from __future__ import annotations

from torch import Tensor

from hetfl.algorithms.personalized.fedalt import SplitTrainingHyperparameters, StatefulPersonalization
from hetfl.engine.grad import local_sgd


class FedSim(StatefulPersonalization):
    """FedSim: joint steps on (θ, w_m)."""

    name = "fedsim"
    Hyperparameters = SplitTrainingHyperparameters

    def round(self, t: int, sampled: Tensor) -> None:
        hp = self.hp
        self.t = t
        params = self.compose(self.personal_start(sampled, self.rng), len(sampled))
        opt = self.personal_optimizer(params, sampled)  # θ: zero momentum; w: as FedAlt's
        local_sgd(self.fed, self.sampler, params, sampled, hp.local_steps, self.lr_at(t), optimizer=opt)
        self.keep(params, sampled, opt)
        self.server_step(params, sampled, hp.server_lr)


ALGORITHMS = {"fedsim": FedSim}
