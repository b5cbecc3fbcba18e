"""FedProx, sequential reference (Li et al., MLSys 2020, Algorithm 2): each client steps, with its own
``torch.optim.SGD``, on the autograd gradient of its minibatch loss plus μ/2 ‖w − w_t‖²."""

from __future__ import annotations

from torch import Tensor

from hetfl.engine.federation import Federation
from hetfl.reference.fedavg import fedavg


def fedprox(fed: Federation, hp, seed: int, schedule: Tensor, sampling: str = "epoch"):
    """Yield, after each round, ``{"global": state}``: the FedAvg reference with μ/2 ‖w − w_t‖² added to
    every client's minibatch loss.

    Args:
        hp: ``FedProxHyperparameters``.
        schedule: ``LongTensor[T, S]`` sampled clients per round.
    """

    def proximal(anchor):  # μ/2 ‖w − w_t‖²
        return lambda params: hp.mu / 2 * sum(((p - anchor[k]) ** 2).sum() for k, p in params.items())

    return fedavg(fed, hp, seed, schedule, sampling, proximal)


REFERENCES = {"fedprox": fedprox}  # the algorithm each reference follows (hetfl.reference.references)
