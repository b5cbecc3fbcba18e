"""Local GD on x = (θ, w), sequential reference: each sampled client runs τ GD steps from x, then the mean."""

from __future__ import annotations

import numpy as np
from torch import Tensor

from hetfl.problems.ffgg_quadratic import FFGGQuadratic
from hetfl.reference.quadratic_client import L_f, clients


def local_gd(problem: FFGGQuadratic, hp, seed: int, schedule: Tensor):
    """Yield x = (θ, w) ``[d_θ + d_w]`` after each round (``hp``: ``LocalGDHyperparameters``)."""
    cs = clients(problem)
    lr = hp.lr or 1.0 / (L_f(cs) * hp.local_steps)
    x = np.zeros(problem.d_theta + problem.d_w)
    for sampled in schedule.tolist():
        local = []
        for m in sampled:
            y = x.copy()
            for _ in range(hp.local_steps):
                y = y - lr * cs[m].grad(y)
            local.append(y)
        x = np.mean(local, axis=0)
        yield x
