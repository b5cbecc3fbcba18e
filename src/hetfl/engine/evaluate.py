"""Batched evaluation of a shared model or of one model per client on every client's data.

A shared model (leading dim 1) runs over the split in contiguous chunks; per-client models (leading
dim N) run "block-rows": call r processes the r-th block of every client that still has data, so
each call is one batched forward with no copies of the parameters when all clients take part.
Sums are accumulated per client in float64.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from hetfl.engine.federation import ClientSplit, Federation
from hetfl.engine.params import Params
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

    def max_call_samples(self) -> int:
        """The most samples one forward call of :meth:`scores` takes on any split: a shared model's chunk
        (at most the split's samples), or one block of every client (padded to the block), whichever is
        larger; the memory plan counts an evaluation's working set from it (``hetfl.engine.memory``)."""
        out = 0
        for name in self.fed.splits:
            data: ClientSplit = getattr(self.fed, name)
            largest = int(data.sizes.max())
            out = max(
                out, min(self.chunk, int(data.offsets[-1])), data.num_clients * min(self.block, largest)
            )
        return out

    @torch.no_grad()
    def scores(self, params: Params, split: str) -> SplitScores:
        """Loss and correct counts of ``params`` on ``split`` (``train``, ``test``, or ``val`` when the
        federation has validation data) of every client.

        Args:
            params: ``[1, ...]`` (one shared model) or ``[N, ...]`` (client i's model on client i's data).

        Raises:
            ValueError: if the leading dimension is neither 1 nor N, or the split is unknown.
        """
        if split not in self.fed.splits:
            raise ValueError(f"unknown split '{split}'; allowed: {', '.join(sorted(self.fed.splits))}")
        data: ClientSplit = getattr(self.fed, split)
        lead = next(iter(params.values())).shape[0]
        n = data.num_clients
        classify = self.fed.model.task == "classification"
        out = SplitScores(*(torch.zeros(n, dtype=torch.float64) for _ in range(3)), has_acc=classify)
        if lead == 1:
            self._shared(params, data, out)
        elif lead == n:
            self._per_client(params, data, out)
        else:
            raise ValueError(f"params have leading dimension {lead}; expected 1 or {n}")
        return out

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

    def _per_client(self, params: Params, data: ClientSplit, out: SplitScores) -> None:
        model = self.fed.model
        block = min(self.block, int(data.sizes.max()))
        arange = torch.arange(block)
        for r in range(0, int(data.sizes.max()), block):
            active = torch.nonzero(data.sizes > r).squeeze(1)
            within = r + arange
            n = data.sizes[active].unsqueeze(1)
            mask = within < n
            pos = torch.minimum(within.expand(len(active), -1), n - 1)
            x, y = data.gather(active, pos)
            p = (
                params
                if len(active) == data.num_clients
                else {k: v.index_select(0, active.to(v.device)) for k, v in params.items()}
            )
            self._accumulate(out, model.forward(p, x), y, mask.to(x.device), active)
