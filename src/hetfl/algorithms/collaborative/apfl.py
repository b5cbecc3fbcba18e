"""APFL: adaptive personalized federated learning.

Deng, Kamani, Mahdavi, "Adaptive Personalized Federated Learning", 2020, Algorithm 1
(https://arxiv.org/abs/2003.13461), as a baseline of Philippenko et al., arXiv:2507.06844, 2025
(docs/papers/all_for_one.md §2.9.7; the paper's final code is not public, so the choices below are this
project's). Each client k keeps a local copy w_k of the global model and a local model v_k; its personalized
model is the mixture v̄_k = α v_k + (1 − α) w_k. Round t, from w_k = w^t, for I iterations with one minibatch
B_k each (both gradients at the current points, Algorithm 1):

    w_k ← w_k − η ∇f_k(w_k; B_k)
    v_k ← v_k − η α ∇f_k(v̄_k; B_k)                      (∇_v f_k(α v + (1−α) w) = α ∇f_k(v̄))
    (adaptive) α_k ← clip(α_k − η_α ⟨v_k − w_k, ∇f_k(v̄_k; B_k)⟩, 0, 1)     (APFL Eq. 10)
    server: w^{t+1} = Σ_k p_k w_k

Both model updates are steps of the client optimizer (config/README.md; one per model, its buffers kept across
rounds; the schedule scales η, not η_α). ``mix_alpha`` α = 0.25 fixed
by default ("a = 0.25 fixed, or adaptive", §2.9.7 of the notes); ``adaptive: true`` with ``mix_lr`` η_α.
Evaluated: ``personal`` = α v_k + (1 − α) w^{t+1} (the mixture with the new global model), ``global`` = w.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import torch

from hetfl.algorithms.collaborative.common import (
    CollaborativeAlgorithm,
    CollaborativeHyperparameters,
    flatten,
)
from hetfl.engine.aggregation import aggregate
from hetfl.engine.grad import drawn_chunks
from hetfl.engine.optim import client_optimizer, scheduled_lr
from hetfl.engine.params import Params, rows
from hetfl.options import option


@dataclasses.dataclass(frozen=True)
class APFLHyperparameters(CollaborativeHyperparameters):
    """``mix_alpha`` α ∈ [0, 1] (0.25), ``adaptive`` (false), ``mix_lr`` η_α (0.01), ``client_weights``."""

    mix_alpha: float = option(0.25, lo=0, hi=1)
    adaptive: bool = False
    mix_lr: float = option(0.01, lo=0, lo_open=True)
    client_weights: Literal["uniform", "samples"] = "uniform"


class APFL(CollaborativeAlgorithm):
    """APFL. State: ``w [1, ...]``, ``local [N, ...]`` (w_k), ``v [N, ...]``, ``mix [N]`` (α_k)."""

    name = "apfl"
    Hyperparameters = APFLHyperparameters
    models = ("global", "personal")

    def __init__(self, fed, hp, seed, sampling="epoch"):
        super().__init__(fed, hp, seed, sampling)
        self.w = self.fed.initial_model(self.seed)
        self.local = fed.states.stack(self.w, fed.num_clients, idle=False)
        self.v = fed.states.stack(self.w, fed.num_clients, idle=False)
        self.mix = torch.full((fed.num_clients,), hp.mix_alpha, dtype=fed.dtype, device=fed.device)
        self.opt_w, self.opt_v = (
            client_optimizer(self.fed, self.hp, self.local),
            client_optimizer(self.fed, self.hp, self.v),
        )
        self.clients = fed.all_clients()

    def _mixture(self, w: Params, s: slice = slice(None)) -> Params:
        """v̄_k = α_k v_k + (1 − α_k) w of the clients ``s`` (all: ``w`` of shape [N, ...] or [1, ...]; a
        chunk: ``w`` its rows ``[r, ...]``)."""
        mix = self.mix[s]
        return {k: _rows(mix, v[s]) * v[s] + (1 - _rows(mix, v[s])) * w[k] for k, v in self.v.items()}

    def round(self, t, sampled) -> None:
        with torch.no_grad():
            for k, v in self.local.items():
                v.copy_(self.w[k].expand_as(v))  # w_k ← w^t
        super().round(t, sampled)
        self.w = aggregate(self.fed, self.hp, self.local, self.clients)  # w^{t+1} = Σ_k p_k w_k

    def step(self, t: int) -> None:
        lr = scheduled_lr(self.hp.lr, t, self.hp, self.rounds)
        mix = self.mix.clone() if self.hp.adaptive else self.mix  # α_k after this step

        def models(s: slice) -> Params:  # w_k and v̄_k = α v_k + (1 − α) w_k of the chunk's clients
            local = rows(self.local, s)
            mixed = self._mixture(local, s)
            return {k: torch.cat([local[k], mixed[k]]) for k in local}

        # w_k and v̄_k of a chunk of clients in one call, on the same minibatch B_k; g_bar = ∇f_k(v̄_k; B_k);
        # each chunk (all clients without a memory budget) steps before the next is differentiated
        for s, (g_w, g_bar) in drawn_chunks(self.fed, self.sampler, self.clients, models, 2):
            w, v, alpha = rows(self.local, s), rows(self.v, s), self.mix[s]
            g_v = {k: g * _rows(alpha, g) for k, g in g_bar.items()}  # ∇_v f_k(v̄_k) = α_k ∇f_k(v̄_k)
            if self.hp.adaptive:  # α_k ← clip(α_k − η_α ⟨v_k − w_k, ∇f_k(v̄_k)⟩, 0, 1), after its use
                diff = flatten(v) - flatten(w)
                mix[s] = (alpha - self.hp.mix_lr * (diff * flatten(g_bar)).sum(1)).clamp_(0.0, 1.0)
            self.opt_w.step(w, g_w, lr, s)  # w_k ← w_k − η ∇f_k(w_k; B_k)
            self.opt_v.step(v, g_v, lr, s)  # v_k ← v_k − η α ∇f_k(v̄_k; B_k)
        self.mix = mix

    def eval_models(self) -> dict[str, Params]:
        return {"global": self.w, "personal": self._mixture(self.w)}


def _rows(values, like):
    """``values [N]`` viewed to broadcast over ``like [N, ...]``."""
    return values.view(-1, *([1] * (like.dim() - 1)))


ALGORITHMS = {"apfl": APFL}
