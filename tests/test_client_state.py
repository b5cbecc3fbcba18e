"""Per-client state placed off the device (``hetfl.engine.state``): every algorithm's stacks go where the
federation's ``states`` says, keep their place through training, and change no number."""

from __future__ import annotations

import os

import pytest
import torch

from hetfl.algorithms import FEDERATION, get_algorithm
from hetfl.engine.params import broadcast, select
from hetfl.engine.participation import participation_schedule
from hetfl.engine.state import STATE_SHARE, ClientStates, put
from tests.conftest import tiny_federation
from tests.test_memory import FEDERATION_CASES, _assert_identical, build, federation, train

CPU = torch.device("cpu")


def _stacks(algorithm, num_clients: int, keys: set[str]) -> dict[str, dict]:
    """The per-client stacks the algorithm holds: attributes that are dicts of the model's parameters,
    every one ``[N, ...]``."""
    return {
        name: value
        for name, value in vars(algorithm).items()
        if isinstance(value, dict)
        and value
        and set(value) <= keys
        and all(isinstance(v, torch.Tensor) and v.dim() > 0 and len(v) == num_clients for v in value.values())
    }


def _mapped(params: dict) -> bool:
    return all(v.untyped_storage().filename is not None for v in params.values())


def _run(name, hp, sampling, make, dtype, states):
    fed = federation(make, dtype)
    if states is not None:
        fed.states = states
    algorithm = build(fed, name, hp, sampling)
    before = _stacks(algorithm, fed.num_clients, set(fed.model.shapes()))
    result = train(fed, algorithm)
    return result, before, {k: getattr(algorithm, k) for k in before}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("case", list(FEDERATION_CASES))
def test_state_in_a_memory_mapped_file_changes_no_number(case, dtype, tmp_path):
    name, _, hp, sampling, make = FEDERATION_CASES[case]
    want, stacks, _ = _run(name, hp, sampling, make, dtype, None)
    states = ClientStates(CPU, budget=0, directory=tmp_path)  # no room on the device: every stack mapped
    got, mapped, kept = _run(name, hp, sampling, make, dtype, states)
    _assert_identical(got, want)
    # every per-client stack the algorithm holds was made by fed.states (none by hand on the device) ...
    assert mapped.keys() == stacks.keys()
    assert all(_mapped(p) for p in mapped.values()), [k for k, p in mapped.items() if not _mapped(p)]
    assert states.placed["mmap"] == sum(
        v.numel() * v.element_size() for p in mapped.values() for v in p.values()
    )
    # ... keeps its place through training, and leaves no file behind
    assert all(_mapped(p) for p in kept.values()), [k for k, p in kept.items() if not _mapped(p)]
    assert os.listdir(tmp_path) == []


def test_the_algorithms_with_per_client_state_are_covered():
    """The test above is not vacuous: these algorithms hold per-client stacks, and they are placed."""
    holders = set()
    for name, _, hp, sampling, make in FEDERATION_CASES.values():
        fed = tiny_federation(make.model, split=make.split)
        fed.states = ClientStates(CPU, budget=0)
        cls = get_algorithm(name, environment=FEDERATION)
        cls(fed, cls.Hyperparameters.from_dict(hp, "test"), 3, sampling)  # makes its stacks
        if fed.states.placed["mmap"]:
            holders.add(name)
    expected = {"scaffold", "feddyn", "fedalt", "fedsim", "pfedme", "local", "ditto", "apfl", "all_for_one"}
    assert expected <= holders, expected - holders


def test_placement_follows_the_budget():
    params = {"w": torch.randn(1, 10, 5, dtype=torch.float64)}
    nbytes = 8 * 10 * 5 * 8  # one stack of 8 clients
    budget = int((100 + 1.5 * nbytes) / STATE_SHARE)  # 100 bytes of data, room for one stack and a half
    states = ClientStates(CPU, budget, reserved=100)
    first, second = states.stack(params, 8), states.stack(params, 8)
    assert not states.is_off(first["w"]) and first["w"].untyped_storage().filename is None
    assert states.is_off(second["w"]) and second["w"].untyped_storage().filename is not None
    assert states.record() == {"device_bytes": nbytes, "host_bytes": 0, "mmap_bytes": nbytes}
    for stack in (first, second):  # the values of broadcast, wherever placed
        assert torch.equal(stack["w"], broadcast(params, 8)["w"])
    assert ClientStates(CPU).place(10**15, idle=True) == "device"  # no budget: always on the device


