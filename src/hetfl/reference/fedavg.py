"""FedAvg, sequential reference (McMahan et al. 2017, Algorithm 1): one client after the other."""

from __future__ import annotations

from torch import Tensor

from hetfl.engine.federation import Federation
from hetfl.reference.common import (
    client_data,
    draws,
    initial_state,
    make_module,
    mean_states,
    minibatch,
    sample_weights,
    sampler_for,
    sgd_step,
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
    for sampled in schedule:
        batches = draws(sampler, sampled, hp.local_steps)
        states = []
        for row, client in enumerate(sampled.tolist()):
            module = make_module(fed, w)
            for draw in batches:
                sgd_step(module, *minibatch(data[client], draw, row), hp.lr)
            states.append(state_of(module))
        w = mean_states(states, sample_weights(fed, sampled.tolist(), hp.client_weights))
        yield {"global": w}
