"""Scaffold (Karimireddy et al. 2020, Algorithm 1, full gradients) on x = (θ, w), sequential reference."""

from __future__ import annotations

import numpy as np
from torch import Tensor

from hetfl.problems.ffgg_quadratic import FFGGQuadratic
from hetfl.reference.quadratic_client import L_f, clients


def scaffold(problem: FFGGQuadratic, hp, seed: int, schedule: Tensor):
    """Yield (x, c, [c_i]) after each round (``hp``: ``ScaffoldHyperparameters``)."""
    cs = clients(problem)
    tau = hp.local_steps
    lr = hp.lr or 1.0 / (L_f(cs) * tau)
    D = problem.d_theta + problem.d_w
    x, c = np.zeros(D), np.zeros(D)
    c_i = [np.zeros(D) for _ in cs]
    for sampled in schedule.tolist():
        dy, dc = [], []
        for m in sampled:
            y = x.copy()
            for _ in range(tau):
                y = y - lr * (cs[m].grad(y) - c_i[m] + c)
            if hp.control_variate == "option1":
                c_plus = cs[m].grad(x)
            else:
                c_plus = c_i[m] - c + (x - y) / (tau * lr)
            dy.append(y - x)
            dc.append(c_plus - c_i[m])
            c_i[m] = c_plus
        x = x + hp.lr_global * np.mean(dy, axis=0)
        c = c + np.sum(dc, axis=0) / len(cs)
        yield x, c, [v.copy() for v in c_i]
