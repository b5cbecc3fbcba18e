"""Asynchronous FFGG (Algorithm 3) and its synchronous mode, sequential reference.

An independent event loop (a list of finish times and ``argmin``, not a heap) over the same random
draws as the batched code, in the same order: the schedule generator's seed (first draw of the
algorithm stream), worker speeds, the K first clients, their K starts w^0 (one draw) and durations, then per
event the new job's client, its start w^0 and its duration.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from hetfl.engine.rng import generator
from hetfl.problems.ffgg_quadratic import FFGGQuadratic
from hetfl.reference.ffgg import ffgg_directions, fine_tune, stepsizes
from hetfl.reference.quadratic_client import clients, draw_w0, example1_L


def async_ffgg(problem: FFGGQuadratic, hp, seed: int, schedule: Tensor):
    """Yield (θ, delays so far, simulated time) after each runner round (``hp``: ``AsyncFFGGHyperparameters``)."""
    cs = clients(problem)
    M, d_w = len(cs), problem.d_w
    K = hp.workers or M
    rng = generator(seed, "algorithm")
    sched = torch.Generator().manual_seed(int(torch.randint(2**62, (1,), generator=rng)))
    speed = torch.exp(hp.speed_spread * torch.randn(K, generator=sched, dtype=torch.float64)).tolist()
    lr_theta, lr_w = stepsizes(cs, hp)
    if hp.mode == "async" and hp.lr_theta is None:
        lr_theta = hp.lr_theta_factor / (2 * example1_L(cs) * math.sqrt(2 * K * (hp.tau_max or K)))
    work = {"gd": hp.local_steps + 1, "cg": hp.local_steps + 2, "exact": 1}[hp.fine_tuner]

    def duration(k):
        z = float(torch.randn(1, generator=sched, dtype=torch.float64))
        return work * speed[k] * math.exp(hp.jitter * z)

    def client_for(k):
        return k % M if hp.assignment == "fixed" else int(torch.randint(M, (1,), generator=sched))

    def delta(theta, m):
        w0 = None if hp.fine_tuner == "exact" else draw_w0(rng, 1, d_w, hp.w_init)[0]
        return cs[m].grad_theta(theta, fine_tune(cs[m], theta, w0, hp.fine_tuner, hp.local_steps, lr_w))

    theta = np.zeros(problem.d_theta)
    delays: list[int] = []
    time = 0.0
    if hp.mode == "sync":
        for sampled in schedule.tolist():
            deltas = ffgg_directions(cs, theta, sampled, hp, rng, lr_w)
            step = deltas.sum(0) if hp.sync_aggregate == "sum" else deltas.mean(0)
            theta = theta - lr_theta * step
            time += max(duration(k) for k in range(len(sampled)))
            yield theta, delays, time
        return
    client = [client_for(k) for k in range(K)]
    starts = draw_w0(rng, K, d_w, hp.w_init) if hp.fine_tuner != "exact" else [None] * K  # one draw for all K
    pending = [
        cs[m].grad_theta(theta, fine_tune(cs[m], theta, w0, hp.fine_tuner, hp.local_steps, lr_w))
        for m, w0 in zip(client, starts, strict=True)
    ]
    start = [0] * K
    finish = [duration(k) for k in range(K)]
    r = 0
    for _ in schedule:
        for _ in range(K):
            j = int(np.argmin(finish))
            delays.append(r - start[j])
            theta = theta - lr_theta * pending[j]
            time = finish[j]
            r += 1
            client[j] = client_for(j)
            pending[j] = delta(theta, client[j])
            start[j] = r
            finish[j] = finish[j] + duration(j)
        yield theta, list(delays), time
