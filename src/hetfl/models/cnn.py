"""A small convolutional network, batched over clients with grouped convolutions.

conv(k×k, same padding) -> ReLU -> maxpool 2 -> conv -> ReLU -> maxpool 2 -> Linear(hidden) -> ReLU -> Linear(K).
The "small CNN" of the All-for-one MNIST experiments and a generic image model for the other studies
(not a model of the pFedMe paper; pFedMe's official code has one but the paper does not use it).

Batching: the C clients' channels are stacked, ``[B, C*ch, H, W]``, and each convolution is one
``conv2d(groups=C)``, so client c only sees its own weights ``conv.weight[c]``. On a CPU in float32 the
activations are laid out channels-last and each block pools before its ReLU (the same numbers, the last bit of a
gradient aside, in about half the time: ``benchmarks/cnn_layout.py``).

The ``adapter`` split's adapters are LoRA corrections of every weight (``adapter_kind: lora``, the default;
``hetfl.models.adapters``) or residual adapters with personal normalization parameters after each hidden
layer (``adapter_kind: residual``, Pillutla et al., ICML 2022; ``hetfl.models.residual_adapters``).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hetfl.models.adapters import LoRAConv2d, LoRALinear
from hetfl.models.base import BatchedModel, ModelOptions, Params, linear_cm, pair, positive
from hetfl.models.residual_adapters import (
    ADAPTER_KINDS,
    SUFFIXES,
    ResidualConv2d,
    ResidualLinear,
    adapt_conv,
    adapt_linear,
    adapter_shapes,
    set_ones,
)


class CNN(BatchedModel):
    """Two conv blocks and two linear layers.

    Params: ``conv1.weight [C, c1, ch, k, k]``, ``conv1.bias [C, c1]``, ``conv2.weight [C, c2, c1, k, k]``,
    ``conv2.bias [C, c2]``, ``fc1.weight [C, hidden, c2·(H/4)·(W/4)]``, ``fc1.bias``, ``fc2.weight [C, K, hidden]``,
    ``fc2.bias``; with ``split: adapter`` and ``adapter_kind: residual``, ``<layer>.res [C, c, c]``,
    ``<layer>.scale [C, c]``, ``<layer>.shift [C, c]`` for conv1, conv2 and fc1 (c their outputs).

    Raises:
        ValueError: if the input is not an image ``(ch, H, W)`` with H, W ≥ 4.
    """

    name = "cnn"
    rows_exact_in_float32 = False  # grouped float32 convolutions (oneDNN): the last bit depends on the rows

    @dataclasses.dataclass(frozen=True)
    class Options(ModelOptions):
        """The model's config options."""

        channels: list = pair([16, 32])
        kernel: int = positive(3)
        hidden: int = positive(64)
        adapter_kind: Literal[ADAPTER_KINDS] = "lora"

    def __init__(
        self,
        sample_shape,
        num_classes,
        channels=(16, 32),
        kernel: int = 3,
        hidden: int = 64,
        adapter_kind: str = "lora",
        **split,
    ):
        super().__init__(sample_shape, num_classes, **split)
        if adapter_kind not in ADAPTER_KINDS:
            raise ValueError(f"unknown adapter_kind {adapter_kind!r}; allowed: {', '.join(ADAPTER_KINDS)}")
        self.residual = self.split == "adapter" and adapter_kind == "residual"
        if len(self.sample_shape) != 3 or min(self.sample_shape[1:]) < 4:
            raise ValueError(
                f"model 'cnn' needs image inputs (channels, H, W) with H, W >= 4, got {sample_shape}"
            )
        if kernel % 2 != 1:
            raise ValueError(f"model 'cnn' needs an odd kernel size, got {kernel}")
        self.channels = tuple(int(c) for c in channels)
        self.kernel = int(kernel)
        self.hidden = int(hidden)
        ch, h, w = self.sample_shape
        self.flat = self.channels[1] * (h // 2 // 2) * (w // 2 // 2)

    def layer_shapes(self):
        ch = self.sample_shape[0]
        c1, c2 = self.channels
        k = self.kernel
        return {
            "conv1.weight": ((c1, ch, k, k), ch * k * k),
            "conv1.bias": ((c1,), ch * k * k),
            "conv2.weight": ((c2, c1, k, k), c1 * k * k),
            "conv2.bias": ((c2,), c1 * k * k),
            "fc1.weight": ((self.hidden, self.flat), self.flat),
            "fc1.bias": ((self.hidden,), self.flat),
            "fc2.weight": ((self.num_classes, self.hidden), self.hidden),
            "fc2.bias": ((self.num_classes,), self.hidden),
        }

    def shapes(self):
        """The base parameters, then the adapters' (LoRA's, or the residual adapters' of conv1, conv2, fc1)."""
        if not self.residual:
            return super().shapes()
        out = dict(self.layer_shapes())
        for layer, width in (("conv1", self.channels[0]), ("conv2", self.channels[1]), ("fc1", self.hidden)):
            out.update(adapter_shapes(layer, width))
        return out

    def personal_keys(self) -> list[str]:
        if not self.residual:
            return super().personal_keys()
        return [k for k in self.shapes() if k.rsplit(".", 1)[1] in SUFFIXES]

    def weight(self, params: Params, layer: str) -> Tensor:
        return params[f"{layer}.weight"] if self.residual else super().weight(params, layer)

    def init(self, generator, dtype=torch.float32, count=1, keys=None) -> Params:
        """As ``BatchedModel.init``; a residual adapter starts at the identity (its scales at one)."""
        params = super().init(generator, dtype, count, keys)
        return set_ones(params) if self.residual else params

    def sample_cost(self) -> int:
        return self.channels[0] * self.sample_shape[1] * self.sample_shape[2]

    def _conv(self, h: Tensor, params: Params, layer: str, clients: int) -> Tensor:
        weight, bias = self.weight(params, layer), params[f"{layer}.bias"]
        w = weight.reshape(-1, *weight.shape[2:])  # [C*out, in, k, k]
        h = F.conv2d(h, w, bias.reshape(-1), padding=self.kernel // 2, groups=clients)
        if self.residual:
            h = adapt_conv(h, params, layer, clients)
        # relu(maxpool(h)) is maxpool(relu(h)) to the bit, forward and backward (ReLU is monotone, so the
        # window's maximum and the mask commute, and where a window is all non-positive both give a zero
        # gradient), on a quarter of the elements
        return torch.relu(F.max_pool2d(h, 2))

    def forward(self, params: Params, x: Tensor) -> Tensor:
        c, b = x.shape[:2]
        h = x.transpose(0, 1).reshape(b, c * self.sample_shape[0], *self.sample_shape[1:])
        if h.device.type == "cpu" and h.dtype == torch.float32:
            # oneDNN's grouped float32 convolutions are 1.7-2x faster channels-last on a CPU (the last bit of a
            # gradient differs from the NCHW kernels'); float64 keeps NCHW, whose rows are exact (chunking)
            h = h.contiguous(memory_format=torch.channels_last)
        h = self._conv(h, params, "conv1", c)
        h = self._conv(h, params, "conv2", c)
        h = h.reshape(b, c, self.flat).permute(1, 2, 0)  # [C, flat, B]
        h = linear_cm(self.weight(params, "fc1"), params["fc1.bias"], h)
        if self.residual:
            h = adapt_linear(h, params, "fc1")
        return linear_cm(self.weight(params, "fc2"), params["fc2.bias"], torch.relu(h))

    def reference_module(self) -> nn.Module:
        rank = self.adapter_rank if self.split == "adapter" and not self.residual else 0
        return _CNNModule(
            self.sample_shape[0],
            self.channels,
            self.kernel,
            self.flat,
            self.hidden,
            self.num_classes,
            rank,
            self.residual,
        )


class _CNNModule(nn.Module):
    def __init__(self, ch, channels, kernel, flat, hidden, k, rank=0, residual=False):
        super().__init__()
        pad = kernel // 2

        def conv(a, b):
            if residual:
                return ResidualConv2d(a, b, kernel, pad)
            return LoRAConv2d(a, b, kernel, rank, pad) if rank else nn.Conv2d(a, b, kernel, padding=pad)

        def linear(a, b, adapted=True):
            if residual and adapted:
                return ResidualLinear(a, b)
            return LoRALinear(a, b, rank) if rank else nn.Linear(a, b)

        self.conv1 = conv(ch, channels[0])
        self.conv2 = conv(channels[0], channels[1])
        self.fc1 = linear(flat, hidden)
        self.fc2 = linear(hidden, k, adapted=False)

    def forward(self, x):
        h = F.max_pool2d(torch.relu(self.conv1(x)), 2)
        h = F.max_pool2d(torch.relu(self.conv2(h)), 2)
        return self.fc2(torch.relu(self.fc1(h.flatten(1))))


MODELS = [CNN]
