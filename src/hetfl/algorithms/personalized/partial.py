"""What FFGG, FedAlt and FedSim share: a model split into a global part θ and a personal part w.

The split is the model's (``model: {split: input | output | adapter}``, ``hetfl.models.adapters``):
θ = every other parameter, shared by the server; w = the personal parameters of each client. Only θ
travels to the server. The personal model of client m is (θ, w_m) with w_m fine-tuned on m's
training data for ``finetune_steps`` SGD steps before testing: the "final fine-tuning of the
personal part" (stage 3 of FFGG's real-data pipeline, TMLR 2025 App. E.6; Pillutla et al. 2022).
Where the fine-tuning starts depends on the algorithm (``personal_start``).

A round (:meth:`PartialPersonalization.round`): each sampled client's personal part starts at
``personal_start``, the clients train a chunk at a time (``local_chunks``: their steps' minibatches drawn
as one batched loop over the S clients draws them, ``hetfl.engine.grad.step_chunks``) and send what the
server adds (θ_m, or FFGG's θ-gradient) in the run's ``aggregation`` order (``hetfl.engine.aggregation``):
one chunk of all S under ``batched`` (the default); under ``sequential`` and a memory budget, one chunk per
call, so that the round's S local models are never resident at once.

Client optimizer (``momentum``, ``weight_decay``, ``clip_norm``, ``lr_schedule``: config/README.md): every
gradient step on θ or w goes through it (each algorithm says how). The evaluation's fine-tuning too, from
zero momentum, at its constant step size (``finetune_lr``, or the personal step size unscheduled: the
schedule is the training rounds').
"""

from __future__ import annotations

import dataclasses
from abc import abstractmethod
from collections.abc import Iterator
from typing import Any, Literal

import torch
from torch import Tensor

from hetfl.algorithms.adapting import AdaptsForEvaluation
from hetfl.algorithms.hyperparameters import Aggregation, ClientOptimization
from hetfl.engine.adapt import ClientModels, adapted_chunks
from hetfl.engine.aggregation import aggregation_weights, client_sum, sequential
from hetfl.engine.federation import Batch
from hetfl.engine.grad import numbered_steps, step_chunks
from hetfl.engine.memory import MemoryProfile
from hetfl.engine.optim import client_optimizer
from hetfl.engine.params import Params, all_finite, broadcast, rows
from hetfl.engine.sampler import eval_sampler
from hetfl.engine.server import ServerOptimizer
from hetfl.errors import ConfigError
from hetfl.models.adapters import SPLITS
from hetfl.options import Options, option


@dataclasses.dataclass(frozen=True)
class PartialHyperparameters(ClientOptimization, Aggregation):
    """Shared by the partially personalized algorithms.

    ``batch_size`` |D|; ``clients_per_round`` S (null = all); ``client_weights`` (``uniform`` 1/S or
    ``samples``); ``finetune_steps``: SGD steps on w before evaluation; ``finetune_lr``: their step size
    (null: the algorithm's personal step size); the client optimizer (``ClientOptimization``) of the
    steps on θ and w, whose scheduled step sizes each algorithm names (:meth:`step_sizes`); and the order of
    the server's sum (``Aggregation``).
    """

    batch_size: int = option(20, lo=0, lo_open=True)
    clients_per_round: int | None = option(None, lo=0, lo_open=True)
    client_weights: Literal["uniform", "samples"] = "uniform"
    finetune_steps: int = option(20, lo=0)
    finetune_lr: float | None = option(None, lo=0, lo_open=True)

    def step_sizes(self) -> tuple[str, ...]:
        return ()


