"""Two-layer perceptron (pFedMe's "DNN": 784-100-10 on MNIST, 60-20-10 on Synthetic).

Source: Dinh et al., pFedMe (NeurIPS 2020), Sec. 5 "nonconvex" setting; official code
``FLAlgorithms/trainmodel/models.py::DNN`` (Linear -> ReLU -> Linear).
"""

from __future__ import annotations

import dataclasses

from hetfl.models.base import ModelOptions, positive
from hetfl.models.mlp import MLP


class DNN(MLP):
    """flatten -> Linear(d, hidden) -> ReLU -> Linear(hidden, K).

    Params: ``fc1.weight [C, hidden, d]``, ``fc1.bias``, ``fc2.weight [C, K, hidden]``, ``fc2.bias``.
    """

    name = "dnn"

    @dataclasses.dataclass(frozen=True)
    class Options(ModelOptions):
        """The model's config options."""

        hidden: int = positive(100)

    def __init__(self, sample_shape, num_classes, hidden: int = 100, **split):
        super().__init__(sample_shape, num_classes, hidden=(hidden,), **split)


MODELS = [DNN]
