"""Batched evaluation of a shared model or of one model per client on every client's data.

A shared model (leading dim 1) runs over the split in contiguous chunks. Per-client models (leading dim N)
run in one of two layouts, whichever the cost rule of :meth:`Evaluator.packing` finds cheaper for the split's
client sizes and the model (a deterministic choice: the same data and model give the same layout, hence the
same sums, on every machine):

- block-rows: call r processes the r-th block of every client that still has data, so each call is one
  batched forward with no copies of the parameters when all clients take part; every client's last block is
  padded to the block size (wasteful when the client sizes are skewed: Synthetic(0.5, 0.5)'s test split
  computes 3.8 samples per real one with blocks of 699);
- packed: each client's samples cut into rows of b samples (padding only in each client's last row), every
  row with its owner's parameters (copied per row), as many rows a call as the activation budget takes.

Sums are accumulated per client in float64.

The gathered blocks or rows of per-client calls over all clients are the same at every evaluation: within
``Federation.eval_cache_bytes`` (set by the training job from its memory plan, ``hetfl.pipeline.train``; 0 keeps
none) they are kept after the first evaluation, so the later ones skip the gather (a third of a per-client
evaluation's time on MNIST's MLR and DNN). The same tensors enter the same calls: the sums are the same.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from hetfl.engine.federation import ClientSplit, Federation
from hetfl.engine.params import Params, param_rows, shared_rows
from hetfl.models.base import sample_losses


def top1(logits: Tensor) -> Tensor:
    """The predicted class of class-major ``logits [C, K, B]``: ``[C, B]``, the first maximum on ties,
    as ``argmax(1)``, which is several times slower on this layout on CPU (torch 2.x)."""
    return logits.max(1).indices


@dataclass
class SplitScores:
    """Per-client sums on one split: ``loss_sum``, ``correct``, ``count``: ``Tensor[N]`` float64 (CPU).

    ``correct`` counts top-1 hits (classification); for regression it stays 0 and ``has_acc`` is False.
    """

    loss_sum: Tensor
    correct: Tensor
    count: Tensor
    has_acc: bool = True

    @property
    def loss(self) -> Tensor:
        """Per-client mean loss ``[N]``."""
        return self.loss_sum / self.count

    @property
    def acc(self) -> Tensor:
        """Per-client accuracy ``[N]`` in [0, 1]."""
        return self.correct / self.count

    def weighted(self) -> tuple[float, float]:
        """(loss, accuracy) over all samples of all clients: Σ_i loss_sum_i / Σ_i n_i, Σ_i correct_i / Σ_i n_i
        (accuracy is nan without ``has_acc``).

        The sample-weighted means of pFedMe's official evaluation (docs/papers/pfedme.md §2.7).
        """
        n = float(self.count.sum())
        return float(self.loss_sum.sum()) / n, float(self.correct.sum()) / n if self.has_acc else float("nan")


PACK_SAMPLES = 64
"""The fewest samples of a packed row (more when a model's parameters outweigh b samples' activations)."""

ACTIVATION_BUDGET = 1 << 22
"""Elements of the largest activation one evaluation call may create (the default ``Evaluator`` budget): it
sets the evaluation's chunk and block sizes, hence its per-client sums, so it is fixed, never derived from the
machine or a ``memory_budget`` (results would then depend on them)."""


class Evaluator:
    """Evaluates models on a federation's splits.

    Args:
        fed: the federation.
        budget: the largest activation (elements) one forward call may create; sets chunk/block sizes.
    """

    def __init__(self, fed: Federation, budget: int = ACTIVATION_BUDGET):
        self.fed = fed
        self.budget = budget
        per_sample = fed.model.sample_cost()
        self.chunk = max(1, budget // per_sample)
        self.block = max(1, budget // (per_sample * fed.num_clients))
        self._packing: dict[str, tuple[int, int] | None] = {}
        self._blocks: dict[tuple, tuple[Tensor, Tensor]] = {}  # (split, call) -> gathered (x, y)
        self.cached_bytes = 0

    def _gather(
        self, data: ClientSplit, key: tuple | None, clients: Tensor, pos: Tensor
    ) -> tuple[Tensor, Tensor]:
        """``data.gather(clients, pos)``, kept under ``key`` (None: not kept) while the kept blocks' bytes stay
        within ``fed.eval_cache_bytes``."""
        if key is None:
            return data.gather(clients, pos)
        if key in self._blocks:
            return self._blocks[key]
        x, y = data.gather(clients, pos)
        size = x.numel() * x.element_size() + y.numel() * y.element_size()
        if self.cached_bytes + size <= self.fed.eval_cache_bytes:
            self._blocks[key] = (x, y)
            self.cached_bytes += size
        return x, y

    def packing(self, split: str) -> tuple[int, int] | None:
        """The packed layout of per-client models on ``split``: ``(b, rows per call)``, or None for block-rows.

        Rule (elements touched, the same on every machine): with P the model's parameters, s its activation
        elements per sample (``sample_cost``), n_i the client sizes, b = max(``PACK_SAMPLES``, ⌈P / s⌉) and
        the block-rows block β: packed costs Σ_i ⌈n_i/b⌉ (b·s + P) (padded samples, one parameter copy a row),
        block-rows Σ_i ⌈n_i/β⌉ β·s plus P for each client of a call that some client sits out (those calls
        gather their parameters); packed when cheaper and b samples fit the activation budget.
        """
        if split not in self._packing:
            data: ClientSplit = getattr(self.fed, split)
            sizes = data.sizes.to(torch.float64)
            cost = self.fed.model.sample_cost()
            params = self.fed.model.num_parameters()
            b = max(PACK_SAMPLES, -(-params // cost))
            block = min(self.block, int(data.sizes.max()))
            packed = float(torch.ceil(sizes / b).sum()) * (b * cost + params)
            calls = torch.arange(0, int(data.sizes.max()), block, dtype=torch.float64)
            active = (sizes.unsqueeze(0) > calls.unsqueeze(1)).sum(1).to(torch.float64)  # clients of call r
            copies = float(active[active < data.num_clients].sum()) * params
            rows = float(torch.ceil(sizes / block).sum()) * block * cost + copies
            fits = b * cost <= self.budget
            self._packing[split] = (b, self.budget // (b * cost)) if fits and packed < rows else None
        return self._packing[split]

    def max_call_samples(self) -> int:
        """The most samples one forward call of :meth:`scores` takes on any split: a shared model's chunk
        (at most the split's samples), or the per-client layout's call (one block of every client, padded
        to the block, or a packed call's rows of b samples), whichever is larger; the memory plan counts an
        evaluation's working set from it (``hetfl.engine.memory``)."""
        out = 0
        for name in self.fed.splits:
            data: ClientSplit = getattr(self.fed, name)
            largest = int(data.sizes.max())
            packing = self.packing(name)
            if packing is None:
                per_client = data.num_clients * min(self.block, largest)
            else:
                b, rows = packing
                per_client = b * min(rows, int(torch.ceil(data.sizes / b).sum()))
            out = max(out, min(self.chunk, int(data.offsets[-1])), per_client)
        return out

    @torch.no_grad()
    def scores(
        self, params: Params, split: str, clients: slice | None = None, out: SplitScores | None = None
    ) -> SplitScores:
        """Loss and correct counts of ``params`` on ``split`` (``train``, ``test``, or ``val`` when the
        federation has validation data) of every client, or of the clients ``clients`` only.

        Args:
            params: ``[1, ...]`` (one shared model) or ``[N, ...]`` (client i's model on client i's data), on
                the federation's device or, a per-client state placed in host memory (``hetfl.engine.state``),
                copied there for the evaluation; with ``clients``, ``[r, ...]``: the models of those r clients.
            clients: a slice of the clients (None: all): their models alone, scored in the calls that the
                N clients' models would take them in (the same blocks or packed rows, so the same sums), for
                models computed a chunk of clients at a time (``hetfl.engine.adapt.ClientModels``).
            out: the scores to add to (None: new zeros); the rows of ``clients`` are written.

        Raises:
            ValueError: if the leading dimension is neither 1 nor N (with ``clients``: not the r clients'),
                or the split is unknown.
        """
        if split not in self.fed.splits:
            raise ValueError(f"unknown split '{split}'; allowed: {', '.join(sorted(self.fed.splits))}")
        data: ClientSplit = getattr(self.fed, split)
        params = {k: v.to(data.x.device) for k, v in params.items()}  # the same tensors on their device
        lead = param_rows(params, "Evaluator.scores")
        n = data.num_clients
        classify = self.fed.model.task == "classification"
        if out is None:
            out = SplitScores(*(torch.zeros(n, dtype=torch.float64) for _ in range(3)), has_acc=classify)
        ids = torch.arange(n)[clients if clients is not None else slice(None)]
        if clients is not None and lead != len(ids):
            raise ValueError(
                f"params have leading dimension {lead}; expected the {len(ids)} clients {clients}"
            )
        if lead == 1 and clients is None:
            self._shared(params, data, out)
        elif lead == len(ids) and self.packing(split) is not None:
            self._packed(params, data, out, ids, *self.packing(split), (split, int(ids[0]), len(ids)))
        elif lead == len(ids):
            self._per_client(params, data, out, ids, (split, int(ids[0]), len(ids)))
        else:
            raise ValueError(f"params have leading dimension {lead}; expected 1 or {n}")
        return out

    @torch.no_grad()
    def client_scores(self, params: Params, clients: Tensor, split: str = "train") -> SplitScores:
        """Loss and correct counts of each of the clients ``clients`` on its own ``split`` data only (the other
        clients' data are not read): a round's sampled clients scored at the server's model (q-FedAvg's
        F_k(w_t), Li et al., ICLR 2020, Algorithm 2) or at their own models.

        Args:
            params: ``[1, ...]`` (one shared model, every client's data in contiguous chunks of at most
                ``chunk`` samples) or ``[S, ...]`` (row c: the model of ``clients[c]``, in the layout
                :meth:`scores` takes for per-client models). A per-client state placed in host memory is
                copied to the data's device.
            clients: ``LongTensor[S]``, distinct client ids, in any order.
            split: ``train``, ``test``, or ``val`` when the federation has validation data.

        Returns:
            ``SplitScores`` of S rows in the order of ``clients``: ``loss`` and ``acc`` ``[S]`` float64 (CPU),
            means over each client's samples of ``split``.

        Raises:
            ValueError: an unknown split, repeated clients, or a leading dimension neither 1 nor S.
        """
        if split not in self.fed.splits:
            raise ValueError(f"unknown split '{split}'; allowed: {', '.join(sorted(self.fed.splits))}")
        data: ClientSplit = getattr(self.fed, split)
        ids = clients.cpu().long().reshape(-1)
        if len(ids.unique()) != len(ids):
            raise ValueError(f"client_scores: repeated clients in {ids.tolist()}")
        params = {k: v.to(data.x.device) for k, v in params.items()}
        lead = param_rows(params, "Evaluator.client_scores")
        classify = self.fed.model.task == "classification"
        out = SplitScores(
            *(torch.zeros(data.num_clients, dtype=torch.float64) for _ in range(3)), has_acc=classify
        )
        if lead == 1:
            self._shared_of(params, data, out, ids)
        elif lead == len(ids) and self.packing(split) is not None:
            self._packed(params, data, out, ids, *self.packing(split))
        elif lead == len(ids):
            self._per_client(params, data, out, ids)
        else:
            raise ValueError(f"params have leading dimension {lead}; expected 1 or the {len(ids)} clients")
        return SplitScores(out.loss_sum[ids], out.correct[ids], out.count[ids], has_acc=classify)

    def _shared_of(self, params: Params, data: ClientSplit, out: SplitScores, ids: Tensor) -> None:
        """A shared model ``params [1, ...]`` on the samples of the clients ``ids`` only, in their order, in
        chunks of at most ``chunk`` samples (one gather each)."""
        sizes = data.sizes[ids]
        owner_of = torch.repeat_interleave(ids, sizes)  # the client of each of the Σ n_i samples
        first = torch.repeat_interleave(data.offsets[ids] - (sizes.cumsum(0) - sizes), sizes)
        index = first + torch.arange(int(sizes.sum()))  # their rows in the split
        model = self.fed.model
        for start in range(0, len(index), self.chunk):
            rows = index[start : start + self.chunk].to(data.x.device)
            owner = owner_of[start : start + self.chunk]
            logits = model.forward(params, data.x[rows].unsqueeze(0))  # [1, K, b]
            y = data.y[rows].unsqueeze(0)
            loss = sample_losses(logits, y, model.task)[0]
            out.loss_sum.index_add_(0, owner, loss.double().cpu())
            out.count.index_add_(0, owner, torch.ones(len(owner), dtype=torch.float64))
            if out.has_acc:
                out.correct.index_add_(0, owner, (top1(logits)[0] == y[0]).double().cpu())

    def _accumulate(self, out: SplitScores, logits: Tensor, y: Tensor, mask: Tensor, owner: Tensor) -> None:
        """Add masked per-sample losses and hits of ``logits [C, K, B]`` to the rows ``owner [C]``."""
        loss = sample_losses(logits, y, self.fed.model.task)
        m = mask.to(loss.dtype)
        out.loss_sum.index_add_(0, owner.cpu(), (loss * m).sum(1).double().cpu())
        out.count.index_add_(0, owner.cpu(), m.sum(1).double().cpu())
        if out.has_acc:
            correct = (top1(logits) == y).to(loss.dtype)
            out.correct.index_add_(0, owner.cpu(), (correct * m).sum(1).double().cpu())

    def _shared(self, params: Params, data: ClientSplit, out: SplitScores) -> None:
        model = self.fed.model
        total = int(data.offsets[-1])
        owner_of = torch.repeat_interleave(torch.arange(data.num_clients), data.sizes)
        for start in range(0, total, self.chunk):
            stop = min(start + self.chunk, total)
            owner = owner_of[start:stop]
            logits = model.forward(params, data.x[start:stop].unsqueeze(0))  # [1, K, b]
            y = data.y[start:stop].unsqueeze(0)
            loss = sample_losses(logits, y, model.task)[0]
            out.loss_sum.index_add_(0, owner, loss.double().cpu())
            out.count.index_add_(0, owner, torch.ones(stop - start, dtype=torch.float64))
            if out.has_acc:
                out.correct.index_add_(0, owner, (top1(logits)[0] == y[0]).double().cpu())

    def _per_client(
        self, params: Params, data: ClientSplit, out: SplitScores, ids: Tensor, keep: tuple | None = None
    ) -> None:
        """The models ``params [r, ...]`` of the clients ``ids [r]`` (consecutive), block by block: call r takes
        the r-th block of every one of them that still has data; the block is the whole split's. ``keep``:
        what names these clients' gathered blocks among those kept (:meth:`_gather`), or None: not kept."""
        model = self.fed.model
        block = min(self.block, int(data.sizes.max()))
        arange = torch.arange(block)
        sizes = data.sizes[ids]
        for r in range(0, int(sizes.max()), block):
            active = torch.nonzero(sizes > r).squeeze(1)  # rows of params
            within = r + arange
            n = sizes[active].unsqueeze(1)
            mask = within < n
            pos = torch.minimum(within.expand(len(active), -1), n - 1)
            x, y = self._gather(data, keep and (*keep, "rows", r), ids[active], pos)
            p = params if len(active) == len(ids) else _take(params, active)
            self._accumulate(out, model.forward(p, x), y, mask.to(x.device), ids[active])

    def _packed(
        self,
        params: Params,
        data: ClientSplit,
        out: SplitScores,
        ids: Tensor,
        b: int,
        rows: int,
        keep: tuple | None = None,
    ) -> None:
        """The models ``params [r, ...]`` of the clients ``ids [r]`` over rows of ``b`` samples of one client each
        (its r-th row: samples r·b ...), ``rows`` rows a call, each row with its owner's parameters; ``keep``
        as :meth:`_per_client`'s."""
        sizes = data.sizes[ids]
        counts = -(-sizes // b)  # rows of each client
        owner = torch.repeat_interleave(torch.arange(len(ids)), counts)  # [R], rows of params
        first = (torch.arange(len(owner)) - torch.repeat_interleave(counts.cumsum(0) - counts, counts)) * b
        arange = torch.arange(b)
        for s in range(0, len(owner), rows):
            o = owner[s : s + rows]
            n = sizes[o].unsqueeze(1)
            within = first[s : s + rows].unsqueeze(1) + arange
            mask = within < n
            x, y = self._gather(data, keep and (*keep, "packed", s), ids[o], torch.minimum(within, n - 1))
            p = _take(params, o)
            self._accumulate(out, self.fed.model.forward(p, x), y, mask.to(x.device), ids[o])


def _take(params: Params, rows: Tensor) -> Params:
    """The models of ``rows [R]`` (indices into the clients, repeats allowed) of ``params [N, ...]``, to read:
    copies, except a parameter that is one row viewed N times (``hetfl.engine.params.broadcast``'s ``views``:
    a partially personalized model's global part), viewed R times, so that no call copies it per client."""
    return {
        k: v[:1].expand(len(rows), *v.shape[1:]) if shared_rows(v) else v.index_select(0, rows.to(v.device))
        for k, v in params.items()
    }
