"""BR-FFGG (Algorithm 5) with sign-flipping Byzantines, sequential reference (the official notebook's
loop: good clients one by one, then −Δ of distinct good clients, then ``np.median`` of bucket means)."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from hetfl.engine.rng import generator
from hetfl.problems.ffgg_quadratic import FFGGQuadratic
from hetfl.reference.ffgg import ffgg_directions, stepsizes
from hetfl.reference.quadratic_client import clients


def cm_bucketing(vectors: list[np.ndarray], bucket_size: int, rng: torch.Generator) -> np.ndarray:
    """The notebook's ``cm``: shuffle, average consecutive groups of ``bucket_size``, coordinate-wise median."""
    order = torch.randperm(len(vectors), generator=rng).tolist()
    shuffled = [vectors[i] for i in order]
    buckets = [np.mean(shuffled[i : i + bucket_size], axis=0) for i in range(0, len(shuffled), bucket_size)]
    return np.median(np.array(buckets), axis=0)


def byzantine_ffgg(problem: FFGGQuadratic, hp, seed: int, schedule: Tensor):
    """Yield θ after each round (``hp``: ``ByzantineFFGGHyperparameters``)."""
    cs = clients(problem)
    rng = generator(seed, "algorithm")
    lr_theta, lr_w = stepsizes(cs, hp)
    theta = np.zeros(problem.d_theta)
    for sampled in schedule.tolist():
        good = list(ffgg_directions(cs, theta, sampled, hp, rng, lr_w))
        picks: list[int] = []
        while len(picks) < hp.byzantine:
            picks += torch.randperm(len(good), generator=rng).tolist()
        sent = good + [-good[i] for i in picks[: hp.byzantine]]
        if hp.aggregator == "mean":
            step = np.mean(sent, axis=0)
        else:
            step = cm_bucketing(sent, hp.bucket_size, rng)
        theta = theta - lr_theta * step
        yield theta
