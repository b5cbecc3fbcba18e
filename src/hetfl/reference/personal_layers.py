"""FedPer, FedRep, LG-FedAvg and FedBABU, sequential references: one client after the other, one ``nn.Module``
each, every step through PyTorch's ``torch.optim.SGD`` (``TorchSGD``), the server rule as each paper writes it.

The personal part is the model split's (``fed.model.personal_keys()``): the head (``output``) of FedPer,
FedRep and FedBABU, the body (``input``) of LG-FedAvg.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor

from hetfl.engine.federation import Federation
from hetfl.reference.common import (
    TorchSGD,
    client_data,
    draws,
    eval_draws,
    initial_state,
    make_module,
    mean_states,
    minibatch,
    round_lrs,
    sample_weights,
    sampler_for,
    state_of,
)
from hetfl.reference.fedavg_ft import finetune

Phases = Callable[[list[str], list[str]], list[tuple[list[str] | None, int]]]


def _kept_personal(fed: Federation, hp, seed: int, schedule: Tensor, sampling: str, phases: Phases):
    """Clients that keep their personal part across rounds; yield ``{"personal": [N states]}`` after each round.

    Each round, each sampled client runs ``phases(personal, shared)``: a list of ``(the parameters it steps, None
    for all; its number of steps)``, one new ``TorchSGD`` per phase; the phase that steps the personal part
    continues from the client's stored momentum buffers of it and stores them again. The server replaces the
    shared part by the (weighted) mean of the clients'. Evaluation: each client's personal part with the
    shared one, after ``finetune_steps`` steps on the personal part (a new ``TorchSGD``, constant step size).
    """
    data = client_data(fed)
    sampler = sampler_for(fed, hp.batch_size, seed, sampling)
    personal = fed.model.personal_keys()
    w0 = initial_state(fed, seed)
    shared = {k: v for k, v in w0.items() if k not in personal}
    kept = [{k: w0[k].clone() for k in personal} for _ in range(fed.num_clients)]
    buffers: list[dict] = [{} for _ in range(fed.num_clients)]
    plan = phases(personal, list(shared))
    lrs = round_lrs(hp, hp.lr, len(schedule))
    for t, sampled in enumerate(schedule, start=1):
        batches = [draws(sampler, sampled, steps) for _, steps in plan]  # phase by phase, as the batched code
        states = []
        for row, client in enumerate(sampled.tolist()):
            module = make_module(fed, {**shared, **kept[client]})
            for (names, _), phase in zip(plan, batches, strict=True):
                opt = TorchSGD(module, hp, names)
                steps_personal = names is None or set(personal) <= set(names)
                if steps_personal:
                    opt.load_momentum(buffers[client])
                for draw in phase:
                    opt.step_on(*minibatch(data[client], draw, row), lrs[t - 1])
                if steps_personal:
                    buffers[client] = {k: v for k, v in opt.momentum().items() if k in personal}
            state = state_of(module)
            kept[client] = {k: state[k] for k in personal}
            states.append({k: state[k] for k in shared})
        shared = mean_states(states, sample_weights(fed, sampled.tolist(), hp.client_weights))
        sampler_eval = eval_draws(fed, seed, t, hp.batch_size, sampling)
        models = [{**shared, **kept[c]} for c in range(fed.num_clients)]
        lr = hp.finetune_lr or hp.lr
        yield {"personal": finetune(fed, hp, models, hp.finetune_steps, lr, sampler_eval, personal)}


def fedper(fed: Federation, hp, seed: int, schedule: Tensor, sampling: str = "epoch"):
    """FedPer (Arivazhagan et al. 2019): ``local_steps`` SGD steps on base and head together; heads kept, bases
    averaged with ``client_weights``."""
    return _kept_personal(
        fed, hp, seed, schedule, sampling, lambda personal, shared: [(None, hp.local_steps)]
    )


def fedrep(fed: Federation, hp, seed: int, schedule: Tensor, sampling: str = "epoch"):
    """FedRep (Collins et al. 2021, Algorithm 1): τ_h = ``personal_steps`` steps on the head, then τ =
    ``local_steps`` steps on the representation at the new head; heads kept, representations averaged."""
    return _kept_personal(
        fed,
        hp,
        seed,
        schedule,
        sampling,
        lambda personal, shared: [(personal, hp.personal_steps), (shared, hp.local_steps)],
    )


def lg_fedavg(fed: Federation, hp, seed: int, schedule: Tensor, sampling: str = "epoch"):
    """LG-FedAvg (Liang et al. 2020, Algorithm 1): ``local_steps`` steps on the whole model; local bodies kept,
    the global layers averaged."""
    return _kept_personal(
        fed, hp, seed, schedule, sampling, lambda personal, shared: [(None, hp.local_steps)]
    )


def fedbabu(fed: Federation, hp, seed: int, schedule: Tensor, sampling: str = "epoch"):
    """FedBABU (Oh et al. 2022); yield ``{"global": w, "personal": [N fine-tuned states]}`` after each round.

    Each sampled client steps the body only (a new ``TorchSGD`` of the body each round) from the global
    model, whose head stays the initial one; the server averages the bodies. Evaluation: the global model
    fine-tuned on each client's data, every parameter (``finetune: all``) or the head (``personal``)."""
    data = client_data(fed)
    sampler = sampler_for(fed, hp.batch_size, seed, sampling)
    head = fed.model.personal_keys()
    w = initial_state(fed, seed)
    body = [k for k in w if k not in head]
    lrs = round_lrs(hp, hp.lr, len(schedule))
    for t, sampled in enumerate(schedule, start=1):
        batches = draws(sampler, sampled, hp.local_steps)
        states = []
        for row, client in enumerate(sampled.tolist()):
            module = make_module(fed, w)
            opt = TorchSGD(module, hp, body)  # the head's learning rate is 0: not among its parameters
            for draw in batches:
                opt.step_on(*minibatch(data[client], draw, row), lrs[t - 1])
            states.append({k: v for k, v in state_of(module).items() if k in body})
        w = {**w, **mean_states(states, sample_weights(fed, sampled.tolist(), hp.client_weights))}
        names = head if hp.finetune == "personal" else None
        sampler_eval = eval_draws(fed, seed, t, hp.batch_size, sampling)
        lr = hp.finetune_lr or hp.lr
        yield {
            "global": w,
            "personal": finetune(fed, hp, [w] * fed.num_clients, hp.finetune_steps, lr, sampler_eval, names),
        }


REFERENCES = {  # the algorithm each reference follows (hetfl.reference.references)
    "fedbabu": fedbabu,
    "fedper": fedper,
    "fedrep": fedrep,
    "lg_fedavg": lg_fedavg,
}
