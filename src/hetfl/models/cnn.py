"""A small convolutional network, batched over clients with grouped convolutions.

conv(k×k, same padding) -> ReLU -> maxpool 2 -> conv -> ReLU -> maxpool 2 -> Linear(hidden) -> ReLU -> Linear(K).
The "small CNN" of the All-for-one MNIST experiments and a generic image model for the other studies
(not a model of the pFedMe paper; pFedMe's official code has one but the paper does not use it).

Batching: the C clients' channels are stacked, ``[B, C*ch, H, W]``, and each convolution is one
``conv2d(groups=C)``, so client c only sees its own weights ``conv.weight[c]``.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hetfl.models.adapters import LoRAConv2d, LoRALinear
from hetfl.models.base import BatchedModel, ModelOptions, Params, linear_cm, pair, positive


class CNN(BatchedModel):
    """Two conv blocks and two linear layers.

    Params: ``conv1.weight [C, c1, ch, k, k]``, ``conv1.bias [C, c1]``, ``conv2.weight [C, c2, c1, k, k]``,
    ``conv2.bias [C, c2]``, ``fc1.weight [C, hidden, c2·(H/4)·(W/4)]``, ``fc1.bias``, ``fc2.weight [C, K, hidden]``,
    ``fc2.bias``.

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

    def __init__(
        self, sample_shape, num_classes, channels=(16, 32), kernel: int = 3, hidden: int = 64, **split
    ):
        super().__init__(sample_shape, num_classes, **split)
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

    def sample_cost(self) -> int:
        return self.channels[0] * self.sample_shape[1] * self.sample_shape[2]

    def _conv(self, h: Tensor, weight: Tensor, bias: Tensor, clients: int) -> Tensor:
        w = weight.reshape(-1, *weight.shape[2:])  # [C*out, in, k, k]
        h = F.conv2d(h, w, bias.reshape(-1), padding=self.kernel // 2, groups=clients)
        return F.max_pool2d(torch.relu(h), 2)

    def forward(self, params: Params, x: Tensor) -> Tensor:
        c, b = x.shape[:2]
        h = x.transpose(0, 1).reshape(b, c * self.sample_shape[0], *self.sample_shape[1:])
        h = self._conv(h, self.weight(params, "conv1"), params["conv1.bias"], c)
        h = self._conv(h, self.weight(params, "conv2"), params["conv2.bias"], c)
        h = h.reshape(b, c, self.flat).permute(1, 2, 0)  # [C, flat, B]
        h = torch.relu(linear_cm(self.weight(params, "fc1"), params["fc1.bias"], h))
        return linear_cm(self.weight(params, "fc2"), params["fc2.bias"], h)

    def reference_module(self) -> nn.Module:
        rank = self.adapter_rank if self.split == "adapter" else 0
        return _CNNModule(
            self.sample_shape[0], self.channels, self.kernel, self.flat, self.hidden, self.num_classes, rank
        )


class _CNNModule(nn.Module):
    def __init__(self, ch, channels, kernel, flat, hidden, k, rank=0):
        super().__init__()
        pad = kernel // 2

        def conv(a, b):
            return LoRAConv2d(a, b, kernel, rank, pad) if rank else nn.Conv2d(a, b, kernel, padding=pad)

        def linear(a, b):
            return LoRALinear(a, b, rank) if rank else nn.Linear(a, b)

        self.conv1 = conv(ch, channels[0])
        self.conv2 = conv(channels[0], channels[1])
        self.fc1 = linear(flat, hidden)
        self.fc2 = linear(hidden, k)

    def forward(self, x):
        h = F.max_pool2d(torch.relu(self.conv1(x)), 2)
        h = F.max_pool2d(torch.relu(self.conv2(h)), 2)
        return self.fc2(torch.relu(self.fc1(h.flatten(1))))


MODELS = [CNN]
