"""Per-FedAvg, sequential reference (Fallah et al. 2020, Algorithm 1), one client after the other."""

from __future__ import annotations

import torch
from torch import Tensor

from hetfl.engine.federation import Federation
from hetfl.reference.common import (
    TorchSGD,
    client_data,
    draws,
    eval_draws,
    initial_state,
    loss_grads,
    make_module,
    mean_states,
    minibatch,
    round_lrs,
    sample_weights,
    sampler_for,
    sgd_step,
    split_data,
    state_of,
)


def _step(module, data, batches, row, hp, opt, alpha, beta) -> None:
    """One local step of one client (in place): the model's steps go through its ``opt`` (``TorchSGD``),
    at ``alpha`` and ``beta`` (sequential) or ``beta`` (the meta step; the look-ahead α-step is plain)."""
    params = list(module.parameters())
    x1, y1 = minibatch(data, batches[0], row)
    x2, y2 = minibatch(data, batches[1], row)
    if hp.step == "sequential":
        opt.step_on(x1, y1, alpha)
        opt.step_on(x2, y2, beta)
        return
    w = [p.detach().clone() for p in params]
    sgd_step(module, x1, y1, hp.lr)  # w' = w − α ∇f(w; D)
    g = loss_grads(module, x2, y2)  # ∇f(w'; D')
    with torch.no_grad():
        for p, v in zip(params, w, strict=True):
            p.copy_(v)
    if hp.variant == "hf":
        x3, y3 = minibatch(data, batches[2], row)
        hv = []
        for sign in (1.0, -1.0):
            with torch.no_grad():
                for p, v, d in zip(params, w, g, strict=True):
                    p.copy_(v + sign * hp.hf_delta * d)
            hv.append(loss_grads(module, x3, y3))
        with torch.no_grad():
            for p, v in zip(params, w, strict=True):
                p.copy_(v)
        g = [d - hp.lr * (a - b) / (2 * hp.hf_delta) for d, a, b in zip(g, hv[0], hv[1], strict=True)]
    opt.step(g, beta)  # w ← w − β g


def _official_test_batches(data, t: int, batch_size: int):
    """The official code's test batches 2t and 2t + 1 of one client: consecutive slices of B samples
    in stored order, the last one partial, cycling (``DataLoader(test, B)`` restarted when exhausted)."""
    x, y = data
    count = -(-len(y) // batch_size)
    starts = [(k % count) * batch_size for k in (2 * t, 2 * t + 1)]
    return [(x[a : a + batch_size], y[a : a + batch_size]) for a in starts]


def personalize(fed, hp, seed, t, sampling, w):
    """Each client's personalized model at the evaluation of round ``t``."""
    everyone = fed.all_clients()
    if hp.adaptation == "official":
        data = split_data(fed, "test")
        per_client = [_official_test_batches(data[c], t, hp.batch_size) for c in range(fed.num_clients)]
        lrs = [hp.lr, hp.beta]
    else:
        data = split_data(fed, "train")
        lrs = [hp.lr] * hp.adaptation_steps
        batches = draws(eval_draws(fed, seed, t, hp.batch_size, sampling), everyone, len(lrs))
        per_client = [[minibatch(data[c], draw, c) for draw in batches] for c in range(fed.num_clients)]
    out = []
    for client in range(fed.num_clients):
        module = make_module(fed, w)
        for (x, y), lr in zip(per_client[client], lrs, strict=True):
            sgd_step(module, x, y, lr)
        out.append(state_of(module))
    return out


def perfedavg(fed: Federation, hp, seed: int, schedule: Tensor, sampling: str = "epoch"):
    """Yield after each round ``{"global": w, "personal": [adapted w per client]}``."""
    data = client_data(fed)
    sampler = sampler_for(fed, hp.batch_size, seed, sampling)
    w = initial_state(fed, seed)
    per_step = 3 if hp.variant == "hf" and hp.step == "maml" else 2
    alphas, betas = round_lrs(hp, hp.lr, len(schedule)), round_lrs(hp, hp.beta, len(schedule))
    for t, sampled in enumerate(schedule, start=1):
        batches = draws(sampler, sampled, hp.local_steps * per_step)
        states = []
        for row, client in enumerate(sampled.tolist()):
            module = make_module(fed, w)
            opt = TorchSGD(module, hp)  # new every round: zero momentum
            for s in range(hp.local_steps):
                step_batches = batches[s * per_step : (s + 1) * per_step]
                _step(module, data[client], step_batches, row, hp, opt, alphas[t - 1], betas[t - 1])
            states.append(state_of(module))
        w = mean_states(states, sample_weights(fed, sampled.tolist(), hp.client_weights))
        yield {"global": w, "personal": personalize(fed, hp, seed, t, sampling, w)}


REFERENCES = {"perfedavg": perfedavg}  # the algorithm each reference follows (hetfl.reference.references)
