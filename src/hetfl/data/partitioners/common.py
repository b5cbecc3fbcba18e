"""Pieces shared by the partition schemes: seeded streams, the per-client train/test split, sizes."""

from __future__ import annotations

import dataclasses
import math
import random
from dataclasses import dataclass, field

import numpy as np

from hetfl.config_options import REQUIRED, ConfigOptions, option
from hetfl.data.checks import MAX_SEED


@dataclasses.dataclass(frozen=True)
class PartitionOptions(ConfigOptions):
    """The options every partition scheme takes; a scheme's ``Options`` derives from it and adds its own.

    ``clients`` (required but for ``natural``), ``test_fraction`` (each client's test share, in (0, 1)),
    ``val_fraction`` (the share of its training samples held out for validation, in [0, 1); absent: none),
    ``seed`` (a fixed partition seed; absent: the run's seed).
    """

    clients: int = option(REQUIRED, lo=1)
    test_fraction: float = option(0.25, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    val_fraction: float | None = option(None, lo=0.0, hi=1.0, hi_open=True)
    seed: int | None = option(None, lo=0, hi=MAX_SEED)


# independent numpy streams derived from one partition seed (SeedSequence spawn keys)
_STREAMS = ("counts", "assign", "split", "transforms", "val")


def stream(seed: int, purpose: str) -> np.random.Generator:
    """The numpy generator for one purpose of a partition seed (``counts``, ``assign``, ``split``,
    ``transforms``, ``val``); the streams are independent and stable across numpy versions (SeedSequence)."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(_STREAMS.index(purpose),)))


def num_train(n: int, test_fraction: float) -> int:
    """Training samples of a client with ``n`` samples: ``int((1 - f) * n)``, pFedMe's ``int(0.75 * n)``."""
    return int((1.0 - test_fraction) * n)


def min_client_size(test_fraction: float) -> int:
    """The fewest samples a client needs for at least one train and one test sample."""
    n = max(1, math.floor(1.0 / (1.0 - test_fraction)) - 1)
    while not 1 <= num_train(n, test_fraction) < n:
        n += 1
    return n


@dataclass
class Assignment:
    """What a scheme decides before the train/test split.

    Attributes:
        clients: per client, int64 indices into the dataset, in the scheme's order.
        cluster: int64 ``[num_clients]`` cluster id per client.
        transforms: per cluster id, its transform dict.
        shuffle: ``numpy`` (the partition's ``split`` stream) or ``python`` (pFedMe's
            ``random.seed(seed); random.shuffle`` per client in client order, RNG-exact with the
            official generator).
    """

    clients: list[np.ndarray]
    cluster: np.ndarray | None = None
    transforms: list[dict] = field(default_factory=lambda: [{"kind": "none"}])
    shuffle: str = "numpy"

    def __post_init__(self) -> None:
        if self.cluster is None:
            self.cluster = np.zeros(len(self.clients), dtype=np.int64)


def split_train_test(
    clients: list[np.ndarray], test_fraction: float, seed: int, shuffle: str = "numpy"
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Shuffle each client's indices and cut them into train (first ``int((1 - f) n)``) and test.

    Args:
        clients: per client, int64 indices.
        test_fraction: f in (0, 1).
        seed: the partition seed.
        shuffle: ``numpy`` or ``python`` (see :class:`Assignment`).

    Returns:
        ``(train, test)`` lists of int64 arrays.
    """
    train, test = [], []
    if shuffle == "python":
        r = random.Random(seed)
        orders = []
        for idx in clients:
            items = idx.tolist()
            r.shuffle(items)
            orders.append(np.asarray(items, dtype=np.int64))
    else:
        rng = stream(seed, "split")
        orders = [rng.permutation(np.asarray(idx, dtype=np.int64)) for idx in clients]
    for order in orders:
        k = num_train(order.size, test_fraction)
        train.append(order[:k])
        test.append(order[k:])
    return train, test


def split_sizes(total: int, parts: int) -> np.ndarray:
    """Sizes of ``np.array_split(range(total), parts)``: int64 ``[parts]``."""
    base, extra = divmod(total, parts)
    return np.array([base + (i < extra) for i in range(parts)], dtype=np.int64)


def split_validation(
    train: list[np.ndarray], fraction: float, seed: int, key: str = "partition.val_fraction"
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Hold out ``max(1, int(fraction · n_i))`` of each client's ``n_i`` training indices for validation.

    The held-out positions are the first of a permutation drawn from the seed's ``val`` stream, one
    client after the other; the remaining training indices keep their order.

    Args:
        train: per client, int64 training indices; fraction: in (0, 1); seed: the partition seed.

    Returns:
        ``(train, val)``: per client, the indices left for training and the validation indices.

    Raises:
        ValueError (a ``ConfigError`` naming ``key``): a client with fewer than 2 training samples.
    """
    from hetfl.errors import ConfigError

    rng = stream(seed, "val")
    kept, val = [], []
    for client, idx in enumerate(train):
        n_val = max(1, int(fraction * idx.size))
        if idx.size - n_val < 1:
            raise ConfigError(
                key,
                f"client {client} has {idx.size} training samples: too few to hold out {n_val} for validation",
            )
        held = np.zeros(idx.size, dtype=bool)
        held[rng.permutation(idx.size)[:n_val]] = True
        kept.append(idx[~held])
        val.append(idx[held])
    return kept, val
