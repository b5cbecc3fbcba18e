"""Shared pieces of the algorithms on ``ffgg_quadratic``: base class and evaluation, batched solvers
for the w-subproblem (Algorithm 2's GD in closed form, conjugate gradients, the exact solve) and the
stepsize rules of the paper (docs/papers/ffgg.md §2.6, §3).

Everything is batched over clients: tensors ``[C, ...]`` for C clients, no Python loop over clients.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Literal

import numpy as np
import torch
from torch import Tensor

from hetfl.algorithms.base import Algorithm, ClientRows, Rows
from hetfl.errors import ConfigError
from hetfl.options import Options, option
from hetfl.problems.ffgg_quadratic import Clients, FFGGQuadratic, mv, take

METRICS = ["F_norm_sq", "F_norm", "theta_dist_sq", "loss", "grad_evals", "comm_rounds"]
"""Reported by every algorithm of the family (see :meth:`QuadraticAlgorithm.evaluate`)."""


@dataclasses.dataclass(frozen=True)
class QuadraticHyperparameters(Options):
    """``clients_per_round`` S (null = all M), drawn from the study's shared participation stream."""

    clients_per_round: int | None = option(None, lo=0, lo_open=True)

    def _exclusive(self, key: str, value: str, factor: str) -> None:
        """An explicit stepsize ``value`` and a ``factor`` of its rule cannot both be set."""
        if getattr(self, value) is not None and getattr(self, factor) != 1.0:
            raise ConfigError(
                f"{key}.{factor}", f"scales the rule of {value}: null; {value} is set explicitly"
            )


class QuadraticAlgorithm(Algorithm):
    """Base of the algorithms on ``ffgg_quadratic``.

    A subclass keeps its state in tensors, returns the current global θ ``[d_θ]`` from
    :meth:`current_theta` and counts its cost in ``self.grad_evals`` (gradient evaluations over all
    clients: one ∇_1 f_m, ∇_2 f_m or joint ∇f_m counts 1, one CG matrix-vector product with B_mᵀB_m
    counts 1) and ``self.comm_rounds`` (server updates of θ).
    """

    inputs: ClassVar[str] = "ffgg_quadratic"
    extra_metrics: ClassVar[tuple[str, ...]] = ()

    def __init__(self, env: FFGGQuadratic, hp, seed: int, sampling: str = "epoch"):
        super().__init__(env, hp, seed, sampling)
        self.problem = env
        self.grad_evals = 0
        self.comm_rounds = 0

    @classmethod
    def metric_names(cls, hp=None) -> list[str]:
        return METRICS + list(cls.extra_metrics)

    def current_theta(self) -> Tensor:
        """The global θ the server holds now: ``[d_θ]``."""
        return self.theta

    def state(self) -> dict[str, Tensor]:
        """Every state tensor (checked by :meth:`finite`, saved by :meth:`state_dict`)."""
        return {"theta": self.theta}

    def evaluate(self) -> tuple[Rows, ClientRows]:
        """‖F(θ)‖² and ‖F(θ)‖ with F = (1/M) Σ_m ∇_1 f_m(θ, w_m^*(θ)) (exact w^*), ‖θ − θ^*‖²,
        ``loss`` = (1/M) Σ_m f_m(θ, w_m^*(θ)), the cost counters; per client ‖F_m(θ)‖²."""
        theta = self.current_theta()
        F_m = self.problem.F_clients(theta)
        F = F_m.mean(0)
        F_sq = float((F * F).sum())
        rows = [
            ("F_norm_sq", F_sq),
            ("F_norm", F_sq**0.5),
            ("theta_dist_sq", float(((theta - self.problem.theta_star) ** 2).sum())),
            ("loss", float(self.problem.loss(theta))),
            ("grad_evals", float(self.grad_evals)),
            ("comm_rounds", float(self.comm_rounds)),
        ]
        per_client = (F_m * F_m).sum(1).tolist()
        return rows + self.extra_rows(), [(m, "F_norm_sq", v) for m, v in enumerate(per_client)]

    def extra_rows(self) -> Rows:
        """Rows of ``extra_metrics``."""
        return []

    def finite(self) -> bool:
        return bool(torch.stack([torch.isfinite(v).all() for v in self.state().values()]).all())

    def state_dict(self) -> dict[str, Tensor]:
        return {k: v.detach().cpu() for k, v in self.state().items()}


# ---- stepsize rules ---------------------------------------------------------------------------


