"""FedProx, sequential reference (Li et al., MLSys 2020, Algorithm 2): each client steps, with its own
``torch.optim.SGD``, on the autograd gradient of its minibatch loss plus μ/2 ‖w − w_t‖²."""

from __future__ import annotations

from torch import Tensor

from hetfl.engine.federation import Federation
from hetfl.reference.common import (
    client_data,
    initial_state,
    mean_states,
    round_lrs,
    sample_weights,
    sampler_for,
)
from hetfl.reference.fedavg_like import ServerOpt, StepCounts, longest_first, step_draws, train_client


def fedprox(fed: Federation, hp, seed: int, schedule: Tensor, sampling: str = "epoch"):
    """Yield, after each round, ``{"global": state}``.

    Args:
        hp: ``FedProxHyperparameters``.
        schedule: ``LongTensor[T, S]`` sampled clients per round.
    """
    data = client_data(fed)
    sampler = sampler_for(fed, hp.batch_size, seed, sampling)
    w = initial_state(fed, seed)
    lrs = round_lrs(hp, hp.lr, len(schedule))
    counts, server = StepCounts(fed, hp, seed), ServerOpt(hp)
    for t, sampled in enumerate(schedule):
        order = longest_first(sampled, counts.next())
        batches = step_draws(sampler, order)
        anchor = w

        def proximal(params, anchor=anchor):  # μ/2 ‖w − w_t‖²
            return hp.mu / 2 * sum(((p - anchor[k]) ** 2).sum() for k, p in params.items())

        states = [train_client(fed, data[c], w, batches[c], lrs[t], hp, proximal) for c, _ in order]
        mean = mean_states(states, sample_weights(fed, [c for c, _ in order], hp.client_weights))
        w = server.step(w, mean)
        yield {"global": w}
