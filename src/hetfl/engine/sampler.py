"""Per-client minibatch sampling for many clients at once, with masks for unequal client sizes.

``BatchSampler.next(clients)`` returns, for each listed client, the positions of its next minibatch
within its own data, as one ``[C, B]`` tensor and a ``[C, B]`` validity mask. Modes:

- ``epoch`` (default): each client reshuffles its data at the start of every epoch and walks through it
  in batches of B; the last batch of an epoch is partial (masked), as ``DataLoader(shuffle=True,
  drop_last=False)`` in the papers' code. A client with n_i < B gets all its n_i samples every step.
- ``sequential``: the same without shuffling, a persistent iterator over the data in stored order
  (pFedMe's official code, ``DataLoader(shuffle=False)``; docs/papers/pfedme.md §2.3).
- ``replacement``: B positions drawn uniformly with replacement each step (the i.i.d. minibatches of
  the convergence analyses); never masked.

Each client keeps its own cursor, so a client that does not train in a round resumes where it stopped.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from hetfl.engine.rng import stream_seed

MODES = ("epoch", "replacement", "sequential")


class BatchSampler:
    """Minibatch positions for C of N clients per call.

    Args:
        sizes: ``LongTensor[N]``, samples per client (all ≥ 1).
        batch_size: B ≥ 1.
        generator: CPU generator (stream ``batches``).
        mode: one of ``MODES``.

    Raises:
        ValueError: unknown mode, B < 1, or a client without samples.
    """

    def __init__(self, sizes: Tensor, batch_size: int, generator: torch.Generator, mode: str = "epoch"):
        if mode not in MODES:
            raise ValueError(f"unknown sampling mode '{mode}'; allowed: {', '.join(MODES)}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.sizes = sizes.to(torch.long).cpu()
        if (self.sizes < 1).any():
            raise ValueError("every client needs at least one sample")
        self.batch_size = int(batch_size)
        self.mode = mode
        self.generator = generator
        # The bookkeeping is numpy: a step's dozen index operations on C clients cost ~1 µs each in numpy,
        # ~5-8 µs in torch (its dispatch), which was a sixth of a FedAvg round on mnist5k. The random draws
        # stay torch's (the generator's stream).
        self._sizes = self.sizes.numpy()
        self._offsets = np.concatenate([[0], np.cumsum(self._sizes)])
        # Flat array of per-client orders: client i's order lives in offsets[i]:offsets[i+1].
        self.order = np.arange(int(self._offsets[-1])) - np.repeat(self._offsets[:-1], self._sizes)
        self.cursor = np.zeros(len(self._sizes), dtype=np.int64)
        self._arange = np.arange(self.batch_size)

    def owners(self, clients: Tensor) -> Tensor:
        """The client whose data each of ``clients [C]`` draws from: itself (``PairSampler``: a pair's data
        client)."""
        return clients

    def next(self, clients: Tensor) -> tuple[Tensor, Tensor]:
        """The next minibatch of each client in ``clients``.

        Args:
            clients: ``LongTensor[C]`` of distinct client ids.

        Returns:
            ``(pos, mask)``: ``LongTensor[C, B]`` positions within each client's data (masked entries
            point at a valid sample) and ``BoolTensor[C, B]`` (CPU).
        """
        clients = clients.cpu().numpy()
        n = self._sizes[clients][:, None]
        if self.mode == "replacement":
            u = torch.rand(len(clients), self.batch_size, generator=self.generator, dtype=torch.float64)
            pos = np.minimum((u.numpy() * n).astype(np.int64), n - 1)
            return torch.from_numpy(pos), torch.ones(pos.shape, dtype=torch.bool)
        cur = self.cursor[clients]
        if self.mode == "epoch":
            starting = clients[cur == 0]
            if len(starting):
                self._shuffle(starting)
        within = cur[:, None] + self._arange
        mask = within < n
        pos = self.order[self._offsets[clients][:, None] + np.minimum(within, n - 1)]
        nxt = cur + self.batch_size
        self.cursor[clients] = np.where(nxt >= n[:, 0], 0, nxt)
        return torch.from_numpy(pos), torch.from_numpy(mask)

    def _shuffle(self, clients: np.ndarray) -> None:
        """A new random order for each of ``clients`` (one ``randperm`` each, from the sampler's generator)."""
        for client in clients.tolist():
            start = int(self._offsets[client])
            n = int(self._sizes[client])
            self.order[start : start + n] = torch.randperm(n, generator=self.generator).numpy()

    def state_dict(self) -> dict[str, Tensor]:
        """Cursor and orders (for checkpoints; ``LongTensor``); the generator state is saved separately."""
        return {"order": torch.from_numpy(self.order.copy()), "cursor": torch.from_numpy(self.cursor.copy())}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        self.order = state["order"].numpy().astype(np.int64, copy=True)
        self.cursor = state["cursor"].numpy().astype(np.int64, copy=True)


def eval_sampler(sizes: Tensor, batch_size: int, seed: int, t: int, mode: str = "epoch") -> BatchSampler:
    """The sampler of the evaluation at round ``t``: stream ``eval`` of ``seed``, offset by ``t``.

    Evaluation-time adaptation (Per-FedAvg's personalization step, FedAvg+FT's fine-tuning, the personal
    fine-tuning of FFGG/FedAlt/FedSim) draws its minibatches here: the personalized model evaluated at
    round t is the same whether or not earlier rounds were evaluated, and training streams are untouched.
    """
    g = torch.Generator().manual_seed((stream_seed(seed, "eval") + t) % (1 << 63))
    return BatchSampler(sizes, batch_size, g, mode)


def cycling_sampler(sizes: Tensor, batch_size: int, start_batch: int) -> BatchSampler:
    """A ``sequential`` sampler whose cursors stand at batch ``start_batch`` of an endless cycle.

    Client i's data, in stored order, are cut into ``n_b = ceil(n_i / B)`` batches (the last one partial,
    ``DataLoader(shuffle=False, drop_last=False)``); its cursor starts at batch ``start_batch mod n_b``
    and, drawing on, wraps to batch 0 after the last: the iterator the official pFedMe code keeps per
    user and restarts when it is exhausted (``userbase.py``, ``get_next_test_batch``), positioned as
    if ``start_batch`` batches had been drawn since the start.

    Args:
        sizes: ``LongTensor[N]`` samples per client (all ≥ 1); batch_size: B ≥ 1; start_batch: ≥ 0.

    Raises:
        ValueError: as :class:`BatchSampler`, or ``start_batch`` < 0.
    """
    if start_batch < 0:
        raise ValueError(f"start_batch must be >= 0, got {start_batch}")
    sampler = BatchSampler(sizes, batch_size, torch.Generator(), "sequential")
    batches = (sampler._sizes + sampler.batch_size - 1) // sampler.batch_size
    sampler.cursor = (start_batch % batches) * sampler.batch_size
    return sampler
