"""The order of the server's sums (``hetfl.engine.aggregation``, the option ``aggregation``).

``sequential`` is a running sum in the clients' order, so any chunks of clients give the same bits; every
FedAvg-like algorithm (and Per-FedAvg) under it trains, adds and drops a chunk of clients at a time under a row limit and
must give the evaluations and final state of its unchunked run, byte for byte, while never holding more than
one chunk's local models. ``batched`` (the default) is torch's reduction, unchanged.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from hetfl.algorithms import FEDERATION, get_algorithm, registry
from hetfl.engine import aggregation
from hetfl.engine.aggregation import ClientSum, weighted_sum
from hetfl.engine.chunks import limit_rows
from hetfl.engine.memory import MIB, TRANSIENT_COPIES, plan_memory
from hetfl.engine.params import average
from hetfl.pipeline.config import ConfigError
from tests.conftest import tiny_federation
from tests.test_memory import _assert_identical, build, train

SIZES = (7, 12, 3, 9, 5, 8, 6, 11, 4, 10)  # 10 clients: torch's sum over >= 5 rows is not a running sum


def _running(x, weights):
    """The definition: ((p_0 x_0 + p_1 x_1) + p_2 x_2) + ..., each term rounded to the dtype; the mean
    divides the running sum of the rows by S."""
    out = {}
    for k, v in x.items():
        total = None
        for i in range(len(v)):
            term = v[i] if weights is None else v[i] * weights[i].to(v.dtype)
            total = term.clone() if total is None else total + term
        out[k] = (total / len(v) if weights is None else total).unsqueeze(0)
    return out


def _terms(dtype, clients=23, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = {"w": torch.randn(clients, 5, 3, generator=g, dtype=dtype), "b": torch.randn(clients, 3, generator=g)}
    x["b"] = x["b"].to(dtype) * 100  # another scale
    p = torch.rand(clients, generator=g, dtype=torch.float64)
    return x, p / p.sum()


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("weighted", [False, True], ids=["mean", "weighted"])
@pytest.mark.parametrize("cuts", [[0, 23], [0, 1, 2, 3, 23], [0, 5, 11, 22, 23], list(range(24))])
def test_the_sequential_sum_is_the_running_sum_whatever_the_chunks(dtype, weighted, cuts):
    x, p = _terms(dtype)
    p = p if weighted else None
    total = ClientSum(23, p, sequential=True)
    for a, b in zip(cuts, cuts[1:], strict=False):
        total.add(slice(a, b), {k: v[a:b] for k, v in x.items()})
    got, want = total.result(), _running(x, p)
    assert all(torch.equal(got[k], want[k]) and got[k].dtype == dtype for k in x)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
def test_the_batched_sum_is_the_server_average_of_before(dtype):
    x, p = _terms(dtype)
    for weights in (None, p):
        total = ClientSum(23, weights, sequential=False)
        total.add(slice(0, 23), x)
        want = average(x, weights)
        assert all(torch.equal(total.result()[k], want[k]) for k in x)
    dot = ClientSum(23, p, sequential=False, reduce=lambda c, v: torch.tensordot(c, v, dims=1).unsqueeze(0))
    dot.add(slice(0, 23), x)
    assert torch.equal(dot.result()["w"], torch.tensordot(p.to(dtype), x["w"], dims=1).unsqueeze(0))


def test_torch_reduction_is_not_a_running_sum_so_it_cannot_be_chunked():
    """Why there are two orders: from 5 rows on, ``sum(0)`` differs from the running sum somewhere (if a
    torch release made them equal, ``batched`` could be chunked too)."""
    x, p = _terms(torch.float32, clients=64, seed=1)
    assert not torch.equal(weighted_sum(p.float(), x["w"]), _running(x, p)["w"])


def test_a_client_sum_refuses_what_it_cannot_add():
    x, p = _terms(torch.float64)
    with pytest.raises(ValueError, match="3 weights for 23 clients"):
        ClientSum(23, p[:3], sequential=True)
    batched = ClientSum(23, None, sequential=False)
    with pytest.raises(ValueError, match="all 23 rows at once"):
        batched.add(slice(0, 5), {k: v[:5] for k, v in x.items()})
    seq = ClientSum(23, None, sequential=True)
    with pytest.raises(ValueError, match="rows 5:9 after 0"):
        seq.add(slice(5, 9), {k: v[5:9] for k, v in x.items()})
    seq.add(slice(0, 5), {k: v[:5] for k, v in x.items()})
    with pytest.raises(ValueError, match="5 of 23 clients added"):
        seq.result()


AGGREGATING = sorted(
    n
    for n, envs in registry().items()
    if FEDERATION in envs
    and "aggregation"
    in {f.name for f in dataclasses.fields(get_algorithm(n, environment=FEDERATION).Hyperparameters)}
)
OPTIONS = {  # each algorithm's sequential run, with its stateful options where it has them
    "fedavg": {"clients_per_round": 7, "client_weights": "samples", "local_steps_per_client": "spread"},
    "fedavg_ft": {"clients_per_round": 7, "momentum": 0.9, "finetune_steps": 2},
    "fedbabu": {"clients_per_round": 7, "server_optimizer": "adam", "finetune_steps": 2},
    "feddyn": {"clients_per_round": 7, "client_weights": "samples"},
    "fednova": {"local_steps_per_client": "spread", "local_steps_min": 1, "momentum": 0.5},
    "fedper": {"clients_per_round": 7, "momentum": 0.9},
    "fedrep": {"personal_steps": 2, "client_weights": "samples"},
    "fedalt": {"clients_per_round": 7, "stateful": True, "momentum": 0.9, "personal_steps": 2},
    "fedprox": {"clients_per_round": 7, "mu": 0.1, "server_optimizer": "avgm"},
    "fedsim": {"clients_per_round": 7, "client_weights": "samples", "stateful": True, "momentum": 0.5},
    "ffgg": {"clients_per_round": 7, "tau": 2, "momentum": 0.9},  # Algorithm 1: θ-gradients summed
    "ffgg-local": {"client_weights": "samples", "tau": 2, "local_theta_steps": 2, "personal_init": "initial"},
    "lg_fedavg": {"clients_per_round": 7},  # a personal body: the input split
    "perfedavg": {"clients_per_round": 7, "variant": "hf", "momentum": 0.9, "beta": 0.05},
    "perfedavg-sequential": {"step": "sequential", "client_weights": "samples", "adaptation_steps": 2},
    "scaffold": {"clients_per_round": 7, "control": "I"},
    "scaffold-II": {"client_weights": "samples", "local_steps_per_client": "spread"},
}
OPTIONS.update(  # an algorithm without a case of its own: 7 of the 10 clients a round, its defaults otherwise
    {name: {"clients_per_round": 7} for name in AGGREGATING if name not in {c.split("-")[0] for c in OPTIONS}}
)


def _sequential_run(case, dtype, rows, record=None):
    name = case.split("-")[0]
    fed = tiny_federation("dnn", sizes=SIZES, dtype=dtype, split="input" if name == "lg_fedavg" else "output")
    if rows is not None:
        limit_rows(fed.model, rows)
    fields = {f.name for f in dataclasses.fields(get_algorithm(name, environment=FEDERATION).Hyperparameters)}
    steps = {"local_steps": 3} if "local_steps" in fields else {}  # FFGG: tau, local_theta_steps
    hp = {**steps, "batch_size": 4, **OPTIONS[case], "aggregation": "sequential"}
    return train(fed, build(fed, name, hp, "epoch"))


def test_every_algorithm_with_the_option_has_a_case():
    assert set(AGGREGATING) >= {
        "fedalt", "fedavg", "fedavg_ft", "fedbabu", "feddyn", "fednova", "fedper", "fedprox", "fedrep", "fedsim",
        "ffgg", "lg_fedavg", "perfedavg", "qfedavg", "scaffold",
    }  # fmt: skip
    assert {c.split("-")[0] for c in OPTIONS} == set(AGGREGATING)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("case", sorted(OPTIONS))
def test_sequential_rounds_train_and_add_a_chunk_at_a_time_to_the_same_numbers(case, dtype, monkeypatch):
    want = _sequential_run(case, dtype, None)
    chunks = []
    add = ClientSum.add

    def recorded(self, s, params):
        chunks.append(s.stop - s.start)
        add(self, s, params)

    monkeypatch.setattr(ClientSum, "add", recorded)
    for rows in (1, 3):
        chunks.clear()
        _assert_identical(_sequential_run(case, dtype, rows), want)
        assert chunks and max(chunks) <= rows  # never more than one call's clients at once


def test_batched_and_sequential_differ_only_in_the_order_of_the_sums():
    """The same run in both orders: equal to rounding (float64), not to the bit (10 clients a round)."""
    fed = tiny_federation("dnn", sizes=SIZES, dtype=torch.float64)
    models = {}
    for order in aggregation.AGGREGATIONS:
        hp = {"local_steps": 3, "batch_size": 4, "client_weights": "samples", "aggregation": order}
        models[order] = train(fed, build(fed, "fedavg", hp, "epoch"))[1]
    a, b = models["batched"], models["sequential"]
    assert all(torch.allclose(a[k], b[k], rtol=0, atol=1e-12) for k in a)
    assert any(not torch.equal(a[k], b[k]) for k in a)


SPLIT = ("fedalt", "ffgg")  # partial personalization: the round's starting personal parts stay resident


@pytest.mark.parametrize(
    "name,hp,draws",
    [
        ("fedavg", {}, 20),
        ("perfedavg", {}, 40),  # D and D' a step
        ("perfedavg", {"variant": "hf"}, 60),  # and D''
        ("fedalt", {"personal_steps": 5}, 25),  # w steps, then θ steps
        ("ffgg", {}, 11),  # τ = 10, then the θ-gradient's minibatch
    ],
    ids=["fedavg", "perfedavg", "perfedavg-hf", "fedalt", "ffgg"],
)
def test_the_plan_counts_a_sequential_rounds_models_per_row_of_a_call(name, hp, draws):
    fed = tiny_federation("dnn", sizes=SIZES, dtype=torch.float32, split="output")
    size, parameters = 4, fed.model.num_parameters()
    plans = {}
    for order in aggregation.AGGREGATIONS:
        algorithm = build(fed, name, {**hp, "aggregation": order, "batch_size": 4}, "epoch")
        plans[order] = plan_memory(fed, algorithm, 64 * MIB, 4)
    batched, sequential = plans["batched"], plans["sequential"]
    transient = len(SIZES) * parameters * TRANSIENT_COPIES * size  # the S local models and updates
    positions = draws * len(SIZES) * 4 * 9  # every step's drawn positions (int64) and mask: B = 4
    personal = len(SIZES) * fed.model.num_parameters(fed.model.personal_keys()) * size if name in SPLIT else 0
    assert personal or name not in SPLIT
    assert batched.resident_bytes - sequential.resident_bytes == transient - positions - personal
    assert sequential.row_bytes - batched.row_bytes == parameters * TRANSIENT_COPIES * size


def test_a_bad_aggregation_names_the_key_and_the_orders():
    cls = get_algorithm("fedavg", environment=FEDERATION)
    with pytest.raises(ConfigError, match=r"t\.aggregation.*batched.*sequential"):
        cls.Hyperparameters.from_dict({"aggregation": "pairwise"}, "t")
    pfedme = get_algorithm("pfedme", environment=FEDERATION)
    with pytest.raises(ConfigError, match=r"t\.aggregation"):
        pfedme.Hyperparameters.from_dict({"aggregation": "sequential"}, "t")
