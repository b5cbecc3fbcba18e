"""CoBo, sequential reference (Hashemi et al. 2024, Algorithm 1): a loop over pairs for the weights, one
module per client for the penalized steps."""

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
    sampler_for,
    state_of,
)


def _flat(gs):
    return torch.cat([g.reshape(-1) for g in gs]).double()


def cobo(fed: Federation, hp, seed: int, schedule: Tensor, sampling: str = "epoch"):
    """Yield, after each round, ``{"personal": [θ_i], "alpha": w}``."""
    n = fed.num_clients
    data = client_data(fed)
    sampler = sampler_for(fed, hp.batch_size, seed, sampling)
    pairs = PairSampler(fed.train.sizes, hp.b_alpha, generator(seed, "algorithm"), sampling)
    w0 = initial_state(fed, seed)
    modules = [make_module(fed, w0) for _ in range(n)]
    opts = [TorchSGD(m, hp) for m in modules]
    rho = hp.rho if hp.rho is not None else 1.0 / (hp.lr * n)
    weights = [[1.0] * n for _ in range(n)]
    period = hp.local_steps if hp.tau == "round" else hp.tau
    if getattr(hp, "tau_epochs", None) is not None:  # τ as a share of an epoch of local_steps iterations
        period = max(1, int(hp.tau_epochs * hp.local_steps + 0.5))
    it = 0
    lrs = round_lrs(hp, hp.lr, len(schedule))  # torch's scheduler, one step per round
    for t in range(len(schedule)):
        for _ in range(hp.local_steps):
            states = [state_of(m) for m in modules]
            if it % period == 0:
                draw = pairs.next(torch.arange(n * n))
                g = {}
                for i in range(n):
                    for k in range(n):
                        z = make_module(fed, {p: (states[i][p] + states[k][p]) / 2 for p in states[i]})
                        g[i, k] = _flat(grads(z, minibatch(data[k], draw, i * n + k)))  # ∇f_k(z_ik)
                for i in range(n):
                    for k in range(n):
                        if i != k:
                            inner = float((g[k, i] * g[i, k]).sum())  # ⟨∇f_i(z_ik), ∇f_k(z_ik)⟩
                            weights[i][k] = min(1.0, max(0.0, weights[i][k] + hp.gamma_c * inner))
            draw = sampler.next(fed.all_clients())
            step_grads = []
            for i in range(n):
                gi = grads(modules[i], minibatch(data[i], draw, i))
                names = list(states[i])
                pen = [
                    sum(weights[i][k] * (states[i][p] - states[k][p]) for k in range(n) if k != i)
                    for p in names
                ]
                step_grads.append([a + rho * b for a, b in zip(gi, pen, strict=True)])
            for i in range(n):
                opts[i].step(step_grads[i], lrs[t])
            it += 1
        yield {"personal": [state_of(m) for m in modules], "alpha": weights}


REFERENCES = {"cobo": cobo}  # the algorithm each reference follows (hetfl.reference.references)
