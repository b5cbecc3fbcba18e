"""The memory budget (``hetfl.engine.memory``): row chunks change no number, and the plan and the run
record say what a run uses.

Every registered algorithm that trains on client data runs each of its checkpoint cases
(``tests/test_checkpoint.py``: every algorithm and its stateful options) unchunked and with its batched
calls limited to 1 and to 3 client rows, and must give byte-identical evaluations and final states, in
float64 and float32. A CNN, whose float32 convolutions are oneDNN's, is byte-identical in float64 and
within float32 rounding in float32: such a model is split only under a budget its run's spec names.
"""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
import torch

from hetfl.algorithms import FEDERATION, get_algorithm, registry
from hetfl.engine.chunks import ChunkedModel, limit_rows, row_chunks
from hetfl.engine.evaluate import Evaluator
from hetfl.engine.memory import (
    EVAL_COPIES,
    MIB,
    TRANSIENT_COPIES,
    activation_elements,
    budget_bytes,
    cgroup_limit,
    evaluation_bytes,
    plan_memory,
    plan_rows,
    row_bytes,
    tensor_bytes,
)
from hetfl.engine.participation import participation_schedule
from hetfl.pipeline.config import ConfigError, build_suite
from tests.conftest import tiny_federation
from tests.test_checkpoint import CASES

ROUNDS = 3
FEDERATION_CASES = {i: c for i, c in CASES.items() if c[1] == FEDERATION}
SOLVED_TO_TOLERANCE = {"minimax_saddle"}
"""Algorithms whose result is an iterative solve to a tolerance (L-BFGS: ``hetfl.algorithms.minimax.saddle``): the
last bits of the objective steer the solver's path, so another execution (the loop, CUDA's kernels) finds the same
solution to the solver's tolerance, not to float64 rounding (``tests/test_minimax_saddle.py`` checks it). Row
chunks on the CPU stay byte-identical (below)."""
EXACT_CASES = [c for c, case in FEDERATION_CASES.items() if case[0] not in SOLVED_TO_TOLERANCE]
"""The cases another execution reproduces to float64 rounding."""


def federation(make, dtype, model=None, device="cpu"):
    """The tiny federation of a checkpoint case (``make``: its builder), in ``dtype`` on ``device``, with two
    clusters."""
    fed = tiny_federation(model or make.model, split=make.split, dtype=dtype, device=device)
    fed.cluster = torch.tensor([0, 1, 0, 1])
    return fed


def build(fed, name, hp, sampling):
    """Algorithm ``name`` with hyper-parameters ``hp`` on ``fed``, seed 3, for ``ROUNDS`` rounds."""
    cls = get_algorithm(name, environment=FEDERATION)
    algorithm = cls(fed, cls.Hyperparameters.from_dict(hp, "test"), 3, sampling)
    algorithm.rounds = ROUNDS
    return algorithm


def train(fed, algorithm):
    """``ROUNDS`` rounds, each evaluated: ``(evaluations, final state_dict)``."""
    schedule = participation_schedule(fed.num_clients, algorithm.clients_per_round, ROUNDS, 3)
    evaluations = []
    for t in range(1, ROUNDS + 1):
        algorithm.round(t, schedule[t - 1])
        rows_, client_rows = algorithm.evaluate()
        evaluations.append([*rows_, *client_rows])
    return evaluations, algorithm.state_dict()


def _run(name, hp, sampling, make, dtype, rows, model=None, device="cpu"):
    fed = federation(make, dtype, model, device)
    if rows is not None:
        limit_rows(fed.model, rows)
    return train(fed, build(fed, name, hp, sampling))


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def _assert_identical(got, want):
    (ev, state), (ev0, state0) = got, want
    for g_rows, w_rows in zip(ev, ev0, strict=True):
        for g, w in zip(g_rows, w_rows, strict=True):
            assert g[:-1] == w[:-1] and _same(g[-1], w[-1]), (g, w)
    assert state.keys() == state0.keys()
    for k in state0:
        assert torch.equal(state[k], state0[k]), k


