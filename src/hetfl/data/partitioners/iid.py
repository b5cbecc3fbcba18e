"""``iid``: a uniformly random split into near-equal clients (sizes differ by at most one)."""

from __future__ import annotations

import dataclasses

import numpy as np

from hetfl.data.dataset import DatasetInfo
from hetfl.data.partitioners.common import Assignment, PartitionOptions, stream


@dataclasses.dataclass(frozen=True)
class Options(PartitionOptions):
    """The common options only."""


def validate(spec: dict, key: str, info: DatasetInfo) -> dict:
    """Nothing beyond the common checks (clients x minimum size <= samples)."""
    return spec


def check(spec: dict, info: DatasetInfo, seed: int, key: str) -> None:
    """Sizes do not depend on the seed: nothing to check."""


def assign(spec: dict, y: np.ndarray, users: np.ndarray | None, info: DatasetInfo, seed: int, key: str):
    """Permute all samples (``assign`` stream) and cut them into ``clients`` near-equal parts."""
    perm = stream(seed, "assign").permutation(y.size)
    return Assignment(clients=[p.astype(np.int64) for p in np.array_split(perm, spec["clients"])])
