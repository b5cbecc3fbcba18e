"""Ditto, sequential reference (Li et al. 2021, Algorithm 1): global and personal module per client."""

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


def ditto(fed: Federation, hp, seed: int, schedule: Tensor, sampling: str = "epoch"):
    """Yield, after each round, ``{"global": w, "personal": [v_k]}``."""
    n = fed.num_clients
    data = client_data(fed)
    sampler = sampler_for(fed, hp.batch_size, seed, sampling)
    w = initial_state(fed, seed)
    local = [make_module(fed, w) for _ in range(n)]
    personal = [make_module(fed, w) for _ in range(n)]
    opt_w = [TorchSGD(m, hp) for m in local]
    opt_v = [TorchSGD(m, hp) for m in personal]
    lrs = round_lrs(hp, hp.lr, len(schedule))  # torch's scheduler, one step per round
    for t in range(len(schedule)):
        for m in local:
            load(m, w)
        for _ in range(hp.local_steps):
            draw = sampler.next(fed.all_clients())
            for k in range(n):
                batch = minibatch(data[k], draw, k)
                g_w = grads(local[k], batch)
                g_v = grads(personal[k], batch)
                reg = [hp.lam * (p.detach() - w[name]) for name, p in personal[k].named_parameters()]
                opt_w[k].step(g_w, lrs[t])
                opt_v[k].step([a + b for a, b in zip(g_v, reg, strict=True)], lrs[t])
        w = mean_states([state_of(m) for m in local], sample_weights(fed, list(range(n)), hp.client_weights))
        yield {"global": w, "personal": [state_of(m) for m in personal]}


REFERENCES = {"ditto": ditto}  # the algorithm each reference follows (hetfl.reference.references)