def test_every_algorithm_on_client_data_has_a_case():
    covered = {c[0] for c in FEDERATION_CASES.values()}
    assert {n for n, envs in registry().items() if FEDERATION in envs} <= covered


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("case", list(FEDERATION_CASES))
def test_row_chunks_change_no_number(case, dtype):
    name, _, hp, sampling, make = FEDERATION_CASES[case]
    want = _run(name, hp, sampling, make, dtype, None)
    for rows in (1, 3):
        _assert_identical(_run(name, hp, sampling, make, dtype, rows), want)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("model", ["mlr", "dnn"])
@pytest.mark.parametrize("carry", [True, False], ids=["carried", "plain"])
def test_pfedme_solves_its_rows_inner_problems_chunk_by_chunk_to_the_same_numbers(carry, model, dtype):
    """pFedMe gathers and solves one row chunk's inner problems at a time (``engine.grad.row_batches``),
    both inner solvers: the W·x carried across the K steps and the plain steps."""

    def run(rows):
        fed = tiny_federation(model, sizes=(7, 12, 3, 9, 5), dtype=dtype)
        limit_rows(fed.model, rows)
        cls = get_algorithm("pfedme", environment=FEDERATION)
        hp = {"batch_size": 4, "K": 3, "local_steps": 2, "clients_per_round": 2}
        algorithm = cls(fed, cls.Hyperparameters.from_dict(hp, "t"), 1)
        algorithm.carry_input_product = carry
        schedule = participation_schedule(fed.num_clients, algorithm.clients_per_round, 2, 1)
        for t in (1, 2):
            algorithm.round(t, schedule[t - 1])
        return algorithm.evaluate(), algorithm.state_dict()

    want = run(None)
    for rows in (1, 2):
        _assert_identical(run(rows), want)


def test_row_chunks_of_a_cnn():
    name, _, hp, sampling, make = FEDERATION_CASES["fedavg-sampled-epoch"]
    want = _run(name, hp, sampling, make, torch.float64, None, model="cnn")
    _assert_identical(_run(name, hp, sampling, make, torch.float64, 1, model="cnn"), want)
    (ev, state), (ev0, state0) = (
        _run(name, hp, sampling, make, torch.float32, r, model="cnn") for r in (1, None)
    )
    for k in state0:  # oneDNN's float32 convolutions: equal up to float32 rounding
        torch.testing.assert_close(state[k], state0[k], rtol=1e-5, atol=1e-6)


def test_a_federations_model_says_its_calls_are_chunked_and_delegates_the_rest():
    """The federation's model is a ChunkedModel around the batched model: ``fed.model.loss_grads`` is the
    chunked call, every other attribute the model's; limiting changes it in place (every holder sees it)."""
    fed = tiny_federation("dnn")
    model = fed.model
    assert isinstance(model, ChunkedModel) and model.max_rows is None
    assert model.shapes() == model.inner.shapes() and model.task == model.inner.task
    assert limit_rows(model, 2) is model and model.max_rows == 2
    limit_rows(model, None)
    assert model.max_rows is None
    with pytest.raises(ValueError, match="rows per call"):
        limit_rows(model, 0)
    with pytest.raises(TypeError, match="ChunkedModel"):
        limit_rows(model.inner, 2)
    with pytest.raises(ValueError, match="chunked already"):
        ChunkedModel(model)


