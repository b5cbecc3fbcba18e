"""SCAFFOLD on client data: local steps corrected by control variates.

Karimireddy, Kale, Mohri, Reddi, Stich, Suresh, "SCAFFOLD: Stochastic Controlled Averaging for Federated
Learning", ICML 2020, Algorithm 1. https://arxiv.org/abs/1910.06378

State: the server model x and control c, one control c_i per client, all zero at the start. Each round, for
each sampled client i ∈ S (lines 5-13):

    y_i ← x;  τ_i times:  y_i ← y_i − η_l (g_i(y_i) − c_i + c)                        (lines 7-10)
    c_i⁺ ← g_i(x)                               (option I: a fresh pass over the client's data at x)
           c_i − c + (x − y_i)/(τ_i η_l)        (option II)                               (line 12)
    Δy_i = y_i − x,  Δc_i = c_i⁺ − c_i,  c_i ← c_i⁺                                      (line 13)

then the server (lines 15-17): x ← x + η_g Δx with Δx = (1/|S|) Σ_{i∈S} Δy_i, and c ← c + (|S|/N) Δc with
Δc = (1/|S|) Σ_{i∈S} Δc_i, i.e. c ← c + (1/N) Σ_{i∈S} Δc_i: c stays the mean of the N client controls.

Here: g_i(y) is the minibatch gradient of the local loss; the corrected gradient g_i − c_i + c is what the
shared client optimizer steps (momentum, weight decay, clipping apply to it; the defaults are the paper's
plain step); η_l is the round's step size. Option I's g_i(x) is the client's full-data gradient at x (one
pass in stored order, no minibatch drawn: ``hetfl.engine.grad.full_grads``). The server step x ← x + η_g Δx
is the server optimizer's ``sgd`` at ``server_lr`` η_g (any other ``server_optimizer`` may replace it). With
``client_weights: samples`` Δx is the n_i-weighted mean and c ← c + Σ_{i∈S} (n_i/n) Δc_i, so that c stays
Σ_i (n_i/n) c_i, the weights of that objective. With unequal local steps (``local_steps_per_client``) K in
option II is each client's τ_i.

Hyper-parameters (config ``scaffold`` on client data; the quadratic problem's ``scaffold`` is another
implementation, ``hetfl.algorithms.quadratic.scaffold``): ``control`` (``II``, the default: it reuses the
local steps; ``I`` costs an extra pass over the client's data), ``server_lr`` η_g (1), and FedAvg's.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import torch
from torch import Tensor

from hetfl.algorithms.baselines.common import FedAvgLike
from hetfl.algorithms.hyperparameters import FedAvgFamily
from hetfl.engine.aggregation import aggregation_weights, client_sum
from hetfl.engine.grad import Correction, full_grads
from hetfl.engine.optim import scheduled_lr
from hetfl.engine.params import Params, broadcast, select
from hetfl.engine.state import put
from hetfl.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class ScaffoldHyperparameters(FedAvgFamily):
    """FedAvg's (``FedAvgFamily``: ``server_lr`` is η_g), plus ``control``: the update of c_i, ``II``
    (default) or ``I`` (Algorithm 1, line 12)."""

    control: Literal["I", "II"] = "II"

    def check(self, key: str) -> None:
        """Raises: ConfigError: ``control: II`` with a ``linear`` schedule that warms up (``lr_warmup`` > 0): its
        first round's step size is 0 and option II divides by K η_l."""
        super().check(key)
        if self.control == "II" and self.lr_schedule == "linear" and self.lr_warmup > 0:
            raise ConfigError(
                f"{key}.lr_schedule",
                "control II divides by K η_l, and a linear warm-up's first step size is 0: use control I or "
                "lr_warmup: 0",
            )


class Scaffold(FedAvgLike):
    """SCAFFOLD. State: the server model ``w: [1, ...]`` (x), the server control ``c: [1, ...]`` and the
    client controls ``c_i: [N, ...]``."""

    name = "scaffold"
    Hyperparameters = ScaffoldHyperparameters

    def __init__(self, fed, hp, seed, sampling="epoch"):
        super().__init__(fed, hp, seed, sampling)
        self.c = {k: torch.zeros_like(v) for k, v in self.w.items()}  # c, [1, ...]
        self.c_i = fed.states.stack(self.c, fed.num_clients)  # c_i, [N, ...], placed (hetfl.engine.state)

    def correction(self, clients: Tensor) -> Correction:
        """g_i(y) − c_i + c (Algorithm 1, line 10) for the clients ``clients [S]``."""
        drift = self.drift(clients)

        def corrected(params: Params, grads: Params, rows: slice) -> None:  # [r, ...] of the stack's rows
            with torch.no_grad():
                for k, g in grads.items():
                    g.add_(drift[k][rows])

        return corrected

    def drift(self, clients: Tensor) -> Params:
        """c − c_i of the clients ``clients [S]``: ``[S, ...]``."""
        c_i = select(self.c_i, clients, self.fed.device)
        return {k: c - c_i[k] for k, c in self.c.items()}

    def round(self, t: int, sampled: Tensor) -> None:
        clients, steps = self.participants(sampled)
        x, c = self.w, self.c
        omega = self.population_weights()[clients].to(self.fed.device)  # ω_i of the participants, [S]
        scale = 1.0 / (
            steps.to(torch.float64) * scheduled_lr(self.hp.lr, t, self.hp, self.rounds)
        )  # 1/(τ_i η_l), [S]
        mean, control = (
            client_sum(self.hp, clients, aggregation_weights(self.fed, self.hp, clients)),
            client_sum(self.hp, clients, omega),
        )
        for s, local in self.local_chunks(t, clients, steps):  # y_i of clients[s], [r, ...] (lines 7-10)
            chunk = clients[s]
            with torch.no_grad():
                c_i, drift = select(self.c_i, chunk, self.fed.device), self.drift(chunk)  # [r, ...]
                if self.hp.control == "I":  # c_i⁺ = g_i(x)
                    new = full_grads(self.fed, broadcast(x, len(chunk)), chunk, self.hp.batch_size)
                else:  # c_i⁺ = c_i − c + (x − y_i)/(τ_i η_l)
                    new = {}
                    for k, y in local.items():
                        f = scale[s].to(device=y.device, dtype=y.dtype).reshape(-1, *([1] * (y.dim() - 1)))
                        new[k] = (x[k] - y) * f - drift[k]
                put(self.c_i, chunk, new)
                control.add(s, {k: new[k] - c_i[k] for k in c})  # Δc_i
            mean.add(s, local)
        with torch.no_grad():
            delta = control.result()
            self.c = {k: c[k] + delta[k] for k in c}  # c ← c + Σ_{i∈S} ω_i Δc_i (line 17)
        self.w = self.server.step(x, mean.result())  # x ← x + η_g Δx (line 16)


ALGORITHMS = {"scaffold": Scaffold}
