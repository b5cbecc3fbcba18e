"""Per-client state placed off the device (``hetfl.engine.state``): every algorithm's stacks go where the
federation's ``states`` says, keep their place through training, and change no number."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
import torch

from hetfl.algorithms import FEDERATION, get_algorithm
from hetfl.engine.optim import ClientOptimizer
from hetfl.engine.params import broadcast, select
from hetfl.engine.participation import participation_schedule
from hetfl.engine.state import STATE_SHARE, ClientStates, put
from tests.conftest import tiny_federation
from tests.test_memory import FEDERATION_CASES, _assert_identical, build, federation, train

CPU = torch.device("cpu")


def _stacks(algorithm, num_clients: int, keys: set[str]) -> dict[str, dict]:
    """The per-client stacks the algorithm holds: attributes that are dicts of the model's parameters,
    every one ``[N, ...]``, and the momentum buffers of its client optimizers (``<name>.buf``)."""
    found = {}
    for name, value in vars(algorithm).items():
        if isinstance(value, ClientOptimizer):
            name, value = f"{name}.buf", value.buf
        if (
            isinstance(value, dict)
            and value
            and set(value) <= keys
            and all(
                isinstance(v, torch.Tensor) and v.dim() > 0 and len(v) == num_clients for v in value.values()
            )
        ):
            found[name] = value
    return found


def _get(algorithm, name: str):
    """The stack ``name`` of :func:`_stacks` (``<optimizer>.buf`` for a client optimizer's buffers)."""
    value = algorithm
    for part in name.split("."):
        value = getattr(value, part)
    return value


def _mapped(params: dict) -> bool:
    return all(v.untyped_storage().filename is not None for v in params.values())


def _run(name, hp, sampling, make, dtype, states):
    fed = federation(make, dtype)
    if states is not None:
        fed.states = states
    algorithm = build(fed, name, hp, sampling)
    before = _stacks(algorithm, fed.num_clients, set(fed.model.shapes()))
    result = train(fed, algorithm)
    return result, before, {k: _get(algorithm, k) for k in before}


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


@pytest.mark.parametrize("case", ["scaffold-II-sampled", "local-sequential-opt-step"])
def test_a_resumed_run_keeps_its_state_in_place(case, tmp_path):
    """A checkpoint of a run whose stacks are memory-mapped restores them into their files (SCAFFOLD's c_i;
    Local's models and the momentum buffers of its kept optimizer), and the run goes on as if never stopped."""
    from hetfl.engine.checkpoint import load_checkpoint, save_checkpoint

    name, _, hp, sampling, make = FEDERATION_CASES[case]

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
    placed = _stacks(resumed, 4, set(resumed.fed.model.shapes()))
    assert load_checkpoint(tmp_path / "ckpt", "k", resumed) is not None
    stacks = {attr: _get(resumed, attr) for attr in placed}
    assert len(stacks) == (1 if name == "scaffold" else 2)  # c_i; Local's θ_i and its buffers
    for attr, stack in stacks.items():  # the fresh run's files, holding the checkpoint's values
        assert all(v is placed[attr][k] for k, v in stack.items()) and _mapped(stack), attr
        assert all(torch.equal(v, _get(first, attr)[k]) for k, v in stack.items()), attr
    resumed.round(3, schedule[2])
    for k, v in straight.state_dict().items():
        assert torch.equal(resumed.state_dict()[k], v), k
    for attr, stack in stacks.items():
        assert all(torch.equal(v, _get(straight, attr)[k]) for k, v in stack.items()), attr


class _Holder:
    """An algorithm's state as a checkpoint sees it: its environment (referenced) and what it holds: a
    per-client stack of 16 MiB placed by the environment's ``states`` and a small tensor in memory."""

    def __init__(self, env, seed: int):
        self.env = env
        self.stack = env.states.zeros({"w": torch.empty(64, 1 << 16, dtype=torch.float32)})
        self.stack["w"].copy_(torch.randn(64, 1 << 16, generator=torch.Generator().manual_seed(seed)))
        self.w = torch.randn(10, dtype=torch.float64)
        self.cycle = SimpleNamespace(stack=self.stack)  # an object that refers to itself (restored once)
        self.cycle.itself = self.cycle


def test_a_checkpoint_of_mapped_state_copies_none_of_it_into_memory(tmp_path):
    """Saving writes each stack from where it lies and loading maps the checkpoint, copying a mapped stack
    into its own file page by page: neither builds the state in memory (Python's allocations stay far below
    the 16 MiB stack; the old pickle-in-memory format took twice the state), so a job whose state only fits
    in a file can checkpoint and resume. What is not restored in place is read into memory, not left mapped
    from the checkpoint file."""
    import tracemalloc

    from hetfl.engine.checkpoint import load_checkpoint, save_checkpoint

    def holder(seed):
        env = tiny_federation()
        env.states = ClientStates(CPU, budget=0, directory=tmp_path)
        return _Holder(env, seed)

    first, resumed = holder(1), holder(2)
    path = tmp_path / "ckpt.pt"
    tracemalloc.start()
    try:
        save_checkpoint(path, "k", first, 5, b"m", b"c", 1.0)
        _, saved_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        record = load_checkpoint(path, "k", resumed)
        _, loaded_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert record is not None and record.round == 5
    assert path.stat().st_size > 16 << 20
    assert saved_peak < 2 << 20 and loaded_peak < 2 << 20, (saved_peak, loaded_peak)
    assert _mapped(resumed.stack) and resumed.env.states.is_off(resumed.stack["w"])
    assert torch.equal(resumed.stack["w"], first.stack["w"]) and torch.equal(resumed.w, first.w)
    assert resumed.w.untyped_storage().filename is None  # in memory, not the checkpoint's pages
    assert resumed.cycle.itself is resumed.cycle and resumed.cycle.stack["w"] is resumed.stack["w"]
    path.unlink()
    assert torch.equal(resumed.w, first.w)


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