@pytest.mark.parametrize("limit", [None, 2])
def test_under_a_row_limit_each_chunk_takes_all_its_steps_on_the_same_draws(limit):
    """Local SGD's minibatches (``chunks_through_steps``): without a limit step by step; under one, every step
    drawn first, then each chunk of rows through all its steps (heterogeneous: 4, 4 and 1 rows working) before
    the next; either way every row gets the same samples at every step."""
    from hetfl.engine.grad import chunks_through_steps
    from hetfl.engine.sampler import BatchSampler

    fed = tiny_federation("dnn", sizes=(5, 7, 6, 9))
    limit_rows(fed.model, limit)
    sampler = BatchSampler(fed.train.sizes, 3, torch.Generator().manual_seed(0))
    clients = torch.tensor([3, 1, 0, 2])
    order, seen = [], {}
    for s, batch in chunks_through_steps(fed, sampler, clients, [4, 4, 1]):
        order.append((s.start, s.stop))
        for row, x in zip(range(s.start, s.stop), batch.x, strict=True):
            seen.setdefault(row, []).append(x)
    if limit is None:
        assert order == [(0, 4), (0, 4), (0, 1)]
    else:
        assert order == [(0, 2), (0, 2), (0, 1), (2, 4), (2, 4)]
    replay = BatchSampler(fed.train.sizes, 3, torch.Generator().manual_seed(0))
    for step, m in enumerate([4, 4, 1]):
        pos, _ = replay.next(clients[:m])
        x, _ = fed.train.gather(clients[:m], pos)
        for row in range(m):
            assert torch.equal(seen[row][step], x[row])


def test_pfedme_under_a_row_limit_stacks_one_chunk_of_clients_at_a_time(monkeypatch):
    """pFedMe trains every client each round (``train_clients: all``): under a row limit each chunk of clients
    takes its R local rounds and goes into the per-client stacks before the next starts, so the round never
    stacks the N clients' models (only a chunk's), and the result is the unchunked one."""
    import hetfl.algorithms.personalized.pfedme as pfedme

    name, _, hp, sampling, make = FEDERATION_CASES["pfedme-epoch"]
    want = _run(name, hp, sampling, make, torch.float64, None)
    stacked = []
    real = pfedme.broadcast
    monkeypatch.setattr(pfedme, "broadcast", lambda params, n: stacked.append(n) or real(params, n))
    got = _run(name, hp, sampling, make, torch.float64, 2)
    _assert_identical(got, want)
    assert stacked and max(stacked) == 2


def test_chunks_are_the_fewest_and_near_equal():
    fed = tiny_federation("dnn", sizes=(5,) * 10)
    limit_rows(fed.model, 8)
    assert [(s.start, s.stop) for s in row_chunks(fed.model, 10)] == [(0, 5), (5, 10)]
    assert row_chunks(fed.model, 8) is None
    limit_rows(fed.model, 3)
    assert [s.stop - s.start for s in row_chunks(fed.model, 10)] == [2, 3, 2, 3]


def test_row_chunks_keep_groups_of_rows_whole():
    """The collaborative family's N pairs (i, 0..N−1) of one model stay in one chunk."""
    model = SimpleNamespace(max_rows=7)
    assert [(s.start, s.stop) for s in row_chunks(model, 12, group=3)] == [(0, 6), (6, 12)]
    assert row_chunks(model, 6, group=3) is None  # within the limit: one call
    model.max_rows = 2  # a group larger than the limit is a chunk of its own
    assert [(s.start, s.stop) for s in row_chunks(model, 9, group=3)] == [(0, 3), (3, 6), (6, 9)]
    for group in (0, 4):
        with pytest.raises(ValueError, match="group"):
            row_chunks(model, 9, group=group)


def test_plan_rows():
    assert plan_rows(1000, 200, 100, 50) == (8, True)
    assert plan_rows(1000, 200, 100, 8) == (None, True)  # every client in one call
    assert plan_rows(1000, 950, 100, 50) == (1, False)  # not even one row fits: one per call, said


@pytest.mark.parametrize("value", ["big", 0, -1, float("nan"), float("inf"), True])
def test_a_bad_budget_is_refused(value):
    with pytest.raises(ValueError, match="memory_budget"):
        budget_bytes(value, torch.device("cpu"))


