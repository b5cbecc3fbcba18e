"""WGA-BC, sequential reference (Chayti et al. 2021, bias correction): a loop over clients and collaborators."""

from __future__ import annotations

import torch
from torch import Tensor

from hetfl.algorithms.collaborative.common import PairSampler
from hetfl.engine.federation import Federation
from hetfl.engine.rng import generator
from hetfl.reference.collaborative import grads
from hetfl.reference.common import (
    TorchSGD,
    client_data,
    initial_state,
    make_module,
    minibatch,
    round_lrs,
    state_of,
)


def wga_bc(fed: Federation, hp, seed: int, schedule: Tensor, sampling: str = "epoch"):
    """Yield, after each round, ``{"personal": [θ_i]}``."""
    n = fed.num_clients
    data = client_data(fed)
    pairs = PairSampler(fed.train.sizes, hp.batch_size, generator(seed, "batches"), sampling)
    w0 = initial_state(fed, seed)
    modules = [make_module(fed, w0) for _ in range(n)]
    opts = [TorchSGD(m, hp) for m in modules]
    weight = hp.weight if hp.weight is not None else 1.0 / n
    bias = [None] * n  # c_i = Σ_{k≠i} w c_ik, per parameter
    lrs = round_lrs(hp, hp.lr, len(schedule))  # torch's scheduler, one step per round
    for t in range(len(schedule)):
        for _ in range(hp.local_steps):
            draw = pairs.next(torch.arange(n * n))
            for i in range(n):
                g = [grads(modules[i], minibatch(data[k], draw, i * n + k)) for k in range(n)]
                d = [sum(weight * (g[k][j] - g[i][j]) for k in range(n) if k != i) for j in range(len(g[i]))]
                if n == 1:
                    d = [torch.zeros_like(v) for v in g[i]]
                c = bias[i] if bias[i] is not None else [torch.zeros_like(v) for v in d]
                pseudo = [a + b - e for a, b, e in zip(g[i], d, c, strict=True)]
                bias[i] = [(1 - hp.beta) * e + hp.beta * b for e, b in zip(c, d, strict=True)]
                opts[i].step(pseudo, lrs[t])
        yield {"personal": [state_of(m) for m in modules]}


REFERENCES = {"wga_bc": wga_bc}  # the algorithm each reference follows (hetfl.reference.references)
