"""Figure 1 of All-for-one: clients with optima θ*_i = θ* + ξ_i around one centre, for the sufficient cluster.

Philippenko, Le Bars, Scaman, Massoulié, arXiv:2507.06844, 2025, Appendix A "Setting of Figure 1" and
Property 1 (docs/papers/all_for_one.md §3.2): N clients, R_i(θ) = (θ − θ*_i)ᵀ A_i (θ − θ*_i) with
A_i = P_iᵀ I P_i = I (so c_ik = 0), θ*_i = θ* + ξ_i, ξ_i ~ N(0, v² I_d). θ* ~ U(−r, r)^d (the code, r = 5).
The problem draws θ* and the standard normal directions z_i (ξ_i = v z_i): the heterogeneity v is the
algorithm's hyper-parameter (``sufficient_cluster_size``), so a grid over v reuses the same draws.
NumPy ``default_rng(seed)``: θ* first, then z ``[N, d]``; ``seed: null`` uses the run seed.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from hetfl.options import Options, option
from hetfl.problems.base import Problem


@dataclasses.dataclass(frozen=True)
class SufficientClusterOptions(Options):
    """``num_clients`` N (20), ``dimension`` d (10), ``center_range`` r (5.0), ``seed`` (null = run seed)."""

    num_clients: int = option(20, lo=0, lo_open=True)
    dimension: int = option(10, lo=0, lo_open=True)
    center_range: float = option(5.0, lo=0, lo_open=True)
    seed: int | None = option(None, lo=0)


class SufficientCluster(Problem):
    """The clients' quadratics, float64.

    Attributes:
        theta_star: θ* ``[d]``; z: ``[N, d]`` standard normal (ξ_i = v z_i);
        A: ``[N, d, d]`` the Hessians / 2 (identity); mu: ``[N]`` μ_i = 2 λ_min(A_i) = 2.
    """

    name = "sufficient_cluster"
    Options = SufficientClusterOptions

    def __init__(self, options, seed, device, dtype):
        super().__init__(options, seed, device, dtype)
        rng = np.random.default_rng(options.seed if options.seed is not None else seed)
        n, d, r = options.num_clients, options.dimension, options.center_range
        self.num_clients = n
        self.theta_star = torch.from_numpy(rng.uniform(-r, r, size=d))
        self.z = torch.from_numpy(rng.standard_normal((n, d)))
        self.A = torch.eye(d, dtype=torch.float64).expand(n, d, d).clone()
        self.mu = 2.0 * torch.linalg.eigvalsh(self.A)[:, 0]

    def heterogeneity(self, v: float) -> tuple[torch.Tensor, torch.Tensor]:
        """Property 1 bounds for ξ_i = v z_i: (b²_ik = 2‖A_k(ξ_i − ξ_k)‖², c_ik = 2‖I − A_k A_i⁻¹‖₂²), both ``[N, N]``."""
        xi = v * self.z
        diff = xi.unsqueeze(1) - xi.unsqueeze(0)  # ξ_i − ξ_k  [N, N, d]
        b_sq = 2.0 * torch.einsum("kde,ike->ikd", self.A, diff).pow(2).sum(2)
        eye = torch.eye(self.z.shape[1], dtype=torch.float64)
        gap = eye - torch.einsum("kde,ief->ikdf", self.A, torch.linalg.inv(self.A))  # I − A_k A_i⁻¹
        c = 2.0 * torch.linalg.matrix_norm(gap, ord=2).pow(2)
        return b_sq, c


PROBLEMS = {"sufficient_cluster": SufficientCluster}
