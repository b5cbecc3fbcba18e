"""Local SGD with momentum (the collaborative family's Local), sequential reference."""

from __future__ import annotations

from torch import Tensor

from hetfl.engine.federation import Federation
from hetfl.reference.collaborative import grads
from hetfl.reference.common import (
    TorchSGD,
    client_data,
    initial_state,
    make_module,
    minibatch,
    round_lrs,
    sampler_for,
    state_of,
)


def local_sgdm(fed: Federation, hp, seed: int, schedule: Tensor, sampling: str = "epoch"):
    """Yield, after each round, ``{"personal": [state_i]}``."""
    data = client_data(fed)
    sampler = sampler_for(fed, hp.batch_size, seed, sampling)
    w0 = initial_state(fed, seed)
    modules = [make_module(fed, w0) for _ in range(fed.num_clients)]
    opts = [TorchSGD(m, hp) for m in modules]
    lrs = round_lrs(hp, hp.lr, len(schedule))  # torch's scheduler, one step per round
    for t in range(len(schedule)):
        for _ in range(hp.local_steps):
            draw = sampler.next(fed.all_clients())
            for i, (module, opt) in enumerate(zip(modules, opts, strict=True)):
                opt.step(grads(module, minibatch(data[i], draw, i)), lrs[t])
        yield {"personal": [state_of(m) for m in modules]}


REFERENCES = {"local_sgdm": local_sgdm}  # the algorithm each reference follows (hetfl.reference.references)
