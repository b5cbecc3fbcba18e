"""All-for-one with the gradient-similarity collaboration criterion (binary and continuous rules).

Philippenko, Le Bars, Scaman, Massoulié, "Adaptive collaboration for online personalized distributed
learning with heterogeneous clients", arXiv:2507.06844, 2025: the update of §2 (All-for-one), the criterion
of §3 (similarity ratio), Definitions 1 and 3 (weights), §4 Eq. (1) (stochastic estimation), Table S1
(schedule). Notes: docs/papers/all_for_one.md §2.1–§2.8.

Every τ iterations (at iteration 0, τ, 2τ, ...), before the step (docs/papers/all_for_one.md §2.8):

    ĝ_ik = ∇ℓ(θ_i; B^α_ik), |B^α_ik| = b_α, fresh batches of client k      (N² gradients, one batched call)
    Z_i = ‖ĝ_ii‖²,  Z_ik = ‖ĝ_ii − ĝ_ik‖²                                     (Eq. 1, m = 1)
    r̂_ik = (1 − Z_ik / Z_i)_+   (1 if Z_ik = 0, so r̂_ii = 1; 0 if Z_i = 0 < Z_ik)
    binary:      a_ik = n_k 1{r̂_ik ≥ λ, r̂_ik > 0}      (φ_bin(x) = λ1{x ≥ λ}; φ(0) = 0, so λ = 0 means 0⁺)
    continuous:  a_ik = n_k r̂_ik                          (φ_cont(x) = x)
    normalized:  α_ik = a_ik / Σ_j a_ij                    (the code; Σ_k α_ik = 1)
    theory:      α_ik = a_ik / Σ_j n_j ψ(r̂_ij)/λ  = a_ik / Σ_j n_j r̂_ij 1{…} (binary), a_ik / Σ_j n_j r̂_ij² (continuous)
                 (Definition 1 with σ_k² = σ²/n_k, Remark 1; Σ_k α_ik = (σ_{i,ψ}/σ_{i,φ})² ≥ 1)

then every client steps θ_i ← θ_i − η Σ_k α_ik ∇ℓ(θ_i; B_ik) (``AllForOneBase``).

Paper vs official code (docs/papers/all_for_one.md §2.7, §5), as named options; defaults are the paper's
where it is explicit:

| option | default | alternative |
|---|---|---|
| ``ratio_numerator`` | ``squared``: Z_ik = ‖ĝ_ii − ĝ_ik‖² (Eq. 1) | ``norm``: ‖ĝ_ii − ĝ_ik‖ over ‖ĝ_ii‖² (the code) |
| ``lam`` λ | 0 (0⁺: r̂ > 0, the code; the paper gives no value) | any λ ∈ (0, 1] |
| ``weights`` | ``normalized`` (the code, and the experiments' "same η for all") | ``theory`` (Definition 1) |
| ``client_size`` n_k | ``batch``: equal batch sizes, n_k = 1 (Remark 1) | ``samples``: training-set sizes (the code) |

``b_alpha``: one gradient per pair on one batch of b_α samples (m = 1: "gave the best results", §4);
a b_α at least a client's size gives its full-data gradient. The estimation batches come from their own
per-pair streams (stream ``algorithm``), independent of the update batches.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import torch
from torch import Tensor

from hetfl.algorithms.collaborative.common import (
    AllForOneBase,
    PairSampler,
    WeightEstimation,
    client_sizes,
    repeat_rows,
    stacked_grads,
)
from hetfl.engine.grad import row_batches
from hetfl.engine.memory import MemoryProfile
from hetfl.errors import ConfigError
from hetfl.options import option


@dataclasses.dataclass(frozen=True)
class AllForOneHyperparameters(WeightEstimation):
    """``rule`` (binary | continuous), ``lam`` λ ∈ [0, 1] (binary only; 0 = 0⁺), ``weights`` (normalized |
    theory), ``client_size`` (batch | samples), ``ratio_numerator`` (squared | norm), ``b_alpha`` b_α,
    ``tau`` τ, and the shared training setting (``CollaborativeHyperparameters``)."""

    rule: Literal["binary", "continuous"] = "binary"
    lam: float = option(0.0, lo=0, hi=1)
    weights: Literal["normalized", "theory"] = "normalized"
    client_size: Literal["batch", "samples"] = "batch"
    ratio_numerator: Literal["squared", "norm"] = "squared"

    def check(self, key: str) -> None:
        super().check(key)
        if self.lam and self.rule != "binary":
            raise ConfigError(f"{key}.lam", "the threshold λ is only used with rule: binary")


def similarity_ratio(z_pair: Tensor, z_own: Tensor) -> Tensor:
    """r̂_ik = (1 − Z_ik / Z_i)_+ (paper §3 and §4, Eq. 1), with the code's conventions at zero.

    Args:
        z_pair: ``Tensor[N, N]``, Z_ik (≥ 0; Z_ii = 0).
        z_own: ``Tensor[N]``, Z_i (≥ 0).

    Returns:
        ``Tensor[N, N]`` in [0, 1]: 1 where Z_ik = 0 (so r̂_ii = 1), else 0 where Z_i = 0, else (1 − Z_ik/Z_i)_+.
    """
    den = z_own.unsqueeze(1)
    r = (1.0 - z_pair / torch.where(den > 0, den, torch.ones_like(den))).clamp_min(0.0)
    r = torch.where(den > 0, r, torch.zeros_like(r))
    return torch.where(z_pair == 0, torch.ones_like(r), r)


def collaboration_weights(ratio: Tensor, n: Tensor, rule: str, lam: float, weights: str) -> Tensor:
    """α from the similarity ratios (Definition 3 closed forms, Definition 1 with σ_k² = σ²/n_k).

    Args:
        ratio: ``Tensor[N, N]`` r̂_ik ∈ [0, 1] with r̂_ii = 1.
        n: ``Tensor[N]`` n_k > 0.
        rule: ``binary`` (φ_bin(x) = λ1{x ≥ λ}; λ = 0 means 0⁺) or ``continuous`` (φ(x) = x).
        lam: λ ∈ [0, 1].
        weights: ``normalized`` (rows sum to 1) or ``theory`` (Definition 1: rows sum to (σ_ψ/σ_φ)² ≥ 1).

    Returns:
        ``Tensor[N, N]`` α_ik ≥ 0, float64; a row whose weights would all vanish is e_i (the code's fallback).
    """
    r, n = ratio.double(), n.double().unsqueeze(0)
    if rule == "binary":
        phi = ((r >= lam) & (r > 0)).double()  # φ_bin / λ
        psi = r * phi  # ψ_bin / λ = x φ_bin(x) / λ
    else:
        phi, psi = r, r * r
    a = n * phi  # a_ik = n_k φ(r̂_ik)
    den = (a if weights == "normalized" else n * psi).sum(1, keepdim=True)
    alpha = torch.where(den > 0, a / den.clamp_min(torch.finfo(torch.float64).tiny), torch.zeros_like(a))
    empty = (alpha.sum(1) == 0).nonzero().squeeze(1)
    alpha[empty, empty] = 1.0
    return alpha


class AllForOne(AllForOneBase):
    """All-for-one with the similarity-ratio weights. State: ``theta [N, ...]``, ``alpha [N, N]``."""

    name = "all_for_one"
    Hyperparameters = AllForOneHyperparameters

    def __init__(self, fed, hp, seed, sampling="epoch"):
        super().__init__(fed, hp, seed, sampling)
        self.alpha_sampler = PairSampler(fed.train.sizes, hp.b_alpha, self.rng, sampling)
        self.n = client_sizes(fed, hp.client_size)

    def memory_profile(self) -> MemoryProfile:
        """Calls over N² rows: the similarity estimation differentiates every ordered pair of clients
        (:meth:`estimate`)."""
        return dataclasses.replace(super().memory_profile(), pairs=True)

    def update_weights(self) -> None:
        if self.iteration % self.hp.period() == 0:
            self.record(*self.estimate())

    def estimate(self) -> tuple[Tensor, Tensor]:
        """Fresh weights and ratios (both ``[N, N]``, float64) at the current models (Eq. 1, Definition 3).

        The N² batches are drawn at once (pair i·N + k: B^α_ik), then the gradients and the norms are
        computed for the pairs of a chunk of clients i at a time (``hetfl.engine.grad.row_batches`` with groups of
        N pairs): all N clients without a memory budget, else as many as the model's row limit takes N pairs
        each (at least one), so the N²×D gradients are never resident at once under a budget. Each pair's numbers are the same.
        """
        fed, n = self.fed, self.fed.num_clients
        z_own = torch.empty(n, dtype=torch.float64, device=fed.device)
        z_pair = torch.empty(n, n, dtype=torch.float64, device=fed.device)
        for s, batch in row_batches(fed, self.alpha_sampler, torch.arange(n * n), group=n):
            clients = torch.arange(s.start // n, s.stop // n)  # models i of the pairs (i, 0..N−1) in s
            theta = {k: v[clients[0] : clients[-1] + 1] for k, v in self.theta.items()}
            g = stacked_grads(fed.model, repeat_rows(theta, n), batch).double().reshape(len(clients), n, -1)
            own = g[torch.arange(len(clients)), clients]  # ĝ_ii [c, D]
            z_own[clients] = own.pow(2).sum(1)  # Z_i = ‖ĝ_ii‖²
            z_pair[clients] = (own.unsqueeze(1) - g).pow(2).sum(2)  # Z_ik = ‖ĝ_ii − ĝ_ik‖²
        if self.hp.ratio_numerator == "norm":
            z_pair = z_pair.sqrt()  # the code's un-squared numerator
        ratio = similarity_ratio(z_pair.cpu(), z_own.cpu())
        hp = self.hp
        return collaboration_weights(ratio, self.n, hp.rule, hp.lam, hp.weights), ratio


ALGORITHMS = {"all_for_one": AllForOne}
