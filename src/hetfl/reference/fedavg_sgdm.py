"""FedAvg with per-client ``torch.optim.SGD`` (momentum buffers kept across rounds), sequential reference."""

from __future__ import annotations

from torch import Tensor

from hetfl.engine.federation import Federation
from hetfl.reference.collaborative import grads, load
from hetfl.reference.common import (
    TorchSGD,
    client_data,
    initial_state,
    make_module,
    mean_states,
    minibatch,
    round_lrs,
    sample_weights,
    sampler_for,
    state_of,
)


def fedavg_sgdm(fed: Federation, hp, seed: int, schedule: Tensor, sampling: str = "epoch"):
    """Yield, after each round, ``{"global": w}``."""
    n = fed.num_clients
    data = client_data(fed)
    sampler = sampler_for(fed, hp.batch_size, seed, sampling)
    w = initial_state(fed, seed)
    modules = [make_module(fed, w) for _ in range(n)]
    opts = [TorchSGD(m, hp) for m in modules]
    lrs = round_lrs(hp, hp.lr, len(schedule))  # torch's scheduler, one step per round
    for t in range(len(schedule)):
        for m in modules:
            load(m, w)
        for _ in range(hp.local_steps):
            draw = sampler.next(fed.all_clients())
            for i in range(n):
                opts[i].step(grads(modules[i], minibatch(data[i], draw, i)), lrs[t])
        w = mean_states(
            [state_of(m) for m in modules], sample_weights(fed, list(range(n)), hp.client_weights)
        )
        yield {"global": w}


REFERENCES = {"fedavg_sgdm": fedavg_sgdm}  # the algorithm each reference follows (hetfl.reference.references)
