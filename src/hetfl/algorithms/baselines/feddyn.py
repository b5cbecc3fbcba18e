"""FedDyn: federated learning with dynamic regularization.

Acar, Zhao, Matas Navarro, Mattina, Whatmough, Saligrama, "Federated Learning Based on Dynamic
Regularization", ICLR 2021, Algorithm 1. https://arxiv.org/abs/2111.04263

State: the server model θ^{t−1}, the server's h (zero at the start) and each client's ∇L_k(θ_k^{t−1}) (zero at
the start). Each round, every sampled client k ∈ P_t approximately solves

    θ_k^t = argmin_θ  L_k(θ) − ⟨∇L_k(θ_k^{t−1}), θ⟩ + α/2 ‖θ − θ^{t−1}‖²
    ∇L_k(θ_k^t) = ∇L_k(θ_k^{t−1}) − α (θ_k^t − θ^{t−1})

(the others keep theirs), then the server

    h^t = h^{t−1} − α (1/m) Σ_{k∈P_t} (θ_k^t − θ^{t−1}),     θ^t = (1/|P_t|) Σ_{k∈P_t} θ_k^t − h^t/α

(m: all clients). The local problem is solved by τ local steps from θ^{t−1} along the minibatch gradient of
its objective, ∇L_k(θ; D) − ∇L_k(θ_k^{t−1}) + α(θ − θ^{t−1}), through the shared client optimizer (the
official code's local SGD also takes weight decay: ``weight_decay``). h stays Σ_k (1/m) ∇L_k(θ_k): at a
fixed point every client's first-order condition and θ^t = θ^{t−1} give Σ_k ∇L_k(θ) = 0, the minimizer of
the average objective, however heterogeneous the clients (the paper's argument for its dynamic
regularizer and its convergence theorems: no client drift). With ``client_weights: samples`` the 1/m of h
and the mean over P_t are n_k/n and n_k/Σ_{j∈P_t} n_j, for the objective Σ_k (n_k/n) L_k.

Config ``feddyn``; hyper-parameter ``alpha`` α > 0 (0.01; the paper searches α ∈ {0.1, 0.01, 0.001}; no
clash with a Dirichlet partition's α, a partition option), plus FedAvg's ``lr``, ``local_steps``,
``batch_size``, ``clients_per_round``, ``client_weights`` and the client optimizer. FedDyn's server step is
its own (θ^t above), so it takes no ``server_optimizer``.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor

from hetfl.algorithms.baselines.common import FedAvgLike
from hetfl.algorithms.hyperparameters import Aggregation, Federated
from hetfl.engine.aggregation import aggregation_weights, client_sum
from hetfl.engine.grad import Correction
from hetfl.engine.params import Params, select
from hetfl.engine.state import put
from hetfl.options import option


@dataclasses.dataclass(frozen=True)
class FedDynHyperparameters(Federated, Aggregation):
    """``Federated``'s, plus ``alpha`` α > 0, the weight of the dynamic regularizer (0.01), and the order of
    the server's sums (``Aggregation``)."""

    alpha: float = option(0.01, lo=0, lo_open=True)


class FedDyn(FedAvgLike):
    """FedDyn. State: the server model ``w: [1, ...]`` (θ), ``h: [1, ...]`` and the clients' gradients
    ``grad: [N, ...]`` (∇L_k(θ_k^{t−1}))."""

    name = "feddyn"
    Hyperparameters = FedDynHyperparameters

    def __init__(self, fed, hp, seed, sampling="epoch"):
        super().__init__(fed, hp, seed, sampling)
        self.h = {k: torch.zeros_like(v) for k, v in self.w.items()}  # h^0 = 0, [1, ...]
        self.grad = fed.states.stack(self.h, fed.num_clients)  # ∇L_k(θ_k^0) = 0, [N, ...], placed

    def correction(self, clients: Tensor) -> Correction:
        """∇L_k(θ) − ∇L_k(θ_k^{t−1}) + α(θ − θ^{t−1}), the gradient of the local objective of Algorithm 1."""
        theta, alpha = self.w, self.hp.alpha  # θ^{t−1}, [1, ...]
        linear = select(self.grad, clients, self.fed.device)  # ∇L_k(θ_k^{t−1}), [S, ...]

        def dynamic(params: Params, grads: Params, rows: slice) -> None:  # [r, ...] of the stack's rows
            with torch.no_grad():
                for k, g in grads.items():
                    g.sub_(linear[k][rows]).add_(params[k] - theta[k], alpha=alpha)

        return dynamic

    def round(self, t: int, sampled: Tensor) -> None:
        clients, steps = self.participants(sampled)
        theta, alpha = self.w, self.hp.alpha  # θ^{t−1}, [1, ...]
        omega = self.population_weights()[clients].to(self.fed.device)  # [S]
        mean = client_sum(
            self.hp, clients, aggregation_weights(self.fed, self.hp, clients)
        )  # (1/|P_t|) Σ_k θ_k^t
        moved = client_sum(self.hp, clients, omega)  # Σ_k ω_k (θ_k^t − θ^{t−1})
        for s, local in self.local_chunks(t, clients, steps):  # θ_k^t of clients[s], [r, ...]
            chunk = clients[s]
            mean.add(s, local)
            with torch.no_grad():
                linear = select(self.grad, chunk, self.fed.device)  # ∇L_k(θ_k^{t−1}), [r, ...]
                step = {k: local[k] - th for k, th in theta.items()}  # θ_k^t − θ^{t−1}, [r, ...]
                put(self.grad, chunk, {k: linear[k] - alpha * step[k] for k in theta})
                moved.add(s, step)
        with torch.no_grad():
            total = moved.result()
            self.h = {k: self.h[k] - alpha * total[k] for k in theta}  # h^t
        mean = mean.result()
        self.w = {k: mean[k] - self.h[k] / alpha for k in mean}  # θ^t = mean − h^t/α


ALGORITHMS = {"feddyn": FedDyn}
