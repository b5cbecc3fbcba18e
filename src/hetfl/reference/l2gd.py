"""L2GD (Hanzely & Richtárik 2020, Algorithm 1), sequential reference: coin by coin, client by client.

The coins of a communication round are the batched code's run lengths (two uniforms of the algorithm
stream per round, the same formula), replayed one flip at a time.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from hetfl.engine.rng import generator
from hetfl.problems.ffgg_quadratic import FFGGQuadratic
from hetfl.reference.quadratic_client import L_f, clients


def l2gd(problem: FFGGQuadratic, hp, seed: int, schedule: Tensor):
    """Yield the client models ``[M, D]`` after each communication round (``hp``: ``L2GDHyperparameters``)."""
    cs = clients(problem)
    rng = generator(seed, "algorithm")
    M, p = len(cs), 1.0 / hp.local_steps
    big = max(L_f(cs) / (1 - p), hp.lam / p)
    alpha = hp.lr or (M / (2 * big) if hp.stepsize_rule == "theory" else big / (2 * M))
    x = [np.zeros(problem.d_theta + problem.d_w) for _ in cs]
    for t in range(1, len(schedule) + 1):
        u = torch.rand(2, generator=rng, dtype=torch.float64).tolist()
        zeros = math.floor(math.log1p(-u[0]) / math.log1p(-p)) + (t > 1)
        ones = 1 + math.floor(math.log1p(-u[1]) / math.log(p))
        for xi in [0] * zeros + [1] * ones:
            if xi == 0:
                x = [xm - alpha / (M * (1 - p)) * c.grad(xm) for xm, c in zip(x, cs, strict=True)]
            else:
                mean = np.mean(x, axis=0)
                a = alpha * hp.lam / (M * p)
                x = [(1 - a) * xm + a * mean for xm in x]
        yield np.array(x)
