"""Hyper-parameters shared by the algorithms that train on client data (local SGD, server averaging)."""

from __future__ import annotations

import dataclasses
from typing import Literal

from hetfl.options import Options

Hyperparameters = Options  # an algorithm's typed hyper-parameters


@dataclasses.dataclass(frozen=True)
class LocalTraining(Hyperparameters):
    """Local SGD: learning rate η (``lr``), local steps τ per round (``local_steps``), minibatch |D| (``batch_size``)."""

    lr: float = 0.005
    local_steps: int = 20
    batch_size: int = 20

    def check(self, key: str) -> None:
        self._positive(key, "lr", "local_steps", "batch_size")


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
