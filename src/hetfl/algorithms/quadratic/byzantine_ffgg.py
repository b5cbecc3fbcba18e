"""BR-FFGG: Byzantine-robust FFGG (Algorithm 5) with sign-flipping attackers.

Mishchenko et al., TMLR 2025, Appendix D (Algorithm 5) and Appendix E.3 (Figure 4); the official
Byzantine notebook; docs/papers/ffgg.md §2.5, §4.5. Robust aggregation: Chen, Su, Xu 2017
(coordinate-wise median); Karimireddy, He, Jaggi, ICLR 2022 (bucketing).

    for r = 0, 1, ...:
        each good m ∈ 𝒢 sends g_m(θ^r) = ∇_1 f_m(θ^r, w_m^r)           (line 5; exact w_m^* in E.3)
        each Byzantine sends anything                                    (line 7)
        θ^{r+1} = θ^r − γ_θ · ARAgg(g_1, …, g_{G+B})                     (line 8)

The problem's clients are the G good ones (F is their mean). The B Byzantines (``byzantine``; 10 with
G = 32 in E.3, "≈ 25 %" of 42) flip the sign of a good client's update: as in the notebook, they draw
B distinct good clients among those sampled this round (a fresh permutation when B > S) and send
−g_m. Aggregators (``aggregator``): ``mean`` (plain averaging, not robust) and ``cm``, the coordinate-
wise median of bucket means: the G + B vectors are randomly permuted, averaged in consecutive buckets
of ``bucket_size`` s (the last may be smaller; s = 1 is the plain coordinate-wise median), and the
median is taken per coordinate (the mean of the two middle values for an even count, like
``np.median``). E.3 uses ``cm`` with s = 2 and exact fine-tuning. The clean run is ``byzantine: 0,
aggregator: mean`` (plain FFGG).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import torch
from torch import Tensor

from hetfl.algorithms.quadratic.ffgg import FFGG, FFGGHyperparameters
from hetfl.options import option


@dataclasses.dataclass(frozen=True)
class ByzantineFFGGHyperparameters(FFGGHyperparameters):
    """FFGG's hyper-parameters plus ``byzantine`` B (10), ``aggregator`` (``cm`` | ``mean``), ``bucket_size`` s (2)."""

    byzantine: int = option(10, lo=0)
    aggregator: Literal["cm", "mean"] = "cm"
    bucket_size: int = option(2, lo=0, lo_open=True)


def sign_flip(deltas: Tensor, byzantine: int, generator: torch.Generator) -> Tensor:
    """The Byzantines' vectors ``[B, d]``: −``deltas[i]`` for B distinct rows i of ``deltas [S, d]``
    (uniform, from ``generator``; successive permutations of the S rows when B > S)."""
    S = len(deltas)
    rows = torch.cat([torch.randperm(S, generator=generator) for _ in range(-(-byzantine // S))])[:byzantine]
    return -deltas.index_select(0, rows.to(deltas.device))


def bucketed_median(vectors: Tensor, bucket_size: int, generator: torch.Generator) -> Tensor:
    """Coordinate-wise median of the means of random buckets (Karimireddy et al. 2022, Algorithm 1).

    Args:
        vectors: ``[n, d]``; bucket_size: s ≥ 1; generator: draws the permutation (one ``randperm(n)``).

    Returns:
        ``[d]``: the coordinate-wise median of the ⌈n/s⌉ bucket means (even count: mean of the middle two).
    """
    n = len(vectors)
    shuffled = vectors.index_select(0, torch.randperm(n, generator=generator).to(vectors.device))
    full = n // bucket_size * bucket_size
    means = shuffled[:full].reshape(-1, bucket_size, vectors.shape[1]).mean(1)
    if full < n:
        means = torch.cat([means, shuffled[full:].mean(0, keepdim=True)])
    return torch.quantile(means, 0.5, dim=0)


class ByzantineFFGG(FFGG):
    """BR-FFGG (Algorithm 5); state θ ``[d_θ]``. Only the good clients' gradients count in ``grad_evals``."""

    name = "ffgg_byzantine"
    Hyperparameters = ByzantineFFGGHyperparameters

    def aggregate(self, deltas: Tensor) -> Tensor:
        """ARAgg of the S good updates ``deltas [S, d_θ]`` and the B Byzantine ones: ``[d_θ]``."""
        hp = self.hp
        if hp.byzantine:
            deltas = torch.cat([deltas, sign_flip(deltas, hp.byzantine, self.rng)])  # line 7
        if hp.aggregator == "mean":
            return deltas.mean(0)
        return bucketed_median(deltas, hp.bucket_size, self.rng)


ALGORITHMS = {"ffgg_byzantine": ByzantineFFGG}