def test_rows_are_read_and_written_in_place(tmp_path):
    states = ClientStates(CPU, budget=0, directory=tmp_path)
    stack = states.zeros({"w": torch.empty(5, 3), "b": torch.empty(5)})
    clients = torch.tensor([3, 1])
    put(stack, clients, {"w": torch.ones(2, 3), "b": torch.full((2,), 2.0)})
    assert stack["w"].sum(1).tolist() == [0, 3, 0, 3, 0] and stack["b"].tolist() == [0, 2, 0, 2, 0]
    got = select(stack, clients, CPU)
    assert torch.equal(got["w"], torch.ones(2, 3)) and got["w"].untyped_storage().filename is None
    new = {"w": torch.full((5, 3), 7.0), "b": torch.zeros(5)}
    assert states.keep(stack, new) is stack and torch.equal(
        stack["w"], new["w"]
    )  # mapped: copied into its place
    plain = {"w": torch.zeros(5, 3), "b": torch.zeros(5)}
    assert states.keep(plain, new) is new  # on the device: the new stack itself, no copy


def test_bad_budgets_are_errors():
    with pytest.raises(ValueError, match="budget and reserved must be >= 0"):
        ClientStates(CPU, budget=-1)
    with pytest.raises(ValueError, match="budget and reserved must be >= 0"):
        ClientStates(CPU, budget=10, reserved=-5)


def test_a_resumed_run_keeps_its_state_in_place(tmp_path):
    """A checkpoint of a run whose stacks are memory-mapped restores them into their files, and the run
    goes on as if never stopped."""
    from hetfl.engine.checkpoint import load_checkpoint, save_checkpoint

    name, _, hp, sampling, make = FEDERATION_CASES["scaffold-II-sampled"]

    def build():
        fed = tiny_federation(make.model, split=make.split)
        fed.states = ClientStates(CPU, budget=0, directory=tmp_path)
        cls = get_algorithm(name, environment=FEDERATION)
        return cls(fed, cls.Hyperparameters.from_dict(hp, "test"), 3, sampling)

    schedule = participation_schedule(4, build().clients_per_round, 3, 3)
    straight, first = build(), build()
    for t in (1, 2, 3):
        straight.round(t, schedule[t - 1])
    for t in (1, 2):
        first.round(t, schedule[t - 1])
    save_checkpoint(tmp_path / "ckpt", "k", first, 2, b"", b"", 0.0)
    resumed = build()
    assert load_checkpoint(tmp_path / "ckpt", "k", resumed) is not None
    assert _mapped(resumed.c_i) and torch.equal(resumed.c_i["fc1.weight"], first.c_i["fc1.weight"])
    resumed.round(3, schedule[2])
    for k, v in straight.state_dict().items():
        assert torch.equal(resumed.state_dict()[k], v), k
    assert torch.equal(resumed.c_i["fc1.weight"], straight.c_i["fc1.weight"])


def test_host_placement_is_off_the_device_and_changes_no_number(monkeypatch):
    """The placement next to a GPU (host memory), forced here on the CPU: the stacks count as off the device
    (the memory plan leaves them out of the resident bytes) and the numbers do not change."""
    from hetfl.engine.memory import plan_memory

    name, _, hp, sampling, make = FEDERATION_CASES["scaffold-II-sampled"]
    want, _, _ = _run(name, hp, sampling, make, torch.float64, None)
    states = ClientStates(CPU, budget=0)
    monkeypatch.setattr(states, "place", lambda nbytes, idle: "host")
    got, stacks, _ = _run(name, hp, sampling, make, torch.float64, states)
    _assert_identical(got, want)
    placed = [v for p in stacks.values() for v in p.values()]
    assert placed and all(states.is_off(v) for v in placed) and states.placed["host"] > 0
    plans = []
    for place in (None, states):
        fed = federation(make, torch.float64)
        if place is not None:
            fed.states = ClientStates(CPU, budget=0)
            monkeypatch.setattr(fed.states, "place", lambda nbytes, idle: "host")
        plans.append(plan_memory(fed, build(fed, name, hp, sampling), 2**30, 4))
    assert plans[0].resident_bytes - plans[1].resident_bytes == states.placed["host"]
