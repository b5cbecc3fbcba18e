"""FFGG (Algorithm 1), sequential reference: one client after the other on its n-row data.

Fine-tuners: Algorithm 2 as a loop of τ GD steps; CG by ``scipy.sparse.linalg.cg`` (the paper's
choice, §5.1) on the operator v ↦ Bᵀ(Bv); the exact w^* by least squares. Stepsizes recomputed
from the n-row data (γ_θ = 1/L of Example 1, γ_w = 1/L_w) unless given.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse.linalg import LinearOperator, cg
from torch import Tensor

from hetfl.engine.rng import generator
from hetfl.problems.ffgg_quadratic import FFGGQuadratic
from hetfl.reference.quadratic_client import L_w, clients, draw_w0, example1_L


def fine_tune(
    client, theta: np.ndarray, w0: np.ndarray | None, kind: str, tau: int, lr_w: float
) -> np.ndarray:
    """w ≈ argmin_w f(θ, w) for one client."""
    if kind == "exact":
        return client.w_star(theta)
    if kind == "gd":
        w = w0.copy()
        for _ in range(tau):  # Algorithm 2, lines 2–4
            w = w - lr_w * client.grad_w(theta, w)
        return w
    B = client.B
    op = LinearOperator((B.shape[1], B.shape[1]), matvec=lambda v: B.T @ (B @ v), dtype=np.float64)
    w, _ = cg(op, B.T @ (client.y - client.A @ theta), x0=w0.copy(), maxiter=tau, rtol=0.0, atol=0.0)
    return w


def ffgg_directions(cs, theta, sampled: list[int], hp, rng, lr_w: float) -> np.ndarray:
    """Δ_m = ∇_1 f_m(θ, w_m) of the sampled clients, in order: ``[S, d_θ]``."""
    w0 = None if hp.fine_tuner == "exact" else draw_w0(rng, len(sampled), cs[0].B.shape[1], hp.w_init)
    deltas = []
    for row, m in enumerate(sampled):
        w = fine_tune(cs[m], theta, None if w0 is None else w0[row], hp.fine_tuner, hp.local_steps, lr_w)
        deltas.append(cs[m].grad_theta(theta, w))
    return np.array(deltas)


def stepsizes(cs, hp) -> tuple[float, float]:
    """(γ_θ, γ_w) with the paper's rules (``L_rule: paper``)."""
    lr_theta = hp.lr_theta or hp.lr_theta_factor / example1_L(cs)
    lr_w = hp.lr_w or hp.lr_w_factor / L_w(cs)
    return lr_theta, lr_w


def ffgg(problem: FFGGQuadratic, hp, seed: int, schedule: Tensor):
    """Yield θ ``[d_θ]`` after each round (``hp``: ``FFGGHyperparameters``, ``schedule [T, S]``)."""
    cs = clients(problem)
    rng = generator(seed, "algorithm")
    lr_theta, lr_w = stepsizes(cs, hp)
    theta = np.zeros(problem.d_theta)
    for sampled in schedule.tolist():
        deltas = ffgg_directions(cs, theta, sampled, hp, rng, lr_w)
        theta = theta - lr_theta * deltas.mean(0)
        yield theta
