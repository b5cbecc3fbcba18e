"""Local GD on the whole model: the non-personalized baseline of Section 5.2 (one shared w).

Khaled, Mishchenko, Richtárik, "Tighter theory for local SGD on identical and heterogeneous data",
AISTATS 2020 (full-gradient local steps); as set up in Mishchenko et al., TMLR 2025, §5.2 and the
notebooks' ``Local_SGD`` (docs/papers/ffgg.md §3.1).

    x = (θ, w) shared by all clients; x^0 = 0
    each round r: for every sampled client i:  x_i^{r,0} = x^r;  x_i^{r,k+1} = x_i^{r,k} − γ ∇f_i(x_i^{r,k}),  k < τ
                  x^{r+1} = (1/|S|) Σ_i x_i^{r,τ}                       (no server stepsize)

γ = 1/(L_f τ) (§5.2; ``lr`` sets it). The τ steps run in closed form on the quadratic f_i
(:class:`~hetfl.algorithms.quadratic.common.QuadraticGD`). Evaluated at the θ part of x, with the exact w_m^*(θ).
"""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor

from hetfl.algorithms.quadratic.common import (
    JointQuadratic,
    QuadraticAlgorithm,
    QuadraticGD,
    QuadraticHyperparameters,
    local_lr,
)
from hetfl.options import option


@dataclasses.dataclass(frozen=True)
class LocalGDHyperparameters(QuadraticHyperparameters):
    """``local_steps`` τ (10), ``lr`` γ (null: 1/(L_f τ)), ``clients_per_round`` S (null: all)."""

    local_steps: int = option(10, lo=0, lo_open=True)
    lr: float | None = option(None, lo=0, lo_open=True)


class LocalGD(QuadraticAlgorithm):
    """Local GD. State: x = (θ, w) ``[d_θ + d_w]``."""

    name = "local_gd"
    Hyperparameters = LocalGDHyperparameters

    def __init__(self, env, hp, seed, sampling="epoch"):
        super().__init__(env, hp, seed, sampling)
        self.f = JointQuadratic(env)
        self.lr = hp.lr or local_lr(env, hp.local_steps)
        self.gd = QuadraticGD(self.f.Q, self.lr)
        self.x = torch.zeros(env.d_theta + env.d_w, device=env.device, dtype=env.dtype)

    def round(self, t: int, sampled: Tensor) -> None:
        clients = None if len(sampled) == self.problem.num_clients else sampled.to(self.problem.device)
        local = self.gd(self.x, self.f.rows(clients), self.hp.local_steps, clients)  # τ steps from x^r
        self.x = local.mean(0)  # x^{r+1} = mean of the local models
        self.grad_evals += len(sampled) * self.hp.local_steps
        self.comm_rounds += 1

    def current_theta(self) -> Tensor:
        return self.x[: self.problem.d_theta]

    def state(self) -> dict[str, Tensor]:
        return {"x": self.x}


ALGORITHMS = {"local_gd": LocalGD}
