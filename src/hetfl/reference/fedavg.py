"""FedAvg, sequential reference (McMahan et al. 2017, Algorithm 1): one client after the other, each with its
own ``torch.optim.SGD`` (new every round: zero momentum) at the round's step size from torch's scheduler."""

from __future__ import annotations

from torch import Tensor

from hetfl.engine.federation import Federation
from hetfl.reference.common import (
    TorchSGD,
    client_data,
    draws,
    initial_state,
    make_module,
    mean_states,
    minibatch,
    round_lrs,
    sample_weights,
    sampler_for,
    state_of,
)


def fedavg(fed: Federation, hp, seed: int, schedule: Tensor, sampling: str = "epoch"):
    """Yield, after each round, ``{"global": state}`` (state: ``dict[str, Tensor[...]]`` of one model).

    Args:
        hp: ``FedAvgHyperparameters``.
        schedule: ``LongTensor[T, S]`` sampled clients per round.
    """
    data = client_data(fed)
    sampler = sampler_for(fed, hp.batch_size, seed, sampling)
    w = initial_state(fed, seed)
    lrs = round_lrs(hp, hp.lr, len(schedule))
    for t, sampled in enumerate(schedule):
        batches = draws(sampler, sampled, hp.local_steps)
        states = []
        for row, client in enumerate(sampled.tolist()):
            module = make_module(fed, w)
            opt = TorchSGD(module, hp)
            for draw in batches:
                opt.step_on(*minibatch(data[client], draw, row), lrs[t])
            states.append(state_of(module))
        w = mean_states(states, sample_weights(fed, sampled.tolist(), hp.client_weights))
        yield {"global": w}