def test_budget_default_and_mib():
    cpu = torch.device("cpu")
    assert budget_bytes(256, cpu) == 256 * MIB
    assert 0 < budget_bytes("auto", cpu) == budget_bytes(None, cpu)


def test_activation_elements_of_a_dnn_and_a_cnn():
    dnn = tiny_federation(
        "dnn"
    ).model  # 16 inputs -> Linear(5) -> relu (functional: not a module) -> Linear(3)
    assert activation_elements(dnn) == 16 + 5 + 3
    cnn = tiny_federation(
        "cnn"
    ).model  # 1×4×4 -> conv(2, 3×3) -> pool -> conv(3) -> pool -> Linear(4) -> Linear(3)
    assert activation_elements(cnn) == 16 + (32 + 16 * 9) + (12 + 8 * 9) + 4 + 3
    assert row_bytes(dnn, 4, 8) == 8 * (4 * 4 * 24 + 3 * dnn.num_parameters())


def test_plan_memory_shrinks_rows_with_the_budget():
    fed = tiny_federation("dnn", sizes=(5,) * 20)
    cls = get_algorithm("pfedme", environment=FEDERATION)
    algorithm = cls(fed, cls.Hyperparameters.from_dict({"batch_size": 4}, "t"), 0)
    big = plan_memory(fed, algorithm, 1 << 30, 4)
    assert big.rows is None and big.fits
    per_row = big.row_bytes
    tight = plan_memory(fed, algorithm, big.resident_bytes + 5 * per_row, 4)
    assert tight.rows == 5 and tight.fits
    assert not plan_memory(fed, algorithm, big.resident_bytes, 4).fits
    json.dumps(tight.record())


@pytest.mark.parametrize("name,pairs", [("cobo", True), ("all_for_one", True), ("ditto", False)])
def test_the_plan_limits_the_rows_of_calls_over_every_pair_of_clients(name, pairs):
    """CoBo's weight update and All-for-one's estimation take the N² ordered pairs of clients in their calls:
    the plan sets a row limit whenever fewer rows than N² fit, not only fewer than the N clients."""
    fed = tiny_federation("dnn", sizes=(5,) * 6)
    cls = get_algorithm(name, environment=FEDERATION)
    algorithm = cls(fed, cls.Hyperparameters.from_dict({"batch_size": 4}, "t"), 0)
    assert algorithm.memory_profile().call_rows(6) == (36 if pairs else 6)
    big = plan_memory(fed, algorithm, 1 << 30, 4)
    between = plan_memory(fed, algorithm, big.resident_bytes + 20 * big.row_bytes, 4)  # 6 <= 20 < 36
    assert big.rows is None and between.rows == (20 if pairs else None)


