"""Helpers of the collaborative family's sequential references: per-client ``torch.optim.SGD`` + ``StepLR``.

The references share with the batched code only the data, the initial weights and the minibatch positions
(the same ``PairSampler``/``BatchSampler`` calls in the same order); the optimizer is torch's own.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from hetfl.reference.common import loss_grads


class ClientOptimizer:
    """``torch.optim.SGD(lr, momentum, weight_decay)`` and ``StepLR(lr_step_size, lr_gamma)`` of one module."""

    def __init__(self, module: nn.Module, hp):
        self.module = module
        self.opt = torch.optim.SGD(
            module.parameters(), lr=hp.lr, momentum=hp.momentum, weight_decay=hp.weight_decay
        )
        self.sched = (
            torch.optim.lr_scheduler.StepLR(self.opt, hp.lr_step_size, hp.lr_gamma)
            if hp.lr_step_size
            else None
        )

    def step(self, grads: list[Tensor]) -> None:
        """Apply ``grads`` (``parameters()`` order) as ``param.grad``, then ``optimizer.step()``."""
        for p, g in zip(self.module.parameters(), grads, strict=True):
            p.grad = g.detach().clone()
        self.opt.step()

    def end_epoch(self) -> None:
        if self.sched is not None:
            self.sched.step()


def grads(module: nn.Module, data: tuple[Tensor, Tensor]) -> list[Tensor]:
    """Gradients of the mean loss of ``module`` on ``data = (x, y)``."""
    return loss_grads(module, *data)


def load(module: nn.Module, state: dict[str, Tensor]) -> None:
    """Copy ``state`` into the module's parameters in place (optimizer state untouched)."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(state[name])
