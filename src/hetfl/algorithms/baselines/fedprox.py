"""FedProx: FedAvg whose clients minimize a proximal local objective.

Li, Sahu, Zaheer, Sanjabi, Talwalkar, Smith, "Federated Optimization in Heterogeneous Networks", MLSys 2020,
Algorithm 2 (FedProx). https://arxiv.org/abs/1812.06127

Each round the server sends w_t to S clients; client k returns an inexact minimizer of

    h_k(w; w_t) = F_k(w) + μ/2 ‖w − w_t‖²                                            (Algorithm 2, line 5)

found here by its τ_k local steps from w_t along the minibatch gradient of h_k, ∇F_k(w; D) + μ(w − w_t)
(the shared client optimizer steps that gradient, as PyTorch would the gradient of loss + μ/2‖w − w_t‖²);
the server averages the returned models (line 6; ``client_weights`` as FedAvg's). μ = 0 is FedAvg, bit for
bit (the correction is then not applied at all); a larger μ keeps the local models closer to w_t.

The paper's "systems heterogeneity" (devices that do variable amounts of work, its γ-inexactness) is the
FedAvg-like option of unequal local steps (``local_steps_per_client``, ``local_steps_min``,
``local_steps_unit``: config/README.md); the server optimizer is shared too (``server_optimizer``).
Hyper-parameter: ``mu`` μ ≥ 0 (0.01; the paper selects μ per dataset from {0.001, 0.01, 0.1, 1}).
"""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor

from hetfl.algorithms.baselines.common import FedAvgLike
from hetfl.algorithms.hyperparameters import FedAvgFamily
from hetfl.engine.grad import Correction
from hetfl.engine.params import Params
from hetfl.options import option


@dataclasses.dataclass(frozen=True)
class FedProxHyperparameters(FedAvgFamily):
    """FedAvg's (``FedAvgFamily``), plus ``mu`` μ ≥ 0, the weight of the proximal term (0.01)."""

    mu: float = option(0.01, lo=0)


class FedProx(FedAvgLike):
    """FedProx. State: the global model ``w: [1, ...]``."""

    name = "fedprox"
    Hyperparameters = FedProxHyperparameters

    def correction(self, clients: Tensor) -> Correction | None:
        """∇h_k(w) = ∇F_k(w) + μ (w − w_t) (Algorithm 2, line 5); None at μ = 0 (FedAvg, bit for bit)."""
        anchor, mu = self.w, self.hp.mu  # w_t, [1, ...]
        if not mu:
            return None

        def proximal(params: Params, grads: Params, rows: slice) -> None:  # [r, ...] of the stack's rows
            with torch.no_grad():
                for k, g in grads.items():
                    g.add_(params[k] - anchor[k], alpha=mu)

        return proximal

    # round: FedAvgLike's, the clients minimizing h_k(·; w_t) (line 5) before the mean (line 6)


ALGORITHMS = {"fedprox": FedProx}
