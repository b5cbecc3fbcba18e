"""VGG-11 for 32×32 images (CIFAR-10), in plain torch, batched over clients with grouped convolutions.

Simonyan & Zisserman, "Very Deep Convolutional Networks for Large-Scale Image Recognition", ICLR 2015,
configuration A (VGG-11): conv widths 64, M, 128, M, 256, 256, M, 512, 512, M, 512, 512, M (3×3, padding
1, ReLU; M = 2×2 max-pool), then the CIFAR classifier Linear(512, 512) → ReLU → Linear(512, 512) → ReLU →
Linear(512, K), no batch norm, no dropout (the CIFAR-style VGG of the FedNova/FedMA code; the federated
minimax paper's "VGG11" for CIFAR-10, docs/papers/fedminimax.md §4.6). torchvision is not used (it has no CPU
build here). ``width`` scales every conv width (64 = the paper's; smaller for tests and smoke runs).

Batching as in ``cnn.py``: the C clients' channels are stacked, ``[B, C·ch, H, W]``, and each conv is
one ``conv2d(groups=C)``; the classifier is ``baddbmm`` per client. Measured 9.75 M parameters at
width 64 (0.17 s per forward+backward of batch 32 on this project's 2-core CPU: a GPU model;
docs/papers/fedminimax.md §6).
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hetfl.models.base import BatchedModel, ModelOptions, Params, linear_cm, positive

CONFIG_A = (1, "M", 2, "M", 4, 4, "M", 8, 8, "M", 8, 8, "M")
"""VGG-11's convolutions in units of ``width`` channels (64: 64, 128, 256, 256, 512, ...), M = max-pool."""


class VGG11(BatchedModel):
    """VGG-11 (configuration A) with a 3-layer classifier.

    Params: ``conv{j}.weight [C, out, in, 3, 3]``, ``conv{j}.bias [C, out]`` for j = 1..8,
    ``fc{l}.weight [C, out, in]``, ``fc{l}.bias`` for l = 1..3 (hidden width 8·width = 512).

    Raises:
        ValueError: the input is not a 32×32 image (five 2×2 pools must leave 1×1), ``width`` is not a
            positive multiple of 8, or a personalization ``split`` other than ``none`` is asked.
    """

    name = "vgg11"
    rows_exact_in_float32 = False  # grouped float32 convolutions (oneDNN): the last bit depends on the rows

    @dataclasses.dataclass(frozen=True)
    class Options(ModelOptions):
        """The model's config options."""

        width: int = positive(64)

    def __init__(self, sample_shape, num_classes, width: int = 64, **split):
        super().__init__(sample_shape, num_classes, **split)
        if len(self.sample_shape) != 3 or tuple(self.sample_shape[1:]) != (32, 32):
            raise ValueError(f"model 'vgg11' needs 32x32 images (channels, 32, 32), got {sample_shape}")
        if width < 8 or width % 8:
            raise ValueError(f"model 'vgg11' needs a width that is a positive multiple of 8, got {width}")
        if self.split != "none":
            raise ValueError("model 'vgg11' supports split: none only")
        self.width = int(width)
        self.plan = [v if v == "M" else v * self.width for v in CONFIG_A]
        self.convs = [c for c in self.plan if c != "M"]
        self.hidden = 8 * self.width

    def layer_shapes(self):
        out, cin = {}, self.sample_shape[0]
        for j, cout in enumerate(self.convs, start=1):
            out[f"conv{j}.weight"] = ((cout, cin, 3, 3), cin * 9)
            out[f"conv{j}.bias"] = ((cout,), cin * 9)
            cin = cout
        for l, (fan_in, fan_out) in enumerate(
            ((cin, self.hidden), (self.hidden, self.hidden), (self.hidden, self.num_classes)), 1
        ):
            out[f"fc{l}.weight"] = ((fan_out, fan_in), fan_in)
            out[f"fc{l}.bias"] = ((fan_out,), fan_in)
        return out

    def sample_cost(self) -> int:
        return self.width * 32 * 32

    def forward(self, params: Params, x: Tensor) -> Tensor:
        c, b = x.shape[:2]
        h = x.transpose(0, 1).reshape(b, c * self.sample_shape[0], 32, 32)
        j = 0
        for v in self.plan:
            if v == "M":
                h = F.max_pool2d(h, 2)
                continue
            j += 1
            w = params[f"conv{j}.weight"]
            h = torch.relu(
                F.conv2d(
                    h, w.reshape(-1, *w.shape[2:]), params[f"conv{j}.bias"].reshape(-1), padding=1, groups=c
                )
            )
        h = h.reshape(b, c, -1).permute(1, 2, 0)  # [C, 512, B]
        h = torch.relu(linear_cm(params["fc1.weight"], params["fc1.bias"], h))
        h = torch.relu(linear_cm(params["fc2.weight"], params["fc2.bias"], h))
        return linear_cm(params["fc3.weight"], params["fc3.bias"], h)

    def reference_module(self) -> nn.Module:
        return _VGGModule(self.sample_shape[0], self.plan, self.hidden, self.num_classes)


class _VGGModule(nn.Module):
    """The same network for one client, as a plain ``nn.Module`` (state_dict keys = the param names)."""

    def __init__(self, ch, plan, hidden, k):
        super().__init__()
        self.plan = plan
        cin, j = ch, 0
        for v in plan:
            if v != "M":
                j += 1
                self.add_module(f"conv{j}", nn.Conv2d(cin, v, 3, padding=1))
                cin = v
        self.fc1, self.fc2, self.fc3 = nn.Linear(cin, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, k)

    def forward(self, x):
        j = 0
        for v in self.plan:
            if v == "M":
                x = F.max_pool2d(x, 2)
            else:
                j += 1
                x = torch.relu(getattr(self, f"conv{j}")(x))
        x = torch.relu(self.fc1(x.flatten(1)))
        return self.fc3(torch.relu(self.fc2(x)))


MODELS = [VGG11]
