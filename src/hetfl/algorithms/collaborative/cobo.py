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
batched call (under a memory budget, blocks of pairs, each block's inner products taken before the next:
:func:`pair_blocks`) and the penalty a matrix product (Laplacian of w times the stacked models).

Its collaboration matrix (recorded at every weight update, for the weight figures) is w with w_ii = 1.
"""

from __future__ import annotations

import dataclasses
import math

import torch
from torch import Tensor

from hetfl.algorithms.collaborative.common import (
    CollaborativeAlgorithm,
    PairSampler,
    WeightEstimation,
    flatten,
    stacked_grads,
    unflatten,
)
from hetfl.engine.grad import drawn_grads, gather_batch
from hetfl.engine.memory import MemoryProfile
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

    def memory_profile(self) -> MemoryProfile:
        """Calls over N² rows: the weight update differentiates every ordered pair of clients
        (:func:`pair_blocks`)."""
        return dataclasses.replace(super().memory_profile(), pairs=True)

    def update_weights(self) -> None:
        """w_ik ← clip(w_ik + γ_C ⟨∇f_i(z_ik), ∇f_k(z_ik)⟩, 0, 1) for all pairs at once: the N² batches drawn at
        once, then the midpoints built and differentiated a block of pairs at a time (:func:`pair_blocks`: the
        pairs (i, k) and (k, i) of two blocks of clients, whose inner products need each other's gradients), each
        block's inner products taken before the next, so that one block's gradients are resident, never the N²."""
        fed, n = self.fed, self.fed.num_clients
        flat = flatten(self.theta)  # [N, D]
        pairs = torch.arange(n * n)  # pair i·N + k: θ_i on the data of k
        pos, mask = self.pair_sampler.next(pairs)
        owners, full = self.pair_sampler.owners(pairs), bool(mask.all())
        inner = torch.empty(n, n, dtype=torch.float64, device=fed.device)
        for first, second in pair_blocks(n, getattr(fed.model, "max_rows", None)):
            i, k = _pairs(first, second)
            index = i * n + k
            batch = gather_batch(fed, fed.train, owners[index], pos[index], mask[index], full)
            z = (flat[i.to(flat.device)] + flat[k.to(flat.device)]) / 2  # z_ik
            g = torch.empty(len(index), flat.shape[1], dtype=torch.float64, device=fed.device)
            stacked_grads(fed.model, unflatten(z, self.theta), batch, out=g)  # float64, as they come
            del z
            a, b = len(first), len(second)
            ik = g[: a * b].reshape(a, b, -1)  # ∇f_k(z_ik; B_k) of i ∈ first, k ∈ second
            ki = ik if first is second else g[a * b :].reshape(b, a, -1)  # ∇f_i(z_ki; B_i), z_ki = z_ik
            inner[first.unsqueeze(1), second] = _inner(ik, ki)
            if first is not second:
                inner[second.unsqueeze(1), first] = _inner(ki, ik)
            del g, ik, ki
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


def pair_blocks(n: int, max_rows: int | None) -> list[tuple[Tensor, Tensor]]:
    """The blocks of ordered pairs of N clients that the weight update differentiates at once: ``(first,
    second)`` clients ``LongTensor``, standing for the pairs (i, k) and (k, i), i ∈ first, k ∈ second (only
    the first where ``first is second``). Without a row limit (``max_rows`` None, or at least N²) one block,
    every pair in the order i·N + k; under one, the clients in the fewest near-equal blocks of m, 2m² ≤
    ``max_rows`` (m ≥ 1), and every block with itself and with each later one: every pair once."""
    clients = torch.arange(n)
    if max_rows is None or n * n <= max_rows:
        return [(clients, clients)]
    m = max(1, math.isqrt(max_rows // 2))
    count = -(-n // m)
    edges = [n * j // count for j in range(count + 1)]
    blocks = [clients[a:b] for a, b in zip(edges, edges[1:], strict=False)]
    return [(p, q) for x, p in enumerate(blocks) for q in blocks[x:]]


def _inner(ik: Tensor, ki: Tensor) -> Tensor:
    """``[a, b]``: ⟨ik[i, k], ki[k, i]⟩ of ``ik [a, b, D]`` and ``ki [b, a, D]``, each a sum over D of one
    output of a reduction with several outputs (computed alike for any number of them; a reduction with a
    single output may be split over threads), as the one call over the N² pairs computes it."""
    products = ik * ki.transpose(0, 1)
    if products.shape[0] * products.shape[1] > 1:
        return products.sum(2)
    return products.reshape(1, -1).expand(2, -1).sum(1)[:1].reshape(1, 1)


def _pairs(first: Tensor, second: Tensor) -> tuple[Tensor, Tensor]:
    """``(i, k)`` of the pairs of a block (:func:`pair_blocks`): (i, k), i ∈ first, k ∈ second, i-major, then
    (k, i) likewise unless ``first is second``."""
    i, k = first.repeat_interleave(len(second)), second.repeat(len(first))
    if first is second:
        return i, k
    return torch.cat([i, second.repeat_interleave(len(first))]), torch.cat([k, first.repeat(len(second))])


ALGORITHMS = {"cobo": CoBo}
