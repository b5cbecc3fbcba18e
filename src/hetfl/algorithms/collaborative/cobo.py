"""CoBo: collaborative learning via bilevel optimization.

Hashemi, Karimireddy, Jaggi et al., "CoBo: Collaborative Learning via Bilevel Optimization", NeurIPS 2024
(https://arxiv.org/abs/2409.05539), Algorithm 1, as a baseline of Philippenko et al., arXiv:2507.06844, 2025
(docs/papers/all_for_one.md §2.9.5; the final code is not public and the work-in-progress code has indexing
bugs, so the choices below are this project's). Collaboration weights w_ik ∈ [0, 1] start at 1. Every τ
iterations, for every pair, at the midpoint z_ik = (θ_i + θ_k)/2 (fresh batches of b_α samples, stream
``algorithm``):

    w_ik ← clip(w_ik + γ_C ⟨∇f_i(z_ik; B_i), ∇f_k(z_ik; B_k)⟩, 0, 1)            (the upper-level step)

and every iteration each client steps on its own batch with the consensus penalty (the lower level):

    θ_i ← θ_i − η (∇f_i(θ_i; B_i) + ρ Σ_k w_ik (θ_i − θ_k))

as a step of its client optimizer (config/README.md: the penalized gradient is clipped, momentum kept
across rounds; the schedule scales η, not γ_C). γ_C = 0.01 (the paper's code: "as in the original
repository").
ρ: the work-in-progress code's ρ = 1/η makes η ρ Σ_k w_ik ≈ N − 1 > 1 and diverges with N = 20, so the
default is ρ = 1/(η N) (η ρ Σ_k w_ik < 1), configurable (``rho``). The N² midpoint gradients are one
batched call and the penalty a matrix product (Laplacian of w times the stacked models).

Its collaboration matrix (recorded at every weight update, for the weight figures) is w with w_ii = 1.
"""

from __future__ import annotations

import dataclasses

import torch

from hetfl.algorithms.collaborative.common import (
    CollaborativeAlgorithm,
    PairSampler,
    WeightEstimation,
    flatten,
    stacked_grads,
    unflatten,
)
from hetfl.engine.grad import drawn_grads, row_batches
from hetfl.engine.params import Params, rows


@dataclasses.dataclass(frozen=True)
class CoBoHyperparameters(WeightEstimation):
    """``gamma_c`` γ_C (0.01), ``rho`` ρ (null = 1/(η N)), ``b_alpha`` (midpoint batch), ``tau`` (weight period)."""

    gamma_c: float = 0.01
    rho: float | None = None

    def check(self, key: str) -> None:
        super().check(key)
        self._positive(key, "gamma_c", "rho", allow_zero=True)


class CoBo(CollaborativeAlgorithm):
    """CoBo. State: ``theta [N, ...]``, ``alpha`` = w ``[N, N]`` (float64, CPU)."""

    name = "cobo"
    Hyperparameters = CoBoHyperparameters
    weighted = True

    def __init__(self, fed, hp, seed, sampling="epoch"):
        super().__init__(fed, hp, seed, sampling)
        n = fed.num_clients
        self.theta = fed.states.stack(self.initial_model(), n, idle=False)
        self.opt = self.client_optimizer(self.theta)
        self.clients = fed.all_clients()
        self.pair_sampler = PairSampler(fed.train.sizes, hp.b_alpha, self.rng, sampling)
        self.rho = hp.rho if hp.rho is not None else 1.0 / (hp.lr * n)
        self.alpha = torch.ones(n, n, dtype=torch.float64)

    def update_weights(self) -> None:
        """w_ik ← clip(w_ik + γ_C ⟨∇f_i(z_ik), ∇f_k(z_ik)⟩, 0, 1) for all pairs at once (the N² batches drawn
        at once, the midpoints built and differentiated N pairs of a model at a time under a memory budget,
        ``hetfl.engine.grad.row_batches``)."""
        fed, n = self.fed, self.fed.num_clients
        flat = flatten(self.theta)  # [N, D]
        g = torch.empty(n * n, flat.shape[1], dtype=torch.float64, device=fed.device)  # pair i·N + k
        for s, batch in row_batches(fed, self.pair_sampler, torch.arange(n * n), group=n):  # data of k
            models = flat[s.start // n : s.stop // n]  # θ_i of the pairs (i, 0..N−1) in s
            z = (models.unsqueeze(1) + flat.unsqueeze(0)).reshape(s.stop - s.start, -1) / 2  # z_ik
            g[s] = stacked_grads(fed.model, unflatten(z, self.theta), batch)
        g = g.reshape(n, n, -1)
        inner = (g * g.transpose(0, 1)).sum(2)  # ⟨∇f_k(z_ik), ∇f_i(z_ki = z_ik)⟩
        w = (self.alpha + self.hp.gamma_c * inner.cpu()).clamp_(0.0, 1.0)
        w.fill_diagonal_(1.0)
        self.record(w)

    def step(self, t: int) -> None:
        if self.iteration % self.hp.period() == 0:
            self.update_weights()
        grads = drawn_grads(self.fed, self.sampler, self.clients, lambda s: rows(self.theta, s))
        w = self.alpha.clone().fill_diagonal_(0.0)
        laplacian = (torch.diag(w.sum(1)) - w).to(
            self.fed.device, self.fed.dtype
        )  # (Lθ)_i = Σ_k w_ik (θ_i − θ_k)
        penalty = unflatten(laplacian @ flatten(self.theta), self.theta)
        for k, g in grads.items():
            g.add_(penalty[k], alpha=self.rho)
        self.opt.step(self.theta, grads, self.lr_at(t))  # θ_i ← θ_i − η (∇f_i(θ_i) + ρ Σ_k w_ik (θ_i − θ_k))

    def eval_models(self) -> dict[str, Params]:
        return {"personal": self.theta}


ALGORITHMS = {"cobo": CoBo}
