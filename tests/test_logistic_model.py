"""The two-class linear model with one logit: the paper's logistic regression (All-for-one, Heart Disease,
Table S1: ``nn.Linear(13, 1)`` with binary cross-entropy), its hand-written gradients and the config option."""

import pytest
import torch
import torch.nn.functional as F

from hetfl.models import build_model
from hetfl.models.base import BatchedModel
from hetfl.models.errors import ModelOptionError
from tests.test_engine import assert_preact_grads


def _client_params(model, clients, g):
    return {
        k: v.expand(clients, *v.shape[1:])
        + 0.3 * torch.randn(clients, *v.shape[1:], generator=g, dtype=v.dtype)
        for k, v in model.init(g, torch.float64).items()
    }


def test_a_two_class_linear_model_has_one_logit_by_default():
    assert build_model({"name": "linear"}, (13,), 2).fc == [("fc1", 13, 1)]
    assert build_model({"name": "linear", "logits": "per_class"}, (13,), 2).fc == [("fc1", 13, 2)]
    assert build_model({"name": "linear"}, (13,), 3).fc == [("fc1", 13, 3)]  # more classes: one per class
    assert build_model({"name": "linear"}, (13,), 2, task="regression").fc == [("fc1", 13, 2)]
    assert build_model({"name": "mlr"}, (13,), 2).fc == [("fc1", 13, 2)]  # pFedMe's MLR keeps its K logits
    with pytest.raises(ModelOptionError) as err:
        build_model({"name": "linear", "logits": "one"}, (13,), 3)
    assert err.value.option == "logits"


@pytest.mark.parametrize("masked", [False, True])
def test_one_logit_is_binary_cross_entropy_of_a_sigmoid(masked):
    """Loss and gradients equal those of ``nn.Linear(d, 1)`` with ``BCEWithLogitsLoss`` (the official
    code's model), per client, and the batched backward pass equals autograd's."""
    model = build_model({"name": "linear"}, (5,), 2)
    g = torch.Generator().manual_seed(0)
    params = _client_params(model, 3, g)
    x = torch.randn(3, 7, 5, generator=g, dtype=torch.float64)
    y = torch.randint(0, 2, (3, 7), generator=g)
    mask = torch.rand(3, 7, generator=g) < 0.7 if masked else None
    mask = None if mask is None else mask.index_fill(1, torch.tensor([0]), True)
    loss, grads = model.loss_grads(params, x, y, mask)
    ref_loss, ref_grads = BatchedModel.loss_grads(model, params, x, y, mask)
    torch.testing.assert_close(loss, ref_loss, rtol=0, atol=1e-12)
    for k in params:
        torch.testing.assert_close(grads[k], ref_grads[k], rtol=0, atol=1e-12)
    assert_preact_grads(model, params, x, y, mask, ref_loss, ref_grads)
    for c in range(3):
        layer = torch.nn.Linear(5, 1).double()
        layer.load_state_dict({k.removeprefix("fc1."): v[c] for k, v in params.items()})
        keep = slice(None) if mask is None else mask[c]
        z = layer(x[c][keep]).squeeze(1)
        bce = F.binary_cross_entropy_with_logits(z, y[c][keep].double())
        w, b = torch.autograd.grad(bce, [layer.weight, layer.bias])
        torch.testing.assert_close(loss[c], bce, rtol=0, atol=1e-12)
        torch.testing.assert_close(grads["fc1.weight"][c], w, rtol=0, atol=1e-12)
        torch.testing.assert_close(grads["fc1.bias"][c], b, rtol=0, atol=1e-12)


def test_its_reference_module_and_predictions():
    """The plain module gives the batched logits ``[0, z]``; the predicted class is 1 exactly when σ(z) > 1/2."""
    model = build_model({"name": "linear"}, (4,), 2)
    g = torch.Generator().manual_seed(1)
    params = _client_params(model, 1, g)
    x = torch.randn(1, 9, 4, generator=g, dtype=torch.float64)
    out = model.forward(params, x)  # [1, 2, 9]
    module = model.reference_module().double()
    module.load_state_dict({k: v[0] for k, v in params.items()})
    torch.testing.assert_close(module(x[0]), out[0].T)
    assert torch.equal(out[0, 0], torch.zeros(9, dtype=torch.float64))
    z = x[0] @ params["fc1.weight"][0, 0] + params["fc1.bias"][0, 0]
    assert torch.equal(out[0].argmax(0), (torch.sigmoid(z) > 0.5).long())
