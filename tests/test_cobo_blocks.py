"""CoBo's weight update in blocks of pairs (``hetfl.algorithms.collaborative.cobo.pair_blocks``): every ordered
pair once, one block's gradients resident, the same weights as one call over the N² pairs."""

from __future__ import annotations

import pytest
import torch

import hetfl.algorithms.collaborative.cobo as cobo
from hetfl.algorithms import get_algorithm
from hetfl.engine.chunks import limit_rows
from tests.conftest import tiny_federation

SIZES = (9, 4, 6, 3, 12, 5, 7)


@pytest.mark.parametrize("n,limit", [(7, None), (7, 49), (7, 48), (7, 8), (7, 2), (7, 1), (1, 1), (5, 18)])
def test_the_blocks_hold_every_ordered_pair_once(n, limit):
    seen = []
    for first, second in cobo.pair_blocks(n, limit):
        i, k = cobo._pairs(first, second)
        seen += list(zip(i.tolist(), k.tolist(), strict=True))
        if limit is not None and n * n > limit:
            assert len(i) <= max(2, limit)  # 2m² pairs, m ≥ 1
    assert sorted(seen) == [(i, k) for i in range(n) for k in range(n)]
    if limit is None or n * n <= limit:  # one block: the pairs in the order i·N + k
        assert seen == [(i, k) for i in range(n) for k in range(n)]


def _cobo(rows, dtype):
    fed = tiny_federation("dnn", sizes=SIZES, dtype=dtype)
    if rows is not None:
        limit_rows(fed.model, rows)
    cls = get_algorithm("cobo")
    hp = {"lr": 0.1, "batch_size": 3, "b_alpha": 2, "local_steps": 2, "tau": 1, "gamma_c": 0.5}
    algorithm = cls(fed, cls.Hyperparameters.from_dict(hp, "t"), 0)
    algorithm.rounds = 2
    return algorithm


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("rows", [1, 8, 20])
def test_blocks_of_pairs_give_the_weights_of_one_call(rows, dtype, monkeypatch):
    want, states = _cobo(None, dtype), []
    for t in (1, 2):
        want.round(t, torch.arange(len(SIZES)))
        states.append((want.alpha.clone(), {k: v.clone() for k, v in want.theta.items()}))
    assert 0.0 < float(want.alpha.min()) < 1.0  # the weights moved: the comparison is not vacuous
    algorithm, pairs = _cobo(rows, dtype), []
    grads = cobo.stacked_grads
    monkeypatch.setattr(
        cobo, "stacked_grads", lambda m, p, b, **kw: pairs.append(len(b.x)) or grads(m, p, b, **kw)
    )
    for t, (alpha, theta) in zip((1, 2), states, strict=True):
        algorithm.round(t, torch.arange(len(SIZES)))
        assert torch.equal(algorithm.alpha, alpha)
        assert all(torch.equal(algorithm.theta[k], v) for k, v in theta.items())
    assert pairs and max(pairs) <= max(2, rows) < len(SIZES) ** 2  # never the N² pairs' gradients at once