class PartialPersonalization(AdaptsForEvaluation):
    """Base: θ (``self.theta``, ``[1, ...]``) and the personal parameter names of the split.

    Attributes:
        global_keys, personal_keys: the split of the model's parameters.
        theta: the global part ``[1, ...]``.
        default_personal: the personal part of the initial model ``[1, ...]`` (the "default client
            parameters" of Pillutla et al.'s stateless variants).
    """

    models = ("personal",)

    def __init__(self, fed, hp, seed, sampling="epoch"):
        super().__init__(fed, hp, seed, sampling)
        self.personal_keys = fed.model.personal_keys()
        w0 = self.fed.initial_model(self.seed)
        self.global_keys = [k for k in w0 if k not in self.personal_keys]
        self.theta = {k: w0[k] for k in self.global_keys}
        self.default_personal = {k: w0[k] for k in self.personal_keys}
        self.server = ServerOptimizer(hp)  # the run's server optimizer, for a server_optimizer other than sgd
        self.t = 0

    def memory_profile(self) -> MemoryProfile:
        """:meth:`drawn_steps` minibatches a round; the personal part's elements adapted for each evaluation
        (its N rows view θ, not copy it: :meth:`compose`) and, under ``aggregation: sequential``, the S
        clients' starting personal parts drawn before the first chunk trains."""
        personal = self.fed.model.num_parameters(self.personal_keys)
        return dataclasses.replace(
            super().memory_profile(),
            drawn_steps=self.drawn_steps(),
            started_elements=personal,
            adapted_elements=personal,
        )

    @classmethod
    def check(cls, hp: Options, settings: dict[str, Any], key: str) -> None:
        if settings["model"]["split"] == "none":
            raise ConfigError(
                f"{key}.model.split",
                f"algorithm '{cls.name}' needs a personal part: set the model's split",
                allowed=[s for s in SPLITS if s != "none"],
            )

    @classmethod
    def check_model(cls, model, key: str) -> None:
        personal = set(model.personal_keys())
        if personal == set(model.shapes()):
            raise ConfigError(
                f"{key}.model.split",
                f"split '{model.split}' makes every parameter of model '{model.name}' personal: no global part "
                "is left to share (a one-layer model has the same input and output layer)",
                allowed=[s for s in SPLITS if s not in ("none", model.split)],
            )

    @property
    def personal_lr(self) -> float:
        """The step size of the personal part (fine-tuning defaults to it)."""
        return self.hp.lr

    def compose(self, personal: Params, count: int, share: bool = False) -> Params:
        """Full models ``[count, ...]``: θ copied ``count`` times (``share``: θ's one row viewed ``count`` times,
        no copy, for models whose global part is only read: the evaluation's fine-tuning), with the given
        personal parts ``[count, ...]`` (copied)."""
        theta = broadcast(self.theta, count, views=self.theta if share else ())
        return {**theta, **{k: v.clone() for k, v in personal.items()}}

    def personal_start(self, clients: Tensor, generator: torch.Generator) -> Params:
        """Where the personal part of ``clients [C]`` starts (for a round, or for evaluation): the default."""
        return broadcast(self.default_personal, len(clients))

    def round(self, t: int, sampled: Tensor) -> None:
        """Round ``t`` of the sampled clients ``sampled [S]``: their personal parts start at
        :meth:`personal_start` (drawn before any minibatch), the clients train (:meth:`local_chunks`), the
        server sums what each sends (:meth:`train_chunk`: the weighted mean, ``client_weights``, in the run's
        ``aggregation`` order) and moves θ with it (:meth:`theta_step`)."""
        self.t = t
        start = self.personal_start(sampled, self.rng)
        mean = client_sum(self.hp, sampled, aggregation_weights(self.fed, self.hp, sampled))
        for s, sent in self.local_chunks(t, sampled, start):
            mean.add(s, sent)
        self.theta_step(t, mean.result())

    def local_chunks(self, t: int, sampled: Tensor, start: Params) -> Iterator[tuple[slice, Params]]:
        """What the clients ``sampled [S]`` send after their local training, a chunk at a time: yields
        ``(s, sent)``, ``sent`` the ``[r, ...]`` rows of the clients ``sampled[s]`` (:meth:`train_chunk`). Every
        minibatch of the round is drawn as one batched loop over the S clients draws them, :meth:`drawn_steps`
        draws (``hetfl.engine.grad.step_chunks``); each chunk's models are θ (copied) with its rows of the
        personal parts ``start [S, ...]``. One chunk of all S under ``aggregation: batched``; under
        ``sequential``, one per call under the run's row limit (each handed over before the next starts)."""
        working = [len(sampled)] * self.drawn_steps()
        for s, steps in step_chunks(self.fed, self.sampler, sampled, working, whole=not sequential(self.hp)):
            params = self.compose(rows(start, s), s.stop - s.start)
            yield s, self.train_chunk(t, sampled[s], params, numbered_steps(s, steps))

    @abstractmethod
    def drawn_steps(self) -> int:
        """The minibatches a client draws in a round (one per local step, and FFGG's gradient's)."""

    @abstractmethod
    def train_chunk(
        self, t: int, clients: Tensor, params: Params, steps: Iterator[tuple[int, slice, tuple[Batch, ...]]]
    ) -> Params:
        """Round ``t``'s local training of ``clients [r]`` from their models ``params [r, ...]`` (stepped in
        place) through ``steps``, :meth:`drawn_steps` ``(k, rows, (batch,))`` for each row chunk of them
        (``hetfl.engine.grad.numbered_steps``: step k of the models' ``rows``); returns what the clients send
        the server, ``[r, ...]`` of the global keys."""

    def theta_step(self, t: int, mean: Params) -> None:
        """θ ← θ − server_lr · (θ − mean): the pseudo-gradient step of the clients' mean θ ``mean [1, ...]``
        (``server_lr`` 1: their average); with a ``server_optimizer`` other than ``sgd``, that optimizer's step
        (``self.server``, ``hetfl.engine.server.ServerOptimizer``: Δ = mean − θ its pseudo-gradient, its state
        kept across rounds)."""
        if getattr(self.hp, "server_optimizer", "sgd") != "sgd":
            self.theta = self.server.step(self.theta, mean)
            return
        lr = self.hp.server_lr
        self.theta = {k: v - lr * (v - mean[k]) for k, v in self.theta.items()}

    def adapt(self) -> ClientModels:
        """Each client's personal model: θ with w fine-tuned on its training data (``finetune_steps`` steps of
        the client optimizer from zero momentum, at ``finetune_lr``, null: :attr:`personal_lr`), from
        :meth:`personal_start`; the global part θ's one row viewed by every client (no copy:
        ``hetfl.engine.params.broadcast``), the fine-tuning only reads it."""
        clients = self.fed.all_clients()
        lr = self.hp.finetune_lr or self.personal_lr

        def chunks():
            sampler = eval_sampler(self.fed.train.sizes, self.hp.batch_size, self.seed, self.t, self.sampling)
            start = self.personal_start(clients, sampler.generator)  # before the minibatches' draws
            return adapted_chunks(
                self.fed,
                sampler,
                lambda s: self.compose(rows(start, s), s.stop - s.start, share=True),
                [lr] * self.hp.finetune_steps,
                optimizer=lambda params: client_optimizer(
                    self.fed, self.hp, params, self.personal_keys
                ),  # a copy's
            )

        return ClientModels(self.fed.num_clients, chunks, views=self.global_keys)

    def finite(self) -> bool:
        return all_finite(self.theta)
