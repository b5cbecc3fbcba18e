"""FFGG, FedAlt and FedSim, sequential references: one client after the other, θ and w as one module, each
part's steps through PyTorch's ``torch.optim.SGD`` (``TorchSGD``)."""

from __future__ import annotations

from torch import Tensor

from hetfl.engine.federation import Federation
from hetfl.engine.rng import generator
from hetfl.reference.common import (
    TorchSGD,
    client_data,
    draws,
    eval_draws,
    initial_state,
    loss_grads,
    make_module,
    mean_states,
    minibatch,
    round_lrs,
    sample_weights,
    sampler_for,
    state_of,
)
from hetfl.reference.fedavg_ft import finetune
from hetfl.reference.fedavg_like import ServerOpt


def _personal_inits(fed, count, gen, personal, default):
    """Fresh personal parts (the model's init, as FFGG's ``personal_init: random``), or the default."""
    if gen is None:
        return [dict(default) for _ in range(count)]
    fresh = fed.model.init(gen, fed.dtype, count=count, keys=personal)
    return [{k: v[i] for k, v in fresh.items()} for i in range(count)]


def _server(theta, states, sampled, fed, hp, averaging: ServerOpt):
    """θ − server_lr (θ − mean θ_m), or the server optimizer's step (``server_optimizer`` not ``sgd``)."""
    mean = mean_states(states, sample_weights(fed, sampled.tolist(), hp.client_weights))
    if averaging.kind != "sgd":
        return averaging.step(theta, mean)
    return {k: v - averaging.lr * (v - mean[k]) for k, v in theta.items()}


def _evaluate(fed, hp, seed, t, sampling, theta, starts_of, lr):
    """Personal models at the evaluation of round ``t``: θ with w fine-tuned from ``starts_of(generator)``."""
    sampler = eval_draws(fed, seed, t, hp.batch_size, sampling)
    starts = starts_of(sampler.generator)
    models = [{**theta, **w} for w in starts]
    lr = hp.finetune_lr or lr
    return finetune(fed, hp, models, hp.finetune_steps, lr, sampler, fed.model.personal_keys())


def ffgg(fed: Federation, hp, seed: int, schedule: Tensor, sampling: str = "epoch"):
    """FFGG (Algorithms 1, 2, 4); yield ``{"personal": [...]}`` after each round.

    Each client's w steps (and Algorithm 4's θ steps) go through its own ``TorchSGD`` of that part, new
    every round; Algorithm 1's θ-step is the server's ``TorchSGD`` on θ (kept across rounds) with the mean
    θ-gradient as ``grad``."""
    data = client_data(fed)
    sampler = sampler_for(fed, hp.batch_size, seed, sampling)
    rng = generator(seed, "algorithm")
    personal = fed.model.personal_keys()
    w0 = initial_state(fed, seed)
    theta = {k: v for k, v in w0.items() if k not in personal}
    averaging = ServerOpt(hp)  # Algorithm 4's, FedAlt's and FedSim's server step
    default = {k: w0[k] for k in personal}
    server = make_module(fed, w0)  # Algorithm 1: holds θ for the server's optimizer (its w unused)
    server_opt = TorchSGD(server, hp, list(theta))
    lrs_w, lrs_theta = round_lrs(hp, hp.lr_w, len(schedule)), round_lrs(hp, hp.lr_theta, len(schedule))
    random = hp.personal_init == "random"
    for t, sampled in enumerate(schedule, start=1):
        lr_w, lr_theta = lrs_w[t - 1], lrs_theta[t - 1]
        inits = _personal_inits(fed, len(sampled), rng if random else None, personal, default)
        tuning = draws(sampler, sampled, hp.tau)
        extra = draws(sampler, sampled, max(1, hp.local_theta_steps))
        grads, states = [], []
        for row, client in enumerate(sampled.tolist()):
            module = make_module(fed, {**theta, **inits[row]})
            opt_w, opt_theta = TorchSGD(module, hp, personal), TorchSGD(module, hp, list(theta))
            for draw in tuning:  # Algorithm 2 on w
                opt_w.step_on(*minibatch(data[client], draw, row), lr_w)
            names = [k for k, _ in module.named_parameters()]
            if hp.local_theta_steps == 0:  # one θ-gradient
                g = dict(zip(names, loss_grads(module, *minibatch(data[client], extra[0], row)), strict=True))
                grads.append({k: g[k] for k in theta})
                continue
            for draw in extra:  # Algorithm 4: alternate
                x, y = minibatch(data[client], draw, row)
                opt_w.step_on(x, y, lr_w)
                opt_theta.step_on(x, y, lr_theta)
            states.append({k: v for k, v in state_of(module).items() if k in theta})
        if hp.local_theta_steps == 0:
            server_opt.step(
                mean_states(grads, sample_weights(fed, sampled.tolist(), hp.client_weights)), lr_theta
            )
            theta = {k: v for k, v in state_of(server).items() if k in theta}
        else:
            theta = _server(theta, states, sampled, fed, hp, averaging)
        starts = lambda g: _personal_inits(fed, fed.num_clients, g if random else None, personal, default)  # noqa: E731
        yield {"personal": _evaluate(fed, hp, seed, t, sampling, theta, starts, hp.lr_w)}


