"""Local SGD with momentum (the collaborative family's Local), sequential reference."""

from __future__ import annotations

from torch import Tensor

from hetfl.engine.federation import Federation
from hetfl.reference.collaborative import ClientOptimizer, grads
from hetfl.reference.common import client_data, initial_state, make_module, minibatch, sampler_for, state_of


def local_sgdm(fed: Federation, hp, seed: int, schedule: Tensor, sampling: str = "epoch"):
    """Yield, after each round, ``{"personal": [state_i]}``."""
    data = client_data(fed)
    sampler = sampler_for(fed, hp.batch_size, seed, sampling)
    w0 = initial_state(fed, seed)
    modules = [make_module(fed, w0) for _ in range(fed.num_clients)]
    opts = [ClientOptimizer(m, hp) for m in modules]
    for _ in schedule:
        for _ in range(hp.local_steps):
            draw = sampler.next(fed.all_clients())
            for i, (module, opt) in enumerate(zip(modules, opts, strict=True)):
                opt.step(grads(module, minibatch(data[i], draw, i)))
        for o in opts:
            o.end_epoch()
        yield {"personal": [state_of(m) for m in modules]}
