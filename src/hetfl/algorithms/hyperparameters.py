"""Hyper-parameters shared by the algorithms that train on client data (local SGD, server averaging), and the
client optimizer every algorithm that takes local steps shares (``ClientOptimization``)."""

from __future__ import annotations

import dataclasses
from typing import Literal

from hetfl.errors import ConfigError
from hetfl.options import Options, option

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
    ``CosineAnnealingLR(T_max=T)``; ``linear``: a linear warm-up over the first ``lr_warmup`` share of the T
    rounds, then a linear decay to 0, the "global scheduler: linear, warm-up 10 % of rounds" of FFGG's GLDv2 and
    StackOverflow protocols (Mishchenko et al., App. E, Table 5; their code multiplies the clients' step size of
    round t by it); all stepped once per round), ``lr_step_size`` (null; rounds per decay: required by ``step``,
    refused otherwise), ``lr_gamma`` (0.1; in (0, 1]), ``lr_min`` (0; ≥ 0 and below every scheduled step size),
    ``lr_warmup`` (0.1; in [0, 1); ``linear`` only).

    Which step sizes the schedule scales is the algorithm's (:meth:`step_sizes`; ``lr`` by default).
    """

    momentum: float = option(0.0, lo=0, hi=1, hi_open=True)
    weight_decay: float = option(0.0, lo=0)
    clip_norm: float | None = option(None, lo=0, lo_open=True)
    lr_schedule: Literal["constant", "step", "cosine", "linear"] = "constant"
    lr_step_size: int | None = option(None, lo=0, lo_open=True)
    lr_gamma: float = option(0.1, lo=0, lo_open=True, hi=1)
    lr_min: float = option(0.0, lo=0)
    lr_warmup: float = option(0.1, lo=0, hi=1, hi_open=True)

    def step_sizes(self) -> tuple[str, ...]:
        """The names of the step sizes the schedule scales (each from its own value, as the param groups
        of one torch scheduler); ``lr_min`` must lie below each of them."""
        return ("lr",)

    def check(self, key: str) -> None:
        """Checks across the optimizer's options (each option's range is declared with it: ``option(lo=, hi=)``,
        checked by ``hetfl.options.Options.from_dict``).

        Raises:
            ConfigError: ``step`` without ``lr_step_size`` or ``lr_step_size`` without ``step``, lr_min not
                below a scheduled step size.
        """
        super().check(key)
        if self.lr_schedule == "step" and self.lr_step_size is None:
            raise ConfigError(
                f"{key}.lr_step_size", "lr_schedule: step needs lr_step_size (rounds per decay)"
            )
        if self.lr_schedule != "step" and self.lr_step_size is not None:
            raise ConfigError(
                f"{key}.lr_step_size",
                f"only taken with lr_schedule: step (the schedule is {self.lr_schedule})",
            )
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

    lr: float = option(0.005, lo=0, lo_open=True)
    local_steps: int = option(20, lo=0, lo_open=True)
    batch_size: int = option(20, lo=0, lo_open=True)


@dataclasses.dataclass(frozen=True)
class Federated(LocalTraining):
    """Adds the server side: S clients per round (``clients_per_round``, null = all N) and aggregation weights.

    ``client_weights``: ``uniform`` averages the S uploaded models with 1/S; ``samples`` with
    n_i / Σ_{j∈S} n_j (train-sample counts).
    """

    clients_per_round: int | None = option(None, lo=0, lo_open=True)
    client_weights: Literal["uniform", "samples"] = "uniform"


@dataclasses.dataclass(frozen=True)
class HeterogeneousSteps(Options):
    """How many local steps each client takes (``hetfl.engine.local_steps``): ``local_steps_per_client``
    (``equal``: every client ``local_steps``, the default; ``spread``: fixed, evenly spread over
    [``local_steps_min``, ``local_steps``] by client index; ``uniform``: drawn from {``local_steps_min``, ...,
    ``local_steps``} for every client each round), ``local_steps_min`` τ_min (1) and ``local_steps_unit``
    (``steps``; ``epochs``: the count is in passes over the client's data, ⌈n_i/B⌉ steps each)."""

    local_steps_per_client: Literal["equal", "spread", "uniform"] = "equal"
    local_steps_min: int = option(1, lo=0, lo_open=True)
    local_steps_unit: Literal["steps", "epochs"] = "steps"

    def check(self, key: str) -> None:
        """Raises: ConfigError: ``local_steps_min`` above ``local_steps`` where it is used."""
        super().check(key)
        tau = getattr(self, "local_steps", None)
        if self.local_steps_per_client != "equal" and tau is not None and self.local_steps_min > tau:
            raise ConfigError(
                f"{key}.local_steps_min", f"must be <= local_steps ({tau}), got {self.local_steps_min}"
            )


@dataclasses.dataclass(frozen=True)
class ServerOptimization(Options):
    """The server optimizer (``hetfl.engine.server``; Reddi et al., ICLR 2021, Algorithms 1-2):
    ``server_optimizer`` (``sgd``, the default; ``avgm`` FedAvgM; ``adagrad``, ``adam``, ``yogi``: FedAdagrad,
    FedAdam, FedYogi), ``server_lr`` η (1: with ``sgd``, the plain average), ``server_momentum`` β1 (0.9;
    [0, 1)), ``server_beta2`` β2 (0.99; [0, 1)), ``server_eps`` τ (1e-3; > 0)."""

    server_optimizer: Literal["sgd", "avgm", "adagrad", "adam", "yogi"] = "sgd"
    server_lr: float = option(1.0, lo=0, lo_open=True)
    server_momentum: float = option(0.9, lo=0, hi=1, hi_open=True)
    server_beta2: float = option(0.99, lo=0, hi=1, hi_open=True)
    server_eps: float = option(1e-3, lo=0, lo_open=True)


@dataclasses.dataclass(frozen=True)
class Aggregation(Options):
    """The order in which the server adds the clients' terms (``hetfl.engine.aggregation``): ``aggregation``
    ``batched`` (the default: torch's reduction over the round's stacked ``[S, ...]`` models) or
    ``sequential`` (a running sum in the clients' order, term by term, as the official pFedMe code's
    ``aggregate_parameters``: the same bits however the S clients are chunked, so that under a memory budget a
    round trains, adds and drops a chunk of clients at a time and never holds its S local models). The two
    differ in the last bits of every aggregate."""

    aggregation: Literal["batched", "sequential"] = "batched"


@dataclasses.dataclass(frozen=True)
class FedAvgFamily(Federated, HeterogeneousSteps, ServerOptimization, Aggregation):
    """The hyper-parameters the FedAvg-like algorithms share (FedAvg, FedProx, SCAFFOLD, FedNova): those of
    ``Federated``, the clients' numbers of local steps (``HeterogeneousSteps``), the server optimizer
    (``ServerOptimization``) and the order of the server's sums (``Aggregation``). Their defaults are FedAvg:
    every client ``local_steps``, the plain average (``batched``)."""