@pytest.mark.parametrize(
    "name,hp,adapts,personal,copies",
    [
        ("fedavg", {"clients_per_round": 5}, False, False, 0),
        ("pfedme", {"clients_per_round": 5}, False, False, 0),  # all N train a chunk at a time
        ("pfedme", {"clients_per_round": 5, "train_clients": "sampled"}, False, False, 0),
        ("perfedavg", {"clients_per_round": 5}, True, False, 1),  # every client adapted, plain steps
        ("perfedavg", {"clients_per_round": 5, "momentum": 0.9}, True, False, 1),  # (training's momentum)
        ("fedavg_ft", {"clients_per_round": 5}, True, False, 1),
        ("fedavg_ft", {"clients_per_round": 5, "momentum": 0.9}, True, False, 2),  # fine-tuning's buffers
        ("fedavg_ft", {"clients_per_round": 5, "finetune": "personal"}, True, True, 1),  # the rest viewed
        (
            "fedalt",
            {"clients_per_round": 5},
            True,
            True,
            1,
        ),  # personal parts, θ viewed; S whole models a round
        ("fedalt", {"clients_per_round": 5, "momentum": 0.5}, True, True, 2),
    ],
)
def test_the_plan_counts_the_stacks_a_round_or_an_evaluation_makes(name, hp, adapts, personal, copies):
    """A round's S whole models and their updates are resident; the models an evaluation adapts for every
    client are counted per row of a call (it adapts, scores and drops them a row chunk at a time), only their
    personal parameters where the others are viewed, not copied, and their momentum buffers where the
    adaptation has momentum; pFedMe trains all N but stacks them a chunk of rows at a time (counted per row of
    a call), then uploads S. Planning adapts no client (that would run before the run's row limit is set)."""
    fed = tiny_federation("dnn", sizes=(5,) * 20, split="output")
    cls = get_algorithm(name, environment=FEDERATION)
    algorithm = cls(fed, cls.Hyperparameters.from_dict({"batch_size": 4, **hp}, "t"), 0)
    plan = plan_memory(fed, algorithm, 1 << 30, 4)
    profile = algorithm.memory_profile()
    assert getattr(algorithm, "_cache", None) is None and (profile.adapted_elements is not None) == adapts
    size = torch.empty((), dtype=fed.dtype).element_size()
    held = algorithm.held_models() if adapts else algorithm.eval_models()
    state = tensor_bytes(vars(algorithm), held, keep=lambda t: True)
    parameters = adapted = fed.model.num_parameters()
    if personal:
        adapted = sum(math.prod(fed.model.shapes()[k][0]) for k in fed.model.personal_keys())
        assert 0 < adapted < parameters
    assert plan.resident_bytes == fed.data_bytes() + state + 5 * parameters * TRANSIENT_COPIES * size
    assert plan.row_bytes == row_bytes(fed.model, 4, size) + copies * adapted * size


@pytest.mark.parametrize("packed", [False, True], ids=["block-rows", "packed"])
@pytest.mark.parametrize("sizes", [(5,) * 20, (1, 3, 40, 7), (200, 2)])
def test_an_evaluation_call_takes_at_most_the_planned_samples(sizes, packed):
    fed = tiny_federation("dnn", sizes=sizes)
    evaluator = Evaluator(fed, budget=24 * 30)  # small blocks: several calls per split
    if packed:  # per-client models in rows of 4 samples, 5 rows a call
        evaluator.packing = lambda split: (4, 5)
    seen = []
    forward = fed.model.forward
    fed.model.forward = lambda params, x: seen.append(x.shape[0] * x.shape[1]) or forward(params, x)
    per_client = fed.model.init(torch.Generator().manual_seed(0), fed.dtype, count=fed.num_clients)
    for split in fed.splits:
        evaluator.scores({k: v[:1] for k, v in per_client.items()}, split)  # a shared model
        evaluator.scores(per_client, split)
    assert max(seen) == evaluator.max_call_samples()
    size = 8 if fed.dtype == torch.float64 else 4
    samples = Evaluator(fed).max_call_samples()
    assert evaluation_bytes(fed, size) == size * EVAL_COPIES * samples * activation_elements(fed.model)


def test_the_plan_says_when_an_evaluation_call_does_not_fit():
    fed = tiny_federation("dnn", sizes=(5,) * 20)
    cls = get_algorithm("pfedme", environment=FEDERATION)
    algorithm = cls(fed, cls.Hyperparameters.from_dict({"batch_size": 4}, "t"), 0)
    big = plan_memory(fed, algorithm, 1 << 30, 4)
    assert big.eval_bytes > big.row_bytes and big.eval_fits
    tight = plan_memory(fed, algorithm, big.resident_bytes + big.row_bytes, 4)
    assert tight.fits and not tight.eval_fits  # the rows fit, an evaluation call would not
    assert plan_memory(fed, algorithm, big.resident_bytes + big.eval_bytes, 4).eval_fits
    assert tight.record()["eval_bytes"] == big.eval_bytes


