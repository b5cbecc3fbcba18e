"""The shared client optimizer equals PyTorch's per-model SGD, gradient clipping and schedulers."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from hetfl.engine.optim import ClientOptimizer, scheduled_lr


def hp(**kw):
    base = {"momentum": 0.0, "weight_decay": 0.0, "clip_norm": None, "lr_schedule": "constant"}
    return SimpleNamespace(**{**base, **kw})


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"momentum": 0.9},
        {"weight_decay": 0.01},
        {"clip_norm": 0.5},
        {"momentum": 0.5, "weight_decay": 0.1, "clip_norm": 0.3},
    ],
)
def test_stacked_steps_equal_torch_sgd_per_client(settings):
    g = torch.Generator().manual_seed(0)
    C, steps, lr = 3, 4, 0.1
    params = {
        "a": torch.randn(C, 4, 5, generator=g, dtype=torch.float64),
        "b": torch.randn(C, 5, generator=g, dtype=torch.float64),
    }
    grads_per_step = [
        {k: torch.randn(v.shape, generator=g, dtype=torch.float64) * 3 for k, v in params.items()}
        for _ in range(steps)
    ]
    opt = ClientOptimizer(hp(**settings), params)
    mine = {k: v.clone() for k, v in params.items()}
    for grads in grads_per_step:
        opt.step(mine, {k: v.clone() for k, v in grads.items()}, lr)
    for c in range(C):
        w = [torch.nn.Parameter(params[k][c].clone()) for k in ("a", "b")]
        sgd = torch.optim.SGD(
            w, lr=lr, momentum=settings.get("momentum", 0.0), weight_decay=settings.get("weight_decay", 0.0)
        )
        for grads in grads_per_step:
            for p, k in zip(w, ("a", "b"), strict=True):
                p.grad = grads[k][c].clone()
            if settings.get("clip_norm") is not None:
                torch.nn.utils.clip_grad_norm_(w, settings["clip_norm"])
            sgd.step()
        for p, k in zip(w, ("a", "b"), strict=True):
            torch.testing.assert_close(mine[k][c], p.detach(), rtol=0, atol=1e-12)


def test_only_the_given_keys_move_and_reset_restarts_momentum():
    params = {"a": torch.ones(2, 3), "b": torch.ones(2, 3)}
    opt = ClientOptimizer(hp(momentum=0.9), params, keys=["a"])
    opt.step(params, {"a": torch.ones(2, 3), "b": torch.ones(2, 3)}, 0.1)
    assert torch.equal(params["b"], torch.ones(2, 3)) and torch.allclose(params["a"], torch.full((2, 3), 0.9))
    opt.reset()
    opt.step(params, {"a": torch.ones(2, 3), "b": torch.ones(2, 3)}, 0.1)
    assert torch.allclose(params["a"], torch.full((2, 3), 0.8))  # no momentum carried over the reset
    assert ClientOptimizer(hp(), params).plain and not opt.plain


def test_schedules_equal_torch_schedulers():
    for schedule, torch_scheduler in (
        (
            {"lr_schedule": "step", "lr_step_size": 3, "lr_gamma": 0.5},
            lambda o: torch.optim.lr_scheduler.StepLR(o, 3, 0.5),
        ),
        (
            {"lr_schedule": "cosine", "lr_min": 0.01},
            lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, 10, 0.01),
        ),
        (  # Mishchenko et al.'s "global scheduler: linear" (App. E, Table 5), as their code's LambdaLR:
            # warm-up over 10 % of the rounds from 0, then a linear decay to 0
            {"lr_schedule": "linear", "lr_warmup": 0.1},
            lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda s: s / 1.0 if s < 1.0 else (10 - s) / 9.0),
        ),
        (
            {"lr_schedule": "linear", "lr_warmup": 0.35},  # W = 3.5 rounds: s/3.5, then (10 − s)/6.5
            lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda s: s / 3.5 if s < 3.5 else (10 - s) / 6.5),
        ),
    ):
        o = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.2)
        sched = torch_scheduler(o)
        for t in range(1, 11):  # round t uses the lr after t - 1 scheduler steps
            assert scheduled_lr(0.2, t, hp(**schedule), rounds=10) == pytest.approx(
                o.param_groups[0]["lr"], abs=1e-12
            )
            o.step()
            sched.step()
    assert scheduled_lr(0.2, 7, hp()) == 0.2
    with pytest.raises(ValueError, match="rounds"):
        scheduled_lr(0.2, 1, hp(lr_schedule="cosine", lr_min=0.0))
    with pytest.raises(ValueError, match="rounds"):
        scheduled_lr(0.2, 1, hp(lr_schedule="linear"))
