"""``dirichlet``: label skew with per-class proportions ~ Dir(α) over the clients.

FedMA / FedNova style (Wang et al. 2020; docs/papers/fedminimax.md §4.6): for each class c draw
q_c ~ Dir_N(α) and give client j the fraction q_{c,j} of the class's samples; redraw until every client
has at least ``min_size`` samples. Small α = strong heterogeneity.

It runs in two steps so a config can be checked without loading data:

1. :func:`dirichlet_counts` draws the ``[clients, classes]`` count matrix from the class counts alone
   (``counts`` stream); ``check_partition`` runs exactly this for every seed.
2. :func:`assign` shuffles each class (``assign`` stream) and hands out consecutive blocks.

The redraw loop is bounded (:data:`MAX_TRIES`): an impossible or very unlikely request fails at once
with a message naming ``alpha``, ``min_size`` and ``clients`` instead of looping forever (the hang
known from FL-bench #29 and PFLlib #130).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from hetfl.config_options import option
from hetfl.data.dataset import DatasetInfo
from hetfl.data.partitioners.common import Assignment, PartitionOptions, min_client_size, stream
from hetfl.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class Options(PartitionOptions):
    """The common options, the concentration ``alpha`` > 0 and each client's ``min_size``."""

    alpha: float = option(0.5, lo=0.0, lo_open=True)
    min_size: int = option(10, lo=1)


MAX_TRIES = 1000


def _floor(spec: dict) -> int:
    return max(spec["min_size"], min_client_size(spec["test_fraction"]))


def dirichlet_counts(
    class_counts: np.ndarray, clients: int, alpha: float, min_size: int, rng: np.random.Generator, key: str
) -> np.ndarray:
    """Draw how many samples of each class each client gets.

    Per try and per class c: ``q ~ Dir(alpha * 1_N)``; the class's ``n_c`` samples are cut at
    ``floor(cumsum(q) * n_c)``. Up to :data:`MAX_TRIES` tries until every client has ``>= min_size``.

    Args:
        class_counts: int ``[C]`` samples per class.
        clients: N.
        alpha: Dirichlet concentration.
        min_size: smallest allowed client size.
        rng: the partition's ``counts`` stream.
        key: dotted config key of the partition, for errors.

    Returns:
        int64 ``[N, C]`` counts; column c sums to ``class_counts[c]``.

    Raises:
        ConfigError: ``clients * min_size`` exceeds the samples, or no draw succeeded.
    """
    class_counts = np.asarray(class_counts, dtype=np.int64)
    total = int(class_counts.sum())
    if clients * min_size > total:
        raise ConfigError(
            f"{key}.min_size",
            f"{clients} clients x min_size {min_size} = {clients * min_size} > {total} samples; "
            f"lower {key}.min_size or {key}.clients",
        )
    counts = np.empty((clients, class_counts.size), dtype=np.int64)
    for _ in range(MAX_TRIES):
        for c, n_c in enumerate(class_counts):
            q = rng.dirichlet(np.full(clients, alpha))
            cuts = np.minimum((np.cumsum(q) * n_c).astype(np.int64), n_c)
            cuts[-1] = n_c
            counts[:, c] = np.diff(cuts, prepend=0)
        if counts.sum(axis=1).min() >= min_size:
            return counts
    raise ConfigError(
        f"{key}.alpha",
        f"no Dirichlet draw in {MAX_TRIES} tries gave each of the {clients} clients >= {min_size} samples "
        f"(alpha {alpha}, {total} samples); raise {key}.alpha, or lower {key}.min_size or {key}.clients",
    )


def validate(spec: dict, key: str, info: DatasetInfo) -> dict:
    """Static feasibility: ``clients * max(min_size, minimum for the split) <= samples``."""
    floor = _floor(spec)
    if spec["clients"] * floor > info.num_samples:
        raise ConfigError(
            f"{key}.min_size",
            f"{spec['clients']} clients x {floor} samples each > {info.num_samples} samples; "
            f"lower {key}.min_size or {key}.clients",
        )
    return spec


def check(spec: dict, info: DatasetInfo, seed: int, key: str) -> None:
    """Run the count draw of this seed from the class counts (skipped when they are unknown)."""
    if info.class_counts is not None:
        dirichlet_counts(
            info.class_counts, spec["clients"], spec["alpha"], _floor(spec), stream(seed, "counts"), key
        )


def assign(spec: dict, y: np.ndarray, users: np.ndarray | None, info: DatasetInfo, seed: int, key: str):
    """Step 2: shuffle each class and give client j the next ``counts[j, c]`` samples of class c."""
    class_counts = np.bincount(y, minlength=info.num_classes)
    counts = dirichlet_counts(
        class_counts, spec["clients"], spec["alpha"], _floor(spec), stream(seed, "counts"), key
    )
    rng = stream(seed, "assign")
    parts: list[list[np.ndarray]] = [[] for _ in range(spec["clients"])]
    for c in range(info.num_classes):
        idx = rng.permutation(np.flatnonzero(y == c))
        for j, block in enumerate(np.split(idx, np.cumsum(counts[:-1, c]))):
            parts[j].append(block)
    return Assignment(clients=[np.concatenate(p).astype(np.int64) for p in parts])