def _study(**changes):
    from tests.conftest import TINY_STUDY

    study = {**TINY_STUDY, **changes}
    return build_suite({"studies": {"t": study}}).studies["t"]


def test_memory_budget_is_a_setting_that_no_job_fingerprints():
    auto = _study()
    small = _study(
        memory_budget=64, runs={**auto_runs(), "fedavg": {"algorithm": "fedavg", "memory_budget": 8.5}}
    )
    assert auto.memory_budget("fedavg") == "auto"
    assert small.memory_budget("pfedme") == 64 and small.memory_budget("fedavg") == 8.5
    for label in auto.runs:  # the job's params: the same whatever the budget
        assert auto.run_json(label) == small.run_json(label)
        assert "memory_budget" not in json.loads(auto.run_json(label))


def auto_runs():
    from tests.conftest import TINY_STUDY

    return dict(TINY_STUDY["runs"])


@pytest.mark.parametrize("value", [0, -5, float("nan"), float("inf"), "lots", True, [1]])
def test_a_bad_memory_budget_names_its_key(value):
    with pytest.raises(ConfigError, match=r"studies\.t\.runs\.fedavg\.memory_budget"):
        _study(runs={**auto_runs(), "fedavg": {"algorithm": "fedavg", "memory_budget": value}})
    with pytest.raises(ConfigError, match=r"'studies\.t\.memory_budget'"):
        _study(memory_budget=value)


def test_a_float32_convolutional_run_keeps_its_budget_in_its_spec_and_auto_never_splits_it(monkeypatch):
    from tests.conftest import TINY_STUDY

    cnn = {"name": "cnn", "channels": [2, 3], "hidden": 4}
    runs = {"fedavg": {"algorithm": "fedavg"}}
    base = {**TINY_STUDY, "model": cnn, "runs": runs}
    auto, small = (
        build_suite({"studies": {"t": {**base, **b}}}).studies["t"] for b in ({}, {"memory_budget": 8})
    )
    assert json.loads(small.run_json("fedavg"))["memory_budget"] == 8  # changing it reruns the run
    assert "memory_budget" not in json.loads(auto.run_json("fedavg"))
    f64 = build_suite({"studies": {"t": {**base, "memory_budget": 8, "dtype": "float64"}}}).studies["t"]
    assert "memory_budget" not in json.loads(f64.run_json("fedavg"))  # exact in float64

    from hetfl.pipeline.train import apply_memory_budget

    fed = tiny_federation("cnn", sizes=(5,) * 12, dtype=torch.float32)
    cls = get_algorithm("fedavg", environment=FEDERATION)
    algorithm = cls(fed, cls.Hyperparameters.from_dict({"batch_size": 4}, "t"), 0)
    tiny = plan_memory(fed, algorithm, 1 << 30, 4)
    budget_mib = (tiny.resident_bytes + 2 * tiny.row_bytes) / MIB
    assert (
        apply_memory_budget(fed, algorithm, budget_mib, torch.device("cpu")).rows is None
    )  # --set-resources
    assert fed.model.max_rows is None
    assert apply_memory_budget(fed, algorithm, budget_mib, torch.device("cpu"), split_inexact=True).rows == 2
    assert fed.model.max_rows == 2 and isinstance(fed.model, ChunkedModel)
    import hetfl.engine.memory as memory

    monkeypatch.setattr(
        memory, "default_budget_bytes", lambda device: int(budget_mib * MIB)
    )  # a small machine
    assert apply_memory_budget(fed, algorithm, "auto", torch.device("cpu")).rows is None
    assert fed.model.max_rows is None
    dnn = tiny_federation("dnn", sizes=(5,) * 12, dtype=torch.float32)  # exact rows: auto splits it
    algorithm = cls(dnn, cls.Hyperparameters.from_dict({"batch_size": 4}, "t"), 0)
    dnn_plan = plan_memory(dnn, algorithm, 1 << 30, 4)
    monkeypatch.setattr(
        memory, "default_budget_bytes", lambda device: dnn_plan.resident_bytes + 3 * dnn_plan.row_bytes
    )
    assert apply_memory_budget(dnn, algorithm, "auto", torch.device("cpu")).rows == 3


