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
same minibatch), Δ_m = θ^r − θ_K, and θ^{r+1} = θ^r − server_lr · mean Δ_m (the pseudo-code: 1); or,
with ``server_optimizer`` other than ``sgd``, the server optimizer's step with −mean Δ_m as its
pseudo-gradient (FedAdam etc., Reddi et al., ICLR 2021: the server of the paper's GLDv2 and StackOverflow
protocols, App. E.6, Table 3).

``personal_init: random`` draws w from the model's default initialization each round (stream
``algorithm``; the paper's random init, N(0, I) in its quadratic code); ``initial`` starts from the
initial model's personal part (Pillutla et al.'s stateless "default client parameters"). Any split of
the model works (input layer, output layer, adapter).

Client optimizer (``momentum``, ``weight_decay``, ``clip_norm``, ``lr_schedule``: config/README.md): every
gradient step on w (Algorithm 2's τ steps, Algorithm 4's w-steps: one optimizer per round, so its momentum
runs on from the fine-tuner into the alternating steps) and on θ goes through it; the schedule scales γ_w and
γ_θ, each from its own value. Clients are stateless: each round's w and Algorithm 4's θ_k start with zero
momentum. Algorithm 1's θ-step θ^{r+1} = θ^r − γ_θ mean_m Δ_m is one SGD step on θ at the server, the
averaged Δ as its gradient (clipped as a whole, weight decay on θ): its momentum buffer is the server's,
kept across rounds. Algorithm 4's server step (``server_lr``) is the server's averaging, not an optimizer
step. The defaults are the paper's plain steps.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import torch
from torch import Tensor

from hetfl.algorithms.hyperparameters import ServerOptimization
from hetfl.algorithms.personalized.partial import PartialHyperparameters, PartialPersonalization
from hetfl.engine.chunks import stitch
from hetfl.engine.grad import client_grads, sgd_step
from hetfl.engine.optim import client_optimizer, scheduled_lr
from hetfl.engine.params import Params, rows
from hetfl.errors import ConfigError
from hetfl.options import option


@dataclasses.dataclass(frozen=True)
class FFGGHyperparameters(PartialHyperparameters, ServerOptimization):
    """``lr_theta`` γ_θ, ``lr_w`` γ_w, ``tau`` τ (fine-tuner steps), ``local_theta_steps`` K (0: Algorithm 1),
    ``personal_init`` (``random`` | ``initial``), the server optimizer of Algorithm 4's averaging
    (``ServerOptimization``: ``server_optimizer``, ``server_lr``, ...), plus the shared ones (the client
    optimizer's schedule scales both γ_θ and γ_w)."""

    lr_theta: float = option(0.1, lo=0, lo_open=True)
    lr_w: float = option(0.1, lo=0, lo_open=True)
    tau: int = option(10, lo=0)
    local_theta_steps: int = option(0, lo=0)
    personal_init: Literal["random", "initial"] = "random"

    def step_sizes(self) -> tuple[str, ...]:
        return ("lr_theta", "lr_w")

    def check(self, key: str) -> None:
        """Raises: ConfigError: a server optimizer other than ``sgd`` with Algorithm 1 (``local_theta_steps: 0``),
        whose θ-step is γ_θ's own step at the server."""
        super().check(key)
        if self.local_theta_steps == 0 and self.server_optimizer != "sgd":
            raise ConfigError(
                f"{key}.server_optimizer",
                "Algorithm 1 (local_theta_steps: 0) steps θ with γ_θ at the server; a server optimizer needs "
                "Algorithm 4 (local_theta_steps > 0)",
                allowed=("sgd",),
            )


