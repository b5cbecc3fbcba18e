"""One client of Example 1 on its n-row data (numpy float64), for the sequential references of the
``ffgg_quadratic`` algorithms: gradients and constants written out from the definitions, one client
at a time, without the Grams the batched code uses."""

from __future__ import annotations

import numpy as np
import torch

from hetfl.problems.ffgg_quadratic import FFGGQuadratic, RawClient


class Client:
    """f(θ, w) = ½‖Hθ − b‖² + ½‖Aθ + Bw − y‖² of one client (Example 1)."""

    def __init__(self, raw: RawClient):
        self.H, self.b, self.A, self.B, self.y = raw.H, raw.b, raw.A, raw.B, raw.y
        self.d_theta = self.H.shape[1]

    def residual(self, theta: np.ndarray, w: np.ndarray) -> np.ndarray:
        return self.A @ theta + self.B @ w - self.y

    def grad_theta(self, theta: np.ndarray, w: np.ndarray) -> np.ndarray:
        """∇_1 f = Hᵀ(Hθ − b) + Aᵀ(Aθ + Bw − y)."""
        return self.H.T @ (self.H @ theta - self.b) + self.A.T @ self.residual(theta, w)

    def grad_w(self, theta: np.ndarray, w: np.ndarray) -> np.ndarray:
        """∇_2 f = Bᵀ(Aθ + Bw − y)."""
        return self.B.T @ self.residual(theta, w)

    def grad(self, x: np.ndarray) -> np.ndarray:
        """∇f at x = (θ, w)."""
        theta, w = x[: self.d_theta], x[self.d_theta :]
        return np.concatenate([self.grad_theta(theta, w), self.grad_w(theta, w)])

    def w_star(self, theta: np.ndarray) -> np.ndarray:
        """argmin_w f(θ, w): least squares of Bw ≈ y − Aθ."""
        return np.linalg.lstsq(self.B, self.y - self.A @ theta, rcond=None)[0]

    def F(self, theta: np.ndarray) -> np.ndarray:
        """F_m(θ) = ∇_1 f(θ, w^*(θ))."""
        return self.grad_theta(theta, self.w_star(theta))

    def projected_A(self) -> np.ndarray:
        """(I − BB^†)A."""
        return self.A - self.B @ (np.linalg.pinv(self.B) @ self.A)

    def joint_hessian(self) -> np.ndarray:
        """∇²f in (θ, w): [H A 0; 0 0 B]-style stacking [[H, 0], [A, B]]ᵀ[[H, 0], [A, B]]."""
        d_w = self.B.shape[1]
        top = np.concatenate([self.H, np.zeros((len(self.H), d_w))], 1)
        bottom = np.concatenate([self.A, self.B], 1)
        X = np.concatenate([top, bottom], 0)
        return X.T @ X


def clients(problem: FFGGQuadratic) -> list[Client]:
    """Every client of the problem, from its n-row data."""
    return [Client(problem.raw_client(m)) for m in range(problem.num_clients)]


def example1_L(cs: list[Client]) -> float:
    """L = 2·max_m max(λ_max(H_mᵀH_m), ‖A_mᵀ(I − B_mB_m^†)A_m‖_2) (Example 1), from the n-row data."""
    return 2 * max(
        max(np.linalg.eigvalsh(c.H.T @ c.H)[-1], np.linalg.norm(c.A.T @ c.projected_A(), 2)) for c in cs
    )


def L_w(cs: list[Client]) -> float:
    """max_m λ_max(B_mᵀB_m)."""
    return max(np.linalg.eigvalsh(c.B.T @ c.B)[-1] for c in cs)


def L_f(cs: list[Client]) -> float:
    """max_m λ_max of the joint Hessian."""
    return max(np.linalg.eigvalsh(c.joint_hessian())[-1] for c in cs)


def draw_w0(generator: torch.Generator, count: int, d_w: int, kind: str) -> np.ndarray:
    """The fine-tuners' starting points ``[count, d_w]``: the same draw as the batched code makes."""
    if kind == "zero":
        return np.zeros((count, d_w))
    return torch.randn(count, d_w, generator=generator, dtype=torch.float64).numpy()