def test_the_memory_limit_is_the_process_own_cgroup(tmp_path):
    """A SLURM job's limit is on its own cgroup, not on the root one (cgroup v1 and v2)."""
    proc = tmp_path / "cgroup"
    proc.write_text("4:memory:/slurm/uid_0/job_7/step_0\n1:cpu:/other\n")
    job = tmp_path / "memory" / "slurm" / "uid_0" / "job_7"
    job.mkdir(parents=True)
    (job / "memory.limit_in_bytes").write_text("2147483648\n")
    (tmp_path / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # v1: no limit
    assert cgroup_limit(str(proc), str(tmp_path)) == 2**31
    proc.write_text("0::/system.slice/job.scope\n")
    scope = tmp_path / "system.slice" / "job.scope"
    scope.mkdir(parents=True)
    (scope / "memory.max").write_text("max\n")  # v2: no limit on the scope, one on its parent
    (tmp_path / "system.slice" / "memory.max").write_text("1073741824\n")
    assert cgroup_limit(str(proc), str(tmp_path)) == 2**30
    assert cgroup_limit(str(tmp_path / "absent"), str(tmp_path / "none")) is None


FINETUNE_PERSONAL = {"finetune": "personal", "local_steps": 1}


@pytest.mark.parametrize(
    "name,hp,model",  # batched MLP, grouped convolutions, torch.func
    [
        *((name, hp, model) for model in ("dnn", "cnn")
          for name, hp in (("fedalt", {}), ("fedsim", {}), ("ffgg", {}), ("fedavg_ft", FINETUNE_PERSONAL))),
        ("fedavg_ft", FINETUNE_PERSONAL, "resnet18"),
    ],
)  # fmt: skip
def test_an_evaluation_views_the_parameters_its_adaptation_only_reads(name, hp, model):
    """The N models an evaluation adapts copy only what it adapts: the global part is one row viewed N times
    (no memory), scored exactly as N copies of it would be (block-rows calls that gather some clients, packed
    rows), and saved to ``final.pt`` as N rows."""
    fed = tiny_federation(model, sizes=(9, 1, 6, 3, 12), split="output", dtype=torch.float64)
    cls = get_algorithm(name, environment=FEDERATION)
    hp = {"batch_size": 4, "clients_per_round": 3, "finetune_steps": 2, **hp}
    algorithm = cls(fed, cls.Hyperparameters.from_dict(hp, "t"), 0)
    algorithm.round(1, torch.tensor([0, 2, 4]))
    personal = algorithm.eval_models()["personal"]
    mine = set(fed.model.personal_keys())
    assert mine and set(personal) > mine
    for k, v in personal.items():
        assert (v.stride(0) == 0) == (k not in mine), k  # viewed, or this client's own rows
    copies = {k: v.contiguous() for k, v in personal.items()}
    for packing in (None, (4, 3)):  # block-rows (later calls gather the clients with data left), packed
        evaluator = Evaluator(fed, budget=fed.model.sample_cost() * 5 * 2)  # blocks of 2 samples
        evaluator.packing = lambda split, packing=packing: packing
        for split in fed.splits:
            viewed, copied = evaluator.scores(personal, split), evaluator.scores(copies, split)
            assert torch.equal(viewed.loss_sum, copied.loss_sum) and torch.equal(
                viewed.correct, copied.correct
            )
    saved = {k: v for k, v in algorithm.state_dict().items() if k.startswith("personal/")}
    assert saved and all(v.is_contiguous() and len(v) == fed.num_clients for v in saved.values())
    assert all(torch.equal(saved[f"personal/{k}"], v) for k, v in personal.items())
