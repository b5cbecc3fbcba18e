"""Helpers of the sequential references: per-client data, modules, one SGD step."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hetfl.engine.federation import Federation
from hetfl.engine.rng import generator
from hetfl.engine.sampler import BatchSampler


def client_data(fed: Federation) -> list[tuple[Tensor, Tensor]]:
    """Each client's training data ``(x [n_i, ...], y [n_i])``, as separate tensors."""
    off = fed.train.offsets.tolist()
    return [(fed.train.x[a:b], fed.train.y[a:b]) for a, b in zip(off[:-1], off[1:], strict=True)]


def initial_state(fed: Federation, seed: int) -> dict[str, Tensor]:
    """The initial weights of one client model (the batched code's w_0, row 0)."""
    init = fed.model.init(generator(seed, "init"), fed.dtype)
    return {k: v[0].to(fed.device) for k, v in init.items()}


def make_module(fed: Federation, state: dict[str, Tensor]) -> nn.Module:
    """A fresh single-client module holding a copy of ``state``."""
    module = fed.model.reference_module().to(device=fed.device, dtype=fed.dtype)
    module.load_state_dict({k: v.clone() for k, v in state.items()})
    return module


def state_of(module: nn.Module) -> dict[str, Tensor]:
    """A detached copy of the module's parameters."""
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def sampler_for(fed: Federation, batch_size: int, seed: int, sampling: str) -> BatchSampler:
    """The same minibatch stream as the batched algorithm's (stream ``batches``)."""
    return BatchSampler(fed.train.sizes, batch_size, generator(seed, "batches"), sampling)


def draws(sampler: BatchSampler, clients: Tensor, n: int) -> list[tuple[Tensor, Tensor]]:
    """The next ``n`` minibatch draws for ``clients``, in the order the batched code makes them."""
    return [sampler.next(clients) for _ in range(n)]


def minibatch(data: tuple[Tensor, Tensor], draw: tuple[Tensor, Tensor], row: int) -> tuple[Tensor, Tensor]:
    """Client ``row`` of a draw: its valid samples ``(x [b, ...], y [b])``."""
    pos, mask = draw
    keep = pos[row][mask[row]].to(data[0].device)
    return data[0][keep], data[1][keep]


def loss_grads(module: nn.Module, x: Tensor, y: Tensor) -> list[Tensor]:
    """Gradients of the mean loss of ``module`` on ``(x, y)``, in ``parameters()`` order.

    Cross-entropy for labels (long ``y``), ``nn.MSELoss`` for regression targets (float ``y [b, K]``).
    """
    out = module(x)
    loss = F.cross_entropy(out, y) if not y.is_floating_point() else F.mse_loss(out, y)
    return list(torch.autograd.grad(loss, list(module.parameters())))


def sgd_step(module: nn.Module, x: Tensor, y: Tensor, lr: float, names: list[str] | None = None) -> None:
    """One plain SGD step on the mean loss, of the parameters ``names`` (None: all)."""
    grads = loss_grads(module, x, y)
    with torch.no_grad():
        for (name, p), g in zip(module.named_parameters(), grads, strict=True):
            if names is None or name in names:
                p -= lr * g


def eval_draws(fed: Federation, seed: int, t: int, batch_size: int, sampling: str, split: str = "train"):
    """The evaluation sampler of round ``t`` (as the batched algorithms create it)."""
    from hetfl.engine.sampler import eval_sampler

    return eval_sampler(getattr(fed, split).sizes, batch_size, seed, t, sampling)


def split_data(fed: Federation, split: str) -> list[tuple[Tensor, Tensor]]:
    """Each client's data of ``split``."""
    data = getattr(fed, split)
    off = data.offsets.tolist()
    return [(data.x[a:b], data.y[a:b]) for a, b in zip(off[:-1], off[1:], strict=True)]


def mean_states(states: list[dict[str, Tensor]], weights: list[float] | None) -> dict[str, Tensor]:
    """Weighted mean of client states (uniform when ``weights`` is None)."""
    if weights is None:
        weights = [1.0 / len(states)] * len(states)
    return {k: sum(w * s[k] for w, s in zip(weights, states, strict=True)) for k in states[0]}


def sample_weights(fed: Federation, clients: list[int], rule: str) -> list[float] | None:
    """None for ``uniform``; n_i / Σ n_j over ``clients`` for ``samples``."""
    if rule == "uniform":
        return None
    n = [float(fed.train.sizes[c]) for c in clients]
    return [v / sum(n) for v in n]
