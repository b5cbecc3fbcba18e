"""The size of the sufficient cluster N_i^⋆(ε) against the precision ε (All-for-one, Figure 1).

Philippenko, Le Bars, Scaman, Massoulié, arXiv:2507.06844, 2025, Definition 2 with Property 1 injected
(Appendix A, "Setting of Figure 1"; docs/papers/all_for_one.md §3.2): for client i and precision ε,

    x_ik(ε) = (1 − b_ik² / (2 μ_i ε) − c_ik)_+,     N_i^⋆(ε) = #{k : ψ(x_ik(ε)) > 0},

with φ_bin(x) = λ1{x ≥ λ}, ψ(x) = x φ(x): k counts when x_ik ≥ λ and x_ik > 0 (λ = 0: 0⁺, the code's
"λ ≤ 1 − …" with λ = 0 up to the equality case). Definition 2 reads b_ik where the proof of Lemma 2 and
the code use b_ik² (docs/papers/all_for_one.md §9, item 12): ``b_form: squared`` (default) or ``linear``.
A pure computation: "round" t evaluates the t-th precision of the grid
log10 ε_t = ``log10_eps_start`` + t · ``log10_eps_step``, so the figure is ``x: log10_eps``. Metrics:
``log10_eps``, ``cluster_size`` (client ``client``'s, the paper's; per client in the client table) and
``mean_cluster_size`` (the mean over clients, less dependent on one draw).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import torch

from hetfl.algorithms.base import Algorithm
from hetfl.options import Options, option


@dataclasses.dataclass(frozen=True)
class SufficientClusterSizeHyperparameters(Options):
    """``v`` (heterogeneity: ξ_i ~ N(0, v² I)), ``client`` i (0: the paper's client 1), ``lam`` λ ∈ [0, 1],
    ``b_form`` (squared | linear), ``log10_eps_start`` (−5), ``log10_eps_step`` (1)."""

    v: float = option(1.0, lo=0, lo_open=True)
    client: int = option(0, lo=0)
    lam: float = option(0.0, lo=0, hi=1)
    b_form: Literal["squared", "linear"] = "squared"
    log10_eps_start: float = -5.0
    log10_eps_step: float = option(1.0, lo=0, lo_open=True)


def sufficient_cluster(
    b_sq: torch.Tensor, c: torch.Tensor, mu: torch.Tensor, eps: float, lam: float, b_form: str
):
    """N_i^⋆(ε) for every client: ``LongTensor[N]`` (Definition 2, binary φ; ``b_sq``, ``c``: ``[N, N]``, ``mu``: ``[N]``)."""
    b = b_sq if b_form == "squared" else b_sq.sqrt()
    x = (1.0 - b / (2.0 * mu.unsqueeze(1) * eps) - c).clamp_min(0.0)
    return ((x >= lam) & (x > 0)).sum(1)


class SufficientClusterSize(Algorithm):
    """Evaluates N_i^⋆(ε_t) at round t; no training."""

    name = "sufficient_cluster_size"
    Hyperparameters = SufficientClusterSizeHyperparameters
    inputs = "sufficient_cluster"

    def __init__(self, env, hp, seed, sampling="epoch"):
        super().__init__(env, hp, seed, sampling)
        if hp.client >= env.num_clients:
            raise ValueError(f"client {hp.client} does not exist: the problem has {env.num_clients} clients")
        self.b_sq, self.c = env.heterogeneity(hp.v)
        self.t = 0

    @classmethod
    def metric_names(cls, hp=None) -> list[str]:
        return ["log10_eps", "cluster_size", "mean_cluster_size"]

    def round(self, t, sampled) -> None:
        self.t = t

    def evaluate(self):
        log_eps = self.hp.log10_eps_start + self.t * self.hp.log10_eps_step
        sizes = sufficient_cluster(self.b_sq, self.c, self.env.mu, 10.0**log_eps, self.hp.lam, self.hp.b_form)
        rows = [
            ("log10_eps", log_eps),
            ("cluster_size", float(sizes[self.hp.client])),
            ("mean_cluster_size", float(sizes.double().mean())),
        ]
        return rows, [(i, "cluster_size", float(s)) for i, s in enumerate(sizes)]

    def finite(self) -> bool:
        return True

    def state_dict(self):
        return {"b_sq": self.b_sq, "c": self.c}


ALGORITHMS = {"sufficient_cluster_size": SufficientClusterSize}