class FFGG(PartialPersonalization):
    """FFGG (Algorithm 1) and Local FFGG (Algorithm 4). State: θ (clients are stateless) and the optimizer of
    Algorithm 1's θ-step ``theta_opt`` (momentum buffers ``[1, ...]``)."""

    name = "ffgg"
    Hyperparameters = FFGGHyperparameters

    def __init__(self, fed, hp, seed, sampling="epoch"):
        super().__init__(fed, hp, seed, sampling)
        self.theta_opt = client_optimizer(
            self.fed, self.hp, self.theta
        )  # Algorithm 1's θ-step: the server's θ [1, ...]

    @property
    def personal_lr(self) -> float:
        return self.hp.lr_w

    def personal_start(self, clients: Tensor, generator: torch.Generator) -> Params:
        if self.hp.personal_init == "initial":
            return super().personal_start(clients, generator)
        fresh = self.fed.model.init(generator, self.fed.dtype, count=len(clients), keys=self.personal_keys)
        return {k: v.to(self.fed.device) for k, v in fresh.items()}

    def drawn_steps(self) -> int:
        """τ fine-tuning steps, then K alternating steps (Algorithm 4) or the θ-gradient's minibatch (1)."""
        return self.hp.tau + max(self.hp.local_theta_steps, 1)

    def train_chunk(self, t: int, clients: Tensor, params: Params, steps) -> Params:
        """Algorithm 2's τ steps on w (θ^r fixed), then Algorithm 1's θ-gradient Δ_m = ∇_θ f_m(θ^r, w_m),
        sent; or Algorithm 4's K alternating steps, θ_m sent. One optimizer of w for both phases (stateless
        clients: zero momentum), θ_k's from zero momentum."""
        hp, model = self.hp, self.fed.model
        lr_w, lr_theta = (
            scheduled_lr(hp.lr_w, t, self.hp, self.rounds),
            scheduled_lr(hp.lr_theta, t, self.hp, self.rounds),
        )
        opt_w = client_optimizer(self.fed, self.hp, params, self.personal_keys)
        opt_theta = client_optimizer(self.fed, self.hp, params, self.global_keys)  # θ_0 = θ^r: zero momentum

        def fine_tuned():  # Alg. 2's τ steps w ← w − γ_w ∇_w f(θ^r, w) taken; the later steps handed over
            for k, s, (batch,) in steps:
                part = rows(params, s)  # views
                if k < hp.tau:
                    sgd_step(model, part, batch, lr_w, opt_w.keys, s, opt_w)
                else:
                    yield s, part, batch

        if hp.local_theta_steps == 0:  # Algorithm 1: one global gradient per client, Δ_m sent

            def delta(part: Params, batch) -> Params:  # Δ_m = ∇_θ f_m(θ^r, w_m) of the part's clients
                _, grads = client_grads(model, part, batch)
                return {key: grads[key] for key in self.global_keys}

            deltas = ((s, (delta(part, batch),)) for s, part, batch in fine_tuned())
            (sent,) = stitch(deltas, len(clients))
            return sent
        for s, part, batch in fine_tuned():  # Algorithm 4: K alternating steps, θ_m sent
            _, grads = client_grads(model, part, batch)
            opt_w.step(part, grads, lr_w, s)  # w ← w − γ_w ∇_w f(θ_k, w)
            _, grads = client_grads(model, part, batch)  # ∇_θ at (θ_k, w_{k+1})
            opt_theta.step(part, grads, lr_theta, s)  # θ_{k+1} = θ_k − γ_θ ∇_θ f(θ_k, w_{k+1})
        return {k: params[k] for k in self.global_keys}

    def theta_step(self, t: int, mean: Params) -> None:
        """Algorithm 1: θ^{r+1} = θ^r − γ_θ · mean Δ_m through the θ-step's optimizer; Algorithm 4: the
        server's averaging (:meth:`PartialPersonalization.theta_step`)."""
        if self.hp.local_theta_steps:
            return super().theta_step(t, mean)
        lr_theta = scheduled_lr(self.hp.lr_theta, t, self.hp, self.rounds)
        if self.theta_opt.plain:
            self.theta = {k: v - lr_theta * mean[k] for k, v in self.theta.items()}
        else:
            self.theta_opt.step(self.theta, mean, lr_theta)


ALGORITHMS = {"ffgg": FFGG}
