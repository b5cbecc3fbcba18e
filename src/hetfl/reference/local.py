"""Local training, sequential reference: every client runs its own SGD, one after the other."""

from __future__ import annotations

from torch import Tensor

from hetfl.engine.federation import Federation
from hetfl.reference.common import (
    client_data,
    draws,
    initial_state,
    make_module,
    minibatch,
    sampler_for,
    sgd_step,
    state_of,
)


def local(fed: Federation, hp, seed: int, schedule: Tensor, sampling: str = "epoch"):
    """Yield, after each round, ``{"personal": [state_i for each client]}``."""
    data = client_data(fed)
    sampler = sampler_for(fed, hp.batch_size, seed, sampling)
    w0 = initial_state(fed, seed)
    modules = [make_module(fed, w0) for _ in range(fed.num_clients)]
    everyone = fed.all_clients()
    for _ in schedule:
        batches = draws(sampler, everyone, hp.local_steps)
        for client, module in enumerate(modules):
            for draw in batches:
                sgd_step(module, *minibatch(data[client], draw, client), hp.lr)
        yield {"personal": [state_of(m) for m in modules]}
