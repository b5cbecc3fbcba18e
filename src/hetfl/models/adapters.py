"""Low-rank adapters (LoRA-style) and the parameter splits of partial personalization.

A split names which parameters are personal (kept or re-initialized per client) and which are global
(shared through the server), as in FFGG (Mishchenko et al., TMLR 2025, Sec. 5.3) and FedAlt/FedSim
(Pillutla et al., ICML 2022):

| split | personal parameters |
|---|---|
| ``none`` | none (the whole model is global) |
| ``input`` | the first layer (weight and bias) |
| ``output`` | the last layer (weight and bias) |
| ``adapter`` | a rank-r adapter per layer, ``W_eff = W + up · down`` (``up [out, r]`` starts at 0, ``down [r, fan_in]``) |

Pillutla et al.'s adapters are residual modules with personal normalization layers; this project's
hand-written models use the LoRA form by default (Hu et al., ICLR 2022): a low-rank personal correction of
every weight, identity at initialization. The CNN also takes Pillutla et al.'s form (``adapter_kind:
residual``, ``hetfl.models.residual_adapters``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

SPLITS = ("none", "input", "output", "adapter")


class LoRALinear(nn.Linear):
    """``nn.Linear`` with a low-rank correction: y = x (W + up·down)ᵀ + b (reference modules)."""

    def __init__(self, fan_in: int, fan_out: int, rank: int, bias: bool = True):
        super().__init__(fan_in, fan_out, bias=bias)
        self.lora_down = nn.Parameter(torch.zeros(rank, fan_in))
        self.lora_up = nn.Parameter(torch.zeros(fan_out, rank))

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight + self.lora_up @ self.lora_down, self.bias)


class LoRAConv2d(nn.Conv2d):
    """``nn.Conv2d`` whose kernel gets a low-rank correction ``(up · down).view(kernel shape)``."""

    def __init__(self, channels_in: int, channels_out: int, kernel: int, rank: int, padding: int):
        super().__init__(channels_in, channels_out, kernel, padding=padding)
        self.lora_down = nn.Parameter(torch.zeros(rank, channels_in * kernel * kernel))
        self.lora_up = nn.Parameter(torch.zeros(channels_out, rank))

    def forward(self, x: Tensor) -> Tensor:
        delta = (self.lora_up @ self.lora_down).view_as(self.weight)
        return self._conv_forward(x, self.weight + delta, self.bias)
