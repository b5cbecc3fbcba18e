"""APFL, sequential reference (Deng et al. 2020, Algorithm 1): w_k, v_k and the mixture per client."""

from __future__ import annotations

import torch
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


def apfl(fed: Federation, hp, seed: int, schedule: Tensor, sampling: str = "epoch"):
    """Yield, after each round, ``{"global": w, "personal": [α_k v_k + (1 − α_k) w]}``."""
    n = fed.num_clients
    data = client_data(fed)
    sampler = sampler_for(fed, hp.batch_size, seed, sampling)
    w = initial_state(fed, seed)
    local = [make_module(fed, w) for _ in range(n)]
    own = [make_module(fed, w) for _ in range(n)]
    opt_w = [TorchSGD(m, hp) for m in local]
    opt_v = [TorchSGD(m, hp) for m in own]
    mix = [hp.mix_alpha] * n
    lrs = round_lrs(hp, hp.lr, len(schedule))  # torch's scheduler, one step per round
    for t in range(len(schedule)):
        for m in local:
            load(m, w)
        for _ in range(hp.local_steps):
            draw = sampler.next(fed.all_clients())
            for k in range(n):
                batch = minibatch(data[k], draw, k)
                wk, vk = state_of(local[k]), state_of(own[k])
                bar = make_module(fed, {p: mix[k] * vk[p] + (1 - mix[k]) * wk[p] for p in vk})
                g_w = grads(local[k], batch)
                g_bar = grads(bar, batch)
                g_v = [mix[k] * g for g in g_bar]
                if hp.adaptive:
                    inner = sum(float(((vk[p] - wk[p]) * g).sum()) for p, g in zip(vk, g_bar, strict=True))
                    mix[k] = min(1.0, max(0.0, mix[k] - hp.mix_lr * inner))
                opt_w[k].step(g_w, lrs[t])
                opt_v[k].step(g_v, lrs[t])
        w = mean_states([state_of(m) for m in local], sample_weights(fed, list(range(n)), hp.client_weights))
        personal = []
        for k in range(n):
            vk = state_of(own[k])
            personal.append({p: mix[k] * vk[p] + (1 - mix[k]) * w[p] for p in vk})
        yield {"global": w, "personal": personal, "mix": torch.tensor(mix, dtype=torch.float64)}


REFERENCES = {"apfl": apfl}  # the algorithm each reference follows (hetfl.reference.references)
