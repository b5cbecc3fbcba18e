"""Per-client gradients and local SGD (with the shared client optimizer) for many clients at once: no
per-client Python loop."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch
from torch import Tensor

from hetfl.engine.chunks import row_chunks, stitch
from hetfl.engine.federation import Batch, Federation
from hetfl.engine.optim import ClientOptimizer
from hetfl.engine.params import Params, select
from hetfl.engine.params import rows as rows_of
from hetfl.engine.sampler import BatchSampler
from hetfl.models import BatchedModel


def client_grads(model: BatchedModel, params: Params, batch: Batch) -> tuple[Tensor, Params]:
    """Each client's minibatch loss and its gradient at its own parameters (``BatchedModel.loss_grads``).

    Args:
        params: ``[C, ...]`` (not modified); batch: ``x [C, B, ...]``, ``y [C, B]``, ``mask [C, B]``.

    Returns:
        ``(loss [C], grads dict[str, Tensor[C, ...]])``.
    """
    return model.loss_grads(params, batch.x, batch.y, None if batch.full else batch.mask)


Correction = Callable[[Params, Params, slice], None]
"""A gradient correction ``correction(params, grads, rows)``: adds, in place, an algorithm's term to the
minibatch gradients ``grads [r, ...]`` of the stack's rows ``rows`` (a slice: the first m clients, or one
chunk of them under a memory budget) at their parameters ``params [r, ...]`` (views of those rows) before the
optimizer's step, e.g. FedProx's μ(w − w_t) or SCAFFOLD's c − c_i (its ``[S, ...]`` terms indexed by ``rows``)."""


def local_sgd(
    fed: Federation,
    sampler: BatchSampler,
    params: Params,
    clients: Tensor,
    steps: int | Tensor,
    lr: float,
    keys: list[str] | None = None,
    split: str = "train",
    optimizer: ClientOptimizer | None = None,
    correction: Correction | None = None,
) -> Params:
    """``steps`` SGD steps of each client in ``clients`` on its own minibatches.

    w_i ← w_i − lr · ∇f_i(w_i; D_i), fresh minibatch D_i each step (FedAvg's ClientUpdate,
    McMahan et al. 2017, Algorithm 1); with an ``optimizer``, each step is the shared client optimizer's
    (``ClientOptimizer.step``: clipping, weight decay, momentum, then the step of size ``lr``), which is
    exactly the plain step above when its options are the defaults. With a ``correction``, the step takes
    the corrected gradient ∇f_i(w_i; D_i) + (the algorithm's term): the gradient of a modified local
    objective (FedProx, FedDyn) or a drift correction (SCAFFOLD), clipped and decayed by the optimizer as a
    gradient of the loss would be.

    Heterogeneous local steps (``steps`` a ``LongTensor[C]``, τ_c for row c, non-increasing: the rows
    ordered longest first, ``hetfl.engine.local_steps.LocalSteps.order``): at local step k the clients still
    working (τ_c > k) are the first m_k rows; step k draws minibatches for ``clients[:m_k]`` only (one
    ``sampler.next`` call, in row order) and updates those rows in place, the others keep their models.

    Under a memory budget (the model's calls limited to ``max_rows`` clients, ``hetfl.engine.memory``), every
    step's minibatches are drawn first, as above (the same draws, in the same order), then each chunk of rows
    takes all its local steps before the next chunk starts (:func:`chunks_through_steps`): one chunk's
    minibatches and gradients are resident, not every row's, and a stack placed off the device
    (``hetfl.engine.state``: a memory-mapped file) has each chunk's rows touched while they are in memory,
    once a round, not once a step. Each row's numbers are the same.

    Args:
        params: ``[C, ...]``, row c belongs to ``clients[c]``; updated in place and returned.
        clients: ``LongTensor[C]``.
        steps: τ, the same for every client (int), or ``LongTensor[C]`` per row, non-increasing.
        lr: the step size (of this round: ``hetfl.engine.optim.scheduled_lr``).
        keys: the parameters to train (None: all, or the optimizer's); the others stay fixed (partial
            personalization).
        split: the data the steps use (``train``; ``test`` only for the official Per-FedAvg evaluation).
        optimizer: the clients' optimizer (``FederatedAlgorithm.client_optimizer``), built for ``params``'
            rows; its momentum buffers carry on from previous calls. None: plain SGD.
        correction: added to the minibatch gradients before each step (:data:`Correction`); None: none.

    Returns:
        ``params`` after the steps.

    Raises:
        ValueError: ``keys`` given and not the optimizer's; per-row ``steps`` of the wrong length, negative
            or increasing.
    """
    if optimizer is not None:
        if keys is not None and list(keys) != optimizer.keys:
            raise ValueError(f"local_sgd: keys {list(keys)} are not the optimizer's {optimizer.keys}")
        keys = optimizer.keys
    keys = list(params) if keys is None else keys
    if not keys:
        return params
    for s, batch in chunks_through_steps(fed, sampler, clients, _working_rows(steps, len(clients)), split):
        sgd_step(fed.model, rows_of(params, s), batch, lr, keys, s, optimizer, correction)
    return params


