"""FedAlt: alternating updates of the personal and the global part.

Pillutla, Malik, Mohamed, Rabbat, Sanjabi, Xiao, "Federated Learning with Partial Model
Personalization", ICML 2022, Algorithm 1 (``pfl/optim/fedalt.py`` of facebookresearch/FL_partial_personalization;
docs/papers/ffgg.md §3.5). Round r, each sampled client m:

    w_m ← its stored personal part (stateful) or the default client parameters (stateless)
    personal_steps SGD steps on w_m, θ fixed
    local_steps SGD steps on θ, w_m fixed, from θ^r: θ_m
    (stateful: store w_m)
    θ^{r+1} = θ^r − server_lr · (θ^r − weighted mean θ_m)          # FedAvg server, lr 1.0

``stateful: false`` is the variant of FFGG's table ("FedAlt (Stateless)"): the personal part restarts
from the default (initial) client parameters every round.
"""

from __future__ import annotations

import dataclasses

from torch import Tensor

from hetfl.algorithms.personalized.partial import PartialHyperparameters, PartialPersonalization
from hetfl.engine.grad import local_sgd
from hetfl.engine.params import Params, all_finite, broadcast


@dataclasses.dataclass(frozen=True)
class SplitTrainingHyperparameters(PartialHyperparameters):
    """``lr`` (client SGD, both parts), ``local_steps`` (steps on θ; FedSim: joint steps),
    ``personal_steps`` (FedAlt's steps on w; null: ``local_steps``), ``server_lr``, ``stateful``."""

    lr: float = 0.01
    local_steps: int = 20
    personal_steps: int | None = None
    server_lr: float = 1.0
    stateful: bool = False

    def check(self, key: str) -> None:
        super().check(key)
        self._positive(key, "lr", "local_steps", "server_lr")
        self._positive(key, "personal_steps", allow_zero=True)


class StatefulPersonalization(PartialPersonalization):
    """Adds the stored personal parts ``[N, ...]`` of stateful clients (FedAlt and FedSim)."""

    def __init__(self, fed, hp, seed, sampling="epoch"):
        super().__init__(fed, hp, seed, sampling)
        self.personal = broadcast(self.default_personal, fed.num_clients) if hp.stateful else None

    def personal_start(self, clients, generator) -> Params:
        if self.personal is None:
            return super().personal_start(clients, generator)
        rows = clients.to(self.fed.device)
        return {k: v.index_select(0, rows) for k, v in self.personal.items()}

    def keep(self, params: Params, sampled: Tensor) -> None:
        """Stateful clients keep their personal part for the next round."""
        if self.personal is not None:
            rows = sampled.to(self.fed.device)
            for k in self.personal_keys:
                self.personal[k][rows] = params[k]

    def finite(self) -> bool:
        return super().finite() and (self.personal is None or all_finite(self.personal))


class FedAlt(StatefulPersonalization):
    """FedAlt: w steps, then θ steps (Pillutla et al. 2022, Alg. 1)."""

    name = "fedalt"
    Hyperparameters = SplitTrainingHyperparameters

    def round(self, t: int, sampled: Tensor) -> None:
        hp = self.hp
        self.t = t
        params = self.compose(self.personal_start(sampled, self.rng), len(sampled))
        w_steps = hp.local_steps if hp.personal_steps is None else hp.personal_steps
        local_sgd(self.fed, self.sampler, params, sampled, w_steps, hp.lr, keys=self.personal_keys)
        local_sgd(self.fed, self.sampler, params, sampled, hp.local_steps, hp.lr, keys=self.global_keys)
        self.keep(params, sampled)
        self.server_step(params, sampled, hp.server_lr)


ALGORITHMS = {"fedalt": FedAlt}
