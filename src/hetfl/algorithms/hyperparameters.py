"""Hyper-parameters shared by the algorithms that train on client data (local SGD, server averaging), and the
client optimizer every algorithm that takes local steps shares (``ClientOptimization``)."""

from __future__ import annotations

import dataclasses
from typing import Literal

from hetfl.errors import ConfigError
from hetfl.options import Options

Hyperparameters = Options  # an algorithm's typed hyper-parameters


@dataclasses.dataclass(frozen=True)
class ClientOptimization(Hyperparameters):
    """The client optimizer: SGD with momentum, weight decay, gradient clipping and a learning-rate schedule.

    A mixin of the hyper-parameters of every algorithm that takes local steps on client data (through
    ``LocalTraining``, or directly as ``PartialHyperparameters``), under the same names everywhere. One step
    of a client is PyTorch's ``clip_grad_norm_(params, clip_norm)`` then ``torch.optim.SGD(lr_t, momentum,
    weight_decay).step()`` (``hetfl.engine.optim.ClientOptimizer``, for all clients at once), at the step
    size of round t (``hetfl.engine.optim.scheduled_lr``). The defaults are plain SGD at a constant step
    size, each paper's setting: with them every algorithm computes, to the bit, what it computed before
    these options existed.

    Options (default): ``momentum`` (0; in [0, 1)), ``weight_decay`` (0; ≥ 0), ``clip_norm`` (null: no
    clipping; > 0: each client's gradient scaled to L2 norm at most ``clip_norm``, the norm over the
    parameters the step updates), ``lr_schedule`` (``constant``; ``step``: η·lr_gamma^⌊(t − 1)/lr_step_size⌋,
    as ``StepLR``; ``cosine``: lr_min + (η − lr_min)(1 + cos(π(t − 1)/T))/2 over the run's T rounds, as
    ``CosineAnnealingLR(T_max=T)``; both stepped once per round), ``lr_step_size`` (null; rounds per decay:
    required by ``step``, refused otherwise), ``lr_gamma`` (0.1; in (0, 1]), ``lr_min`` (0; ≥ 0 and below
    every scheduled step size).

    Which step sizes the schedule scales is the algorithm's (:meth:`step_sizes`; ``lr`` by default).
    """

    momentum: float = 0.0
    weight_decay: float = 0.0
    clip_norm: float | None = None
    lr_schedule: Literal["constant", "step", "cosine"] = "constant"
    lr_step_size: int | None = None
    lr_gamma: float = 0.1
    lr_min: float = 0.0

    def step_sizes(self) -> tuple[str, ...]:
        """The names of the step sizes the schedule scales (each from its own value, as the param groups
        of one torch scheduler); ``lr_min`` must lie below each of them."""
        return ("lr",)

    def check(self, key: str) -> None:
        """Range checks of the optimizer's options.

        Raises:
            ConfigError: momentum outside [0, 1), weight_decay < 0, clip_norm ≤ 0, ``step`` without
                ``lr_step_size`` or ``lr_step_size`` without ``step``, lr_step_size ≤ 0, lr_gamma outside
                (0, 1], lr_min < 0 or not below a scheduled step size.
        """
        super().check(key)
        if not 0.0 <= self.momentum < 1.0:
            raise ConfigError(f"{key}.momentum", f"must lie in [0, 1), got {self.momentum}")
        self._positive(key, "weight_decay", "lr_min", allow_zero=True)
        self._positive(key, "clip_norm", "lr_step_size")
        if self.lr_schedule == "step" and self.lr_step_size is None:
            raise ConfigError(
                f"{key}.lr_step_size", "lr_schedule: step needs lr_step_size (rounds per decay)"
            )
        if self.lr_schedule != "step" and self.lr_step_size is not None:
            raise ConfigError(
                f"{key}.lr_step_size",
                f"only taken with lr_schedule: step (the schedule is {self.lr_schedule})",
            )
        if not 0.0 < self.lr_gamma <= 1.0:
            raise ConfigError(f"{key}.lr_gamma", f"must lie in (0, 1], got {self.lr_gamma}")
        for name in self.step_sizes():
            lr = getattr(self, name)
            if lr is not None and lr > 0 and self.lr_min >= lr:
                raise ConfigError(f"{key}.lr_min", f"must lie below {name} = {lr}, got {self.lr_min}")


OPTIMIZER_KEYS = tuple(f.name for f in dataclasses.fields(ClientOptimization))
"""The names of the shared client optimizer's options, the same in every algorithm that takes them."""


@dataclasses.dataclass(frozen=True)
class LocalTraining(ClientOptimization):
    """Local SGD: learning rate η (``lr``), local steps τ per round (``local_steps``), minibatch |D|
    (``batch_size``), through the shared client optimizer (``ClientOptimization``)."""

    lr: float = 0.005
    local_steps: int = 20
    batch_size: int = 20

    def check(self, key: str) -> None:
        self._positive(key, "lr", "local_steps", "batch_size")
        super().check(key)


@dataclasses.dataclass(frozen=True)
class Federated(LocalTraining):
    """Adds the server side: S clients per round (``clients_per_round``, null = all N) and aggregation weights.

    ``client_weights``: ``uniform`` averages the S uploaded models with 1/S; ``samples`` with
    n_i / Σ_{j∈S} n_j (train-sample counts).
    """

    clients_per_round: int | None = None
    client_weights: Literal["uniform", "samples"] = "uniform"

    def check(self, key: str) -> None:
        super().check(key)
        self._positive(key, "clients_per_round")