def sgd_step(
    model: BatchedModel,
    params: Params,
    batch: Batch,
    lr: float,
    keys: list[str],
    s: slice,
    optimizer: ClientOptimizer | None = None,
    correction: Correction | None = None,
) -> None:
    """One step of :func:`local_sgd` on the rows ``s`` of a stack (``params [r, ...]``: views of them, updated
    in place) on their minibatches ``batch``: the ``correction``, then the ``optimizer``'s step (its buffers'
    rows ``s``), or the plain step w ← w − lr · g of the parameters ``keys``."""
    _, grads = client_grads(model, params, batch)
    if correction is not None:
        correction(params, grads, s)
    if optimizer is not None:
        optimizer.step(params, grads, lr, s)
        return
    with torch.no_grad():
        torch._foreach_add_([params[k] for k in keys], [grads[k] for k in keys], alpha=-lr)


def chunks_through_steps(
    fed: Federation, sampler: BatchSampler, clients: Tensor, working: list[int], split: str = "train"
) -> Iterator[tuple[slice, Batch]]:
    """The minibatches of local steps k = 0, 1, ... of ``clients [C]``, step k for its first ``working[k]``
    rows (non-increasing), in the order a batched loop consumes them: yields ``(s, batch)``, ``s`` a slice of
    the rows and ``batch`` their step's minibatches (:func:`gather_chunks`).

    Without a row limit (``hetfl.engine.chunks.row_chunks`` None): step by step, each step's rows in one
    batch, each step drawn when it comes. Under one: every step's minibatches drawn first (one
    ``sampler.next`` a step, in step order: the same draws), then chunk by chunk of the C rows, each chunk
    through all its steps before the next (:func:`step_chunks`); the caller's step on ``s`` may only touch
    the rows ``s``.
    """
    ((_, steps),) = step_chunks(fed, sampler, clients, working, split, whole=True)
    for s, (batch,) in steps:
        yield s, batch


