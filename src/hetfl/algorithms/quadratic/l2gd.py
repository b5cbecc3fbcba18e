"""L2GD: Loopless Local GD for the mixture of global and local models (fully personalized baseline, §5.2).

Hanzely, Richtárik, "Federated Learning of a Mixture of Global and Local Models", arXiv:2002.05516, 2020,
Algorithm 1 (L2GD, full gradients); set up as in Mishchenko et al., TMLR 2025, §5.2 and the notebooks'
``Mixture`` (docs/papers/ffgg.md §3.3). It solves min Σ_i f_i(x_i) + (λ/2) Σ_i ‖x_i − x̄‖², a different
problem, so θ̄ does not reach θ^*.

    every client i keeps x_i = (θ_i, w_i), x_i^0 = 0
    each iteration: ξ ~ Bernoulli(p)
        ξ = 0: x_i ← x_i − α/(M(1 − p)) ∇f_i(x_i)                   (local step, all clients)
        ξ = 1: x̄ = mean_i x_i;  x_i ← (1 − αλ/(Mp)) x_i + αλ/(Mp) x̄      (averaging)

λ = 0.1 and p = 1/τ (``local_steps`` τ: about τ − 1 local steps between communications). Stepsize
(``stepsize_rule``): the paper prints α = (2M)^{-1} max{L/(1−p), λ/p} (``literal``), which grows with L
and diverges here (docs/papers/ffgg.md §3.3); the default ``theory`` is L2GD's own α = 1/(2L_F) with
L_F = max{L/(1−p), λ/p}/M, i.e. α = M/(2 max{L/(1−p), λ/p}); L = L_f. ``lr`` sets α explicitly.

One round here is one communication: the ξ = 0 steps since the last averaging, then the run of
ξ = 1 (consecutive averagings need no new communication, since averaging keeps x̄; Hanzely &
Richtárik count a communication when ξ_k = 1 and ξ_{k−1} = 0). The coin flips are drawn as run
lengths, from two uniforms U_1, U_2 of the algorithm stream per round: k = ⌊log(1−U_1)/log(1−p)⌋ zeros
before the first 1 (plus the 0 that ended the previous round's run, from round 2 on) and
j = ⌊log(1−U_2)/log p⌋ further ones — the coin sequence in distribution. ``iterations`` counts the coin
flips; the local steps run in closed form. Evaluated at θ̄ = mean_i θ_i (the notebook).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

import torch
from torch import Tensor

from hetfl.algorithms.quadratic.common import JointQuadratic, QuadraticAlgorithm, QuadraticGD
from hetfl.errors import ConfigError
from hetfl.options import Options, option


@dataclasses.dataclass(frozen=True)
class L2GDHyperparameters(Options):
    """``local_steps`` τ (p = 1/τ, τ ≥ 2; 10), ``lam`` λ (0.1), ``lr`` α (null: ``stepsize_rule``),
    ``stepsize_rule`` (``theory`` | ``literal``). Every client takes part in every iteration."""

    local_steps: int = 10
    lam: float = option(0.1, lo=0, lo_open=True)
    lr: float | None = option(None, lo=0, lo_open=True)
    stepsize_rule: Literal["theory", "literal"] = "theory"

    def check(self, key: str) -> None:
        if self.local_steps < 2:
            raise ConfigError(f"{key}.local_steps", f"L2GD needs τ ≥ 2 (p = 1/τ < 1), got {self.local_steps}")


def l2gd_stepsize(L: float, lam: float, p: float, M: int, rule: str) -> float:
    """α of §5.2: ``theory`` M/(2 max{L/(1−p), λ/p}); ``literal`` max{L/(1−p), λ/p}/(2M)."""
    big = max(L / (1 - p), lam / p)
    return M / (2 * big) if rule == "theory" else big / (2 * M)


class L2GD(QuadraticAlgorithm):
    """L2GD. State: x_i = (θ_i, w_i) ``[M, D]``."""

    name = "l2gd"
    Hyperparameters = L2GDHyperparameters
    extra_metrics = ("iterations",)

    def __init__(self, env, hp, seed, sampling="epoch"):
        super().__init__(env, hp, seed, sampling)
        M = env.num_clients
        self.p = 1.0 / hp.local_steps
        self.alpha = hp.lr or l2gd_stepsize(env.L_f, hp.lam, self.p, M, hp.stepsize_rule)
        self.f = JointQuadratic(env)
        self.gd = QuadraticGD(self.f.Q, self.alpha / (M * (1 - self.p)))  # ξ = 0 step
        self.mix = self.alpha * hp.lam / (M * self.p)  # ξ = 1 weight αλ/(Mp)
        self.x = torch.zeros(M, env.d_theta + env.d_w, device=env.device, dtype=env.dtype)
        self.iterations = 0

    def coins(self, t: int) -> tuple[int, int]:
        """(ξ = 0 flips, ξ = 1 flips) of communication round ``t``."""
        u = torch.rand(2, generator=self.rng, dtype=torch.float64).tolist()
        zeros = math.floor(math.log1p(-u[0]) / math.log1p(-self.p)) + (t > 1)
        ones = 1 + math.floor(math.log1p(-u[1]) / math.log(self.p))
        return zeros, ones

    def round(self, t: int, sampled: Tensor) -> None:
        zeros, ones = self.coins(t)
        if zeros:
            self.x = self.gd(self.x, self.f.q, zeros)  # ξ = 0, `zeros` times
        mean = self.x.mean(0, keepdim=True)
        self.x = mean + (1 - self.mix) ** ones * (self.x - mean)  # ξ = 1, `ones` times (x̄ is kept)
        self.iterations += zeros + ones
        self.grad_evals += self.problem.num_clients * zeros
        self.comm_rounds += 1

    def current_theta(self) -> Tensor:
        return self.x[:, : self.problem.d_theta].mean(0)  # θ̄

    def extra_rows(self):
        return [("iterations", float(self.iterations))]

    def state(self) -> dict[str, Tensor]:
        return {"x": self.x}


ALGORITHMS = {"l2gd": L2GD}
