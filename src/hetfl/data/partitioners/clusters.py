"""``clusters``: K groups of clients that differ by label set or by a transform of their data.

Client i is in cluster ``i mod K`` (``K = num_clusters``); the cluster ids are recorded in the
partition (ground truth for All-for-one's oracle and cluster-recovery checks,
docs/papers/all_for_one.md §3.4). ``by`` chooses what separates the clusters:

- ``labels`` (default): cluster c holds only the labels ``groups[c]``; its samples are shuffled and
  split near-equally among the cluster's clients. ``groups`` defaults to the labels cut into K
  contiguous groups (``np.array_split``; for C = 10, K = 2: {0..4} and {5..9}). All-for-one's literal
  Definition S1 ({0..5}, {6..9}) is ``groups: [[0,1,2,3,4,5],[6,7,8,9]]``.
- ``rotate``: all data split iid over the clients; cluster c's data are rotated by ``angles[c]``
  degrees (default ``c * 360 / K``). Image datasets only.
- ``permute_pixels`` / ``permute_labels``: all data split iid; cluster c > 0 gets a seeded
  permutation of the features / labels, cluster 0 none. The permutation seeds are drawn from the
  partition's ``transforms`` stream and recorded as concrete ints; they are redrawn until every
  cluster's permutation differs from the identity and from the other clusters'.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Literal

import numpy as np

from hetfl.config_options import option
from hetfl.data.dataset import DatasetInfo
from hetfl.data.partitioners.common import Assignment, PartitionOptions, min_client_size, split_sizes, stream
from hetfl.data.transforms import label_permutation, pixel_permutation
from hetfl.errors import ConfigError

BY = ("labels", "permute_labels", "permute_pixels", "rotate")
MAX_SEED_TRIES = 1000


def _groups_check(value, key):
    if not isinstance(value, (list, tuple)) or not all(isinstance(g, (list, tuple)) for g in value):
        raise ConfigError(key, f"must be a list of label lists, one per cluster, got {value!r}")
    for g in value:
        for label in g:
            if isinstance(label, bool) or not isinstance(label, numbers.Integral):
                raise ConfigError(key, f"labels must be integers, got {label!r}")
    return [[int(label) for label in g] for g in value]


def _angles_check(value, key):
    if not isinstance(value, (list, tuple)) or not all(
        isinstance(a, numbers.Real) and not isinstance(a, bool) and math.isfinite(a) for a in value
    ):
        raise ConfigError(key, f"must be a list of angles in degrees, one per cluster, got {value!r}")
    return [float(a) for a in value]


@dataclasses.dataclass(frozen=True)
class Options(PartitionOptions):
    """The common options, ``num_clusters``, ``by``, ``groups`` and ``angles`` (module docstring)."""

    num_clusters: int = option(2, lo=1)
    by: Literal[BY] = "labels"
    groups: list | None = option(None, check=_groups_check)
    angles: list | None = option(None, check=_angles_check)


def cluster_clients(clients: int, num_clusters: int, cluster: int) -> list[int]:
    """The clients of one cluster: ``cluster, cluster + K, ...``."""
    return list(range(cluster, clients, num_clusters))


def validate(spec: dict, key: str, info: DatasetInfo) -> dict:
    """Check the options against the dataset and fill ``groups`` / ``angles``.

    Raises:
        ConfigError: K > clients; ``groups`` not K disjoint non-empty lists of valid labels; ``angles``
            not K numbers; an option given for the wrong ``by``; ``rotate`` on non-image data;
            ``permute_labels`` with more clusters than label permutations; a cluster whose clients
            would get too few samples (with known class counts).
    """
    spec = dict(spec)
    K, N, C, by = spec["num_clusters"], spec["clients"], info.num_classes, spec["by"]
    if K > N:
        raise ConfigError(f"{key}.num_clusters", f"{K} clusters > {N} clients", allowed=range(1, N + 1))
    for name, owner in (("groups", "labels"), ("angles", "rotate")):
        if name in spec and by != owner:
            raise ConfigError(f"{key}.{name}", f"only used with by: {owner} (by is {by!r})")
    need = min_client_size(spec["test_fraction"])
    if by == "labels":
        if "groups" not in spec:
            if K > C:
                raise ConfigError(
                    f"{key}.num_clusters", f"{K} label groups > {C} classes", allowed=range(1, C + 1)
                )
            spec["groups"] = [g.tolist() for g in np.array_split(np.arange(C), K)]
        groups = spec["groups"]
        flat = [label for g in groups for label in g]
        if len(groups) != K or any(not g for g in groups):
            raise ConfigError(
                f"{key}.groups", f"needs {K} non-empty label lists (one per cluster), got {groups}"
            )
        if any(not 0 <= label < C for label in flat) or len(set(flat)) != len(flat):
            raise ConfigError(
                f"{key}.groups", f"labels must be distinct and in 0..{C - 1}, got {groups}", allowed=range(C)
            )
        if info.class_counts is not None:
            for c, g in enumerate(groups):
                members = len(cluster_clients(N, K, c))
                smallest = int(split_sizes(int(info.class_counts[g].sum()), members).min())
                if smallest < need:
                    raise ConfigError(
                        f"{key}.clients",
                        f"cluster {c} (labels {g}) gives its {members} clients only {smallest} samples each; "
                        f"each needs >= {need}",
                    )
    elif by == "rotate":
        if len(info.sample_shape) < 2:
            raise ConfigError(
                f"{key}.by",
                f"rotate needs image samples; {info.name!r} samples have shape {info.sample_shape}",
                allowed=("labels", "permute_labels", "permute_pixels"),
            )
        spec.setdefault("angles", [c * 360.0 / K for c in range(K)])
        if len(spec["angles"]) != K:
            raise ConfigError(f"{key}.angles", f"needs {K} angles (one per cluster), got {spec['angles']}")
    elif by == "permute_labels" and K > math.factorial(C):
        raise ConfigError(
            f"{key}.num_clusters",
            f"only {math.factorial(C)} distinct label permutations of {C} classes",
            allowed=range(1, math.factorial(C) + 1),
        )
    return spec


def check(spec: dict, info: DatasetInfo, seed: int, key: str) -> None:
    """Sizes do not depend on the seed: nothing to check."""


def permutation_seeds(by: str, num_clusters: int, size: int, seed: int) -> list[int]:
    """Seeds for clusters 1..K-1 whose permutations (of ``size`` items) are all distinct and not the
    identity; drawn from the ``transforms`` stream of ``seed``."""
    rng = stream(seed, "transforms")
    make = pixel_permutation if by == "permute_pixels" else label_permutation
    seen = {tuple(range(size))}
    seeds: list[int] = []
    for _ in range(MAX_SEED_TRIES):
        if len(seeds) == num_clusters - 1:
            break
        s = int(rng.integers(0, 2**31 - 1))
        perm = tuple(make(s, size).tolist())
        if perm not in seen:
            seen.add(perm)
            seeds.append(s)
    if len(seeds) < num_clusters - 1:
        raise ValueError(f"could not draw {num_clusters - 1} distinct permutations of {size} items")
    return seeds


def assign(spec: dict, y: np.ndarray, users: np.ndarray | None, info: DatasetInfo, seed: int, key: str):
    """Split the samples, record the cluster of each client and the transform of each cluster."""
    K, N, by = spec["num_clusters"], spec["clients"], spec["by"]
    rng = stream(seed, "assign")
    clients: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * N
    if by == "labels":
        for c, group in enumerate(spec["groups"]):
            members = cluster_clients(N, K, c)
            idx = rng.permutation(np.flatnonzero(np.isin(y, group)))
            for u, part in zip(members, np.array_split(idx, len(members)), strict=True):
                clients[u] = part.astype(np.int64)
        transforms = [{"kind": "none"} for _ in range(K)]
    else:
        clients = [p.astype(np.int64) for p in np.array_split(rng.permutation(y.size), N)]
        if by == "rotate":
            transforms = [{"kind": "rotate", "angle": float(a)} for a in spec["angles"]]
        else:
            size = info.num_classes if by == "permute_labels" else int(np.prod(info.sample_shape))
            seeds = permutation_seeds(by, K, size, seed)
            transforms = [{"kind": "none"}] + [{"kind": by, "seed": s} for s in seeds]
    cluster = np.arange(N, dtype=np.int64) % K
    return Assignment(clients=clients, cluster=cluster, transforms=transforms)