def step_chunks(
    fed: Federation,
    sampler: BatchSampler,
    clients: Tensor,
    working: list[int],
    split: str = "train",
    picks: int = 1,
    whole: bool = False,
) -> Iterator[tuple[slice, Iterator[tuple[slice, tuple[Batch, ...]]]]]:
    """:func:`chunks_through_steps` a chunk of rows at a time: yields ``(chunk, steps)``, ``chunk`` a slice of
    the C rows and ``steps`` the ``(s, batches)`` of its local steps (``s`` within ``chunk``), to be consumed
    before the next chunk. Each step draws ``picks`` minibatches per row, one ``sampler.next`` each, in that
    order (Per-FedAvg's D, D' and D''): ``batches`` holds them. Without a row limit, one chunk of all C rows
    whose steps are drawn as they come; under one, every step's minibatches drawn first (the same draws).
    ``whole``: one chunk of all C rows whatever the limit, its steps those of the row chunks in their order
    (:func:`chunks_through_steps`: for a caller that steps a ``[C, ...]`` stack)."""
    if whole:
        chunked = step_chunks(fed, sampler, clients, working, split, picks)
        yield slice(0, len(clients)), (step for _, steps in chunked for step in steps)
        return
    chunks = row_chunks(fed.model, len(clients))
    data = getattr(fed, split)

    def draw(m: int) -> list[tuple[Tensor, Tensor, Tensor, bool]]:  # one step of the first m rows
        rows = clients[:m]
        drawn = [sampler.next(rows) for _ in range(picks)]
        return [(sampler.owners(rows), pos, mask, bool(mask.all())) for pos, mask in drawn]

    def gathered(step, s: slice) -> tuple[Batch, ...]:  # each draw's whole mask flag, as unchunked
        return tuple(gather_batch(fed, data, o[s], pos[s], mask[s], full) for o, pos, mask, full in step)

    if chunks is None:
        yield slice(0, len(clients)), ((slice(0, m), gathered(draw(m), slice(0, m))) for m in working)
        return
    draws = [draw(m) for m in working]

    def steps(chunk: slice) -> Iterator[tuple[slice, tuple[Batch, ...]]]:
        for step in draws:
            s = slice(chunk.start, min(chunk.stop, len(step[0][0])))
            if s.start >= s.stop:  # this chunk's rows have taken all their steps
                break
            yield s, gathered(step, s)

    for chunk in chunks:
        yield chunk, steps(chunk)


def trained_chunks(
    fed: Federation,
    sampler: BatchSampler,
    start: Callable[[slice], Params],
    clients: Tensor,
    steps: int | Tensor,
    lr: float | list[float],
    setup: Callable[[slice, Params], tuple[ClientOptimizer | None, Correction | None]],
    whole: bool = True,
    split: str = "train",
) -> Iterator[tuple[slice, Params]]:
    """:func:`local_sgd` of ``clients [C]``, each chunk of clients from the models ``start(chunk)``, as a
    stream of chunks: yields ``(chunk, params)``, the clients ``clients[chunk]`` and their models
    ``params [r, ...]`` after all their local steps.

    ``whole`` (the default): one chunk of all C clients, stepped as :func:`local_sgd` steps them (under a
    row limit, a chunk of rows through all its steps at a time, inside the ``[C, ...]`` stack). False: under a
    row limit (``hetfl.engine.chunks.row_chunks``), each chunk of rows is started, stepped through all its
    steps and handed over before the next one starts, so one chunk's models are resident, not C (the caller
    drops them: ``hetfl.engine.aggregation.ClientSum``, ``hetfl.engine.adapt``); without one, one chunk. Every
    step's minibatches are drawn either way (:func:`step_chunks`): each client's models and numbers are the
    same.

    Args:
        start: ``chunk -> Params [r, ...]``, the models the chunk's clients start from (new tensors the steps
            may write; a parameter only read may be a view).
        steps: τ (int), or ``LongTensor[C]`` per row, non-increasing (:func:`local_sgd`).
        lr: the step size, or one per step.
        setup: ``setup(chunk, params)`` -> the optimizer of the chunk's models ``params [r, ...]`` (None:
            plain SGD of every parameter) and the correction of its rows (rows relative to the chunk; None:
            none). Without a parameter to train (an optimizer of none) the steps are drawn, not taken.
        split: the data the steps draw from.

    Raises:
        ValueError: per-row ``steps`` of the wrong length, negative or increasing.
    """
    working = _working_rows(steps, len(clients))
    lrs = lr if isinstance(lr, list) else [lr] * len(working)
    for chunk, batches in step_chunks(fed, sampler, clients, working, split, whole=whole):
        params = start(chunk)
        optimizer, correction = setup(chunk, params)
        keys = optimizer.keys if optimizer is not None else list(params)
        for k, rows, (batch,) in numbered_steps(chunk, batches):
            if keys:  # as local_sgd: no step without a parameter to train
                sgd_step(fed.model, rows_of(params, rows), batch, lrs[k], keys, rows, optimizer, correction)
        yield chunk, params


