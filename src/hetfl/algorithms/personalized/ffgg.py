"""FFGG: Fine-tuning Followed by Global Gradient, and Local FFGG.

Mishchenko, Islamov, Gorbunov, Horváth, "Partially Personalized Federated Learning: Breaking the Curse
of Data Heterogeneity", TMLR 2025 (arXiv 2305.18285), Algorithms 1, 2 and 4 (docs/papers/ffgg.md §2).

Algorithm 1 (``local_theta_steps: 0``), round r:

    sample C^r; for m ∈ C^r:
        w_m ← random init (stateless clients)                        # Alg. 2, line 1
        τ steps: w_m ← w_m − γ_w ∇_w f_m(θ^r, w_m)                  # Alg. 2 (minibatch SGD here)
        Δ_m = ∇_θ f_m(θ^r, w_m)                                      # one θ-gradient per client
    θ^{r+1} = θ^r − γ_θ · mean_{m∈C^r} Δ_m                           # Alg. 1, line 7 (TMLR)

Algorithm 4 (``local_theta_steps: K > 0``): after the fine-tuning, K alternating steps
w ← w − γ_w ∇_w f_m(θ_k, w); θ_k ← θ_k − γ_θ ∇_θ f_m(θ_k, w) (the second gradient at the new w, on the
same minibatch), Δ_m = θ^r − θ_K, and θ^{r+1} = θ^r − server_lr · mean Δ_m (the pseudo-code: 1).

``personal_init: random`` draws w from the model's default initialization each round (stream
``algorithm``; the paper's random init, N(0, I) in its quadratic code); ``initial`` starts from the
initial model's personal part (Pillutla et al.'s stateless "default client parameters"). Any split of
the model works (input layer, output layer, adapter).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import torch
from torch import Tensor

from hetfl.algorithms.personalized.partial import PartialHyperparameters, PartialPersonalization
from hetfl.engine.grad import client_grads, local_sgd
from hetfl.engine.params import Params


@dataclasses.dataclass(frozen=True)
class FFGGHyperparameters(PartialHyperparameters):
    """``lr_theta`` γ_θ, ``lr_w`` γ_w, ``tau`` τ (fine-tuner steps), ``local_theta_steps`` K (0: Algorithm 1),
    ``server_lr`` (Algorithm 4), ``personal_init`` (``random`` | ``initial``), plus the shared ones."""

    lr_theta: float = 0.1
    lr_w: float = 0.1
    tau: int = 10
    local_theta_steps: int = 0
    server_lr: float = 1.0
    personal_init: Literal["random", "initial"] = "random"

    def check(self, key: str) -> None:
        super().check(key)
        self._positive(key, "lr_theta", "lr_w", "server_lr")
        self._positive(key, "tau", "local_theta_steps", allow_zero=True)


class FFGG(PartialPersonalization):
    """FFGG (Algorithm 1) and Local FFGG (Algorithm 4). State: θ only (clients are stateless)."""

    name = "ffgg"
    Hyperparameters = FFGGHyperparameters

    @property
    def personal_lr(self) -> float:
        return self.hp.lr_w

    def personal_start(self, clients: Tensor, generator: torch.Generator) -> Params:
        if self.hp.personal_init == "initial":
            return super().personal_start(clients, generator)
        fresh = self.fed.model.init(generator, self.fed.dtype, count=len(clients), keys=self.personal_keys)
        return {k: v.to(self.fed.device) for k, v in fresh.items()}

    def round(self, t: int, sampled: Tensor) -> None:
        hp, model = self.hp, self.fed.model
        self.t = t
        params = self.compose(self.personal_start(sampled, self.rng), len(sampled))
        local_sgd(self.fed, self.sampler, params, sampled, hp.tau, hp.lr_w, keys=self.personal_keys)  # Alg. 2
        if hp.local_theta_steps == 0:  # Algorithm 1: one global gradient per client, server step γ_θ
            _, grads = client_grads(model, params, self.fed.batch(self.sampler, sampled))
            delta = self.aggregate({k: grads[k] for k in self.global_keys}, sampled)
            self.theta = {k: v - hp.lr_theta * delta[k] for k, v in self.theta.items()}
            return
        for _ in range(hp.local_theta_steps):  # Algorithm 4: alternate w and θ steps
            batch = self.fed.batch(self.sampler, sampled)
            _, grads = client_grads(model, params, batch)
            with torch.no_grad():
                torch._foreach_add_(
                    [params[k] for k in self.personal_keys],
                    [grads[k] for k in self.personal_keys],
                    alpha=-hp.lr_w,
                )
            _, grads = client_grads(model, params, batch)  # ∇_θ at (θ_k, w_{k+1})
            with torch.no_grad():
                torch._foreach_add_(
                    [params[k] for k in self.global_keys],
                    [grads[k] for k in self.global_keys],
                    alpha=-hp.lr_theta,
                )
        self.server_step(params, sampled, hp.server_lr)


ALGORITHMS = {"ffgg": FFGG}
