"""Multinomial logistic regression (pFedMe's "MLR", ``Mclr_Logistic`` in the official code).

Source: Dinh et al., pFedMe (NeurIPS 2020), Sec. 5 "μ-strongly convex" setting: flatten -> Linear(d, K);
the official model ends in log_softmax + NLLLoss, which equals cross-entropy on these logits.
"""

from __future__ import annotations

from hetfl.models.mlp import MLP


class MLR(MLP):
    """Linear(d, K) on flattened inputs. Params: ``fc1.weight [C, K, d]``, ``fc1.bias [C, K]``."""

    name = "mlr"

    def __init__(self, sample_shape, num_classes, **split):
        super().__init__(sample_shape, num_classes, hidden=(), **split)


MODELS = [MLR]
