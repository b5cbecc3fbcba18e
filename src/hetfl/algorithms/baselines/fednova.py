"""FedNova: federated normalized averaging, for clients that take unequal numbers of local steps.

Wang, Liu, Liang, Joshi, Poor, "Tackling the Objective Inconsistency Problem in Heterogeneous Federated
Optimization", NeurIPS 2020 (https://arxiv.org/abs/2007.07481): its generalized update rule (a client's
update as a combination a_i of its local gradients, with the examples vanilla SGD, proximal updates and
local momentum), Theorem 1 (what FedAvg converges to) and the FedNova update.

Client i's local solver makes its update a combination of its τ_i minibatch gradients, w_t − w_i =
η G_i a_i (G_i: its gradients as columns, a_i ∈ R^{τ_i} their coefficients). FedAvg adds up these updates,
so that a client that takes more steps weighs more: with unequal τ_i its fixed point is a stationary point
of the surrogate Σ_i p_i ‖a_i‖₁ f_i / Σ_i p_i ‖a_i‖₁, not of F = Σ_i p_i f_i (Theorem 1). FedNova averages
the *normalized* updates instead,

    d_i = (w_t − w_i) / ‖a_i‖₁,    w_{t+1} = w_t − τ_eff Σ_{i∈S} p_i d_i,    τ_eff = Σ_{i∈S} p_i ‖a_i‖₁,

which converges to a stationary point of F whatever the τ_i. ‖a_i‖₁ is the local solver's (the paper's
examples):

- vanilla SGD, a_i = [1, ..., 1]: ‖a_i‖₁ = τ_i;
- SGD with momentum ρ (the client optimizer's ``momentum``; buffer from zero each round), a_i =
  [1 − ρ^{τ_i}, 1 − ρ^{τ_i − 1}, ..., 1 − ρ]/(1 − ρ): ‖a_i‖₁ = [τ_i − ρ(1 − ρ^{τ_i})/(1 − ρ)]/(1 − ρ)
  (``hetfl.algorithms.minimax.local_work.a_l1``, the same vector for Sharma et al.'s Fed-Norm-SGDA; the
  official code accumulates it step by step, c ← ρc + 1, ‖a_i‖₁ ← ‖a_i‖₁ + c).

Weight decay and clipping of the client optimizer are not in a_i (they are not among the paper's solvers).
p_i are the aggregation weights of the participants (1/|S|, or n_i / Σ_{j∈S} n_j with ``client_weights:
samples``, the official code's ratio). The step w_t − τ_eff Σ p_i d_i goes through the server optimizer
(``server_optimizer: sgd`` at ``server_lr`` 1, the default, is FedNova's rule itself; the official code's
global momentum ``gmf`` is, up to its step-size scaling, ``avgm``). With equal τ_i (and no momentum)
τ_eff Σ p_i d_i = Σ p_i (w_t − w_i): FedNova is FedAvg.

Config ``fednova``; hyper-parameters: FedAvg's, with unequal local steps set by ``local_steps_per_client``,
``local_steps_min`` and ``local_steps_unit`` (config/README.md). The paper's experiments draw local epochs
E_i ~ U(2, 5): ``local_steps: 5, local_steps_min: 2, local_steps_per_client: uniform, local_steps_unit:
epochs`` (redrawn every round here).
"""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor

from hetfl.algorithms.baselines.common import FedAvgLike
from hetfl.algorithms.hyperparameters import FedAvgFamily
from hetfl.algorithms.minimax.local_work import a_l1
from hetfl.engine.aggregation import aggregation_weights, client_sum


@dataclasses.dataclass(frozen=True)
class FedNovaHyperparameters(FedAvgFamily):
    """FedAvg's (``FedAvgFamily``): FedNova has no hyper-parameter of its own."""


class FedNova(FedAvgLike):
    """FedNova. State: the global model ``w: [1, ...]``."""

    name = "fednova"
    Hyperparameters = FedNovaHyperparameters

    def normalizers(self, steps: Tensor) -> Tensor:
        """‖a_i‖₁ of the participants' local solver for ``steps [S]`` local steps: ``Tensor[S]`` float64."""
        return a_l1(steps, self.hp.momentum)

    def round(self, t: int, sampled: Tensor) -> None:
        clients, steps = self.participants(sampled)
        a = self.normalizers(steps)  # ‖a_i‖₁, [S]
        p = aggregation_weights(self.fed, self.hp, clients)
        p = torch.full_like(a, 1.0 / len(a)) if p is None else p  # p_i, [S]
        tau_eff = float((p * a).sum())  # Σ_i p_i ‖a_i‖₁
        coef = tau_eff * p / a  # w_{t+1} = w_t + Σ_i coef_i (w_i − w_t)
        moved = client_sum(self.hp, clients, coef, reduce=_dot)
        for s, local in self.local_chunks(t, clients, steps):  # w_i of clients[s], [r, ...]
            with torch.no_grad():
                moved.add(s, {k: local[k] - w for k, w in self.w.items()})
        total = moved.result()
        with torch.no_grad():
            target = {k: w + total[k] for k, w in self.w.items()}
        self.w = self.server.step(self.w, target)


def _dot(c: Tensor, x: Tensor) -> Tensor:
    """Σ_i c_i x_i as one product over the clients (``c [S]``, ``x [S, ...]``): ``[1, ...]``."""
    return torch.tensordot(c, x, dims=1).unsqueeze(0)


ALGORITHMS = {"fednova": FedNova}
