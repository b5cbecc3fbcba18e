"""FedAlt: alternating updates of the personal and the global part.

Pillutla, Malik, Mohamed, Rabbat, Sanjabi, Xiao, "Federated Learning with Partial Model
Personalization", ICML 2022, Algorithm 1 (``pfl/optim/fedalt.py`` of facebookresearch/FL_partial_personalization;
docs/papers/ffgg.md §3.5). Round r, each sampled client m:

    w_m ← its stored personal part (stateful) or the default client parameters (stateless)
    personal_steps SGD steps on w_m, θ fixed
    local_steps SGD steps on θ, w_m fixed, from θ^r: θ_m
    (stateful: store w_m)
    θ^{r+1} = θ^r − server_lr · (θ^r − weighted mean θ_m)          # FedAvg server, lr 1.0

or, with ``server_optimizer`` other than ``sgd``, the server optimizer's step on the pseudo-gradient
mean θ_m − θ^r (FedAdam etc., Reddi et al., ICLR 2021; Pillutla et al.'s GLDv2 and StackOverflow runs).

``stateful: false`` is the variant of FFGG's table ("FedAlt (Stateless)"): the personal part restarts
from the default (initial) client parameters every round.

Client optimizer (``momentum``, ``weight_decay``, ``clip_norm``, ``lr_schedule``: config/README.md): the w
steps and the θ steps are steps of the client's optimizer (one for w, one for θ, each over its own part: its
clipping norm and weight decay too), at the round's scheduled ``lr``. θ starts from θ^r with zero momentum;
w's momentum restarts with w (stateless) or carries on across the rounds a stateful client keeps its w.
"""

from __future__ import annotations

import dataclasses

from torch import Tensor

from hetfl.algorithms.hyperparameters import ServerOptimization
from hetfl.algorithms.personalized.partial import PartialHyperparameters, PartialPersonalization
from hetfl.engine.grad import sgd_step
from hetfl.engine.optim import ClientOptimizer, client_optimizer, scheduled_lr
from hetfl.engine.params import Params, all_finite, rows, select
from hetfl.engine.state import put
from hetfl.options import option


@dataclasses.dataclass(frozen=True)
class SplitTrainingHyperparameters(PartialHyperparameters, ServerOptimization):
    """``lr`` (client SGD, both parts), ``local_steps`` (steps on θ; FedSim: joint steps),
    ``personal_steps`` (FedAlt's steps on w; null: ``local_steps``), ``stateful``, the server optimizer
    (``ServerOptimization``: ``server_optimizer``, ``server_lr``, ...) and the client optimizer (its schedule
    scales ``lr``)."""

    lr: float = option(0.01, lo=0, lo_open=True)
    local_steps: int = option(20, lo=0, lo_open=True)
    personal_steps: int | None = option(None, lo=0)
    stateful: bool = False

    def step_sizes(self) -> tuple[str, ...]:
        return ("lr",)


class StatefulPersonalization(PartialPersonalization):
    """Adds the stored personal parts ``[N, ...]`` of stateful clients (FedAlt and FedSim), and their momentum
    buffers ``[N, ...]`` (``personal_momentum``, with ``momentum`` > 0): a client that keeps its personal part
    across rounds keeps its optimizer's buffers of it."""

    def __init__(self, fed, hp, seed, sampling="epoch"):
        super().__init__(fed, hp, seed, sampling)
        # [N, ...] stacks, placed by fed.states (hetfl.engine.state): off the device within a memory budget
        self.personal = fed.states.stack(self.default_personal, fed.num_clients) if hp.stateful else None
        self.personal_momentum = fed.states.zeros(self.personal) if hp.stateful and hp.momentum else None

    def personal_start(self, clients, generator) -> Params:
        if self.personal is None:
            return super().personal_start(clients, generator)
        return select(self.personal, clients, self.fed.device)

    def personal_optimizer(self, params: Params, sampled: Tensor, keys: list[str] | None = None):
        """The optimizer of the clients' models ``params [r, ...]`` (``sampled [r]``; over ``keys``, None: all):
        zero momentum, except the personal part's buffers of stateful clients, which carry on from their last
        round."""
        opt = client_optimizer(self.fed, self.hp, params, keys)
        if self.personal_momentum is not None:
            opt.load_state_dict(select(self.personal_momentum, sampled, self.fed.device))
        return opt

    def keep(self, params: Params, sampled: Tensor, opt: ClientOptimizer) -> None:
        """Stateful clients ``sampled [r]`` keep their personal part of ``params [r, ...]``, and its momentum
        buffers in ``opt``, for their next round."""
        if self.personal is not None:
            put(self.personal, sampled, {k: params[k] for k in self.personal_keys})
            if self.personal_momentum is not None:
                buffers = opt.state_dict()
                put(self.personal_momentum, sampled, {k: buffers[k] for k in self.personal_keys})

    def finite(self) -> bool:
        return super().finite() and (self.personal is None or all_finite(self.personal))


class FedAlt(StatefulPersonalization):
    """FedAlt: w steps, then θ steps (Pillutla et al. 2022, Alg. 1)."""

    name = "fedalt"
    Hyperparameters = SplitTrainingHyperparameters

    @property
    def personal_steps(self) -> int:
        """The steps on w (``personal_steps``; null: ``local_steps``)."""
        return self.hp.local_steps if self.hp.personal_steps is None else self.hp.personal_steps

    def drawn_steps(self) -> int:
        return self.personal_steps + self.hp.local_steps

    def train_chunk(self, t: int, clients: Tensor, params: Params, steps) -> Params:
        """The w steps (θ fixed), then the θ steps from θ^r (w fixed), each through its own client optimizer;
        sends θ_m."""
        lr = scheduled_lr(self.hp.lr, t, self.hp, self.rounds)
        opt_w = self.personal_optimizer(params, clients, self.personal_keys)
        opt_theta = client_optimizer(self.fed, self.hp, params, self.global_keys)  # from θ^r: zero momentum
        for k, s, (batch,) in steps:
            opt = opt_w if k < self.personal_steps else opt_theta
            sgd_step(self.fed.model, rows(params, s), batch, lr, opt.keys, s, opt)
        self.keep(params, clients, opt_w)
        return {k: params[k] for k in self.global_keys}


ALGORITHMS = {"fedalt": FedAlt}
