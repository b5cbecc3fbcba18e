"""Models an evaluation adapts for every client, a row chunk of clients at a time (``hetfl.engine.adapt``):
scored chunk by chunk to the same sums, never stacked under a row limit, stacked to the same final state.

(Every algorithm's evaluations and final states, unchunked and under row limits, byte for byte:
``tests/test_memory.py``.)
"""

from __future__ import annotations

import pytest
import torch

from hetfl.algorithms import FEDERATION, get_algorithm
from hetfl.engine.adapt import ClientModels
from hetfl.engine.chunks import limit_rows
from hetfl.engine.evaluate import Evaluator
from hetfl.engine.state import ClientStates
from hetfl.testing import tiny_federation

SIZES = (9, 1, 6, 3, 12, 2, 7)  # skewed: later block-rows calls gather the clients with data left


@pytest.mark.parametrize("packing", [None, (4, 3)], ids=["block-rows", "packed"])
@pytest.mark.parametrize("model", ["dnn", "cnn"])
def test_scoring_the_clients_a_chunk_at_a_time_gives_the_same_sums(packing, model):
    fed = tiny_federation(model, sizes=SIZES, dtype=torch.float64)
    evaluator = Evaluator(fed, budget=fed.model.sample_cost() * len(SIZES) * 2)  # blocks of 2 samples
    evaluator.packing = lambda split: packing
    params = fed.model.init(torch.Generator().manual_seed(1), fed.dtype, count=fed.num_clients)
    for split in fed.splits:
        whole = evaluator.scores(params, split)
        for edges in ([0, 3, 7], [0, 1, 2, 5, 6, 7], [0, 7]):
            out = None
            for a, b in zip(edges, edges[1:], strict=False):
                out = evaluator.scores({k: v[a:b] for k, v in params.items()}, split, slice(a, b), out)
            for name in ("loss_sum", "correct", "count"):
                assert torch.equal(getattr(out, name), getattr(whole, name)), (split, edges, name)


def test_scores_refuse_models_that_are_not_the_chunks():
    fed = tiny_federation("mlr", sizes=SIZES)
    params = fed.model.init(torch.Generator().manual_seed(1), fed.dtype, count=3)
    with pytest.raises(ValueError, match="expected the 2 clients"):
        Evaluator(fed).scores(params, "test", slice(1, 3))


CASES = [
    ("perfedavg", {}),
    ("perfedavg", {"adaptation": "official"}),
    ("fedavg_ft", {"momentum": 0.9, "finetune_steps": 2}),
    ("fedavg_ft", {"finetune": "personal", "finetune_steps": 2}),
    ("fedalt", {"finetune_steps": 2}),
    ("ffgg", {"personal_init": "random", "finetune_steps": 2}),
]


def _algorithm(name, hp, rows):
    fed = tiny_federation("dnn", sizes=SIZES, split="output")
    if rows is not None:
        limit_rows(fed.model, rows)
    cls = get_algorithm(name, environment=FEDERATION)
    hp = {"batch_size": 4, "clients_per_round": 3, **hp}
    algorithm = cls(fed, cls.Hyperparameters.from_dict(hp, "t"), 0)
    algorithm.round(1, torch.tensor([0, 2, 4]))
    return algorithm


@pytest.mark.parametrize("name,hp", CASES)
def test_under_a_row_limit_an_evaluation_holds_one_chunk_of_adapted_models(name, hp, monkeypatch):
    """Each chunk is adapted, scored and dropped before the next: no stack of the N clients' models is made
    or kept (nothing cached), and every call takes at most the limit's rows; the metrics are the unchunked
    ones, and so is the final state, stacked from the chunks with the viewed part still one row."""
    want = _algorithm(name, hp, None)
    want_rows, want_clients = want.evaluate()
    algorithm = _algorithm(name, hp, 3)
    model = algorithm.fed.model
    calls = []
    for method in ("forward", "loss_grads"):
        inner = getattr(model, method)
        monkeypatch.setattr(
            model,
            method,
            lambda p, *a, inner=inner: calls.append(len(next(iter(p.values())))) or inner(p, *a),
        )
    chunks = []
    iterate = ClientModels.__iter__
    monkeypatch.setattr(
        ClientModels, "__iter__", lambda self: (chunks.append(s) or (s, p) for s, p in iterate(self))
    )
    rows, client_rows = algorithm.evaluate()
    assert rows == want_rows and client_rows == want_clients
    assert chunks == [slice(0, 2), slice(2, 4), slice(4, 7)]  # 7 clients under 3 rows a call: near-equal
    assert calls and max(calls) <= 3 and algorithm._cache is None
    got, expected = algorithm.eval_models()["personal"], want.eval_models()["personal"]
    for k, v in expected.items():
        assert torch.equal(got[k], v) and (got[k].stride(0) == 0) == (v.stride(0) == 0), k


def test_a_stack_of_chunks_goes_where_the_states_place_it(tmp_path):
    """Stacked at the end (``final.pt``) under a budget that leaves no room on the device: a memory-mapped
    file, the same values; a part viewed by every client is written as N rows of it, also placed."""
    want = _algorithm("fedalt", {"finetune_steps": 2}, None).state_dict()
    algorithm = _algorithm("fedalt", {"finetune_steps": 2}, 3)
    algorithm.fed.states = ClientStates(torch.device("cpu"), budget=0, directory=tmp_path)
    state = algorithm.state_dict()
    assert state.keys() == want.keys() and all(torch.equal(state[k], v) for k, v in want.items())
    personal = algorithm.eval_models()["personal"]
    assert all(algorithm.fed.states.is_off(v) != (v.stride(0) == 0) for v in personal.values())
    assert algorithm.fed.states.placed["mmap"] == 0  # written out, not kept as client state