def numbered_steps(
    chunk: slice, steps: Iterator[tuple[slice, tuple[Batch, ...]]]
) -> Iterator[tuple[int, slice, tuple[Batch, ...]]]:
    """The steps of one chunk of :func:`step_chunks` numbered: yields ``(k, rows, batches)``, ``k`` the local
    step the rows take (from 0 for each row chunk: ``whole``'s row chunks follow each other, each through
    all its steps) and ``rows`` the slice of the chunk's models (relative to ``chunk``) that take it."""
    k, first = 0, None
    for s, batches in steps:
        k, first = (k + 1 if s.start == first else 0), s.start
        yield k, slice(s.start - chunk.start, s.stop - chunk.start), batches


def drawn_grads(
    fed: Federation, sampler: BatchSampler, clients: Tensor, params_of: Callable[[slice], Params]
) -> Params:
    """Each client's gradient on its next minibatch, at its model: :func:`drawn_chunks` (one model per client)
    with the chunks' gradients stitched into ``dict[str, Tensor[C, ...]]`` (``hetfl.engine.chunks.stitch``)."""
    (grads,) = stitch(drawn_chunks(fed, sampler, clients, params_of), len(clients))
    return grads


def drawn_chunks(
    fed: Federation,
    sampler: BatchSampler,
    clients: Tensor,
    params_of: Callable[[slice], Params],
    copies: int = 1,
    split: str = "train",
) -> Iterator[tuple[slice, tuple[Params, ...]]]:
    """Gradients of ``copies`` models per client on the client's next minibatch, chunk by chunk: the
    minibatches of ``clients [C]`` drawn at once (one ``sampler.next``, before the first chunk), then gathered
    and differentiated a chunk at a time (:func:`row_batches`), so that one chunk's minibatches are resident,
    not all C clients'. ``params_of(s)`` is called when chunk ``s`` comes, after the caller has handled the
    chunks before it: an algorithm that steps each chunk's rows as they come never holds the C clients'
    gradients (Ditto, APFL).

    The same numbers as ``client_grads(model, params, batch)`` on the whole draw, with ``params`` the
    ``[copies·C, ...]`` models ordered copy-major and each client's batch repeated for its ``copies`` models
    (Ditto's w_k and v_k, APFL's w_k and v̄_k: one call).

    Args:
        params_of: ``s -> Params [copies·r, ...]``, the models of the chunk's clients ``clients[s]`` (r rows),
            copy-major within the chunk.

    Yields:
        ``(s, grads)``: ``grads`` the ``copies`` dicts ``Tensor[r, ...]`` of the clients ``clients[s]``, the
        gradients of each one's j-th model.
    """
    for s, batch in row_batches(fed, sampler, clients, split):
        if copies > 1:
            batch = Batch(*(torch.cat([a] * copies) for a in (batch.x, batch.y, batch.mask)), full=batch.full)
        _, grads = client_grads(fed.model, params_of(s), batch)
        r = s.stop - s.start
        yield s, tuple({k: g[j * r : (j + 1) * r] for k, g in grads.items()} for j in range(copies))


def row_batches(
    fed: Federation, sampler: BatchSampler, rows: Tensor, split: str = "train", group: int = 1
) -> Iterator[tuple[slice, Batch]]:
    """The next minibatch of each of ``rows [C]`` (clients, or the pairs of a ``PairSampler``), drawn at once
    (one ``sampler.next``: the same draws whatever the chunks), then gathered chunk by chunk
    (:func:`gather_chunks`): yields ``(s, batch)``, ``s`` a slice of ``rows`` and ``batch`` its rows'
    minibatches ``x [r, B, ...]``, ``y``, ``mask``, so that one chunk's samples are resident at a time.

    Raises:
        ValueError: ``group`` not dividing ``len(rows)``.
    """
    pos, mask = sampler.next(rows)
    return gather_chunks(fed, sampler.owners(rows), pos, mask, split, group)


