"""Helpers of the collaborative family's sequential references.

The references share with the batched code only the data, the initial weights and the minibatch positions
(the same ``PairSampler``/``BatchSampler`` calls in the same order); the optimizer is torch's own
(``hetfl.reference.common.TorchSGD``: ``torch.optim.SGD`` with ``clip_grad_norm_``, one per client model,
kept across rounds as the paper's code keeps it, at the step size of torch's scheduler, ``round_lrs``).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from hetfl.reference.common import loss_grads


def grads(module: nn.Module, data: tuple[Tensor, Tensor]) -> list[Tensor]:
    """Gradients of the mean loss of ``module`` on ``data = (x, y)``."""
    return loss_grads(module, *data)


def load(module: nn.Module, state: dict[str, Tensor]) -> None:
    """Copy ``state`` into the module's parameters in place (optimizer state untouched)."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(state[name])
