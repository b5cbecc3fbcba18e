"""The server optimizer: the server treats the clients' mean update as a pseudo-gradient (FedOpt).

Reddi, Charles, Zaheer, Garrett, Rush, Konečný, Kumar, McMahan, "Adaptive Federated Optimization", ICLR 2021
(https://arxiv.org/abs/2003.00295), Algorithm 1 (FedOpt) and Algorithm 2 (FedAdagrad, FedYogi, FedAdam).
With x_t the server model and x̄_t the clients' aggregate (the weighted mean of their models), the round's
pseudo-gradient is Δ_t = x̄_t − x_t (Algorithm 2: Δ_t = (1/|S|) Σ_{i∈S} Δ_i^t, with Δ_i^t = x_i^t − x_t;
weighted by the run's ``client_weights``), and, coordinate-wise, with η = ``server_lr``, β1 =
``server_momentum``, β2 = ``server_beta2``, τ = ``server_eps``:

| ``server_optimizer`` | name | update |
|---|---|---|
| ``sgd`` | FedAvg with a server learning rate (Algorithm 1, SGD) | x_{t+1} = x_t + η Δ_t |
| ``avgm`` | FedAvgM (Hsu, Qi, Brown, arXiv:1909.06335, 2019; a baseline of Reddi et al.) | m_t = β1 m_{t−1} + Δ_t; x_{t+1} = x_t + η m_t |
| ``adagrad`` | FedAdagrad (Algorithm 2) | v_t = v_{t−1} + Δ_t² |
| ``adam`` | FedAdam (Algorithm 2) | v_t = β2 v_{t−1} + (1 − β2) Δ_t² |
| ``yogi`` | FedYogi (Algorithm 2) | v_t = v_{t−1} − (1 − β2) Δ_t² sign(v_{t−1} − Δ_t²) |

and for the three adaptive ones m_t = β1 m_{t−1} + (1 − β1) Δ_t, x_{t+1} = x_t + η m_t / (√v_t + τ), from
m_{−1} = 0 and v_{−1} = τ² (Algorithm 2 asks v_{−1} ≥ τ²; as printed, without Adam's bias correction).
``sgd`` with η = 1 is x̄_t itself: the plain average, returned as is (bit for bit the code before the
server optimizer existed).

"""

from __future__ import annotations

from typing import Any

import torch

from hetfl.engine.params import Params

SERVER_OPTIMIZERS = ("sgd", "avgm", "adagrad", "adam", "yogi")


def is_plain_average(hp: Any) -> bool:
    """True when the server step is the plain average: ``server_optimizer`` ``sgd`` (or absent) with
    ``server_lr`` 1 (or absent)."""
    return getattr(hp, "server_optimizer", "sgd") == "sgd" and getattr(hp, "server_lr", 1.0) == 1.0


class ServerOptimizer:
    """The server's optimizer of one shared model ``[1, ...]`` and its state (m, v: ``[1, ...]`` each, made at
    the first :meth:`step` that needs them, like the model it steps).

    Args:
        hp: hyper-parameters with ``server_optimizer`` (one of ``SERVER_OPTIMIZERS``), ``server_lr`` η,
            ``server_momentum`` β1, ``server_beta2`` β2, ``server_eps`` τ (absent: sgd, 1, 0.9, 0.99, 1e-3; the
            options of ``hetfl.algorithms.hyperparameters.ServerOptimization``).

    The state is part of the algorithm's (checkpoints): an algorithm keeps its server optimizer as an
    attribute, built once with its hyper-parameters.

    Raises:
        ValueError: an unknown optimizer.
    """

    def __init__(self, hp: Any):
        self.plain = is_plain_average(hp)
        self.kind = getattr(hp, "server_optimizer", "sgd")
        if self.kind not in SERVER_OPTIMIZERS:
            raise ValueError(
                f"unknown server optimizer '{self.kind}'; allowed: {', '.join(SERVER_OPTIMIZERS)}"
            )
        self.lr = float(getattr(hp, "server_lr", 1.0))
        self.beta1 = float(getattr(hp, "server_momentum", 0.9))
        self.beta2 = float(getattr(hp, "server_beta2", 0.99))
        self.eps = float(getattr(hp, "server_eps", 1e-3))
        self.m: Params | None = None
        self.v: Params | None = None

    def _init_state(self, template: Params) -> None:
        """m = 0 and v = τ² shaped like the server model ``template [1, ...]`` (those the optimizer keeps)."""
        self.m = {k: torch.zeros_like(v) for k, v in template.items()} if self.kind != "sgd" else None
        adaptive = self.kind in ("adagrad", "adam", "yogi")
        self.v = {k: torch.full_like(v, self.eps**2) for k, v in template.items()} if adaptive else None

    @torch.no_grad()
    def step(self, x: Params, aggregate: Params) -> Params:
        """x_{t+1} from the server model ``x [1, ...]`` and the clients' aggregate ``aggregate [1, ...]``
        (x̄_t; Δ_t = x̄_t − x_t); updates the state, returns new tensors (``x`` is not modified). The plain
        average (``sgd``, η = 1: :func:`is_plain_average`) is ``aggregate`` itself, bit for bit."""
        if self.plain:
            return aggregate
        if self.kind != "sgd" and self.m is None:  # the first step of a stateful optimizer
            self._init_state(x)
        lr = self.lr
        out = {}
        for k, w in x.items():
            delta = aggregate[k] - w  # Δ_t, the pseudo-gradient (a descent direction)
            if self.kind == "sgd":
                out[k] = w + lr * delta
                continue
            m = self.m[k]
            if self.kind == "avgm":
                m.mul_(self.beta1).add_(delta)  # m_t = β1 m_{t−1} + Δ_t
                out[k] = w + lr * m
                continue
            m.mul_(self.beta1).add_(delta, alpha=1.0 - self.beta1)  # m_t = β1 m_{t−1} + (1 − β1) Δ_t
            v, sq = self.v[k], delta * delta
            if self.kind == "adagrad":
                v.add_(sq)
            elif self.kind == "adam":
                v.mul_(self.beta2).add_(sq, alpha=1.0 - self.beta2)
            else:  # yogi
                v.sub_((1.0 - self.beta2) * sq * torch.sign(v - sq))
            out[k] = w + lr * m / (v.sqrt() + self.eps)
        return out