def split_training(fed: Federation, hp, seed: int, schedule: Tensor, sampling: str, alternate: bool):
    """FedAlt (``alternate``) or FedSim; yield ``{"personal": [...]}`` after each round.

    Each sampled client's steps go through its own ``TorchSGD``: FedAlt one for w and one for θ, FedSim one
    for both, new every round; a stateful client's w momentum buffers are carried to its next round."""
    data = client_data(fed)
    sampler = sampler_for(fed, hp.batch_size, seed, sampling)
    personal = fed.model.personal_keys()
    w0 = initial_state(fed, seed)
    theta = {k: v for k, v in w0.items() if k not in personal}
    averaging = ServerOpt(hp)  # Algorithm 4's, FedAlt's and FedSim's server step
    stored = [{k: w0[k].clone() for k in personal} for _ in range(fed.num_clients)]
    momentum = [{} for _ in range(fed.num_clients)]  # stateful clients' w momentum buffers
    default = {k: w0[k] for k in personal}
    w_steps = hp.local_steps if hp.personal_steps is None else hp.personal_steps
    lrs = round_lrs(hp, hp.lr, len(schedule))
    for t, sampled in enumerate(schedule, start=1):
        first = draws(sampler, sampled, w_steps if alternate else hp.local_steps)
        second = draws(sampler, sampled, hp.local_steps) if alternate else []
        states = []
        for row, client in enumerate(sampled.tolist()):
            start = stored[client] if hp.stateful else default
            module = make_module(fed, {**theta, **start})
            opt_first = TorchSGD(module, hp, personal if alternate else None)
            opt_theta = TorchSGD(module, hp, list(theta))
            if hp.stateful:
                opt_first.load_momentum(momentum[client])
            for draw in first:
                opt_first.step_on(*minibatch(data[client], draw, row), lrs[t - 1])
            for draw in second:
                opt_theta.step_on(*minibatch(data[client], draw, row), lrs[t - 1])
            state = state_of(module)
            if hp.stateful:
                stored[client] = {k: state[k] for k in personal}
                kept = opt_first.momentum()
                momentum[client].update({k: v for k, v in kept.items() if k in personal})
            states.append({k: state[k] for k in theta})
        theta = _server(theta, states, sampled, fed, hp, averaging)
        starts = lambda g: [s if hp.stateful else default for s in stored]  # noqa: E731
        yield {"personal": _evaluate(fed, hp, seed, t, sampling, theta, starts, hp.lr)}


def fedalt(fed, hp, seed, schedule, sampling="epoch"):
    """FedAlt (Pillutla et al. 2022): w steps, then θ steps."""
    return split_training(fed, hp, seed, schedule, sampling, alternate=True)


def fedsim(fed, hp, seed, schedule, sampling="epoch"):
    """FedSim (Pillutla et al. 2022): joint steps."""
    return split_training(fed, hp, seed, schedule, sampling, alternate=False)


REFERENCES = {  # the algorithm each reference follows (hetfl.reference.references)
    "fedalt": fedalt,
    "fedsim": fedsim,
    "ffgg": ffgg,
}
