"""A linear model: Linear(d, K), optionally without bias (least squares, logistic regression).

On a two-class task it is the logistic regression sigmoid(Linear(d, 1)) with binary cross-entropy by default
(``logits: auto``; ``hetfl.models.mlp.MLP``): All-for-one's Heart Disease model (Even et al., Appendix A,
Table S1; the official code's ``nn.Linear(13, 1)`` with ``BCEWithLogitsLoss``). ``logits: per_class`` keeps
Linear(d, 2) with softmax cross-entropy, whose logit difference moves at twice the step.

All-for-one's synthetic least squares uses "a linear model with d trainable parameters" (Table S1;
docs/papers/all_for_one.md §3.3): ``bias: false``; the official code's ``nn.Linear(d, 1)`` has a bias
(``bias: true``, the default here as in ``nn.Linear``).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from hetfl.models.base import ModelOptions, flag
from hetfl.models.mlp import LOGITS, MLP


class Linear(MLP):
    """Linear(d, K) on flattened inputs. Params: ``fc1.weight [C, K, d]`` and, with a bias, ``fc1.bias [C, K]``
    (K = 1 for a two-class task's one logit)."""

    name = "linear"

    @dataclasses.dataclass(frozen=True)
    class Options(ModelOptions):
        """The model's config options."""

        bias: bool = flag(True)
        logits: Literal[LOGITS] = "auto"

    def __init__(self, sample_shape, num_classes, bias: bool = True, logits: str = "auto", **split):
        super().__init__(sample_shape, num_classes, hidden=(), bias=bias, logits=logits, **split)


MODELS = [Linear]
