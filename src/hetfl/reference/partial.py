"""FFGG, FedAlt and FedSim, sequential references: one client after the other, θ and w as one module."""

from __future__ import annotations

from torch import Tensor

from hetfl.engine.federation import Federation
from hetfl.engine.rng import generator
from hetfl.reference.common import (
    client_data,
    draws,
    eval_draws,
    initial_state,
    loss_grads,
    make_module,
    mean_states,
    minibatch,
    sample_weights,
    sampler_for,
    sgd_step,
    state_of,
)
from hetfl.reference.fedavg_ft import finetune


def _personal_inits(fed, count, gen, personal, default):
    """Fresh personal parts (the model's init, as FFGG's ``personal_init: random``), or the default."""
    if gen is None:
        return [dict(default) for _ in range(count)]
    fresh = fed.model.init(gen, fed.dtype, count=count, keys=personal)
    return [{k: v[i] for k, v in fresh.items()} for i in range(count)]


def _server(theta, states, sampled, fed, hp, lr):
    mean = mean_states(states, sample_weights(fed, sampled.tolist(), hp.client_weights))
    return {k: v - lr * (v - mean[k]) for k, v in theta.items()}


def _evaluate(fed, hp, seed, t, sampling, theta, starts_of, lr):
    """Personal models at the evaluation of round ``t``: θ with w fine-tuned from ``starts_of(generator)``."""
    sampler = eval_draws(fed, seed, t, hp.batch_size, sampling)
    starts = starts_of(sampler.generator)
    models = [{**theta, **w} for w in starts]
    return finetune(fed, models, hp.finetune_steps, hp.finetune_lr or lr, sampler, fed.model.personal_keys())


def ffgg(fed: Federation, hp, seed: int, schedule: Tensor, sampling: str = "epoch"):
    """FFGG (Algorithms 1, 2, 4); yield ``{"personal": [...]}`` after each round."""
    data = client_data(fed)
    sampler = sampler_for(fed, hp.batch_size, seed, sampling)
    rng = generator(seed, "algorithm")
    personal = fed.model.personal_keys()
    w0 = initial_state(fed, seed)
    theta = {k: v for k, v in w0.items() if k not in personal}
    default = {k: w0[k] for k in personal}
    random = hp.personal_init == "random"
    for t, sampled in enumerate(schedule, start=1):
        inits = _personal_inits(fed, len(sampled), rng if random else None, personal, default)
        tuning = draws(sampler, sampled, hp.tau)
        extra = draws(sampler, sampled, max(1, hp.local_theta_steps))
        grads, states = [], []
        for row, client in enumerate(sampled.tolist()):
            module = make_module(fed, {**theta, **inits[row]})
            for draw in tuning:  # Algorithm 2 on w
                sgd_step(module, *minibatch(data[client], draw, row), hp.lr_w, personal)
            names = [k for k, _ in module.named_parameters()]
            if hp.local_theta_steps == 0:  # one θ-gradient
                g = dict(zip(names, loss_grads(module, *minibatch(data[client], extra[0], row)), strict=True))
                grads.append({k: g[k] for k in theta})
                continue
            for draw in extra:  # Algorithm 4: alternate
                x, y = minibatch(data[client], draw, row)
                sgd_step(module, x, y, hp.lr_w, personal)
                sgd_step(module, x, y, hp.lr_theta, list(theta))
            states.append({k: v for k, v in state_of(module).items() if k in theta})
        if hp.local_theta_steps == 0:
            mean = mean_states(grads, sample_weights(fed, sampled.tolist(), hp.client_weights))
            theta = {k: v - hp.lr_theta * mean[k] for k, v in theta.items()}
        else:
            theta = _server(theta, states, sampled, fed, hp, hp.server_lr)
        starts = lambda g: _personal_inits(fed, fed.num_clients, g if random else None, personal, default)  # noqa: E731
        yield {"personal": _evaluate(fed, hp, seed, t, sampling, theta, starts, hp.lr_w)}


def split_training(fed: Federation, hp, seed: int, schedule: Tensor, sampling: str, alternate: bool):
    """FedAlt (``alternate``) or FedSim; yield ``{"personal": [...]}`` after each round."""
    data = client_data(fed)
    sampler = sampler_for(fed, hp.batch_size, seed, sampling)
    personal = fed.model.personal_keys()
    w0 = initial_state(fed, seed)
    theta = {k: v for k, v in w0.items() if k not in personal}
    stored = [{k: w0[k].clone() for k in personal} for _ in range(fed.num_clients)]
    default = {k: w0[k] for k in personal}
    w_steps = hp.local_steps if hp.personal_steps is None else hp.personal_steps
    for t, sampled in enumerate(schedule, start=1):
        first = draws(sampler, sampled, w_steps if alternate else hp.local_steps)
        second = draws(sampler, sampled, hp.local_steps) if alternate else []
        states = []
        for row, client in enumerate(sampled.tolist()):
            start = stored[client] if hp.stateful else default
            module = make_module(fed, {**theta, **start})
            for draw in first:
                sgd_step(module, *minibatch(data[client], draw, row), hp.lr, personal if alternate else None)
            for draw in second:
                sgd_step(module, *minibatch(data[client], draw, row), hp.lr, list(theta))
            state = state_of(module)
            if hp.stateful:
                stored[client] = {k: state[k] for k in personal}
            states.append({k: state[k] for k in theta})
        theta = _server(theta, states, sampled, fed, hp, hp.server_lr)
        starts = lambda g: [s if hp.stateful else default for s in stored]  # noqa: E731
        yield {"personal": _evaluate(fed, hp, seed, t, sampling, theta, starts, hp.lr)}


def fedalt(fed, hp, seed, schedule, sampling="epoch"):
    """FedAlt (Pillutla et al. 2022): w steps, then θ steps."""
    return split_training(fed, hp, seed, schedule, sampling, alternate=True)


def fedsim(fed, hp, seed, schedule, sampling="epoch"):
    """FedSim (Pillutla et al. 2022): joint steps."""
    return split_training(fed, hp, seed, schedule, sampling, alternate=False)