def cocoercivity_L(problem: FFGGQuadratic, rule: str) -> float:
    """L of γ_θ = 1/L.

    ``paper``: L = 2·max_m max(λ_max(H_mᵀH_m), ‖A_mᵀ(I − B_mB_m^†)A_m‖_2), Example 1's cocoercivity
    constant (Theorem 1: γ_θ ≤ 1/L). ``code``: the notebooks' ``compute_L`` (Frobenius norm, last
    client, no factor 2; about L/2 here), see :attr:`FFGGQuadratic.constants`.
    """
    return problem.constants["L" if rule == "paper" else "L_code"]


# ---- solvers for the w-subproblem and for local steps ----------------------------------------


class QuadraticGD:
    """k steps of gradient descent x ← x − γ(K_m x − r_m) on ½xᵀK_m x − r_mᵀx, for a batch of clients,
    computed in closed form.

    With K_m = U_m Λ_m U_mᵀ (symmetric), the k-th iterate is exactly
    x_k = U_m[(1 − γλ)^k ⊙ U_mᵀx_0 + c_k(λ) ⊙ U_mᵀr_m], c_k(λ) = (1 − (1 − γλ)^k)/λ = γ Σ_{i<k} (1 − γλ)^i
    (c_k(0) = γk): the sum of the geometric series of the k steps, evaluated without cancellation
    (``-expm1(k·log1p(−γλ))/λ`` for γλ ≤ 1/2). It matches the k-step loop to rounding (tested against
    the per-client reference loops) at a cost independent of k; γλ > 2 diverges, as the loop does.

    Args:
        K: ``[M, d, d]`` symmetric (B_mᵀB_m for Algorithm 2, the joint Hessians Q_m for the baselines).
        lr: γ > 0.
    """

    def __init__(self, K: Tensor, lr: float):
        self.lam, self.U = torch.linalg.eigh(K)
        self.Ut = self.U.transpose(1, 2).contiguous()
        self.lr = float(lr)
        self._cached: tuple[int, Tensor, Tensor] | None = None

    def coefficients(self, steps: int, clients: Clients = None) -> tuple[Tensor, Tensor]:
        """((1 − γλ)^k, c_k(λ)), each ``[C, d]`` (the last ``steps`` is cached for all clients)."""
        if self._cached is None or self._cached[0] != steps:
            self._cached = (steps, *self._coefficients(steps))
        return take(self._cached[1], clients), take(self._cached[2], clients)

    def _coefficients(self, steps: int) -> tuple[Tensor, Tensor]:
        lam = self.lam
        x = self.lr * lam
        power = (1 - x) ** steps
        small = x <= 0.5  # 1 − (1 − x)^k cancels for small x: use −expm1(k·log1p(−x)) there
        one_minus = torch.where(small, -torch.expm1(steps * torch.log1p(-x.clamp(max=0.5))), 1 - power)
        nonzero = lam != 0
        coef = torch.where(nonzero, one_minus / torch.where(nonzero, lam, 1), self.lr * steps)
        return power, coef

    def __call__(self, x0: Tensor, r: Tensor, steps: int, clients: Clients = None) -> Tensor:
        """x_k from ``x0 [C, d]`` or ``[d]`` (shared) with ``r [C, d]``; ``clients``: rows of K (None: all)."""
        U, Ut = take(self.U, clients), take(self.Ut, clients)
        power, coef = self.coefficients(steps, clients)
        z = power * mv(Ut, x0) + coef * mv(Ut, r)
        return mv(U, z)


def conjugate_gradient(K: Tensor, rhs: Tensor, x0: Tensor, iters: int) -> Tensor:
    """``iters`` iterations of conjugate gradients on K_c x = rhs_c for every client c, batched.

    The iteration of SciPy's ``scipy.sparse.linalg.cg(K, rhs, x0, maxiter=iters, rtol=0, atol=0)``,
    which the paper uses (§5.1; docs/papers/ffgg.md §2.2: tolerance 0, so exactly ``iters`` iterations).
    A client whose residual or search direction is exactly 0 has converged and stays put (SciPy would
    divide by 0).
    On CPU the loop runs on numpy views of the tensors (numpy's small operations cost less than torch's).

    Args:
        K: ``[C, d, d]`` symmetric positive definite; rhs, x0: ``[C, d]``.

    Returns:
        ``[C, d]``. Cost: ``iters + 1`` products with K per client (the first is the initial residual).
    """
    if K.device.type == "cpu":
        return torch.from_numpy(_cg(np, K.numpy(), rhs.numpy(), x0.numpy(), iters))
    return _cg(torch, K, rhs, x0, iters)


