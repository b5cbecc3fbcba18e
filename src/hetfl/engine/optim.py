"""The client optimizer shared by every algorithm that takes local steps: SGD with momentum, weight decay,
gradient clipping and a learning-rate schedule, for C stacked client models at once.

One step of client c, as PyTorch does it for one model (``loss.backward()``;
``torch.nn.utils.clip_grad_norm_(params, clip_norm)``; ``torch.optim.SGD(lr, momentum, dampening=0,
weight_decay, nesterov=False).step()``):

    g ← g · min(1, clip_norm / (‖g‖ + 1e-6))     ‖g‖: the L2 norm over all the client's parameters
    g ← g + weight_decay · w
    b ← momentum · b + g                            (b = g at the first step after a reset)
    w ← w − lr_t · b

and the learning rate of round t (1-based) follows ``lr_schedule`` (``hetfl.algorithms.hyperparameters``):
``constant``; ``step``, lr · lr_gamma^⌊(t − 1)/lr_step_size⌋ (``StepLR`` stepped once per round);
``cosine``, lr_min + (lr − lr_min)(1 + cos(π (t − 1)/T))/2 over the run's T rounds (``CosineAnnealingLR``,
``T_max = T``, stepped once per round). With the defaults (no momentum, weight decay, clipping or schedule)
a step is ``w ← w − lr · g``, exactly the plain SGD the papers' algorithms take.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from hetfl.engine.params import Params

SCHEDULES = ("constant", "step", "cosine")


def scheduled_lr(lr: float, t: int, hp: Any, rounds: int | None = None) -> float:
    """The learning rate ``lr`` at round ``t`` (1-based) under ``hp``'s ``lr_schedule``.

    Args:
        hp: hyper-parameters with ``lr_schedule`` and its options (absent: constant).
        rounds: T, the run's rounds (the cosine schedule needs it).

    ``linear`` is the "global scheduler" of Mishchenko et al.'s protocols (App. E, Table 5; their code's
    factor of round s = t − 1, 0-based): s / max(1, W) while s < W = ``lr_warmup`` T, then
    max(0, (T − s) / max(1, T − W)); the first round's step size is 0.

    Raises:
        ValueError: a cosine or linear schedule without ``rounds``.
    """
    schedule = getattr(hp, "lr_schedule", "constant")
    if schedule == "step":
        return lr * hp.lr_gamma ** ((t - 1) // hp.lr_step_size)
    if schedule in ("cosine", "linear") and not rounds:
        raise ValueError(f"the {schedule} learning-rate schedule needs the run's number of rounds")
    if schedule == "cosine":
        return hp.lr_min + (lr - hp.lr_min) * (1.0 + math.cos(math.pi * (t - 1) / rounds)) / 2.0
    if schedule == "linear":
        step, warmup = t - 1, hp.lr_warmup * rounds
        if step < warmup:
            return lr * (step / max(1.0, warmup))
        return lr * max(0.0, (rounds - step) / max(1.0, rounds - warmup))
    return lr


def client_optimizer(fed: Any, hp: Any, params: Params, keys: list[str] | None = None) -> ClientOptimizer:
    """The client optimizer of the clients whose models are ``params [C, ...]``: the run's ``momentum``,
    ``weight_decay`` and ``clip_norm`` (``hetfl.algorithms.hyperparameters.ClientOptimization``; plain SGD
    where ``hp`` has none), stepping ``keys`` (None: every parameter), with zero momentum buffers ``[C, ...]``.

    Momentum buffers follow the model: build the optimizer anew for clients that start a round from the
    server's model (stateless clients start each round with zero momentum); keep it (an attribute, saved in
    checkpoints with the algorithm) for clients that keep their model across rounds. The buffers of models
    placed off the device (per-client state, ``hetfl.engine.state``) are placed by the federation ``fed``'s
    ``states`` too (``[N, ...]`` stacks like the models).
    """
    states = fed.states
    kept = any(states.is_off(v) for v in params.values())
    return ClientOptimizer(
        hp, params, keys, zeros=(lambda like: states.zeros(like, idle=False)) if kept else None
    )


def _zeros_like(params: Params) -> Params:
    return {k: torch.zeros_like(v) for k, v in params.items()}


class ClientOptimizer:
    """SGD with momentum, weight decay and gradient clipping for ``[C, ...]`` stacked client models.

    Args:
        hp: hyper-parameters with ``momentum``, ``weight_decay``, ``clip_norm`` (absent: 0, 0, None).
        template: parameters ``[C, ...]`` of the C models it will update (shapes of the momentum buffers).
        keys: the parameters it updates (default: all of ``template``).
        zeros: makes the zero momentum buffers from ``template``'s ``keys`` (None: ``torch.zeros_like``, on
            ``template``'s device); e.g. ``ClientStates.zeros``, for the buffers of per-client models kept off
            the device (``hetfl.engine.state``).

    The momentum buffers start at zero (PyTorch's first step, b = g); :meth:`reset` zeroes them (a client
    that starts a new round from the server's model). They are part of the algorithm's state (checkpoints).
    """

    def __init__(
        self,
        hp: Any,
        template: Params,
        keys: list[str] | None = None,
        zeros: Callable[[Params], Params] | None = None,
    ):
        self.momentum = float(getattr(hp, "momentum", 0.0))
        self.weight_decay = float(getattr(hp, "weight_decay", 0.0))
        self.clip_norm = getattr(hp, "clip_norm", None)
        self.keys = list(template) if keys is None else list(keys)
        like = {k: template[k] for k in self.keys}
        self.buf = None if not self.momentum else (zeros or _zeros_like)(like)

    @property
    def plain(self) -> bool:
        """True when a step is plain SGD (no momentum, weight decay or clipping)."""
        return not self.momentum and not self.weight_decay and self.clip_norm is None

    def reset(self) -> None:
        """Zero the momentum buffers."""
        if self.buf is not None:
            torch._foreach_zero_(list(self.buf.values()))

    @torch.no_grad()
    def clip(self, grads: Params) -> Params:
        """Scale each client's gradient ``[C, ...]`` (over ``keys``) to L2 norm at most ``clip_norm``, in place
        (``clip_grad_norm_``: factor min(1, clip_norm / (‖g‖ + 1e-6)))."""
        if self.clip_norm is None:
            return grads
        g = [grads[k] for k in self.keys]
        norms = torch.stack([v.reshape(len(v), -1).pow(2).sum(1) for v in g]).sum(0).sqrt()  # [C]
        factor = (self.clip_norm / (norms + 1e-6)).clamp(max=1.0)
        for v in g:
            v.mul_(factor.reshape(-1, *([1] * (v.dim() - 1))).to(v.dtype))
        return grads

    @torch.no_grad()
    def step(self, params: Params, grads: Params, lr: float, rows: slice | None = None) -> Params:
        """One step of every client: ``params [C, ...]`` updated in place (only ``keys``) with ``grads
        [C, ...]`` (consumed: modified in place) at learning rate ``lr``; returns ``params``.

        ``params`` and ``grads`` may hold only some rows of the C clients: the first m (``[m, ...]``: the
        clients that still step when local step counts differ, ``hetfl.engine.grad.local_sgd``), or the
        rows ``rows`` (a slice: a chunk under a memory budget); then only those rows of the momentum buffers
        take part.
        """
        self.clip(grads)
        p, g = [params[k] for k in self.keys], [grads[k] for k in self.keys]
        if self.weight_decay:
            torch._foreach_add_(g, p, alpha=self.weight_decay)
        if self.buf is not None:
            rows = rows if rows is not None else slice(0, len(g[0]) if g else 0)
            buf = [self.buf[k][rows] for k in self.keys]
            torch._foreach_mul_(buf, self.momentum)
            torch._foreach_add_(buf, g)
            g = buf
        torch._foreach_add_(p, g, alpha=-lr)
        return params

    def state_dict(self) -> dict[str, Tensor]:
        """The momentum buffers (empty without momentum)."""
        return {} if self.buf is None else {k: v.clone() for k, v in self.buf.items()}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        if self.buf is not None:
            for k, v in state.items():
                self.buf[k].copy_(v)
