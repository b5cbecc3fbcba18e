"""CoBo's weight update in chunks of pairs (``hetfl.algorithms.collaborative.cobo.pair_chunks``): every sampled
pair once, in order, one chunk's gradients resident, the same weights as one call over all the pairs."""

from __future__ import annotations

import pytest
import torch

import hetfl.algorithms.collaborative.cobo as cobo
from hetfl.algorithms import get_algorithm
from hetfl.engine.chunks import limit_rows
from tests.conftest import tiny_federation

SIZES = (9, 4, 6, 3, 12, 5, 7)


@pytest.mark.parametrize(
    "m,limit", [(21, None), (21, 42), (21, 41), (21, 8), (21, 2), (21, 1), (1, 1), (0, 4)]
)
def test_the_chunks_hold_every_pair_once_in_order(m, limit):
    chunks = cobo.pair_chunks(m, limit)
    assert torch.cat(chunks).tolist() == list(range(m))
    if limit is not None and 2 * m > limit:
        assert max(len(c) for c in chunks) <= max(1, limit // 2)
    else:
        assert len(chunks) == 1


def _cobo(rows, dtype, probability):
    fed = tiny_federation("dnn", sizes=SIZES, dtype=dtype)
    if rows is not None:
        limit_rows(fed.model, rows)
    cls = get_algorithm("cobo")
    hp = {"lr": 0.1, "batch_size": 3, "pair_batch": 2, "local_steps": 2, "gamma_c": 0.5}
    hp["pair_probability"] = probability
    algorithm = cls(fed, cls.Hyperparameters.from_dict(hp, "t"), 0)
    algorithm.rounds = 2
    return algorithm


@pytest.mark.parametrize("probability", [1.0, None], ids=["every-pair", "sampled"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("rows", [1, 8, 20])
def test_chunks_of_pairs_give_the_weights_of_one_call(rows, dtype, probability, monkeypatch):
    want, states = _cobo(None, dtype, probability), []
    for t in (1, 2):
        want.round(t, torch.arange(len(SIZES)))
        states.append((want.alpha.clone(), {k: v.clone() for k, v in want.theta.items()}))
    assert 0.0 < float(want.alpha.min()) < 1.0  # the weights moved: the comparison is not vacuous
    algorithm, calls = _cobo(rows, dtype, probability), []
    grads = cobo.stacked_grads
    monkeypatch.setattr(
        cobo, "stacked_grads", lambda m, p, b, **kw: calls.append(len(b.x)) or grads(m, p, b, **kw)
    )
    for t, (alpha, theta) in zip((1, 2), states, strict=True):
        algorithm.round(t, torch.arange(len(SIZES)))
        assert torch.equal(algorithm.alpha, alpha)
        assert all(torch.equal(algorithm.theta[k], v) for k, v in theta.items())
    assert calls and max(calls) <= max(
        2, rows
    )  # never more rows than the limit (two per pair, one pair at least)
