"""Helpers of the sequential references: per-client data, modules, one SGD step, and the client optimizer
as PyTorch writes it (``TorchSGD``, ``round_lrs``)."""

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


def round_lrs(hp, lr: float, rounds: int) -> list[float]:
    """The step size ``lr`` of rounds 1..T under ``hp.lr_schedule``, read from PyTorch's own scheduler
    (``StepLR(lr_step_size, lr_gamma)``, ``CosineAnnealingLR(T_max=T, eta_min=lr_min)``, for ``linear`` the
    ``LambdaLR`` of Mishchenko et al.'s code (``get_fed_global_lr_scheduler``: a linear warm-up over
    ``lr_warmup`` T rounds, then a linear decay to 0), or none for ``constant``) stepped once per round on a
    one-parameter ``torch.optim.SGD``.

    Args:
        hp: hyper-parameters with the client optimizer's options (absent: constant).
        rounds: T, the run's rounds (the reference's ``len(schedule)``).

    Returns:
        ``[lr_1, ..., lr_T]``.
    """
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=lr)
    schedule = getattr(hp, "lr_schedule", "constant")
    sched = None
    if schedule == "step":
        sched = torch.optim.lr_scheduler.StepLR(opt, hp.lr_step_size, hp.lr_gamma)
    elif schedule == "cosine":
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=rounds, eta_min=hp.lr_min)
    elif schedule == "linear":
        warmup = hp.lr_warmup * rounds

        def factor(step: int) -> float:  # the official code's lr_lambda of round step (0-based)
            if step < warmup:
                return step / max(1.0, warmup)
            return max(0.0, (rounds - step) / max(1.0, rounds - warmup))

        sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    out = []
    for _ in range(rounds):
        out.append(opt.param_groups[0]["lr"])
        if sched is not None:
            opt.step()  # no gradients: no update; keeps the scheduler's call order
            sched.step()
    return out


class TorchSGD:
    """One client's optimizer, PyTorch's own: ``torch.optim.SGD(params, lr, momentum, weight_decay)`` on the
    parameters ``names`` of ``module`` (None: all), with ``torch.nn.utils.clip_grad_norm_(params, clip_norm)``
    before each step. Its momentum buffers live as long as the object (a new one starts from zero).

    Args:
        module: the client's model (its parameters are updated in place).
        hp: hyper-parameters with ``momentum``, ``weight_decay``, ``clip_norm`` (absent: plain SGD).
        names: the parameters it steps (None: every parameter).
    """

    def __init__(self, module: nn.Module, hp, names: list[str] | None = None):
        self.module = module
        self.named = [(n, p) for n, p in module.named_parameters() if names is None or n in names]
        self.clip_norm = getattr(hp, "clip_norm", None)
        self.sgd = torch.optim.SGD(
            [p for _, p in self.named],
            lr=1.0,  # set at every step
            momentum=getattr(hp, "momentum", 0.0),
            weight_decay=getattr(hp, "weight_decay", 0.0),
        )

    def step(self, grads: list[Tensor] | dict[str, Tensor], lr: float) -> None:
        """Set ``param.grad`` of its parameters from ``grads`` (by name, or a list in the module's
        ``parameters()`` order), clip their joint norm, and take ``optimizer.step()`` at step size ``lr``."""
        if not isinstance(grads, dict):
            grads = dict(zip([n for n, _ in self.module.named_parameters()], grads, strict=True))
        for name, p in self.named:
            p.grad = grads[name].detach().clone()
        params = [p for _, p in self.named]
        if self.clip_norm is not None:
            torch.nn.utils.clip_grad_norm_(params, self.clip_norm)
        for group in self.sgd.param_groups:
            group["lr"] = lr
        self.sgd.step()
        for p in params:
            p.grad = None

    def step_on(self, x: Tensor, y: Tensor, lr: float) -> None:
        """One step on the gradient of the module's mean loss on ``(x, y)``."""
        self.step(loss_grads(self.module, x, y), lr)

    def momentum(self) -> dict[str, Tensor]:
        """Copies of its momentum buffers by parameter name (those that exist: a parameter not stepped yet
        has none)."""
        out = {}
        for name, p in self.named:
            buf = self.sgd.state.get(p, {}).get("momentum_buffer")
            if buf is not None:
                out[name] = buf.clone()
        return out

    def load_momentum(self, buffers: dict[str, Tensor]) -> None:
        """Continue from the momentum buffers ``buffers`` (by name; the :meth:`momentum` of an earlier
        optimizer)."""
        for name, p in self.named:
            if name in buffers:
                self.sgd.state[p]["momentum_buffer"] = buffers[name].clone()
