"""Local training, sequential reference: every client runs its own ``torch.optim.SGD`` (kept across rounds),
one after the other."""

from __future__ import annotations

from torch import Tensor

from hetfl.engine.federation import Federation
from hetfl.reference.common import (
    TorchSGD,
    client_data,
    draws,
    initial_state,
    make_module,
    minibatch,
    round_lrs,
    sampler_for,
    state_of,
)


def local(fed: Federation, hp, seed: int, schedule: Tensor, sampling: str = "epoch"):
    """Yield, after each round, ``{"personal": [state_i for each client]}``."""
    data = client_data(fed)
    sampler = sampler_for(fed, hp.batch_size, seed, sampling)
    w0 = initial_state(fed, seed)
    modules = [make_module(fed, w0) for _ in range(fed.num_clients)]
    opts = [TorchSGD(m, hp) for m in modules]
    lrs = round_lrs(hp, hp.lr, len(schedule))
    everyone = fed.all_clients()
    for t in range(len(schedule)):
        batches = draws(sampler, everyone, hp.local_steps)
        for client, opt in enumerate(opts):
            for draw in batches:
                opt.step_on(*minibatch(data[client], draw, client), lrs[t])
        yield {"personal": [state_of(m) for m in modules]}


REFERENCES = {"local": local}  # the algorithm each reference follows (hetfl.reference.references)
