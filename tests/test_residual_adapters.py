"""The CNN's residual adapters (``adapter_kind: residual``): identity at the start, all personal, trainable."""

from __future__ import annotations

import pytest
import torch

from hetfl.errors import ConfigError
from hetfl.models import build_model, normalize_model_spec


def cnn(**options):
    spec = normalize_model_spec({"name": "cnn", "channels": [4, 6], "hidden": 8, **options}, "model")
    return build_model(spec, (1, 12, 12), 5)


def test_a_residual_adapter_starts_as_the_identity_and_draws_nothing():
    plain, adapted = cnn(), cnn(split="adapter", adapter_kind="residual")
    p0 = plain.init(torch.Generator().manual_seed(1), torch.float64, count=2)
    p1 = adapted.init(torch.Generator().manual_seed(1), torch.float64, count=2)
    assert all(torch.equal(p0[k], p1[k]) for k in p0)  # the base draws do not depend on the adapters
    x = torch.randn(2, 3, 1, 12, 12, dtype=torch.float64)
    assert torch.equal(plain.forward(p0, x), adapted.forward(p1, x))
    fresh = adapted.init(torch.Generator().manual_seed(2), torch.float64, keys=adapted.personal_keys())
    assert all(torch.equal(fresh[k], p1[k][:1]) for k in fresh)  # FFGG's "random" start is the identity too


def test_the_adapters_are_the_personal_part_and_change_the_output():
    model = cnn(split="adapter", adapter_kind="residual")
    keys = model.personal_keys()
    assert sorted(keys) == sorted(
        f"{layer}.{p}" for layer in ("conv1", "conv2", "fc1") for p in ("res", "scale", "shift")
    )
    assert model.num_parameters(keys) == 4 * 4 + 8 + 6 * 6 + 12 + 8 * 8 + 16
    params = model.init(torch.Generator().manual_seed(0), torch.float64)
    x = torch.randn(1, 6, 1, 12, 12, dtype=torch.float64)
    y = torch.randint(0, 5, (1, 6))
    _, grads = model.loss_grads(params, x, y, None)
    assert all(grads[k].abs().sum() > 0 for k in keys)  # every adapter parameter gets a gradient
    before = model.forward(params, x)
    params["conv2.res"] = params["conv2.res"] + 0.5
    assert not torch.allclose(model.forward(params, x), before)


def test_an_unknown_adapter_kind_names_the_key():
    with pytest.raises(ConfigError, match=r"model\.adapter_kind"):
        normalize_model_spec({"name": "cnn", "adapter_kind": "houlsby"}, "model")
