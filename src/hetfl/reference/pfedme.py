"""pFedMe, sequential reference (Dinh et al. 2020, Algorithm 1), one client after the other."""

from __future__ import annotations

import torch
from torch import Tensor

from hetfl.engine.federation import Federation
from hetfl.reference.common import (
    TorchSGD,
    client_data,
    draws,
    initial_state,
    loss_grads,
    make_module,
    mean_states,
    minibatch,
    round_lrs,
    sample_weights,
    sampler_for,
    state_of,
)


def _client_round(fed, hp, w, data, batches, row, lr):
    """R local rounds of one client from w_t at step size ``lr``; returns (θ̃, w_{i,R}) as states.

    The local update w_{i,r+1} = w_{i,r} − η λ (w_{i,r} − θ̃_i) is a step of the client's ``torch.optim.SGD``
    (new each round) with ``grad = λ(w_{i,r} − θ̃_i)``; the inner solver takes plain gradient steps."""
    theta = make_module(fed, w)  # θ, warm-started from w_t
    local = make_module(fed, w)  # w_{i,r}
    opt = TorchSGD(local, hp)
    names = [k for k, _ in theta.named_parameters()]
    for draw in batches:
        x, y = minibatch(data, draw, row)
        w_r = state_of(local)
        if hp.inner_init == "local":
            theta.load_state_dict(w_r)
        for _ in range(hp.K):
            grads = loss_grads(theta, x, y)
            with torch.no_grad():
                for (name, p), g in zip(theta.named_parameters(), grads, strict=True):
                    p -= hp.personal_lr * (g + hp.lam * (p - w_r[name]) + hp.inner_l2 * p)
        th = dict(zip(names, (p.detach() for p in theta.parameters()), strict=True))
        opt.step({k: hp.lam * (w_r[k] - th[k]) for k in w_r}, lr)
    return state_of(theta), state_of(local)


def pfedme(fed: Federation, hp, seed: int, schedule: Tensor, sampling: str = "epoch"):
    """Yield, after each round, ``{"global": w, "personal": [θ̃_i], "local": [w_{i,R}]}``."""
    data = client_data(fed)
    sampler = sampler_for(fed, hp.batch_size, seed, sampling)
    w = initial_state(fed, seed)
    personal = [w] * fed.num_clients
    local = [w] * fed.num_clients
    lrs = round_lrs(hp, hp.lr, len(schedule))
    for t, sampled in enumerate(schedule):
        trainers = fed.all_clients() if hp.train_clients == "all" else sampled
        batches = draws(sampler, trainers, hp.local_steps)
        for row, client in enumerate(trainers.tolist()):
            personal[client], local[client] = _client_round(fed, hp, w, data[client], batches, row, lrs[t])
        uploaded = [local[c] for c in sampled.tolist()]
        avg = mean_states(uploaded, sample_weights(fed, sampled.tolist(), hp.client_weights))
        w = {k: (1 - hp.beta) * w[k] + hp.beta * avg[k] for k in w}
        yield {"global": w, "personal": list(personal), "local": list(local)}


REFERENCES = {"pfedme": pfedme}  # the algorithm each reference follows (hetfl.reference.references)
