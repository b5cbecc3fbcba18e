"""q-FedAvg: FedAvg for the q-FFL objective, which weighs the clients with a higher loss more.

Li, Sanjabi, Beirami, Smith, "Fair Resource Allocation in Federated Learning", ICLR 2020, Algorithm 2
(q-FedAvg). https://arxiv.org/abs/1905.10497

The objective is q-FFL, min_w f_q(w) = Σ_k p_k F_k^{q+1}(w) / (q + 1) (the paper's Eq. (2)): q = 0 is FedAvg's
objective, a larger q puts more weight on the clients with a larger loss F_k, so that the accuracy is spread
more evenly over the clients. Each round, every sampled client k of S_t

- scores the server model on all its training data, F_k(w_t);
- runs its local SGD from w_t (FedAvg's ClientUpdate) to w̄_k;
- sends Δw_k = L(w_t − w̄_k), Δ_k = F_k^q(w_t) Δw_k and h_k = q F_k^{q−1}(w_t) ‖Δw_k‖² + L F_k^q(w_t)
  (‖·‖ over all parameters);

and the server steps w_{t+1} = w_t − Σ_{k∈S_t} Δ_k / Σ_{k∈S_t} h_k. At q = 0 this is FedAvg's uniform mean of
the local models (h_k = L); ``tests/test_qfedavg.py`` checks it.

Paper and official code (github.com/litian96/fair_flearn, ``flearn/trainers/qffedavg.py``):

- L, the Lipschitz constant of ∇F_k, is an input of Algorithm 2; the code sets L = 1/η. ``lipschitz: null``
  (the default) takes 1/η_t, the round's local step size; a number sets L.
- The code raises every loss to its powers as F_k + 1e-10 (``loss_offset: 1e-10``); the paper as F_k
  (``loss_offset: 0``, the default).
- The paper samples client k with probability p_k (the code: n_k/n, without replacement) and so optimizes
  f_q with p_k. hetfl samples every algorithm's clients uniformly (``hetfl.engine.participation``), which
  optimizes f_q with p_k = 1/N. The server's sums take no client weights: ``client_weights: samples`` is
  refused.

Shared with FedAvg (config/README.md): the client optimizer (``momentum``, ..., ``lr_schedule``), unequal
local steps (``local_steps_per_client``; ``local_steps_unit: epochs`` is the paper's E epochs), the server
optimizer (``server_optimizer``: the server's w_t − Σ Δ_k / Σ h_k is its "average"; the defaults take it as
is) and ``aggregation`` (Σ Δ_k and Σ h_k in client order under ``sequential``, a chunk of clients at a time).
"""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor

from hetfl.algorithms.baselines.common import FedAvgLike
from hetfl.algorithms.hyperparameters import FedAvgFamily
from hetfl.engine.aggregation import client_sum
from hetfl.engine.optim import scheduled_lr
from hetfl.errors import ConfigError
from hetfl.options import option


@dataclasses.dataclass(frozen=True)
class QFedAvgHyperparameters(FedAvgFamily):
    """FedAvg's (``FedAvgFamily``), plus ``q`` ≥ 0 (1; 0: FedAvg), ``lipschitz`` L > 0 (null: 1/η_t, the
    official code's) and ``loss_offset`` ≥ 0 added to F_k before its powers (0; the code: 1e-10)."""

    q: float = option(1.0, lo=0)
    lipschitz: float | None = option(None, lo=0, lo_open=True)
    loss_offset: float = option(0.0, lo=0)

    def check(self, key: str) -> None:
        """Raises: ConfigError: ``client_weights: samples``; ``lipschitz: null`` (L = 1/η_t) with a ``linear``
        schedule that warms up (``lr_warmup`` > 0), whose first step size is 0."""
        super().check(key)
        if self.lipschitz is None and self.lr_schedule == "linear" and self.lr_warmup > 0:
            raise ConfigError(
                f"{key}.lr_schedule",
                "L = 1/η_t (lipschitz: null) is infinite in the first round of a linear warm-up, whose step size "
                "is 0: set lipschitz, or lr_warmup: 0",
            )
        if self.client_weights != "uniform":
            raise ConfigError(
                f"{key}.client_weights", "q-FedAvg's server step Σ Δ_k / Σ h_k takes no client weights"
            )


class QFedAvg(FedAvgLike):
    """q-FedAvg. State: the global model ``w: [1, ...]`` (FedAvg's ``personal`` alias of it)."""

    name = "qfedavg"
    Hyperparameters = QFedAvgHyperparameters

    def round(self, t: int, sampled: Tensor) -> None:
        """Round ``t`` of Algorithm 2 for the clients ``sampled [S]``."""
        q = self.hp.q
        lipschitz = self.hp.lipschitz or 1.0 / scheduled_lr(
            self.hp.lr, t, self.hp, self.rounds
        )  # L (the code's 1/η)
        clients, steps = self.participants(sampled)  # S_t, longest first, and their local steps
        loss = (
            self.evaluator.client_scores(self.w, clients).loss + self.hp.loss_offset
        )  # F_k(w_t), [S] float64
        weight = loss.pow(q)  # F_k^q
        slope = q * loss.pow(q - 1) if q else torch.zeros_like(loss)  # q F_k^{q−1}
        h = torch.zeros_like(loss)  # h_k, [S]
        deltas = client_sum(self.hp, clients, weight)  # Σ_k F_k^q Δw_k, in the run's aggregation order
        for s, local in self.local_chunks(t, clients, steps):  # w̄_k: local SGD from w_t, [r, ...]
            dw = {k: (self.w[k] - v).mul_(lipschitz) for k, v in local.items()}  # Δw_k = L(w_t − w̄_k)
            norm2 = sum(v.flatten(1).double().pow(2).sum(1) for v in dw.values()).cpu()  # ‖Δw_k‖², [r]
            h[s] = slope[s] * norm2 + lipschitz * weight[s]
            deltas.add(s, dw)
        step, total = deltas.result(), float(h.sum())
        self.w = self.server.step(self.w, {k: w - step[k] / total for k, w in self.w.items()})


ALGORITHMS = {"qfedavg": QFedAvg}