def gather_chunks(
    fed: Federation, owners: Tensor, pos: Tensor, mask: Tensor, split: str = "train", group: int = 1
) -> Iterator[tuple[slice, Batch]]:
    """Drawn minibatches gathered chunk by chunk under the model's row limit (``hetfl.engine.memory
    .row_chunks``, whole groups of ``group`` consecutive rows; one chunk, all C rows, without a limit).

    Args:
        owners: ``LongTensor[C]``, the client whose ``split`` data row c draws from (``sampler.owners``).
        pos, mask: ``[C, B]``, the draw (``sampler.next``).

    Yields:
        ``(s, batch)``: ``s`` a slice of the rows, ``batch`` its ``x [r, B, ...]``, ``y``, ``mask``;
        ``batch.full`` is the whole draw's, so a chunk's loss takes the mask as the unchunked call would.
    """
    full = bool(mask.all())
    data = getattr(fed, split)
    chunks = row_chunks(fed.model, len(owners), group)
    if chunks is None:  # one chunk of every row (no slicing)
        yield slice(0, len(owners)), gather_batch(fed, data, owners, pos, mask, full)
        return
    for s in chunks:
        yield s, gather_batch(fed, data, owners[s], pos[s], mask[s], full)


def gather_batch(fed: Federation, data, owners: Tensor, pos: Tensor, mask: Tensor, full: bool) -> Batch:
    """The drawn minibatches ``pos [r, B]`` of ``owners [r]`` gathered from ``data`` (a split), the mask moved
    to the device; ``full``: the whole draw's (a chunk's loss takes the mask as the unchunked call would)."""
    x, y = data.gather(owners, pos)
    return Batch(x, y, mask.to(fed.device, non_blocking=True), full=full)


def _working_rows(steps: int | Tensor, rows: int) -> list[int]:
    """The number of rows that step at each local step k = 0, 1, ...: ``[rows] * steps`` for an int, else
    m_k = #{c : τ_c > k} for non-increasing per-row ``steps [rows]``.

    Raises:
        ValueError: per-row steps of the wrong length, negative or increasing.
    """
    if isinstance(steps, int):
        return [rows] * steps
    tau = [int(v) for v in steps.tolist()]
    if len(tau) != rows or any(v < 0 for v in tau) or any(a < b for a, b in zip(tau, tau[1:], strict=False)):
        raise ValueError(f"local_sgd: per-row steps must be {rows} non-increasing counts >= 0, got {tau}")
    return [sum(v > k for v in tau) for k in range(tau[0] if tau else 0)]


def full_grads(fed: Federation, params: Params, clients: Tensor, chunk: int, split: str = "train") -> Params:
    """Each client's gradient of its mean loss over all its samples of ``split``, at its own parameters.

    One pass over every client's data in stored order, ``chunk`` samples per client per call (block r of
    each client that still has data), weighting each block's mean gradient by its share of the client's
    samples: Σ_r (b_r / n_i) ∇f_i(w_i; block r) = ∇f_i(w_i; all n_i samples). No random stream is used.

    Args:
        params: ``[C, ...]``, row c belongs to ``clients[c]`` (not modified).
        clients: ``LongTensor[C]``.
        chunk: samples per client per call (memory), ≥ 1.

    Returns:
        ``dict[str, Tensor[C, ...]]`` (new tensors).
    """
    data = getattr(fed, split)
    clients = clients.cpu()
    sizes = data.sizes[clients]
    out = {k: torch.zeros_like(v) for k, v in params.items()}
    arange = torch.arange(chunk)
    for start in range(0, int(sizes.max()) if len(sizes) else 0, chunk):
        active = torch.nonzero(sizes > start).squeeze(1)
        n = sizes[active].unsqueeze(1)
        within = start + arange
        mask = within < n
        pos = torch.minimum(within.expand(len(active), -1), n - 1)
        x, y = data.gather(clients[active], pos)
        rows = params if len(active) == len(clients) else select(params, active)
        batch = Batch(x, y, mask.to(x.device), full=bool(mask.all()))
        _, grads = client_grads(fed.model, rows, batch)
        share = (mask.sum(1).double() / n.squeeze(1).double()).to(fed.device)
        with torch.no_grad():
            for k, g in grads.items():
                weight = share.to(g.dtype).reshape(-1, *([1] * (g.dim() - 1)))
                out[k].index_add_(0, active.to(g.device), weight * g)
    return out