def _cg(xp, K, rhs, x0, iters: int):
    """The CG loop on numpy arrays (``xp = np``) or tensors (``xp = torch``)."""

    def matvec(v):
        return xp.matmul(K, v[..., None])[..., 0]

    def dot(a, b):
        return (a * b).sum(1)[:, None]

    def ratio(num, den):  # num/den where den > 0, else 0 (a converged client)
        return xp.where(den > 0, num / xp.where(den > 0, den, 1), 0)

    x = x0 + 0
    r = rhs - matvec(x)
    p = r + 0
    rho = dot(r, r)
    for _ in range(iters):
        q = matvec(p)
        alpha = ratio(rho, dot(p, q))
        x += alpha * p
        r -= alpha * q
        rho_next = dot(r, r)
        p = r + ratio(rho_next, rho) * p
        rho = rho_next
    return x


FineTuners = Literal["gd", "cg", "exact"]
WInits = Literal["normal", "zero"]


class FineTuner:
    """w_m ≈ argmin_w f_m(θ, w) for a batch of clients: line 5 of Algorithm 1.

    ``gd``: Algorithm 2, τ steps w ← w − γ_w ∇_2 f_m(θ, w) (in closed form, :class:`QuadraticGD`);
    ``cg``: τ iterations of CG on B_mᵀB_m w = B_mᵀ(y_m − A_mθ) (§5.1, Figure 1a);
    ``exact``: w_m^*(θ) (the idealized method of Theorem 1; the notebooks' ``exact_comp=True``).
    The start w_m^{r,0} is drawn by the caller (``w_init``: ``normal`` N(0, I), as the paper's "initialize
    randomly" and the notebooks; ``zero``, as the theory of Appendix B, Remark 1).

    Args:
        problem: the quadratic problem; kind: ``gd`` | ``cg`` | ``exact``; tau: τ; lr_w: γ_w (``gd`` only).
    """

    def __init__(self, problem: FFGGQuadratic, kind: str, tau: int, lr_w: float | None):
        self.problem, self.kind, self.tau = problem, kind, tau
        self.gd = QuadraticGD(problem.BtB, lr_w) if kind == "gd" else None

    @property
    def needs_init(self) -> bool:
        """Whether the solver starts from w_m^{r,0} (all but ``exact``)."""
        return self.kind != "exact"

    @property
    def cost(self) -> int:
        """Gradient evaluations per client and call: τ (GD), τ + 1 (CG products with B_mᵀB_m), 0 (exact)."""
        return {"gd": self.tau, "cg": self.tau + 1, "exact": 0}[self.kind]

    def __call__(self, theta: Tensor, w0: Tensor | None, clients: Clients = None) -> Tensor:
        """w_m^r for ``clients [C]`` (None: all) at ``theta [d_θ]``, from ``w0 [C, d_w]``: ``[C, d_w]``."""
        rhs = self.problem.w_rhs(theta, clients)  # = −∇_2 f_m(θ, 0)
        if self.kind == "exact":
            return self.problem.w_star(theta, clients)
        if self.kind == "gd":
            return self.gd(w0, rhs, self.tau, clients)
        return conjugate_gradient(take(self.problem.BtB, clients), rhs, w0, self.tau)


class JointQuadratic:
    """f_m as a quadratic in x = (θ, w) ``[D]``, D = d_θ + d_w, for the baselines that train the whole
    model (one shared w for Local GD and Scaffold, a model per client for L2GD): ∇f_m(x) = Q_m x − q_m.

    Attributes:
        Q: ``[M, D, D]``; q: ``[M, D]``; d_theta: where θ ends in x.
    """

    def __init__(self, problem: FFGGQuadratic):
        self.Q, self.q = problem.joint()
        self.d_theta = problem.d_theta

    def grad(self, x: Tensor, clients: Clients = None) -> Tensor:
        """∇f_m(x) for ``x [D]`` (shared) or ``[C, D]``: ``[C, D]``."""
        return mv(take(self.Q, clients), x) - take(self.q, clients)

    def rows(self, clients: Clients) -> Tensor:
        """q_m of ``clients`` (None: all): ``[C, D]``."""
        return take(self.q, clients)


def local_lr(problem: FFGGQuadratic, tau: int) -> float:
    """1/(L_f τ), the local stepsize of Local GD and Scaffold in Section 5.2 (L_f: smoothness of f_m in (θ, w))."""
    return 1.0 / (problem.L_f * tau)


def initial_w(generator: torch.Generator, clients: int, problem: FFGGQuadratic, kind: str) -> Tensor:
    """w_m^{r,0} for ``clients`` clients: ``[clients, d_w]``, N(0, I) drawn from ``generator`` (``normal``)
    or zeros (``zero``). The draw is one ``torch.randn`` call in float64 on CPU, so it is the same on
    every device and dtype."""
    if kind == "zero":
        return torch.zeros(clients, problem.d_w, device=problem.device, dtype=problem.dtype)
    w = torch.randn(clients, problem.d_w, generator=generator, dtype=torch.float64)
    return w.to(device=problem.device, dtype=problem.dtype)
