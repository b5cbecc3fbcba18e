"""Helpers of the FedAvg-like references (FedAvg, FedProx, SCAFFOLD, FedNova, FedDyn), written plainly, one
client and one parameter at a time: the clients' local step counts, the order of their minibatch draws,
one client's local training on a penalized objective (autograd), and the server optimizer.

What must be identical for a comparison is shared with the batched code by construction (the same random
streams drawn in the same order): the step counts of ``local_steps_per_client: uniform`` (stream
``local_steps``, all N clients each round) and the minibatch draws (at local step k, one ``sampler.next``
for the clients still working, longest first). The update rules are written again here and in each
reference.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hetfl.engine.federation import Federation
from hetfl.engine.rng import generator
from hetfl.engine.sampler import BatchSampler
from hetfl.reference.common import TorchSGD, make_module, minibatch, state_of

State = dict[str, Tensor]
Penalty = Callable[[dict[str, Tensor]], Tensor]
"""A term added to a client's minibatch loss: ``penalty(named parameters) -> scalar`` (autograd)."""


class StepCounts:
    """τ_i of every client, each round, as the docs of ``local_steps_per_client`` say (config/README.md).

    ``equal``: τ; ``spread``: τ_min + round(i (τ − τ_min)/(N − 1)); ``uniform``: ``torch.randint(τ_min, τ + 1,
    (N,))`` from the run's ``local_steps`` stream, every round; times ⌈n_i/B⌉ with ``local_steps_unit:
    epochs``.
    """

    def __init__(self, fed: Federation, hp, seed: int):
        self.hp = hp
        self.rule = getattr(hp, "local_steps_per_client", "equal")
        self.sizes = [int(n) for n in fed.train.sizes]
        self.g = generator(seed, "local_steps")

    def next(self) -> list[int]:
        """τ_i of all N clients for the next round."""
        hp, n = self.hp, len(self.sizes)
        low = getattr(hp, "local_steps_min", 1)
        if self.rule == "equal":
            units = [hp.local_steps] * n
        elif self.rule == "spread":
            units = [low + round(i * (hp.local_steps - low) / max(n - 1, 1)) for i in range(n)]
        else:
            units = torch.randint(low, hp.local_steps + 1, (n,), generator=self.g).tolist()
        if getattr(hp, "local_steps_unit", "steps") == "epochs":
            return [u * -(-size // hp.batch_size) for u, size in zip(units, self.sizes, strict=True)]
        return units


def longest_first(sampled: Tensor, taus: list[int]) -> list[tuple[int, int]]:
    """``[(client, τ_client)]`` of the sampled clients, by τ descending (ties: the server's order)."""
    clients = sampled.tolist()
    return sorted(((c, taus[c]) for c in clients), key=lambda pair: -pair[1])


def step_draws(sampler: BatchSampler, order: list[tuple[int, int]]) -> dict[int, list[tuple[tuple, int]]]:
    """Each client's minibatch draws ``[(draw, row), ...]``: at local step k, one ``sampler.next`` for the
    clients of ``order`` still working (τ > k), in that order (the batched code's calls)."""
    out: dict[int, list] = {c: [] for c, _ in order}
    for k in range(max((tau for _, tau in order), default=0)):
        working = [c for c, tau in order if tau > k]
        draw = sampler.next(torch.tensor(working))
        for row, c in enumerate(working):
            out[c].append((draw, row))
    return out


def objective_grads(module: nn.Module, x: Tensor, y: Tensor, penalty: Penalty | None = None) -> list[Tensor]:
    """Gradients, in ``parameters()`` order, of the mean loss on ``(x, y)`` (cross-entropy, or squared error
    for float targets) plus ``penalty`` of the module's parameters."""
    out = module(x)
    loss = F.cross_entropy(out, y) if not y.is_floating_point() else F.mse_loss(out, y)
    if penalty is not None:
        loss = loss + penalty(dict(module.named_parameters()))
    return list(torch.autograd.grad(loss, list(module.parameters())))


def train_client(
    fed: Federation,
    data: tuple[Tensor, Tensor],
    start: State,
    draws: list[tuple[tuple, int]],
    lr: float,
    hp,
    penalty: Penalty | None = None,
) -> State:
    """One client's local training: a fresh module at ``start``, PyTorch's SGD (``TorchSGD``: new, zero
    momentum), one step per draw on the minibatch loss plus ``penalty``; returns its final state."""
    module = make_module(fed, start)
    opt = TorchSGD(module, hp)
    for draw, row in draws:
        x, y = minibatch(data, draw, row)
        opt.step(objective_grads(module, x, y, penalty), lr)
    return state_of(module)


class ServerOpt:
    """The server optimizer of Reddi et al. (ICLR 2021), Algorithms 1-2, one parameter tensor at a time:
    Δ = mean − w; sgd w + ηΔ; avgm m = β1 m + Δ, w + ηm; adagrad/adam/yogi m = β1 m + (1 − β1)Δ, v from
    v_{−1} = τ² (Σ Δ²; β2 v + (1 − β2)Δ²; v − (1 − β2)Δ² sign(v − Δ²)), w + η m/(√v + τ)."""

    def __init__(self, hp):
        self.kind = getattr(hp, "server_optimizer", "sgd")
        self.lr = getattr(hp, "server_lr", 1.0)
        self.b1 = getattr(hp, "server_momentum", 0.9)
        self.b2 = getattr(hp, "server_beta2", 0.99)
        self.eps = getattr(hp, "server_eps", 1e-3)
        self.m: State = {}
        self.v: State = {}

    def step(self, w: State, mean: State) -> State:
        out = {}
        for k in w:
            delta = mean[k] - w[k]
            if self.kind == "sgd":
                out[k] = w[k] + self.lr * delta
                continue
            m = self.m.get(k, torch.zeros_like(delta))
            if self.kind == "avgm":
                self.m[k] = self.b1 * m + delta
                out[k] = w[k] + self.lr * self.m[k]
                continue
            self.m[k] = self.b1 * m + (1 - self.b1) * delta
            v = self.v.get(k, torch.full_like(delta, self.eps**2))
            if self.kind == "adagrad":
                v = v + delta**2
            elif self.kind == "adam":
                v = self.b2 * v + (1 - self.b2) * delta**2
            else:
                v = v - (1 - self.b2) * delta**2 * torch.sign(v - delta**2)
            self.v[k] = v
            out[k] = w[k] + self.lr * self.m[k] / (torch.sqrt(v) + self.eps)
        return out
