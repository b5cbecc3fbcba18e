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
from hetfl.engine.grad import sgd_step
from hetfl.engine.optim import scheduled_lr
from hetfl.engine.params import Params, rows


class FedSim(StatefulPersonalization):
    """FedSim: joint steps on (θ, w_m)."""

    name = "fedsim"
    Hyperparameters = SplitTrainingHyperparameters

    def drawn_steps(self) -> int:
        return self.hp.local_steps

    def train_chunk(self, t: int, clients: Tensor, params: Params, steps) -> Params:
        """``local_steps`` joint steps of one client optimizer over (θ, w); sends θ_m."""
        lr = scheduled_lr(self.hp.lr, t, self.hp, self.rounds)
        opt = self.personal_optimizer(params, clients)  # θ: zero momentum; w: as FedAlt's
        for _, s, (batch,) in steps:
            sgd_step(self.fed.model, rows(params, s), batch, lr, opt.keys, s, opt)
        self.keep(params, clients, opt)
        return {k: params[k] for k in self.global_keys}


ALGORITHMS = {"fedsim": FedSim}
