"""Engine units: minibatch sampling, participation, random streams, evaluation, analytic gradients."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from hetfl.engine.evaluate import Evaluator
from hetfl.engine.params import average, broadcast, param_rows
from hetfl.engine.participation import participation_schedule
from hetfl.engine.rng import generator, stream_seed
from hetfl.engine.sampler import BatchSampler, cycling_sampler
from hetfl.models import BatchedModel
from hetfl.models.linalg import bmm
from hetfl.models.mlp import MLP
from tests.conftest import tiny_federation

SIZES = torch.tensor([7, 12, 3, 20])


def _epoch_positions(sampler: BatchSampler, client: int, steps: int) -> list[list[int]]:
    """Valid positions drawn for one client over ``steps`` calls (the others also draw)."""
    out = []
    for _ in range(steps):
        pos, mask = sampler.next(torch.arange(len(SIZES)))
        out.append(pos[client][mask[client]].tolist())
    return out


@pytest.mark.parametrize("client", range(4))
def test_epoch_mode_visits_every_sample_once_per_epoch(client):
    sampler = BatchSampler(SIZES, 5, generator(0, "batches"), "epoch")
    n = int(SIZES[client])
    per_epoch = -(-n // 5)  # ceil: the last batch is partial
    draws = _epoch_positions(sampler, client, 3 * per_epoch)
    epochs = [sum(draws[e * per_epoch : (e + 1) * per_epoch], []) for e in range(3)]
    for epoch in epochs:
        assert sorted(epoch) == list(range(n))
    if n > 5:
        assert epochs[0] != epochs[1]  # reshuffled between epochs


def test_sequential_mode_walks_in_order_and_masks_the_tail():
    sampler = BatchSampler(SIZES, 5, generator(0, "batches"), "sequential")
    pos, mask = sampler.next(torch.tensor([0, 2]))
    assert pos[0].tolist() == [0, 1, 2, 3, 4] and mask[0].all()
    assert mask[1].tolist() == [True, True, True, False, False]  # n = 3 < B: whole client, masked rest
    pos, mask = sampler.next(torch.tensor([0]))
    assert pos[0][mask[0]].tolist() == [5, 6]  # partial last batch, then a new epoch
    pos, _ = sampler.next(torch.tensor([0]))
    assert pos[0].tolist() == [0, 1, 2, 3, 4]


def test_clients_keep_their_own_cursor():
    sampler = BatchSampler(SIZES, 5, generator(0, "batches"), "sequential")
    sampler.next(torch.tensor([3]))
    pos, _ = sampler.next(torch.tensor([1, 3]))
    assert pos[0].tolist() == [0, 1, 2, 3, 4]  # client 1 starts; client 3 continues
    assert pos[1].tolist() == [5, 6, 7, 8, 9]


@pytest.mark.parametrize("start", [0, 1, 2, 3, 5, 11])
def test_cycling_sampler_continues_a_persistent_dataloader_iterator(start):
    """The batches after ``start`` draws of a ``DataLoader(range(n), B)`` iterator restarted when
    exhausted (the official pFedMe code's per-user test iterator), for every client."""

    def dataloader_stream(n: int, b: int):
        while True:
            yield from (list(range(a, min(a + b, n))) for a in range(0, n, b))

    sampler = cycling_sampler(SIZES, 5, start)
    streams = [dataloader_stream(int(n), 5) for n in SIZES]
    for stream in streams:
        for _ in range(start):
            next(stream)
    for _ in range(4):
        pos, mask = sampler.next(torch.arange(len(SIZES)))
        for c, stream in enumerate(streams):
            assert pos[c][mask[c]].tolist() == next(stream)


def test_replacement_mode_is_unmasked_and_in_range():
    sampler = BatchSampler(SIZES, 9, generator(0, "batches"), "replacement")
    pos, mask = sampler.next(torch.arange(4))
    assert mask.all()
    assert (pos < SIZES.unsqueeze(1)).all() and (pos >= 0).all()


def test_sampler_rejects_bad_input():
    with pytest.raises(ValueError, match="allowed: epoch, replacement, sequential"):
        BatchSampler(SIZES, 5, generator(0, "batches"), "shuffle")
    with pytest.raises(ValueError, match="at least one sample"):
        BatchSampler(torch.tensor([3, 0]), 5, generator(0, "batches"))


def test_participation_is_seeded_shared_and_nested():
    a = participation_schedule(20, 5, 30, seed=1)
    assert torch.equal(a, participation_schedule(20, 5, 30, seed=1))
    assert not torch.equal(a, participation_schedule(20, 5, 30, seed=2))
    assert all(len(set(row.tolist())) == 5 for row in a)  # without replacement
    b = participation_schedule(20, 10, 30, seed=1)
    assert all(set(x.tolist()) <= set(y.tolist()) for x, y in zip(a, b, strict=True))  # S=5 ⊂ S=10
    with pytest.raises(ValueError, match=r"\[1, 20\]"):
        participation_schedule(20, 21, 3, seed=1)


def test_streams_are_distinct_and_deterministic():
    seeds = {stream: stream_seed(0, stream) for stream in ("init", "participation", "batches", "algorithm")}
    assert len(set(seeds.values())) == 4
    assert stream_seed(0, "init") == stream_seed(0, "init") != stream_seed(1, "init")
    with pytest.raises(KeyError, match="allowed"):
        stream_seed(0, "noise")


@pytest.mark.parametrize("layout", ["block-rows", "packed"])
@pytest.mark.parametrize("model", ["mlr", "dnn", "cnn"])
def test_evaluator_matches_a_per_client_loop(model, layout):
    fed = tiny_federation(model, sizes=(30, 3, 17, 9), dtype=torch.float64)
    evaluator = Evaluator(fed, budget=40)  # tiny budget: several chunks and block-rows
    if layout == "packed":  # rows of 4 samples of one client, 3 rows a call
        evaluator.packing = lambda split: (4, 3)
    g = torch.Generator().manual_seed(1)
    personal = {
        k: v + 0.3 * torch.randn(fed.num_clients, *v.shape[1:], generator=g, dtype=v.dtype)
        for k, v in fed.model.init(g, fed.dtype).items()
    }
    shared = {k: v[:1] for k, v in personal.items()}
    module = fed.model.reference_module().double()
    for params, per_client in ((shared, False), (personal, True)):
        for split in ("train", "test"):
            scores = evaluator.scores(params, split)
            data = getattr(fed, split)
            for i in range(fed.num_clients):
                a, b = int(data.offsets[i]), int(data.offsets[i + 1])
                module.load_state_dict({k: v[i if per_client else 0] for k, v in params.items()})
                logits = module(data.x[a:b])
                loss = F.cross_entropy(logits, data.y[a:b], reduction="sum")
                correct = (logits.argmax(1) == data.y[a:b]).sum()
                assert scores.count[i] == b - a
                assert scores.loss_sum[i].item() == pytest.approx(loss.item(), rel=1e-10)
                assert scores.correct[i] == correct
    with pytest.raises(ValueError, match="leading dimension"):
        evaluator.scores({k: v[:2] for k, v in personal.items()}, "test")


@pytest.mark.parametrize("layout", ["block-rows", "packed"])
@pytest.mark.parametrize("model", ["mlr", "dnn", "cnn"])
def test_kept_evaluation_blocks_give_the_same_sums_and_stay_within_their_bytes(model, layout):
    """``Federation.eval_cache_bytes``: the gathered blocks kept from the first evaluation give the later
    ones the sums of an evaluator that gathers every time, bit for bit (whatever the models, which must not
    write into their input), and never more than the allowed bytes are kept."""
    fed = tiny_federation(model, sizes=(30, 3, 17, 9), dtype=torch.float32)
    plain, kept = Evaluator(fed, budget=200), Evaluator(fed, budget=200)
    for evaluator in (plain, kept):
        if layout == "packed":
            evaluator.packing = lambda split: (4, 3)
    g = torch.Generator().manual_seed(1)
    full = None
    for limit in (10**9, None):  # every block kept, then about half of them
        limit = limit or full // 2
        fed.eval_cache_bytes = limit
        kept._blocks.clear()
        kept.cached_bytes = 0
        for _ in range(3):  # new models each time, on the kept blocks
            personal = {
                k: v + 0.3 * torch.randn(fed.num_clients, *v.shape[1:], generator=g, dtype=v.dtype)
                for k, v in fed.model.init(g, fed.dtype).items()
            }
            for split in ("train", "test"):
                fed.eval_cache_bytes = 0
                a = plain.scores(personal, split)
                fed.eval_cache_bytes = limit
                b = kept.scores(personal, split)
                assert torch.equal(a.loss_sum, b.loss_sum) and torch.equal(a.correct, b.correct)
        assert 0 < kept.cached_bytes <= limit and kept._blocks
        assert kept.cached_bytes == sum(x.nbytes + y.nbytes for x, y in kept._blocks.values())
        assert full is None or kept.cached_bytes < full
        full = kept.cached_bytes
        subset = torch.tensor([2, 0])  # a round's sampled clients: scored from their own data, never kept
        rows = {k: v[subset] for k, v in personal.items()}
        a, b = plain.client_scores(rows, subset, "train"), kept.client_scores(rows, subset, "train")
        assert torch.equal(a.loss, b.loss) and kept.cached_bytes == full
    fed.eval_cache_bytes = 0
    assert not Evaluator(fed)._blocks


def test_per_client_models_are_packed_when_client_sizes_are_skewed():
    """Block-rows pads every client's last block to the block size: with one large client and many small
    ones most of a call is padding, and rows of b samples of one client cost less (``Evaluator.packing``);
    with equal sizes block-rows pads nothing and copies no parameters, and is kept."""
    skewed = tiny_federation("mlr", sizes=(600, *[7] * 30), sample_shape=(6,))
    budget = 6 * 31 * 600  # block-rows: blocks of 600 samples, 31 x 600 a call for 810 samples
    evaluator = Evaluator(skewed, budget=budget)
    assert evaluator.packing("train") == (64, budget // (64 * 6))
    assert evaluator.packing("train") is evaluator.packing("train")  # decided once per split
    equal = tiny_federation("mlr", sizes=(64,) * 31, sample_shape=(6,))
    assert Evaluator(equal, budget=budget).packing("train") is None
    assert Evaluator(skewed, budget=6 * 63).packing("train") is None  # b = 64 samples do not fit


@pytest.mark.parametrize("hidden", [(), (6,), (5, 4)])
@pytest.mark.parametrize("masked", [False, True])
def test_mlp_backward_matches_autograd(hidden, masked):
    model = MLP((2, 3), 4, hidden=hidden)
    g = torch.Generator().manual_seed(0)
    params = {
        k: v.expand(3, *v.shape[1:]) + 0.1 * torch.randn(3, *v.shape[1:], generator=g, dtype=torch.float64)
        for k, v in model.init(g, torch.float64).items()
    }
    x = torch.randn(3, 5, 2, 3, generator=g, dtype=torch.float64)
    y = torch.randint(0, 4, (3, 5), generator=g)
    mask = (
        torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 0, 1, 0, 1]], dtype=torch.bool)
        if masked
        else None
    )
    loss, grads = model.loss_grads(params, x, y, mask)
    ref_loss, ref_grads = BatchedModel.loss_grads(model, params, x, y, mask)  # the generic autograd version
    torch.testing.assert_close(loss, ref_loss, rtol=0, atol=1e-12)
    for k in params:
        torch.testing.assert_close(grads[k], ref_grads[k], rtol=0, atol=1e-12)
    assert_preact_grads(model, params, x, y, mask, ref_loss, ref_grads)


