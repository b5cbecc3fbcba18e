"""ResNet-18 with GroupNorm for small images (CIFAR-10/100), batched over clients by ``torch.func``.

He, Zhang, Ren, Sun, "Deep Residual Learning for Image Recognition", CVPR 2016: ResNet-18 is four stages
of two basic blocks (two 3×3 convolutions and an identity or 1×1-projection shortcut), widths 64, 128,
256, 512, the last three starting with stride 2, then global average pooling and Linear(512, K). For
32×32 images the stem is one 3×3 convolution with stride 1 and no max-pool (the CIFAR variant of
kuangliu/pytorch-cifar, used by the federated-learning literature, e.g. Hsieh et al. 2020, Wang et al.
2020 FedNova). Batch normalization is replaced by group normalization (Wu & He, ECCV 2018) with
``norm_groups`` groups, 2 by default as in Hsieh et al., "The Non-IID Data Quagmire of Decentralized
Machine Learning" (ICML 2020), where GroupNorm recovers most of what BatchNorm loses on skewed clients.
torchvision is not used (no dependency): the module is written here.

Initialization (``init: module``): torchvision's ResNet rule, convolutions ``kaiming_normal_(fan_out,
relu)``, GroupNorm scale 1 and shift 0, the classifier PyTorch's default. 11,173,962 parameters at
``width`` 64 with 10 classes (11,220,132 with 100). ``width`` scales every stage (64 = the paper's).

``split: adapter``: residual adapters with personal normalization, the personal part of Pillutla, Malik,
Mohamed, Rabbat, Sanjabi, Xiao, "Federated Learning with Partial Model Personalization" (ICML 2022, Sec. 5),
whose setup FFGG's Table 2 follows (Mishchenko et al., TMLR 2025, Sec. 5.3). As their code
(``pfl/models/resnet_utils.py``: ``AdapterBlock``, ``split_server_and_client_params``, mode ``adapter``)
builds them: after each of a basic block's two convolutions, ``h ← h + conv1x1(GroupNorm(h))`` (Rebuffi,
Bilen, Vedaldi, NeurIPS 2017), the 1×1 weights drawn from N(0, 10⁻⁸) (std 10⁻⁴), so that a block starts as
the one without adapters up to 10⁻⁴; personal are the adapters and every GroupNorm of the stem and of the
blocks' two convolutions (their ``bn1``, ``bn2``; not the shortcuts'). The adapters are drawn after the base
model, so the base parameters are those of the model without them. 11.2 % of the parameters at ``width`` 64 with
10 classes (1,408,128 of 12,574,282; ``python -m hetfl.tools.split_shares``).
"""

from __future__ import annotations

import dataclasses

import torch.nn.functional as F
from torch import Tensor, nn

from hetfl.models.base import ModelOptions, positive
from hetfl.models.generic import ModelOptionError, ModuleModel


def _norm(groups: int, channels: int) -> nn.GroupNorm:
    return nn.GroupNorm(min(groups, channels), channels)


class BasicBlock(nn.Module):
    """Two 3×3 conv → GroupNorm layers with a shortcut: ``relu(gn2(conv2(relu(gn1(conv1 x)))) + short(x))``.

    The shortcut is the identity, or a 1×1 convolution with GroupNorm when the stride or width changes.
    """

    def __init__(self, channels_in: int, channels_out: int, stride: int, groups: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels_in, channels_out, 3, stride, 1, bias=False)
        self.gn1 = _norm(groups, channels_out)
        self.conv2 = nn.Conv2d(channels_out, channels_out, 3, 1, 1, bias=False)
        self.gn2 = _norm(groups, channels_out)
        self.shortcut = nn.Sequential()
        if stride != 1 or channels_in != channels_out:
            self.shortcut = nn.Sequential(
                nn.Conv2d(channels_in, channels_out, 1, stride, bias=False), _norm(groups, channels_out)
            )

        self.adapter1: ResidualAdapter | None = None
        self.adapter2: ResidualAdapter | None = None

    def add_adapters(self, groups: int) -> None:
        """Add the residual adapter after each convolution (:class:`ResidualAdapter`)."""
        channels = self.conv2.out_channels
        self.adapter1, self.adapter2 = ResidualAdapter(channels, groups), ResidualAdapter(channels, groups)

    def forward(self, x: Tensor) -> Tensor:
        h = self.conv1(x)
        if self.adapter1 is not None:
            h = self.adapter1(h)
        h = self.conv2(F.relu(self.gn1(h)))
        if self.adapter2 is not None:
            h = self.adapter2(h)
        return F.relu(self.gn2(h) + self.shortcut(x))


