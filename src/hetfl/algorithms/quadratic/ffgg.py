"""FFGG: Fine-tuning Followed by Global Gradient (Algorithm 1), with the GD (Algorithm 2), CG or exact fine-tuner.

Mishchenko, Islamov, Gorbunov, Horváth, "Partially Personalized Federated Learning: Breaking the Curse
of Data Heterogeneity", TMLR 2025, Algorithm 1 (arXiv:2305.18285); docs/papers/ffgg.md §2.1–2.2.

    Input: θ^0, γ_θ > 0
    for r = 0, 1, 2, ...:
        sample a batch of clients C^r                                    (line 2)
        for m ∈ C^r in parallel:
            w_m^{r,0} random; w_m^r ≈ argmin_w f_m(θ^r, w)               (line 4; Algorithm 2, CG, or exact)
            Δ_m^r = ∇_1 f_m(θ^r, w_m^r)                                   (line 5)
        θ^{r+1} = θ^r − γ_θ (1/|C^r|) Σ_{m∈C^r} Δ_m^r                     (line 7 TMLR, line 8 arXiv)

Clients are stateless: w is redrawn every round (N(0, I), ``w_init``). θ^0 = 0 (the notebooks). Stepsizes
(docs/papers/ffgg.md §2.6): γ_θ = 1/L with Example 1's L = 2·max(L_φ, L̂) (Theorem 1; ``L_rule: code`` takes
the notebooks' ``compute_L``, about L/2 here), γ_w = 1/L_w (eq. 7). ``lr_theta``/``lr_w`` set them explicitly;
``lr_theta_factor``/``lr_w_factor`` scale the rules (Appendix E.2 tunes ×{0.25, …, 4}). Figure 1a uses
``fine_tuner: cg`` (τ CG iterations, tolerance 0), Figures 1b–d and 2 ``gd``.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import torch
from torch import Tensor

from hetfl.algorithms.quadratic.common import (
    FineTuner,
    FineTuners,
    QuadraticAlgorithm,
    QuadraticHyperparameters,
    WInits,
    cocoercivity_L,
    initial_w,
)
from hetfl.options import option


@dataclasses.dataclass(frozen=True)
class FFGGHyperparameters(QuadraticHyperparameters):
    """``local_steps`` τ (GD steps or CG iterations; 10), ``fine_tuner`` (``gd`` | ``cg`` | ``exact``),
    ``lr_theta`` γ_θ (null: ``lr_theta_factor``/L), ``lr_w`` γ_w (null: ``lr_w_factor``/L_w), ``w_init``
    (``normal`` | ``zero``), ``L_rule`` (``paper`` | ``code``), ``clients_per_round`` S (null: all)."""

    local_steps: int = option(10, lo=0, lo_open=True)
    fine_tuner: FineTuners = "gd"
    lr_theta: float | None = option(None, lo=0, lo_open=True)
    lr_theta_factor: float = option(1.0, lo=0, lo_open=True)
    lr_w: float | None = option(None, lo=0, lo_open=True)
    lr_w_factor: float = option(1.0, lo=0, lo_open=True)
    w_init: WInits = "normal"
    L_rule: Literal["paper", "code"] = "paper"

    def check(self, key: str) -> None:
        super().check(key)
        self._exclusive(key, "lr_theta", "lr_theta_factor")
        self._exclusive(key, "lr_w", "lr_w_factor")


class FFGG(QuadraticAlgorithm):
    """FFGG (Algorithm 1). State: θ ``[d_θ]``.

    Attributes:
        lr_theta: γ_θ; lr_w: γ_w (used by ``gd``); fine_tune: the :class:`FineTuner`.
    """

    name = "ffgg"
    Hyperparameters = FFGGHyperparameters

    def __init__(self, env, hp, seed, sampling="epoch"):
        super().__init__(env, hp, seed, sampling)
        c = env.constants
        self.lr_theta = hp.lr_theta or hp.lr_theta_factor / cocoercivity_L(env, hp.L_rule)
        self.lr_w = hp.lr_w or hp.lr_w_factor / c["L_w"]
        self.fine_tune = FineTuner(env, hp.fine_tuner, hp.local_steps, self.lr_w)
        self.theta = torch.zeros(env.d_theta, device=env.device, dtype=env.dtype)  # θ^0 = 0

    def clients_of(self, sampled: Tensor) -> Tensor | None:
        """The sampled clients on the problem's device, or None when all M take part (no row copies)."""
        if len(sampled) == self.problem.num_clients:
            return None
        return sampled.to(self.problem.device)

    def directions(self, theta: Tensor, clients: Tensor | None, count: int) -> Tensor:
        """Δ_m = ∇_1 f_m(θ, w_m) after fine-tuning from a fresh w_m^0, for ``count`` clients: ``[count, d_θ]``."""
        w0 = initial_w(self.rng, count, self.problem, self.hp.w_init) if self.fine_tune.needs_init else None
        w = self.fine_tune(theta, w0, clients)  # line 4: w_m^r ≈ argmin_w f_m(θ^r, w)
        self.grad_evals += count * (self.fine_tune.cost + 1)
        return self.problem.grad_theta(theta, w, clients)  # line 5: Δ_m^r = ∇_1 f_m(θ^r, w_m^r)

    def aggregate(self, deltas: Tensor) -> Tensor:
        """The server's combination of the uploaded ``deltas [S, d_θ]``: their mean ``[d_θ]``."""
        return deltas.mean(0)

    def round(self, t: int, sampled: Tensor) -> None:
        deltas = self.directions(self.theta, self.clients_of(sampled), len(sampled))
        self.theta = self.theta - self.lr_theta * self.aggregate(deltas)  # line 7: θ^{r+1}
        self.comm_rounds += 1


ALGORITHMS = {"ffgg": FFGG}