def assert_preact_grads(model, params, x, y, mask, ref_loss, ref_grads):
    """``loss_grads_preact`` given W·x: the same loss and gradients, W's as delta @ xᵀ."""
    layer = model.linear_input_layer()
    h = model.flat_input(x)
    z1 = torch.bmm(params[f"{layer}.weight"], h)
    for need_loss in (True, False):
        loss, grads, delta = model.loss_grads_preact(params, z1, y, mask, need_loss=need_loss)
        if need_loss:
            torch.testing.assert_close(loss, ref_loss, rtol=0, atol=1e-12)
        else:
            assert loss is None
        assert set(grads) == set(params) - {f"{layer}.weight"}
        for k, g in grads.items():
            torch.testing.assert_close(g, ref_grads[k], rtol=0, atol=1e-12)
        torch.testing.assert_close(
            torch.bmm(delta, h.transpose(1, 2)), ref_grads[f"{layer}.weight"], rtol=0, atol=1e-12
        )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_bmm_matches_torch(dtype):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(4, 3, 7, generator=g, dtype=dtype)
    b = torch.randn(4, 5, 7, generator=g, dtype=dtype).transpose(1, 2)  # a strided operand
    torch.testing.assert_close(bmm(a, b), torch.bmm(a, b))
    w = a.clone().requires_grad_()
    out = bmm(w, b)  # inside autograd: must stay differentiable
    out.sum().backward()
    assert w.grad is not None and np.isfinite(w.grad.numpy()).all()


