"""A toy generated problem and algorithm for testing problem studies: consensus of client targets.

Client i holds b_i ∈ R^d; f_i(x) = ½‖x − b_i‖². Gradient descent on the sampled clients' mean
converges to the mean of their targets.
"""

from __future__ import annotations

import dataclasses

import torch

from hetfl.algorithms.base import Algorithm
from hetfl.options import Options
from hetfl.problems.base import Problem


@dataclasses.dataclass(frozen=True)
class ToyOptions(Options):
    num_clients: int = 4
    dim: int = 3


class ToyProblem(Problem):
    name = "toy"
    Options = ToyOptions

    def __init__(self, options, seed, device, dtype):
        super().__init__(options, seed, device, dtype)
        self.num_clients = options.num_clients
        g = torch.Generator().manual_seed(seed)
        self.b = torch.randn(options.num_clients, options.dim, generator=g, dtype=torch.float64).to(
            device, dtype
        )


@dataclasses.dataclass(frozen=True)
class ToyGDOptions(Options):
    lr: float = 0.5
    clients_per_round: int | None = None


class ToyGD(Algorithm):
    name = "toy_gd"
    Hyperparameters = ToyGDOptions
    inputs = "toy"

    def __init__(self, env, hp, seed, sampling="epoch"):
        super().__init__(env, hp, seed, sampling)
        self.x = torch.zeros_like(env.b[0])

    @classmethod
    def metric_names(cls, hp=None):
        return ["dist_sq", "loss"]

    def round(self, t, sampled):
        self.x = self.x - self.hp.lr * (self.x - self.env.b[sampled].mean(0))

    def evaluate(self):
        dist = float(((self.x - self.env.b.mean(0)) ** 2).sum())
        per_client = 0.5 * ((self.x - self.env.b) ** 2).sum(1)
        return [("dist_sq", dist), ("loss", float(per_client.mean()))], [
            (i, "loss", float(v)) for i, v in enumerate(per_client)
        ]

    def finite(self):
        return bool(torch.isfinite(self.x).all())

    def state_dict(self):
        return {"x": self.x.cpu()}
