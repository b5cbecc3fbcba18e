"""Per-client gradients and local SGD (with the shared client optimizer) for many clients at once: no
per-client Python loop."""

from __future__ import annotations

import torch
from torch import Tensor

from hetfl.engine.federation import Batch, Federation
from hetfl.engine.optim import ClientOptimizer
from hetfl.engine.params import Params
from hetfl.engine.sampler import BatchSampler
from hetfl.models import BatchedModel


def client_grads(model: BatchedModel, params: Params, batch: Batch) -> tuple[Tensor, Params]:
    """Each client's minibatch loss and its gradient at its own parameters (``BatchedModel.loss_grads``).

    Args:
        params: ``[C, ...]`` (not modified); batch: ``x [C, B, ...]``, ``y [C, B]``, ``mask [C, B]``.

    Returns:
        ``(loss [C], grads dict[str, Tensor[C, ...]])``.
    """
    return model.loss_grads(params, batch.x, batch.y, None if batch.full else batch.mask)


def local_sgd(
    fed: Federation,
    sampler: BatchSampler,
    params: Params,
    clients: Tensor,
    steps: int,
    lr: float,
    keys: list[str] | None = None,
    split: str = "train",
    optimizer: ClientOptimizer | None = None,
) -> Params:
    """``steps`` SGD steps of each client in ``clients`` on its own minibatches.

    w_i ← w_i − lr · ∇f_i(w_i; D_i), fresh minibatch D_i each step (FedAvg's ClientUpdate,
    McMahan et al. 2017, Algorithm 1); with an ``optimizer``, each step is the shared client optimizer's
    (``ClientOptimizer.step``: clipping, weight decay, momentum, then the step of size ``lr``), which is
    exactly the plain step above when its options are the defaults.

    Args:
        params: ``[C, ...]``, row c belongs to ``clients[c]``; updated in place and returned.
        clients: ``LongTensor[C]``.
        lr: the step size (of this round: ``FederatedAlgorithm.lr_at``).
        keys: the parameters to train (None: all, or the optimizer's); the others stay fixed (partial
            personalization).
        split: the data the steps use (``train``; ``test`` only for the official Per-FedAvg evaluation).
        optimizer: the clients' optimizer (``FederatedAlgorithm.client_optimizer``), built for ``params``'
            rows; its momentum buffers carry on from previous calls. None: plain SGD.

    Returns:
        ``params`` after the steps.

    Raises:
        ValueError: ``keys`` given and not the optimizer's.
    """
    if optimizer is not None:
        if keys is not None and list(keys) != optimizer.keys:
            raise ValueError(f"local_sgd: keys {list(keys)} are not the optimizer's {optimizer.keys}")
        keys = optimizer.keys
    keys = list(params) if keys is None else keys
    if not keys:
        return params
    for _ in range(steps):
        _, grads = client_grads(fed.model, params, fed.batch(sampler, clients, split))
        if optimizer is not None:
            optimizer.step(params, grads, lr)
            continue
        with torch.no_grad():
            torch._foreach_add_([params[k] for k in keys], [grads[k] for k in keys], alpha=-lr)
    return params
