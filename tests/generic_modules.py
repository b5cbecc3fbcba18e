"""Plain ``nn.Module`` classes that tests load as ``model: {name: torch, module: "tests.generic_modules:..."}``:
one that runs, and one per kind of module the batched engine refuses."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class TanhNet(nn.Module):
    """flatten -> Linear(d, hidden) -> tanh -> Linear(hidden, K); takes ``num_classes`` and ``sample_shape``."""

    def __init__(self, sample_shape, num_classes, hidden=6):
        super().__init__()
        d = 1
        for s in sample_shape:
            d *= s
        self.fc1 = nn.Linear(d, hidden)
        self.fc2 = nn.Linear(hidden, num_classes)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x.flatten(1))))


def tanh_net(num_classes, hidden=6, sample_shape=(1, 8, 8)):
    """A factory (not a class) giving :class:`TanhNet`."""
    return TanhNet(sample_shape, num_classes, hidden)


class ScaledNet(TanhNet):
    """TanhNet with a constant buffer (persistent) that scales the logits."""

    def __init__(self, sample_shape, num_classes):
        super().__init__(sample_shape, num_classes)
        self.register_buffer("scale", torch.full((num_classes,), 2.0))

    def forward(self, x):
        return super().forward(x) * self.scale


class WithBatchNorm(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, num_classes)

    def forward(self, x):
        return self.fc(F.adaptive_avg_pool2d(F.relu(self.bn(self.conv(x))), 1).flatten(1))


class WithDropout(TanhNet):
    def __init__(self, sample_shape, num_classes, p=0.5):
        super().__init__(sample_shape, num_classes)
        self.drop = nn.Dropout(p)

    def forward(self, x):
        return self.fc2(self.drop(torch.tanh(self.fc1(x.flatten(1)))))


class WithNoise(TanhNet):
    """Random noise drawn in the forward pass, not through a Dropout layer."""

    def forward(self, x):
        h = self.fc1(x.flatten(1))
        return self.fc2(torch.tanh(h + 0.1 * torch.randn_like(h)))


class WithLSTM(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.lstm = nn.LSTM(8, 4, batch_first=True)
        self.fc = nn.Linear(4, num_classes)

    def forward(self, x):
        return self.fc(self.lstm(x.reshape(x.shape[0], 8, 8))[0][:, -1])


class WrongShape(TanhNet):
    def forward(self, x):
        return super().forward(x).unsqueeze(1)


class WithGroupNorm(nn.Module):
    """GroupNorm: accepted (its scale has no fan-in, so ``init: uniform`` is refused)."""

    def __init__(self, num_classes):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.gn = nn.GroupNorm(2, 4)
        self.fc = nn.Linear(4, num_classes)

    def forward(self, x):
        return self.fc(F.adaptive_avg_pool2d(F.relu(self.gn(self.conv(x))), 1).flatten(1))


NOT_A_MODULE = 3


class NotAModule:
    pass
