"""FedAvg, sequential reference (McMahan et al. 2017, Algorithm 1): one client after the other, each with its
own ``torch.optim.SGD`` (new every round: zero momentum) at the round's step size from torch's scheduler;
with the FedAvg-like options, unequal local steps τ_i and the server optimizer (Reddi et al. 2021)."""

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


def fedavg(fed: Federation, hp, seed: int, schedule: Tensor, sampling: str = "epoch", penalty=None):
    """Yield, after each round, ``{"global": state}`` (state: ``dict[str, Tensor[...]]`` of one model).

    Args:
        hp: ``FedAvgHyperparameters``.
        schedule: ``LongTensor[T, S]`` sampled clients per round.
        penalty: ``penalty(w_t)`` -> a term ``term(params)`` added to every client's minibatch loss in the
            round from server model ``w_t`` (FedProx's proximal term); None: none.
    """
    data = client_data(fed)
    sampler = sampler_for(fed, hp.batch_size, seed, sampling)
    w = initial_state(fed, seed)
    lrs = round_lrs(hp, hp.lr, len(schedule))
    counts, server = StepCounts(fed, hp, seed), ServerOpt(hp)
    for t, sampled in enumerate(schedule):
        order = longest_first(sampled, counts.next())
        batches = step_draws(sampler, order)
        term = None if penalty is None else penalty(w)
        states = [train_client(fed, data[c], w, batches[c], lrs[t], hp, term) for c, _ in order]
        mean = mean_states(states, sample_weights(fed, [c for c, _ in order], hp.client_weights))
        w = server.step(w, mean)
        yield {"global": w}


REFERENCES = {"fedavg": fedavg}  # the algorithm each reference follows (hetfl.reference.references)
