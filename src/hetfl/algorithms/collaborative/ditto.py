"""Ditto: fair and robust federated learning through personalization.

Li, Hu, Beirami, Smith, "Ditto: Fair and Robust Federated Learning Through Personalization", ICML 2021,
Algorithm 1 (https://arxiv.org/abs/2012.04221), as a baseline of Philippenko et al., arXiv:2507.06844, 2025
(docs/papers/all_for_one.md §2.9.4; the paper's final code is not public, so the choices below are this
project's):

    round t: every client k, from w_k = w^t, for I iterations with one minibatch B_k each:
        w_k ← w_k − η ∇f_k(w_k; B_k)                              (the global objective, FedAvg's local solver)
        v_k ← v_k − η (∇f_k(v_k; B_k) + λ (v_k − w^t))            (the personal objective, regularized to w^t)
    server: w^{t+1} = Σ_k p_k w_k  (p = 1/N, ``client_weights: uniform``, the work-in-progress code)

Both updates are steps of the client optimizer (config/README.md: momentum, weight decay, clipping,
schedule; one optimizer per model, its buffers kept across rounds, as the paper's code keeps its
optimizers; the schedule scales η). ``lam`` λ = 1 (the paper's code). The regularization uses the global
model of the round start w^t (Ditto's Algorithm 1; the work-in-progress code used the client's locally
updated copy). Evaluated: ``personal`` = v_k, ``global`` = w.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import torch

from hetfl.algorithms.collaborative.common import (
    CollaborativeAlgorithm,
    CollaborativeHyperparameters,
    stacked_rows,
)
from hetfl.engine.aggregation import aggregate
from hetfl.engine.grad import drawn_chunks
from hetfl.engine.optim import client_optimizer, scheduled_lr
from hetfl.engine.params import Params, rows
from hetfl.options import option


@dataclasses.dataclass(frozen=True)
class DittoHyperparameters(CollaborativeHyperparameters):
    """``lam`` λ ≥ 0 (1.0), ``client_weights`` (uniform | samples) and the shared setting."""

    lam: float = option(1.0, lo=0)
    client_weights: Literal["uniform", "samples"] = "uniform"


class Ditto(CollaborativeAlgorithm):
    """Ditto. State: ``w [1, ...]`` (global), ``local [N, ...]`` (w_k), ``v [N, ...]`` (personal)."""

    name = "ditto"
    Hyperparameters = DittoHyperparameters
    models = ("global", "personal")

    def __init__(self, fed, hp, seed, sampling="epoch"):
        super().__init__(fed, hp, seed, sampling)
        self.w = self.fed.initial_model(self.seed)
        self.local = fed.states.stack(self.w, fed.num_clients, idle=False)
        self.v = fed.states.stack(self.w, fed.num_clients, idle=False)
        self.opt_w, self.opt_v = (
            client_optimizer(self.fed, self.hp, self.local),
            client_optimizer(self.fed, self.hp, self.v),
        )
        self.clients = fed.all_clients()

    def round(self, t, sampled) -> None:
        with torch.no_grad():
            for k, v in self.local.items():
                v.copy_(self.w[k].expand_as(v))  # w_k ← w^t
        super().round(t, sampled)
        self.w = aggregate(self.fed, self.hp, self.local, self.clients)  # w^{t+1} = Σ_k p_k w_k

    def step(self, t: int) -> None:
        lr = scheduled_lr(self.hp.lr, t, self.hp, self.rounds)
        # w_k and v_k of a chunk of clients in one call, on the same minibatch B_k; each chunk (all clients
        # without a memory budget) steps before the next is differentiated: its rows only
        models = lambda s: stacked_rows(self.local, self.v, s)  # noqa: E731
        for s, (g_w, g_v) in drawn_chunks(self.fed, self.sampler, self.clients, models, 2):
            w, v = rows(self.local, s), rows(self.v, s)
            g_v = {k: g.add_(v[k] - self.w[k], alpha=self.hp.lam) for k, g in g_v.items()}
            self.opt_w.step(w, g_w, lr, s)  # w_k ← w_k − η ∇f_k(w_k; B_k)
            self.opt_v.step(v, g_v, lr, s)  # v_k ← v_k − η (∇f_k(v_k; B_k) + λ(v_k − w^t))

    def eval_models(self) -> dict[str, Params]:
        return {"global": self.w, "personal": self.v}


ALGORITHMS = {"ditto": Ditto}
