"""What the layer-wise personalization baselines share: a personal head or a personal body.

FedPer, FedRep and FedBABU keep the model's last layers per client (the **head**, a classifier on a shared
representation); LG-FedAvg keeps its first layers per client (the **body**, a local representation) and
shares the rest. Both are the model's ``split`` (``hetfl.models.adapters``; the split names the personal
parameters):

| part | split | personal parameters | global parameters |
|---|---|---|---|
| ``head`` | ``output`` | the last layer | every other layer (the body) |
| ``body`` | ``input`` | the first layer | every other layer (the head) |

A model with one layer has neither (its input layer is its output layer), and the ``adapter`` split's
personal part is not made of whole layers: both are refused at config time, naming the key. With the
``input`` split LG-FedAvg's body is the first layer and its shared head the others: a personal body and a
shared output layer exactly on a two-layer model (``dnn``), LG-FedAvg with ``num_layers_keep`` = L − 1
global layers on deeper ones (its official code's option; its CIFAR-10 runs keep 2 of the CNN's layers
global).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from hetfl.errors import ConfigError
from hetfl.options import Options

Part = Literal["head", "body"]
SPLIT_OF: dict[str, str] = {"head": "output", "body": "input"}  # the split that makes the part personal


def layer_part(model) -> Part | None:
    """Which whole layers the split of ``model`` (a ``BatchedModel``) makes personal.

    Returns:
        ``head`` when the personal parameters are exactly those of the last k layers, ``body`` when of the
        first k, for some 0 < k < L (L: the model's layers); None otherwise (no split, a one-layer model,
        adapters).
    """
    layers = model.layers()
    personal = set(model.personal_keys())
    names = list(model.shapes())

    def of(group: list[str]) -> set[str]:
        return {k for k in names if k.rsplit(".", 1)[0] in group}

    for k in range(1, len(layers)):
        if personal == of(layers[-k:]):
            return "head"
        if personal == of(layers[:k]):
            return "body"
    return None


class PersonalLayers:
    """Mixin of a ``FederatedAlgorithm`` whose personal part is the model's head or body (``part``): the
    config-time checks of the split. Put it first among the bases."""

    part: ClassVar[Part]
    name: ClassVar[str]

    @classmethod
    def check(cls, hp: Options, settings: dict[str, Any], key: str) -> None:
        """Refuse a split other than ``SPLIT_OF[part]``.

        Raises:
            ConfigError: naming ``{key}.model.split``.
        """
        split, want = settings["model"]["split"], SPLIT_OF[cls.part]
        if split != want:
            raise ConfigError(
                f"{key}.model.split",
                f"algorithm '{cls.name}' keeps the model's {cls.part} personal: set split '{want}' "
                f"(split '{split}' makes {_what(split)} personal)",
                allowed=[want],
            )
        super().check(hp, settings, key)  # type: ignore[misc]

    @classmethod
    def check_model(cls, model, key: str) -> None:
        """Refuse a model whose split does not make a proper head (body) personal: one layer, or another split.

        Raises:
            ConfigError: naming ``{key}.model.split``.
        """
        if layer_part(model) != cls.part:
            raise ConfigError(
                f"{key}.model.split",
                f"algorithm '{cls.name}' needs a personal {cls.part} and a global rest of whole layers: split "
                f"'{model.split}' of model '{model.name}' (layers {', '.join(model.layers())}) makes "
                f"{_what(model.split)} personal"
                + (" (a one-layer model has no head and body to split)" if len(model.layers()) < 2 else ""),
                allowed=[SPLIT_OF[cls.part]] if len(model.layers()) > 1 else None,
            )
        super().check_model(model, key)  # type: ignore[misc]


def _what(split: str) -> str:
    return {
        "none": "nothing",
        "input": "the first layer",
        "output": "the last layer",
        "adapter": "low-rank adapters of every layer",
    }.get(split, f"the parameters of split '{split}'")