class ResidualAdapter(nn.Module):
    """A residual adapter: ``x + conv1x1(GroupNorm(x))`` on ``x [B, c, H, W]``, the 1×1 weights ``[c, c, 1, 1]``
    drawn from N(0, 10⁻⁸) (Pillutla et al.'s ``AdapterBlock`` without dropout)."""

    def __init__(self, channels: int, groups: int):
        super().__init__()
        self.norm = _norm(groups, channels)
        self.conv = nn.Conv2d(channels, channels, 1, bias=False)
        nn.init.normal_(self.conv.weight, 0.0, 1e-4)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.conv(self.norm(x))


class ResNet18GN(nn.Module):
    """ResNet-18 (CIFAR stem) with GroupNorm, for one client: ``x [B, ch, H, W]`` -> logits ``[B, K]``.

    Args:
        channels: input channels. num_classes: K. width: the first stage's width (64).
        groups: GroupNorm groups (2). adapters: add each block's residual adapters (module docstring),
            drawn after the base parameters.
    """

    def __init__(
        self, channels: int, num_classes: int, width: int = 64, groups: int = 2, adapters: bool = False
    ):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, width, 3, 1, 1, bias=False)
        self.gn1 = _norm(groups, width)
        stages, cin = [], width
        for i, cout in enumerate((width, 2 * width, 4 * width, 8 * width)):
            stride = 1 if i == 0 else 2
            stages.append(
                nn.Sequential(BasicBlock(cin, cout, stride, groups), BasicBlock(cout, cout, 1, groups))
            )
            cin = cout
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.fc = nn.Linear(cin, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        if adapters:
            for stage in (self.layer1, self.layer2, self.layer3, self.layer4):
                for block in stage:
                    block.add_adapters(groups)

    def forward(self, x: Tensor) -> Tensor:
        h = F.relu(self.gn1(self.conv1(x)))
        h = self.layer4(self.layer3(self.layer2(self.layer1(h))))
        return self.fc(F.adaptive_avg_pool2d(h, 1).flatten(1))


class ResNet18(ModuleModel):
    """``resnet18``: :class:`ResNet18GN` through the generic ``torch.func`` path (``hetfl.models.generic``).

    Params: the module's, e.g. ``conv1.weight [C, 64, ch, 3, 3]``, ``gn1.weight [C, 64]``,
    ``layer2.0.shortcut.0.weight [C, 128, 64, 1, 1]``, ``fc.weight [C, K, 512]``, ``fc.bias [C, K]``.
    ``split: input`` makes the stem convolution personal, ``output`` the classifier, ``adapter`` the residual
    adapters and the personal normalization (module docstring: ``layer1.0.adapter1.conv.weight [C, 64, 64, 1,
    1]``, ``layer1.0.adapter1.norm.weight [C, 64]``, ``gn1.weight [C, 64]``, ``layer1.0.gn2.bias [C, 64]``, ...).

    Raises:
        ModelOptionError: the input is not an image ``(channels, H, W)``, ``norm_groups`` does not divide
            ``width``, or the checks of ``ModuleModel``.
    """

    name = "resnet18"
    module_adapters = True

    @dataclasses.dataclass(frozen=True)
    class Options(ModelOptions):
        """The model's config options."""

        width: int = positive(64)
        norm_groups: int = positive(2)

    def __init__(self, sample_shape, num_classes, width: int = 64, norm_groups: int = 2, **rest):
        if len(tuple(sample_shape)) != 3:
            raise ModelOptionError(
                "name", f"model 'resnet18' needs image inputs (channels, H, W), got {sample_shape}"
            )
        if width % norm_groups:
            raise ModelOptionError("norm_groups", f"norm_groups {norm_groups} does not divide width {width}")
        self.width, self.norm_groups = int(width), int(norm_groups)
        super().__init__(sample_shape, num_classes, **rest)

    def build_module(self) -> nn.Module:
        return ResNet18GN(
            self.sample_shape[0],
            self.num_classes,
            self.width,
            self.norm_groups,
            adapters=self.split == "adapter",
        )

    def personal_keys(self) -> list[str]:
        """As :meth:`BatchedModel.personal_keys`; ``adapter``: the adapters' parameters and those of the stem's and
        the blocks' ``gn1``, ``gn2`` (Pillutla et al.'s ``adapter`` mode: names with ``adapter``, ``bn1``, ``bn2``)."""
        if self.split != "adapter":
            return super().personal_keys()
        return [k for k in self.shapes() if ".adapter" in k or k.split(".")[-2] in ("gn1", "gn2")]


MODELS = [ResNet18]
