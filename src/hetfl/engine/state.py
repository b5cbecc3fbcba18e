"""Where an algorithm's per-client state lives: on the compute device, or off it within a memory budget.

Per-client state is what an algorithm keeps for every client between rounds, stacked ``[N, ...]``: SCAFFOLD's
controls c_i, FedDyn's gradients ∇L_k(θ_k), FedAlt's and FedSim's personal parts and their momentum
buffers, pFedMe's θ̃_i and w_{i,R}, the collaborative family's client models. An algorithm makes such a stack
with :meth:`ClientStates.stack` (copies of a shared model) or :meth:`ClientStates.zeros`, and the federation's
``states`` decides where it goes, stack by stack in the order they are made:

- on the compute device while the federation's data, the stacks placed there before and this one take at
  most ``STATE_SHARE`` of the run's memory budget (``memory_budget``, ``hetfl.engine.memory``); always there
  without a budget (scripts, tests, benchmarks that build a ``Federation`` themselves);
- otherwise off it: on a GPU, in the host's memory (not pinned: a state the size of the RAM may not be
  page-locked), for the stacks whose clients do not all train every round (``idle``: the rows of the sampled
  clients are copied to the GPU and back each round, by
  ``hetfl.engine.params.select(..., device=)`` and :func:`put`); a stack every client trains every round stays
  on the GPU (it would cross the bus whole each round). On the CPU, in a memory-mapped file, any stack: the
  operating system keeps the rows a round touches in memory and writes the others back to the file, so a
  state larger than the RAM the job may use still runs. The file is made in ``directory`` (default: the
  system's temporary directory, ``$TMPDIR``: a SLURM node's local scratch where it sets one) and unlinked at
  once, so nothing is left behind, even by a killed job.

Placement changes no number: the same values are computed by the same operations wherever they are stored
(``tests/test_client_state.py`` trains every algorithm with every stack in a memory-mapped file and compares
byte for byte). ``run.json`` records the bytes of each placement (``memory.client_state``).
"""

from __future__ import annotations

import math
import os
import tempfile
from typing import Any

import torch
from torch import Tensor

from hetfl.engine.params import Params

STATE_SHARE = 0.5  # the share of the memory budget that the data and the on-device per-client state may take
PLACES = ("device", "host", "mmap")


class ClientStates:
    """The placement of one run's per-client state stacks (the federation's ``states``).

    Args:
        device: the compute device.
        budget: the run's memory budget in bytes, or None: every stack on ``device``.
        reserved: bytes of the budget already taken on ``device`` (the federation's data).
        directory: where memory-mapped files are made (None: ``tempfile.gettempdir()``).

    Raises:
        ValueError: a negative ``budget`` or ``reserved``.
    """

    def __init__(
        self,
        device: torch.device,
        budget: int | None = None,
        reserved: int = 0,
        directory: str | os.PathLike | None = None,
    ):
        if (budget is not None and budget < 0) or reserved < 0:
            raise ValueError(
                f"ClientStates: budget and reserved must be >= 0 bytes, got {budget}, {reserved}"
            )
        self.device = torch.device(device)
        self.budget = budget
        self.reserved = int(reserved)
        self.directory = directory
        self.placed = dict.fromkeys(PLACES, 0)  # bytes of the stacks in each place
        self._off: set[int] = set()  # storage addresses of the stacks off the device

    def place(self, nbytes: int, idle: bool) -> str:
        """Where a new stack of ``nbytes`` goes: ``device``, ``host`` or ``mmap`` (see the module docstring)."""
        if self.budget is None or self.reserved + self.placed["device"] + nbytes <= STATE_SHARE * self.budget:
            return "device"
        if self.device.type == "cpu":
            return "mmap"
        return "host" if idle else "device"

    def stack(self, params: Params, clients: int, idle: bool = True, record: bool = True) -> Params:
        """``clients`` copies of a shared model ``params [1, ...]``: ``[clients, ...]``, placed (the values of
        ``hetfl.engine.params.broadcast``). ``idle``: not every client trains every round; ``record``: as in
        :meth:`zeros`."""
        out = self.zeros({k: v.expand(clients, *v.shape[1:]) for k, v in params.items()}, idle, record)
        for k, v in params.items():
            out[k].copy_(v.expand_as(out[k]))
        return out

    def zeros(self, like: Params, idle: bool = True, record: bool = True) -> Params:
        """Zeros shaped and typed like ``like [N, ...]``, placed as one stack (``idle`` as in :meth:`stack`).
        ``record`` False: a stack made to be written out, not kept as client state (the final state's
        per-client models, ``final.pt``): placed by the same rule, not counted in :attr:`placed`."""
        nbytes = sum(v.numel() * v.element_size() for v in like.values())
        where = self.place(nbytes, idle)
        self.placed[where] += nbytes if record else 0
        # zeros written even into a new file (which reads as zeros): reading a file's holes costs about
        # 10 ms per MB on first touch, writing them once at the start less than 1.2 ms
        out = {k: self._empty(v.shape, v.dtype, where).zero_() for k, v in like.items()}
        if where != "device":
            self._off.update(v.untyped_storage().data_ptr() for v in out.values())
        return out

    def _empty(self, shape: torch.Size, dtype: torch.dtype, where: str) -> Tensor:
        if where == "device":
            return torch.empty(shape, dtype=dtype, device=self.device)
        if where == "host":
            return torch.empty(shape, dtype=dtype)
        numel = max(1, math.prod(shape))
        fd, path = tempfile.mkstemp(prefix="hetfl-state-", suffix=".bin", dir=self.directory)
        try:
            os.ftruncate(fd, numel * torch.empty((), dtype=dtype).element_size())
            mapped = torch.from_file(path, shared=True, size=numel, dtype=dtype)
        finally:
            os.close(fd)
            os.unlink(path)  # the mapping keeps the pages; the name goes now
        return mapped[: math.prod(shape)].view(shape)

    def is_off(self, tensor: Tensor) -> bool:
        """Whether ``tensor`` is (a view of) a stack placed off the device."""
        return tensor.untyped_storage().data_ptr() in self._off

    def keep(self, state: Params, new: Params) -> Params:
        """The per-client stack to hold from now on when every row of ``state [N, ...]`` was recomputed as
        ``new [N, ...]``: ``new`` itself when ``state`` is on the device (no copy), else ``state`` with ``new``
        copied into it, so that the stack keeps its place (``state`` itself when ``new`` is ``state``)."""
        if new is state or not any(self.is_off(v) for v in state.values()):
            return new
        for k, v in new.items():
            state[k].copy_(v)
        return state

    def record(self) -> dict[str, Any]:
        """Bytes of the stacks in each place, for ``run.json`` (``device_bytes``, ``host_bytes``, ``mmap_bytes``)."""
        return {f"{where}_bytes": nbytes for where, nbytes in self.placed.items()}


def put(state: Params, clients: Tensor, rows: Params) -> None:
    """Write ``rows [S, ...]`` (on the compute device) into the rows ``clients [S]`` of the per-client stack
    ``state [N, ...]`` wherever it is placed (:class:`ClientStates`), for the keys of ``rows``."""
    for k, v in rows.items():
        target = state[k]
        target.index_copy_(0, clients.to(target.device), v.to(target.device))
