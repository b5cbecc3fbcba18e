"""Quadratic minimax games with a known saddle point (the analogue of Fig. 1 of Sharma et al. 2023).

Client i holds the strongly-convex-strongly-concave quadratic

    f_i(x, y) = ½ (x − u_i)ᵀ A_i (x − u_i) + xᵀ B y − ½ (y − v_i)ᵀ C_i (y − v_i),

with A_i, C_i symmetric, eigenvalues in [``mu``, ``smoothness``]; the coupling B is shared. For any
weights w (Σ w_i = 1) the saddle point of Σ_i w_i f_i solves the linear system

    Ā x + B y = Σ_i w_i A_i u_i,     Bᵀ x − C̄ y = −Σ_i w_i C_i v_i,     Ā = Σ w_i A_i, C̄ = Σ w_i C_i,

so both the true saddle point (w = p) and the surrogate's (the paper's w for Local SGDA, Theorem 1)
are exact. ``instance: figure1`` is the 2-client scalar game of this project's Fig. 1 pilot
(docs/papers/fedminimax.md §8, C1): A = B = C = 1, u = (2, −2), v = (−1, 1), p = (½, ½); its saddle point is
(0, 0), and with τ = (2, 5) Local SGDA's surrogate (w = (2/7, 5/7)) has its saddle at (−9/14, −3/14).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

import torch
from torch import Tensor

from hetfl.engine.rng import generator
from hetfl.errors import ConfigError
from hetfl.options import Options, option
from hetfl.problems.base import Problem


@dataclasses.dataclass(frozen=True)
class QuadraticGameOptions(Options):
    """``num_clients`` n (15), ``dim_x``/``dim_y`` (5), ``instance`` (``random`` | ``figure1``), spectrum
    [``mu``, ``smoothness``] of A_i and C_i (0.5, 2), ``coupling`` scale of B (1), ``heterogeneity`` σ_u of
    the optima u_i, v_i ~ N(0, σ_u² I) (1), ``noise`` σ of additive Gaussian gradient noise (0: exact),
    ``weights`` p_i (``uniform`` | ``lognormal``: p_i ∝ exp(z_i), z_i ~ N(0, 1)), ``init_scale``
    (x^(0) = y^(0) = init_scale · 1; 0), ``seed`` (null: the run seed draws the instance)."""

    num_clients: int = option(15, lo=0, lo_open=True)
    dim_x: int = option(5, lo=0, lo_open=True)
    dim_y: int = option(5, lo=0, lo_open=True)
    instance: Literal["random", "figure1"] = "random"
    mu: float = option(0.5, lo=0, lo_open=True)
    smoothness: float = 2.0
    coupling: float = option(1.0, lo=0)
    heterogeneity: float = option(1.0, lo=0)
    noise: float = option(0.0, lo=0)
    weights: Literal["uniform", "lognormal"] = "uniform"
    init_scale: float = 0.0
    seed: int | None = option(None, lo=0)

    def check(self, key: str) -> None:
        if self.smoothness < self.mu:
            raise ConfigError(f"{key}.smoothness", f"must be >= mu ({self.mu}), got {self.smoothness}")
        if self.instance == "figure1" and (self.num_clients, self.dim_x, self.dim_y) != (2, 1, 1):
            raise ConfigError(
                f"{key}.instance",
                "figure1 is the 2-client scalar game: set num_clients: 2, dim_x: 1, dim_y: 1",
            )


class QuadraticGame(Problem):
    """The game's data, on ``device`` in ``dtype``.

    Attributes:
        A: ``[n, d_x, d_x]``; B: ``[d_x, d_y]``; C: ``[n, d_y, d_y]``; u: ``[n, d_x]``; v: ``[n, d_y]``;
        weights: p, ``Tensor[n]`` float64 (CPU); x0: ``[1, d_x]``; y0: ``[1, d_y]``; noise: σ.
    """

    name = "quadratic_game"
    Options = QuadraticGameOptions

    def __init__(self, options, seed, device, dtype):
        super().__init__(options, seed, device, dtype)
        o = options
        self.num_clients, self.noise = o.num_clients, o.noise
        n, dx, dy = o.num_clients, o.dim_x, o.dim_y
        g = generator(seed if o.seed is None else o.seed, "init")
        if o.instance == "figure1":
            A, C, B = torch.ones(2, 1, 1), torch.ones(2, 1, 1), torch.ones(1, 1)
            u, v = torch.tensor([[2.0], [-2.0]]), torch.tensor([[-1.0], [1.0]])
        else:
            A, C = self._spd(n, dx, g), self._spd(n, dy, g)
            B = o.coupling * torch.randn(dx, dy, generator=g, dtype=torch.float64) / math.sqrt(max(dx, dy))
            u = o.heterogeneity * torch.randn(n, dx, generator=g, dtype=torch.float64)
            v = o.heterogeneity * torch.randn(n, dy, generator=g, dtype=torch.float64)
        if o.weights == "lognormal":
            p = torch.softmax(torch.randn(n, generator=g, dtype=torch.float64), 0)
        else:
            p = torch.full((n,), 1.0 / n, dtype=torch.float64)
        self.A64, self.B64, self.C64 = A.double(), B.double(), C.double()
        self.u64, self.v64 = u.double(), v.double()
        self.weights = p.double()
        to = {"device": device, "dtype": dtype}
        self.A, self.B, self.C, self.u, self.v = (t.to(**to) for t in (A, B, C, u, v))
        self.x0 = torch.full((1, dx), o.init_scale, **to)
        self.y0 = torch.full((1, dy), o.init_scale, **to)

    def _spd(self, n: int, d: int, g: torch.Generator) -> Tensor:
        """n random symmetric matrices Q diag(λ) Qᵀ, λ ~ U[mu, smoothness], Q Haar-random: ``[n, d, d]``."""
        q, r = torch.linalg.qr(torch.randn(n, d, d, generator=g, dtype=torch.float64))
        q = q * torch.sign(torch.diagonal(r, dim1=1, dim2=2)).unsqueeze(1)
        lam = self.options.mu + (self.options.smoothness - self.options.mu) * torch.rand(
            n, d, generator=g, dtype=torch.float64
        )
        return q @ torch.diag_embed(lam) @ q.transpose(1, 2)

    def grads(
        self, x: Tensor, y: Tensor, clients: Tensor, x_hat: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Exact ∇_x f_i(x_c, y_c) and ∇_y f_i(x̂ or x_c, y_c) of each row c's client ``clients[c]``.

        Args:
            x: ``[m, d_x]``; y: ``[m, d_y]``; clients: ``LongTensor[m]``; x_hat: ``[1, d_x]`` or None.

        Returns:
            ``(g_x [m, d_x], g_y [m, d_y])``: A_i(x − u_i) + B y and Bᵀ x̂ − C_i(y − v_i).
        """
        rows = clients.to(self.A.device)
        A, C = self.A.index_select(0, rows), self.C.index_select(0, rows)
        g_x = torch.einsum("mij,mj->mi", A, x - self.u.index_select(0, rows)) + y @ self.B.T
        xy = x if x_hat is None else x_hat.expand_as(x)
        g_y = xy @ self.B - torch.einsum("mij,mj->mi", C, y - self.v.index_select(0, rows))
        return g_x, g_y

    def saddle(self, w: Tensor) -> tuple[Tensor, Tensor]:
        """The saddle point of Σ_i w_i f_i, exactly (float64, CPU): ``(x* [1, d_x], y* [1, d_y])``."""
        w = w.double().cpu()
        A = torch.einsum("i,ijk->jk", w, self.A64)
        C = torch.einsum("i,ijk->jk", w, self.C64)
        rhs = torch.cat(
            [
                torch.einsum("i,ijk,ik->j", w, self.A64, self.u64),
                -torch.einsum("i,ijk,ik->j", w, self.C64, self.v64),
            ]
        )
        system = torch.cat([torch.cat([A, self.B64], 1), torch.cat([self.B64.T, -C], 1)], 0)
        z = torch.linalg.solve(system, rhs)
        dx = self.A64.shape[1]
        return z[:dx].unsqueeze(0), z[dx:].unsqueeze(0)


PROBLEMS = {"quadratic_game": QuadraticGame}