def test_mlp_forward_is_differentiable_in_its_input():
    """Minimax robust training differentiates the loss in an input perturbation, parameters fixed."""
    model = MLP((6,), 3, hidden=(4,))
    params = {k: v.double() for k, v in model.init(torch.Generator().manual_seed(0), torch.float64).items()}
    x = torch.randn(1, 5, 6, dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(model.forward(params, x).sum(), x)
    module = model.reference_module().double()
    module.load_state_dict({k: v[0] for k, v in params.items()})
    x0 = x.detach()[0].requires_grad_()
    (ref,) = torch.autograd.grad(module(x0).sum(), x0)
    torch.testing.assert_close(g[0], ref)


def _per_client_split(dataset, indices, labels, transforms=None):
    """A split built client by client: each client's arrays (transformed by ``transforms[i]``), concatenated."""
    from hetfl.data.transforms import apply_transform
    from hetfl.engine.federation import ClientSplit

    xs, ys = [], []
    for i, idx in enumerate(indices):
        x, y = dataset.x[idx], dataset.y[idx]
        if transforms is not None:
            x, y = apply_transform(x, y, transforms[i], dataset.num_classes)
        xs.append(x)
        ys.append(y if dataset.targets is None else labels[idx])
    return ClientSplit(xs, ys, torch.device("cpu"), torch.float32)


@pytest.mark.parametrize("regression", [False, True])
def test_federation_gathers_every_client_at_once_as_client_by_client(regression):
    """``Federation.from_partition`` builds each split in one gather (``ClientSplit.concatenated``), each
    client's rows transformed where they lie: the same tensors as the per-client arrays, concatenated."""
    from hetfl.data.clients import Partition
    from hetfl.data.dataset import Dataset
    from hetfl.engine.federation import ClientSplit, Federation
    from hetfl.models import build_model, normalize_model_spec

    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 1, 4, 4)).astype(np.float32)
    targets = rng.normal(size=(60, 2)).astype(np.float32) if regression else None
    dataset = Dataset("toy", x, rng.integers(0, 3, size=60), 3, targets=targets)
    order = rng.permutation(60)
    train = [order[0:9], order[9:10], order[10:30]]
    test = [order[30:40], order[40:55], order[55:60]]
    model = build_model(normalize_model_spec({"name": "mlr"}, "model"), (1, 4, 4), 2 if regression else 3)
    labels = dataset.y if targets is None else targets
    kinds = [{"kind": "none"}, {"kind": "rotate", "angle": 90.0}, {"kind": "permute_labels", "seed": 3}]
    for cluster in ([0, 0, 0], [0, 1, 0], [2, 1, 1]):
        partition = Partition(train, test, np.array(cluster), kinds)
        fed = Federation.from_partition(dataset, partition, model, torch.device("cpu"), torch.float32)
        for split, indices in (("train", train), ("test", test)):
            want = _per_client_split(dataset, indices, labels, [kinds[c] for c in cluster])
            got = getattr(fed, split)
            for name in ("x", "y", "sizes", "offsets"):
                assert torch.equal(getattr(got, name), getattr(want, name)), (cluster, split, name)
        if cluster == [0, 1, 0]:  # the rotated client, and only it, differs from its plain samples
            plain = _per_client_split(dataset, train, labels)
            rows = [slice(int(fed.train.offsets[i]), int(fed.train.offsets[i + 1])) for i in range(3)]
            assert [torch.equal(fed.train.x[r], plain.x[r]) for r in rows] == [True, False, True]
    with pytest.raises(ValueError, match="sizes add up to 11"):
        ClientSplit.concatenated(x[:10], labels[:10], [5, 6], torch.device("cpu"), torch.float32)
    with pytest.raises(ValueError, match="client 1 has no samples"):
        ClientSplit.concatenated(x[:10], labels[:10], [10, 0], torch.device("cpu"), torch.float32)


