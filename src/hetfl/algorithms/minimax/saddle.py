"""The saddle points of the fair objective F and of Local SGDA's surrogate F̃ on client data, solved centrally.

Sharma, Panda, Joshi (TMLR 2023), Theorem 1 and Corollary 1.1: with unequal local work, Local SGDA converges to
a stationary point of F̃ = Σ_i w̃_i f_i, w̃_i ∝ p_i‖ā_i‖₁, Fed-Norm-SGDA to one of F = Σ_i p_i f_i (Figure 1, on
a two-client game). On client data the claim is measurable where the saddle points are computable: the fair
objective (Eq. (8); ``objectives.Fair``) with a linear model (``mlr``) and a ridge (μ/2)‖x‖² (``l2_x`` μ > 0) is
μ-strongly convex in x and λ-strongly concave in y ∈ Δ_C, so each of F and F̃ has one saddle point (x*, y*).

The solver: x* minimizes the primal function Φ_w(x) = max_{y∈Δ} Σ_c y_c F^w_c(x) − (λ/2)‖y‖² + (μ/2)‖x‖² with
F^w_c = Σ_i w_i F_{c,i} (w = p for F, w̃ for F̃), which is μ-strongly convex and differentiable, with gradient
Σ_c y*_c ∇F^w_c(x) + μx at y*(x) = Π_Δ(F^w(x)/λ) (Danskin's theorem; the inner maximum in closed form,
``objectives.simplex_max``); then y* = y*(x*). L-BFGS with a strong-Wolfe line search on the full training data
of the n clients in float64 (``torch.optim.LBFGS``), until every coordinate of ∇Φ_w(x) is within ``solver_tol``
(its ``tolerance_grad``) or ``solver_steps`` iterations; the run reports ‖∇Φ_w‖₂ at the solution. The weights w̃ are those of the run's local work (``federated.federated_objective``: the same τ_i
as every minimax algorithm of the seed draws, from the same stream), so a ``minimax_saddle`` run computes the
references the study's other runs measure their distances to (their ``reference_from``).

Config name: ``minimax_saddle`` (on client data; ``objective: fair`` only). One round solves; its models,
``saddle`` and ``surrogate_saddle`` (x* of F and of F̃, each with its y*), are scored like any model, and its
metrics are ``phi_saddle`` (Φ(x*)), ``phi_surrogate_saddle`` (Φ̃(x̃*)), ``grad_norm_saddle`` and
``grad_norm_surrogate_saddle`` (‖∇Φ_w‖₂ at the solutions: the certificate), ``dist_between_saddles`` and
``solver_iterations``.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from hetfl.algorithms.base import FederatedAlgorithm
from hetfl.algorithms.minimax.federated import (
    FederatedSGDAHyperparameters,
    federated_objective,
    saddle_distance,
)
from hetfl.algorithms.minimax.projections import project_simplex
from hetfl.engine.params import Params, all_finite
from hetfl.metrics import metric_names
from hetfl.options import option

SOLVER_METRICS = (
    "phi_saddle",
    "phi_surrogate_saddle",
    "grad_norm_saddle",
    "grad_norm_surrogate_saddle",
    "dist_between_saddles",
    "solver_iterations",
)
CHUNK = 4096  # samples per forward of the full-batch objective


@dataclasses.dataclass(frozen=True)
class SaddleHyperparameters(FederatedSGDAHyperparameters):
    """The federated objective's options, as the study's minimax runs take them (``objective`` fair only,
    ``fair_lambda`` λ > 0, ``l2_x`` μ > 0 (0.1 here: the saddle point exists and is unique; the runs that read it
    must take the same, which the config checks), ``client_weights``, ``active_clients``, and the local work that sets F̃'s
    weights: ``tau_min``, ``tau_max``, ``tau_draw``, ``tau_redraw``, ``tau_unit``, ``batch_size``, ``momentum``;
    the step sizes, P and the attack's options are not used), and the solver's: ``solver_steps`` (2000, the
    L-BFGS iterations at most) and ``solver_tol`` (1e-10: it stops when every coordinate of the gradient is
    within it).

    Raises:
        ConfigError: ``fair_lambda`` or ``l2_x`` = 0 (the saddle point would not be unique, or not exist),
            ``solver_steps`` < 1, ``solver_tol`` ≤ 0.
    """

    objective: Literal["fair"] = "fair"
    fair_lambda: float = option(0.1, lo=0, lo_open=True)
    l2_x: float = option(0.1, lo=0, lo_open=True)
    solver_steps: int = option(2000, lo=0, lo_open=True)
    solver_tol: float = option(1e-10, lo=0, lo_open=True)


class MinimaxSaddle(FederatedAlgorithm):
    """The saddle points (x*, y*) of F and F̃ (module docstring), solved in round 1; later rounds change nothing."""

    name = "minimax_saddle"
    Hyperparameters = SaddleHyperparameters
    models = ("saddle", "surrogate_saddle")

    def __init__(self, fed, hp, seed, sampling="epoch"):
        super().__init__(fed, hp, seed, sampling)
        self.p, self.work, self.objective = federated_objective(fed, hp, self.rng)
        start = self.fed.initial_model(self.seed)
        self.x = {model: {k: v.clone() for k, v in start.items()} for model in self.models}
        self.y = {model: self.objective.init_y() for model in self.models}
        self.stats: dict[str, float] = dict.fromkeys(SOLVER_METRICS, float("nan"))

    @classmethod
    def metric_names(cls, hp=None) -> list[str]:
        return metric_names(cls.models) + list(SOLVER_METRICS)

    def round(self, t: int, sampled: Tensor) -> None:
        if t != 1:
            return
        weights = {"saddle": self.p, "surrogate_saddle": self.objective.surrogate}
        phi_names = {"saddle": "phi_saddle", "surrogate_saddle": "phi_surrogate_saddle"}
        iterations = 0
        for model, w in weights.items():
            x, y, phi, grad_norm, steps = self.solve(w, self.x[model])
            self.x[model] = {k: v.to(self.fed.dtype) for k, v in x.items()}
            self.y[model] = y.to(self.fed.dtype)
            self.stats[phi_names[model]] = phi
            self.stats[f"grad_norm_{model}"] = grad_norm
            iterations = max(iterations, steps)
        self.stats["dist_between_saddles"] = saddle_distance(
            self.x["saddle"],
            self.y["saddle"],
            {**self.x["surrogate_saddle"], "y": self.y["surrogate_saddle"]},
        )
        self.stats["solver_iterations"] = float(iterations)

    def sample_weights(self, w: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The training data of the n clients ``(inputs [M, ...], labels [M], coef [M])`` with each sample's
        coefficient in F^w_c: w_i / (n_i π_c) for a sample of client i and class c (float64)."""
        n, data = len(self.p), self.fed.train
        end = int(data.offsets[n])
        owner = torch.repeat_interleave(torch.arange(n), data.sizes[:n])
        labels = data.y[:end]
        coef = (w / data.sizes[:n].double())[owner] / self.objective.prior[labels.cpu()]
        return data.x[:end], labels, coef.to(data.x.device)

    def class_losses(self, x: Params, inputs: Tensor, labels: Tensor, coef: Tensor) -> Tensor:
        """F^w(x) ``[C]``: Σ_j coef_j ℓ_j(x) over the samples of each class (differentiable in ``x``)."""
        k = self.fed.model.num_classes
        out = torch.zeros(k, dtype=torch.float64, device=inputs.device)
        for start in range(0, len(labels), CHUNK):
            xb, yb = inputs[start : start + CHUNK].double(), labels[start : start + CHUNK]
            logits = self.fed.model.forward(x, xb.unsqueeze(0))[0]  # [K, b]
            loss = F.cross_entropy(logits.T, yb, reduction="none") * coef[start : start + CHUNK]
            out = out.index_add(0, yb, loss)
        return out

    def solve(self, w: Tensor, start: Params) -> tuple[Params, Tensor, float, float, int]:
        """(x*, y* ``[1, C]``, Φ_w(x*), ‖∇Φ_w(x*)‖₂, L-BFGS iterations) for the client weights ``w [n]``, from
        ``start [1, ...]`` (the run's initial model)."""
        hp, lam = self.hp, self.hp.fair_lambda
        inputs, labels, coef = self.sample_weights(w.double())
        x = {k: v.detach().double().clone().requires_grad_(True) for k, v in start.items()}

        def primal() -> tuple[Tensor, Tensor]:
            losses = self.class_losses(x, inputs, labels, coef)
            y = project_simplex((losses.detach() / lam).unsqueeze(0))[0]  # y*(x), Danskin
            ridge = 0.5 * hp.l2_x * sum(v.pow(2).sum() for v in x.values())
            return losses @ y - 0.5 * lam * (y @ y) + ridge, y

        optimizer = torch.optim.LBFGS(
            list(x.values()),
            lr=1.0,
            max_iter=hp.solver_steps,
            tolerance_grad=hp.solver_tol,
            tolerance_change=0.0,
            history_size=20,
            line_search_fn="strong_wolfe",
        )

        def closure() -> Tensor:
            optimizer.zero_grad()
            with torch.enable_grad():
                value, _ = primal()
                value.backward()
            return value

        optimizer.step(closure)
        steps = int(optimizer.state_dict()["state"].get(0, {}).get("n_iter", 0))
        with torch.enable_grad():
            value, y = primal()
            grads = torch.autograd.grad(value, list(x.values()))
        grad_norm = float(torch.sqrt(sum(g.pow(2).sum() for g in grads)))
        solution = {k: v.detach() for k, v in x.items()}
        return solution, y.detach().unsqueeze(0), float(value.detach()), grad_norm, steps

    def eval_models(self) -> dict[str, Params]:
        return self.x

    def evaluate(self):
        rows, client_rows = super().evaluate()
        return rows + list(self.stats.items()), client_rows

    def finite(self) -> bool:
        return all(all_finite(x) for x in self.x.values()) and all(
            bool(torch.isfinite(y).all()) for y in self.y.values()
        )

    def state_dict(self) -> dict[str, Tensor]:
        out = super().state_dict()
        for model, y in self.y.items():
            out[f"{model}/y"] = y.detach().cpu()
        return out


ALGORITHMS = [MinimaxSaddle]
