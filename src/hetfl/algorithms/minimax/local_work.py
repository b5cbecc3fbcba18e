"""Heterogeneous local work: τ_i^(t) per client and round, in SGD steps, and ‖ā_i‖₁.

The paper's experiments: "Clients sample the number of epochs they run locally via uniform sampling over the
set {2, ..., E}, i.e., τ_i ∼ Unif[2 : E]" (Sec. 6). Here τ_i is drawn for **every** client each round
(``redraw: round``) or once per run (``fixed``), so the exact τ_eff = Σ_j p_j‖ā_j‖₁ over all n clients is
known (docs/papers/fedminimax.md §2.4, D2). ``draw: spread`` gives deterministic τ_i evenly spread over
[τ_min, τ_max] by client index (Fig. 1's τ = (2, 5) for two clients). In epochs, client i runs τ_i · ⌈n_i / B⌉
steps, and ‖ā_i‖₁ is the number of SGD steps (docs/papers/fedminimax.md §2.6, §4.6).
"""

from __future__ import annotations

import torch
from torch import Tensor

DRAWS = ("uniform", "spread")
REDRAWS = ("round", "fixed")


def a_l1(steps: Tensor, rho: float) -> Tensor:
    """‖ā_i‖₁ of τ local steps of SGD (ρ = 0) or heavy-ball momentum ρ with a buffer reset each round.

    Appendix A.1: momentum gives a^(k) = (1 − ρ^{τ−k})/(1 − ρ), k = 0..τ−1, so
    ‖ā‖₁ = [τ − ρ(1 − ρ^τ)/(1 − ρ)]/(1 − ρ) (our algebra; the paper's display is lost). SGD: ‖ā‖₁ = τ.

    Args:
        steps: ``LongTensor[...]`` τ in SGD steps.
        rho: momentum ρ ∈ [0, 1).

    Returns:
        ``Tensor[...]`` float64.
    """
    tau = steps.double()
    if rho == 0.0:
        return tau
    return (tau - rho * (1.0 - rho**tau) / (1.0 - rho)) / (1.0 - rho)


class LocalWork:
    """τ_i^(t) for every client, in SGD steps.

    Args:
        steps_per_unit: ``LongTensor[N]``: 1 when τ counts steps, ⌈n_i/B⌉ when it counts epochs.
        tau_min, tau_max: τ ∈ {tau_min, ..., tau_max} (in units), 1 ≤ tau_min ≤ tau_max.
        draw: ``uniform`` (i.i.d. uniform integers) or ``spread`` (client i gets
            tau_min + round(i (tau_max − tau_min)/(N − 1))).
        redraw: ``round`` (new τ_i every round) or ``fixed`` (drawn once).
        generator: the run's ``algorithm`` stream (the same τ's for every algorithm of a study).

    Raises:
        ValueError: an unknown draw or redraw, or 1 ≤ tau_min ≤ tau_max violated.
    """

    def __init__(self, steps_per_unit: Tensor, tau_min: int, tau_max: int, draw: str, redraw: str, generator):
        if draw not in DRAWS or redraw not in REDRAWS:
            raise ValueError(f"draw must be one of {DRAWS}, redraw one of {REDRAWS}")
        if not 1 <= tau_min <= tau_max:
            raise ValueError(f"need 1 <= tau_min <= tau_max, got {tau_min}, {tau_max}")
        self.steps_per_unit = steps_per_unit.long().cpu()
        self.tau_min, self.tau_max, self.draw, self.redraw = tau_min, tau_max, draw, redraw
        self.generator = generator
        self._fixed = self._draw() if redraw == "fixed" else None

    @property
    def num_clients(self) -> int:
        return len(self.steps_per_unit)

    def _draw(self) -> Tensor:
        n = self.num_clients
        if self.draw == "uniform":
            tau = torch.randint(self.tau_min, self.tau_max + 1, (n,), generator=self.generator)
        else:
            span = self.tau_max - self.tau_min
            tau = self.tau_min + torch.round(torch.arange(n, dtype=torch.float64) * span / max(n - 1, 1))
        return tau.long() * self.steps_per_unit

    def steps(self) -> Tensor:
        """τ_i of this round for all N clients, in steps: ``LongTensor[N]`` (call once per round)."""
        return self._fixed.clone() if self._fixed is not None else self._draw()

    def expected_a_l1(self, rho: float) -> Tensor:
        """E‖ā_i‖₁ over the τ distribution (the actual value when ``fixed``): ``Tensor[N]`` float64."""
        if self._fixed is not None or self.draw == "spread":
            return a_l1(self._fixed if self._fixed is not None else self._draw(), rho)
        units = torch.arange(self.tau_min, self.tau_max + 1)
        return a_l1(units.unsqueeze(1) * self.steps_per_unit, rho).mean(0)
