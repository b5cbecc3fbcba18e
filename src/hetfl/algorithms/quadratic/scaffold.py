"""Scaffold on the whole model: a non-personalized baseline of Section 5.2 (one shared w).

Karimireddy, Kale, Mohri, Reddi, Stich, Suresh, "SCAFFOLD: Stochastic Controlled Averaging for Federated
Learning", ICML 2020, Algorithm 1 (full local gradients here); set up as in Mishchenko et al., TMLR 2025,
§5.2 (docs/papers/ffgg.md §3.2).

    server x = (θ, w), c; client control variates c_i; all zero at the start
    each round, for each sampled client i:
        y_i = x;  τ times: y_i ← y_i − η_l (∇f_i(y_i) − c_i + c)                  (Alg. 1, line 10)
        c_i^+ = ∇f_i(x)  (option I)  or  c_i − c + (x − y_i)/(τ η_l)  (option II)   (line 12)
        Δy_i = y_i − x,  Δc_i = c_i^+ − c_i,  c_i ← c_i^+                         (line 13)
    x ← x + η_g (1/|S|) Σ_{i∈S} Δy_i;   c ← c + (1/M) Σ_{i∈S} Δc_i             (lines 16–17)

η_g = 0.5 and η_l = 1/(L_f τ) (§5.2). Option I is the notebook's choice (the paper does not say). The notebook
has two bugs this module does not copy (docs/papers/ffgg.md §3.2): Δy is overwritten in its client loop, so
only the last client's Δy reaches the server, and c moves by (|S|/M)·Σ Δc_i (the sum, not the mean, when
|S| = M). The τ local steps run in closed form (:class:`~hetfl.algorithms.quadratic.common.QuadraticGD`).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

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
class ScaffoldHyperparameters(QuadraticHyperparameters):
    """``local_steps`` τ (10), ``lr`` η_l (null: 1/(L_f τ)), ``lr_global`` η_g (0.5), ``control_variate``
    (``option1`` | ``option2``), ``clients_per_round`` S (null: all)."""

    local_steps: int = option(10, lo=0, lo_open=True)
    lr: float | None = option(None, lo=0, lo_open=True)
    lr_global: float = option(0.5, lo=0, lo_open=True)
    control_variate: Literal["option1", "option2"] = "option1"


class Scaffold(QuadraticAlgorithm):
    """Scaffold. State: x ``[D]``, c ``[D]``, c_i ``[M, D]`` (D = d_θ + d_w)."""

    name = "scaffold"
    Hyperparameters = ScaffoldHyperparameters

    def __init__(self, env, hp, seed, sampling="epoch"):
        super().__init__(env, hp, seed, sampling)
        self.f = JointQuadratic(env)
        self.lr = hp.lr or local_lr(env, hp.local_steps)
        self.gd = QuadraticGD(self.f.Q, self.lr)
        D = env.d_theta + env.d_w
        self.x = torch.zeros(D, device=env.device, dtype=env.dtype)
        self.c = torch.zeros_like(self.x)
        self.c_i = torch.zeros(env.num_clients, D, device=env.device, dtype=env.dtype)

    def round(self, t: int, sampled: Tensor) -> None:
        hp, tau = self.hp, self.hp.local_steps
        rows = sampled.to(self.problem.device)
        clients = None if len(sampled) == self.problem.num_clients else rows
        c_i = self.c_i.index_select(0, rows)
        # line 10: y ← y − η_l (Q_i y − q_i − c_i + c), i.e. GD on ½yᵀQ_i y − (q_i + c_i − c)ᵀy
        y = self.gd(self.x, self.f.rows(clients) + c_i - self.c, tau, clients)
        if hp.control_variate == "option1":
            c_plus = self.f.grad(self.x, clients)  # line 12, option I: ∇f_i(x)
        else:
            c_plus = c_i - self.c + (self.x - y) / (tau * self.lr)  # option II
        self.c_i[rows] = c_plus  # line 13
        self.x = self.x + hp.lr_global * (y - self.x).mean(0)  # line 16
        self.c = self.c + (c_plus - c_i).sum(0) / self.problem.num_clients  # line 17
        self.grad_evals += len(sampled) * (tau + (hp.control_variate == "option1"))
        self.comm_rounds += 1

    def current_theta(self) -> Tensor:
        return self.x[: self.problem.d_theta]

    def state(self) -> dict[str, Tensor]:
        return {"x": self.x, "c": self.c, "c_i": self.c_i}


ALGORITHMS = {"scaffold": Scaffold}
