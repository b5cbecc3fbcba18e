"""Personalization splits and low-rank adapters of the batched models."""

from __future__ import annotations

import pytest
import torch

from hetfl.errors import ConfigError
from hetfl.models import BatchedModel, build_model, normalize_model_spec

SHAPES = {"mlr": (1, 4, 4), "dnn": (1, 4, 4), "cnn": (1, 6, 6)}


def model(name, split="none", rank=2):
    extra = {"hidden": 5} if name == "dnn" else {"channels": [2, 3], "hidden": 4} if name == "cnn" else {}
    spec = normalize_model_spec({"name": name, "split": split, "adapter_rank": rank, **extra}, "m")
    return build_model(spec, SHAPES[name], 3)


def test_split_keys():
    assert model("dnn", "input").personal_keys() == ["fc1.weight", "fc1.bias"]
    assert model("dnn", "output").personal_keys() == ["fc2.weight", "fc2.bias"]
    assert model("dnn", "none").personal_keys() == []
    assert model("cnn", "input").personal_keys() == ["conv1.weight", "conv1.bias"]
    assert model("cnn", "adapter").personal_keys() == [
        f"{layer}.lora_{p}" for layer in ("conv1", "conv2", "fc1", "fc2") for p in ("down", "up")
    ]
    shapes = model("dnn", "adapter", rank=3).shapes()
    assert shapes["fc1.lora_down"][0] == (3, 16) and shapes["fc1.lora_up"][0] == (5, 3)


@pytest.mark.parametrize("name", ["mlr", "dnn", "cnn"])
def test_adapters_start_as_identity_on_the_same_base_init(name):
    plain, adapted = model(name), model(name, "adapter")
    p0 = plain.init(torch.Generator().manual_seed(3), torch.float64)
    p1 = adapted.init(torch.Generator().manual_seed(3), torch.float64)
    for k, v in p0.items():
        torch.testing.assert_close(p1[k], v, rtol=0, atol=0)  # base parameters unchanged by adding adapters
    assert all(p1[k].abs().sum() == 0 for k in p1 if k.endswith("lora_up"))
    x = torch.randn(1, 5, *SHAPES[name], dtype=torch.float64)
    torch.testing.assert_close(adapted.forward(p1, x), plain.forward(p0, x))


@pytest.mark.parametrize("name", ["mlr", "dnn", "cnn"])
def test_adapter_gradients_and_reference_module(name):
    m = model(name, "adapter")
    g = torch.Generator().manual_seed(0)
    params = {
        k: v.expand(3, *v.shape[1:]) + 0.2 * torch.randn(3, *v.shape[1:], generator=g, dtype=v.dtype)
        for k, v in m.init(g, torch.float64).items()
    }
    x = torch.randn(3, 5, *SHAPES[name], generator=g, dtype=torch.float64)
    y = torch.randint(0, 3, (3, 5), generator=g)
    loss, grads = m.loss_grads(params, x, y, None)
    ref_loss, ref_grads = BatchedModel.loss_grads(m, params, x, y, None)  # autograd through W + up·down
    torch.testing.assert_close(loss, ref_loss)
    for k in params:
        torch.testing.assert_close(grads[k], ref_grads[k], rtol=0, atol=1e-12)
    module = m.reference_module().double()
    module.load_state_dict({k: v[1] for k, v in params.items()})
    torch.testing.assert_close(m.forward(params, x)[1].T, module(x[1]))


def test_bad_split_names_the_key():
    with pytest.raises(ConfigError, match="allowed: adapter, input, none, output"):
        normalize_model_spec({"name": "dnn", "split": "middle"}, "m")
