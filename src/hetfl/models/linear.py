"""A linear model: Linear(d, K), optionally without bias (least squares, logistic regression).

All-for-one's synthetic least squares uses "a linear model with d trainable parameters" (Table S1;
docs/papers/all_for_one.md §3.3): ``bias: false``; the official code's ``nn.Linear(d, 1)`` has a bias
(``bias: true``, the default here as in ``nn.Linear``).
"""

from __future__ import annotations

import dataclasses

from hetfl.models.base import ModelOptions, flag
from hetfl.models.mlp import MLP


class Linear(MLP):
    """Linear(d, K) on flattened inputs. Params: ``fc1.weight [C, K, d]`` and, with a bias, ``fc1.bias [C, K]``."""

    name = "linear"

    @dataclasses.dataclass(frozen=True)
    class Options(ModelOptions):
        """The model's config options."""

        bias: bool = flag(True)

    def __init__(self, sample_shape, num_classes, bias: bool = True, **split):
        super().__init__(sample_shape, num_classes, hidden=(), bias=bias, **split)


MODELS = [Linear]
