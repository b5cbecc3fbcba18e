"""CoBo, sequential reference (Hashemi et al. 2024, Algorithm 1, with the authors' code's sampling of pairs):
a loop over the sampled pairs for the weights, one module per client for the penalized steps."""

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
    batch = hp.pair_batch if hp.pair_batch is not None else hp.batch_size
    pick = generator(seed, "algorithm")  # the pairs, then their batches, from one stream
    pairs = PairSampler(fed.train.sizes, batch, pick, sampling)
    w0 = initial_state(fed, seed)
    modules = [make_module(fed, w0) for _ in range(n)]
    opts = [TorchSGD(m, hp) for m in modules]
    rho = hp.rho if hp.rho is not None else 1.0 / (hp.lr * n)
    weights = [[1.0] * n for _ in range(n)]
    upper = [(i, k) for i in range(n) for k in range(i + 1, n)]
    it = updates = 0
    lrs = round_lrs(hp, hp.lr, len(schedule))  # torch's scheduler, one step per round
    for t in range(len(schedule)):
        for _ in range(hp.local_steps):
            states = [state_of(m) for m in modules]
            if it % hp.pair_every == 0:
                p = hp.pair_probability
                if p is None:  # the authors' code: 2/N, then 1/sqrt(s) past 800 updates
                    p = min(1.0, 2.0 / n) if updates <= 800 else updates**-0.5
                if p >= 1.0:
                    chosen = upper
                else:
                    u = torch.rand(len(upper), generator=pick, dtype=torch.float64)
                    chosen = [pair for pair, v in zip(upper, u.tolist(), strict=True) if v < p]
                updates += 1
                streams = [i * n + k for i, k in chosen] + [k * n + i for i, k in chosen]
                if chosen == upper:  # every pair: the N² streams drawn in order
                    rows = streams
                    draw = pairs.next(torch.arange(n * n))
                else:
                    rows = list(range(len(streams)))
                    draw = pairs.next(torch.tensor(streams, dtype=torch.long))
                for j, (i, k) in enumerate(chosen):
                    z = make_module(fed, {q: (states[i][q] + states[k][q]) / 2 for q in states[i]})
                    gk = _flat(grads(z, minibatch(data[k], draw, rows[j])))  # ∇f_k(z_ik; B_k)
                    gi = _flat(grads(z, minibatch(data[i], draw, rows[len(chosen) + j])))  # ∇f_i(z_ik; B_i)
                    inner = float((gi * gk).sum())
                    weights[i][k] = weights[k][i] = min(1.0, max(0.0, weights[i][k] + hp.gamma_c * inner))
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