def test_the_engine_entry_points_check_the_row_conventions_of_params():
    """One Params, one row count: a model call, the server's average and an evaluation refuse parameters whose
    tensors disagree on their rows, or rows that are neither a server row nor one per client, naming the
    entry point and the parameter."""
    fed = tiny_federation("dnn")
    w = fed.model.init(torch.Generator().manual_seed(0), fed.dtype)  # a server row [1, ...]
    stack = broadcast(w, fed.num_clients)
    assert param_rows(w, "t") == 1 and param_rows(stack, "t", fed.num_clients) == fed.num_clients
    ragged = {**stack, next(iter(w)): next(iter(w.values()))}  # one tensor of 1 row among N-row ones
    batch = fed.batch(BatchSampler(fed.train.sizes, 4, torch.Generator().manual_seed(0)), fed.all_clients())
    with pytest.raises(ValueError, match=r"model\.loss_grads: parameter .* has 4 rows, .* 1: one Params"):
        fed.model.loss_grads(ragged, batch.x, batch.y, batch.mask)
    three = {k: v[:3] for k, v in stack.items()}
    with pytest.raises(ValueError, match=r"model\.forward: parameters of 3 rows for 4 clients"):
        fed.model.forward(three, batch.x)
    with pytest.raises(ValueError, match="average: parameter"):
        average(ragged)
    with pytest.raises(ValueError, match="average: 2 weights for 4 rows"):
        average(stack, torch.ones(2, dtype=torch.float64) / 2)
    with pytest.raises(ValueError, match="Evaluator.scores: no parameters"):
        Evaluator(fed).scores({}, "test")
    fed.model.forward(w, batch.x)  # a server row serves every client
