"""Residual adapters with personal normalization parameters: the ``adapter_kind: residual`` of the CNN.

Pillutla, Malik, Mohamed, Rabbat, Sanjabi, Xiao, "Federated Learning with Partial Model Personalization",
ICML 2022 (Sec. 5, "adapters"), whose setup FFGG's Table 2 follows (Mishchenko et al., TMLR 2025, Sec. 5.3):
for a ResNet the personal part is a residual adapter per block, a 1×1 convolution added to the block's
output and initialized near zero (Rebuffi, Bilen, Vedaldi, "Learning multiple visual domains with residual
adapters", NeurIPS 2017), plus the personal parameters of the normalization layers. The CNN here has no
normalization layer, so its "personal normalization" is a per-channel scale and shift (a normalization
layer's affine part) after each adapter. For a layer with output h (channels or units c):

    h ← s ⊙ (h + R h) + b        R: [c, c], zeros at the start; s: [c], ones; b: [c], zeros

so that at the start the adapter is the identity, whatever the global part. Parameters ``<layer>.res``,
``<layer>.scale``, ``<layer>.shift``, on every hidden layer (not the output layer); all of them personal.
LoRA (``hetfl.models.adapters``) stays the default ``adapter_kind``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hetfl.engine.params import Params

ADAPTER_KINDS = ("lora", "residual")
SUFFIXES = ("res", "scale", "shift")  # the adapter parameters of a layer: <layer>.res, .scale, .shift


def adapter_shapes(layer: str, channels: int) -> dict[str, tuple[tuple[int, ...], int]]:
    """The adapter's parameters of one layer with ``channels`` outputs: name -> (shape, fan_in), the
    ``BatchedModel.shapes`` form; fan_in 0: drawn as zeros (``scale`` is set to ones by :func:`set_ones`)."""
    return {
        f"{layer}.res": ((channels, channels), 0),
        f"{layer}.scale": ((channels,), 0),
        f"{layer}.shift": ((channels,), 0),
    }


def set_ones(params: Params) -> Params:
    """Set every ``*.scale`` of ``params`` to ones (in place; the adapters' start); returns ``params``."""
    for k, v in params.items():
        if k.endswith(".scale"):
            v.fill_(1.0)
    return params


def adapt_conv(h: Tensor, params: Params, layer: str, clients: int) -> Tensor:
    """The adapter on a grouped convolution's output ``h [B, C·c, H, W]`` (C clients, c channels each):
    ``s ⊙ (h + R h) + b`` per client, R a 1×1 convolution ``[C, c, c]``."""
    res = params[f"{layer}.res"]
    h = h + F.conv2d(h, res.reshape(-1, res.shape[-1], 1, 1), groups=clients)
    scale, shift = (
        params[f"{layer}.scale"].reshape(1, -1, 1, 1),
        params[f"{layer}.shift"].reshape(1, -1, 1, 1),
    )
    return h * scale + shift


def adapt_linear(h: Tensor, params: Params, layer: str) -> Tensor:
    """The adapter on a column-major layer output ``h [C, c, B]``: ``s ⊙ (h + R h) + b``, R ``[C, c, c]``."""
    h = h + torch.bmm(params[f"{layer}.res"], h)
    return h * params[f"{layer}.scale"].unsqueeze(2) + params[f"{layer}.shift"].unsqueeze(2)


def _register(module: nn.Module, channels: int) -> None:
    """Give a reference module its adapter's parameters ``res [c, c]`` (zeros), ``scale [c]`` (ones) and
    ``shift [c]`` (zeros)."""
    module.res = nn.Parameter(torch.zeros(channels, channels))
    module.scale = nn.Parameter(torch.ones(channels))
    module.shift = nn.Parameter(torch.zeros(channels))


class ResidualConv2d(nn.Conv2d):
    """``nn.Conv2d`` followed by its residual adapter (reference modules; ``state_dict`` keys ``weight``,
    ``bias``, ``res``, ``scale``, ``shift``)."""

    def __init__(self, channels_in: int, channels_out: int, kernel: int, padding: int):
        super().__init__(channels_in, channels_out, kernel, padding=padding)
        _register(self, channels_out)

    def forward(self, x: Tensor) -> Tensor:
        h = super().forward(x)
        h = h + torch.einsum("oc,bchw->bohw", self.res, h)
        return h * self.scale.view(1, -1, 1, 1) + self.shift.view(1, -1, 1, 1)


class ResidualLinear(nn.Linear):
    """``nn.Linear`` followed by its residual adapter (reference modules)."""

    def __init__(self, fan_in: int, fan_out: int):
        super().__init__(fan_in, fan_out)
        _register(self, fan_out)

    def forward(self, x: Tensor) -> Tensor:
        h = super().forward(x)
        return (h + h @ self.res.T) * self.scale + self.shift
