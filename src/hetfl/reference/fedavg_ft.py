"""FedAvg+FT, sequential reference: FedAvg, then each client fine-tunes the global model alone."""

from __future__ import annotations

from torch import Tensor

from hetfl.engine.federation import Federation
from hetfl.reference.common import TorchSGD, client_data, draws, eval_draws, make_module, minibatch, state_of
from hetfl.reference.fedavg import fedavg


def finetune(
    fed: Federation, hp, start: list[dict], steps: int, lr: float, sampler, names=None
) -> list[dict]:
    """Each client's model ``start[i]`` after ``steps`` steps of a new ``TorchSGD`` (``hp``'s optimizer, zero
    momentum, constant ``lr``) on its training data, of the parameters ``names`` (None: all)."""
    data = client_data(fed)
    batches = draws(sampler, fed.all_clients(), steps)
    out = []
    for client, state in enumerate(start):
        module = make_module(fed, state)
        opt = TorchSGD(module, hp, names)
        for draw in batches:
            opt.step_on(*minibatch(data[client], draw, client), lr)
        out.append(state_of(module))
    return out


def fedavg_ft(fed: Federation, hp, seed: int, schedule: Tensor, sampling: str = "epoch"):
    """Yield after each round ``{"global": w, "personal": [fine-tuned w per client]}``."""
    names = fed.model.personal_keys() if hp.finetune == "personal" else None
    for t, models in enumerate(fedavg(fed, hp, seed, schedule, sampling), start=1):
        w = models["global"]
        sampler = eval_draws(fed, seed, t, hp.batch_size, sampling)
        personal = finetune(
            fed, hp, [w] * fed.num_clients, hp.finetune_steps, hp.finetune_lr or hp.lr, sampler, names
        )
        yield {"global": w, "personal": personal}


REFERENCES = {"fedavg_ft": fedavg_ft}  # the algorithm each reference follows (hetfl.reference.references)
