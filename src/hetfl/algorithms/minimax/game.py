"""Generalized federated SGDA on a quadratic minimax game (``hetfl.problems.quadratic_game``).

The state is x ``[1, d_x]`` and y ``[1, d_y]``; client gradients are exact, plus Gaussian noise of
the problem's ``noise`` σ (drawn from the run's ``batches`` stream, the game's stand-in for
minibatches). Metrics: ``dist_saddle`` ‖(x, y) − (x*, y*)‖ to the saddle point of F = Σ_i p_i f_i,
``dist_surrogate`` to the saddle point of the surrogate F̃ = Σ_i w_i f_i that the paper predicts
for the algorithm (Theorems 1-2: w_i = p_i E‖ā_i‖₁/Σ_j p_j E‖ā_j‖₁ for Local SGDA, w = p for
Fed-Norm-SGDA), the first coordinates ``x_coord``, ``y_coord`` (Fig. 1's plane), ``tau_eff`` and
``client_steps``.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor

from hetfl.algorithms.base import Algorithm
from hetfl.algorithms.minimax.common import GeneralizedSGDA, SGDAHyperparameters
from hetfl.algorithms.minimax.local_work import LocalWork
from hetfl.engine.params import Params
from hetfl.engine.rng import generator

GAME_METRICS = ["dist_saddle", "dist_surrogate", "x_coord", "y_coord", "tau_eff", "client_steps"]


@dataclasses.dataclass(frozen=True)
class GameHyperparameters(SGDAHyperparameters):
    """As ``SGDAHyperparameters`` (τ in steps), with constant learning rates by default."""

    lr_milestones: list | None = dataclasses.field(default_factory=list)


class MinimaxGame(GeneralizedSGDA, Algorithm):
    """Base of the minimax algorithms on the quadratic game. State: ``x {"x": [1, d_x]}``, ``y [1, d_y]``."""

    inputs = "quadratic_game"

    def __init__(self, env, hp, seed, sampling="epoch"):
        super().__init__(env, hp, seed, sampling)
        self.game = env
        self.x = {"x": env.x0.clone()}
        self.y = env.y0.clone()
        self.p = env.weights
        self.work = LocalWork(
            torch.ones(env.num_clients, dtype=torch.long),
            hp.tau_min,
            hp.tau_max,
            hp.tau_draw,
            hp.tau_redraw,
            self.rng,
        )
        self.noise = generator(seed, "batches")
        self.saddle = torch.cat(env.saddle(self.p), 1)
        self.surrogate = torch.cat(env.saddle(self.surrogate_weights()), 1)

    @classmethod
    def metric_names(cls, hp=None) -> list[str]:
        return list(GAME_METRICS)

    def surrogate_weights(self) -> Tensor:
        """w of the surrogate F̃ = Σ w_i f_i this algorithm converges to (Eq. (2), Theorem 1): ``[n]``."""
        if self.normalized:
            return self.p
        w = self.p * self.work.expected_a_l1(self.hp.momentum)
        return w / w.sum()

    def client_grads(self, x: Params, y: Tensor, clients: Tensor) -> tuple[Params, Tensor]:
        x_hat = self.x_hat["x"] if self.plus else None
        g_x, g_y = self.game.grads(x["x"], y, clients, x_hat)
        if self.game.noise:
            g_x = g_x + self.game.noise * self._gaussian(g_x)
            g_y = g_y + self.game.noise * self._gaussian(g_y)
        return {"x": g_x}, g_y

    def _gaussian(self, like: Tensor) -> Tensor:
        return torch.randn(like.shape, generator=self.noise, dtype=torch.float64).to(like)

    def evaluate(self):
        z = torch.cat([self.x["x"], self.y], 1).double().cpu()
        rows = [
            ("dist_saddle", float((z - self.saddle).norm())),
            ("dist_surrogate", float((z - self.surrogate).norm())),
            ("x_coord", float(z[0, 0])),
            ("y_coord", float(z[0, self.x["x"].shape[1]])),
            ("tau_eff", self.tau_eff_last),
            ("client_steps", float(self.client_steps)),
        ]
        return rows, []

    def state_dict(self) -> dict[str, Tensor]:
        return {"x": self.x["x"].detach().cpu(), "y": self.y.detach().cpu()}
