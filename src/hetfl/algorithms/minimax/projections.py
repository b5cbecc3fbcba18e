"""Euclidean projections onto the constraint sets Y of the minimax problems, batched over clients.

docs/papers/fedminimax.md §2.4, D3: Π_Y is applied after every local y-step and after the
server's y-step (the paper only says projections "can be easily" added).
"""

from __future__ import annotations

import torch
from torch import Tensor


def project_ball(y: Tensor, radius: float) -> Tensor:
    """Π onto {‖y_c‖₂ ≤ radius} for each row: ``y [C, ...]`` -> ``[C, ...]`` (a new tensor).

    Each client's whole perturbation (all trailing dimensions) is one vector: y ← y · min(1, r/‖y‖).
    """
    norms = y.reshape(y.shape[0], -1).norm(dim=1).clamp_min(torch.finfo(y.dtype).tiny)
    scale = (radius / norms).clamp(max=1.0)
    return y * scale.view(-1, *([1] * (y.dim() - 1)))


def project_simplex(y: Tensor) -> Tensor:
    """Π onto the probability simplex Δ_K = {y ≥ 0, Σ y = 1} for each row of ``y [C, K]``.

    The sort-based algorithm (Held, Wolfe, Crowder 1974; Duchi et al., ICML 2008, Fig. 1):
    u = sort(y) descending, ρ = max{j : u_j − (Σ_{i≤j} u_i − 1)/j > 0}, θ = (Σ_{i≤ρ} u_i − 1)/ρ,
    y ← max(y − θ, 0).
    """
    u = torch.sort(y, dim=1, descending=True).values
    css = u.cumsum(1) - 1.0
    j = torch.arange(1, y.shape[1] + 1, dtype=y.dtype, device=y.device)
    rho = (u - css / j > 0).sum(1, keepdim=True).clamp_min(1)  # ≥ 1 unless y holds NaN (then NaN out)
    theta = css.gather(1, rho - 1) / rho.to(y.dtype)
    return (y - theta).clamp_min(0.0)
