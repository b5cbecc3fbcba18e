"""``pathological``: each client holds ``k`` labels, pFedMe's pattern (docs/papers/pfedme.md §4.2, §4.4).

Client u holds labels ``{(u + j) mod C : j < k}`` (``k = labels_per_client``); label l's *holders* are
the clients holding it, in client order. How a label's samples are divided among its holders:

``sizes: pfedme`` (default)
    pFedMe's ``ram_dom_gen``: with ``h`` holders and ``n_l`` samples, draw ``h - 1`` parts, each
    ``randint(rest // (h + 1), rest // 2)`` of what is left, the last part being the rest; labels in
    order 0..C-1 (labels nobody holds draw nothing), from ``np.random.RandomState(seed)`` (the official
    ``np.random.seed(1)``). Each label's samples are taken in dataset order ("the first n images").
    The per-client train/test shuffle is ``random.seed(seed); random.shuffle`` per client in client
    order, as in the official script.

    - ``overlap: disjoint`` (default; pfedme.md §4.4): part i of label l goes to its i-th holder, at
      cumulative offsets, so clients are disjoint and every sample is used. With MNIST's counts and
      seed 1 the client sizes are 5112 4304 3700 ... (pfedme.md §4.4); with mnist5k 309 307 376 ...
      (pfedme.md §6.2).
    - ``overlap: faithful`` (pfedme.md §4.2): the paper-time generator with its two bugs. The sizes are read
      from the *interleaved* list ``[part i of label 0..C-1 for i in 0..h-1]`` in the order the
      (client, label) pairs are visited, and client u takes ``label_l[start_l : n]`` where ``start_l``
      is 0 or 1: the official offsets array was the boolean mask ``target == C - 1`` left over from a
      loop, so ``start_l`` starts as ``y[l] == C - 1`` (true for l = 4 in MNIST's order) and becomes
      1 after the label's first use. A pair is skipped when ``start_l + n >= n_l``. Clients that share
      a label get nested prefixes of the same images. With MNIST's counts this reproduces the table of
      pfedme.md §4.2 (train sizes 1165..3834, 23,536 distinct images, 89.1 % of test samples in another
      client's train set). Needs every label to have the same number of holders.

``sizes: equal``
    Each label's samples are shuffled (``assign`` stream) and cut into near-equal parts for its holders.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np

from hetfl.config_options import option
from hetfl.data.dataset import DatasetInfo
from hetfl.data.partitioners.common import Assignment, PartitionOptions, min_client_size, split_sizes, stream
from hetfl.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class Options(PartitionOptions):
    """The common options, ``labels_per_client``, ``sizes`` and ``overlap`` (module docstring)."""

    labels_per_client: int = option(2, lo=1)
    sizes: Literal["equal", "pfedme"] = "pfedme"
    overlap: Literal["disjoint", "faithful"] = "disjoint"


def client_labels(client: int, labels_per_client: int, num_classes: int) -> list[int]:
    """Labels of a client: ``[(client + j) % C for j < k]`` in this order."""
    return [(client + j) % num_classes for j in range(labels_per_client)]


def label_holders(clients: int, labels_per_client: int, num_classes: int) -> list[list[int]]:
    """Per label, the clients holding it, in client order."""
    holders: list[list[int]] = [[] for _ in range(num_classes)]
    for u in range(clients):
        for label in client_labels(u, labels_per_client, num_classes):
            holders[label].append(u)
    return holders


class _Infeasible(Exception):
    """``ram_dom_gen`` cannot split a label: too few samples for its holders."""


def ram_dom_gen(total: int, size: int, rs: np.random.RandomState) -> list[int]:
    """pFedMe's ``ram_dom_gen``: split ``total`` into ``size`` random positive-ish parts
    (docs/papers/pfedme.md §4.2).

    Raises:
        _Infeasible: ``randint``'s range is empty (``rest // (size + 1) >= rest // 2``).
    """
    parts = []
    for _ in range(size - 1):
        lo, hi = total // (size + 1), total // 2
        if lo >= hi:
            raise _Infeasible(total)
        value = int(rs.randint(lo, hi))
        parts.append(value)
        total -= value
    parts.append(int(total))
    return parts


def pfedme_parts(class_counts, holders: list[list[int]], seed: int, key: str) -> list[list[int]]:
    """Per label, its ``ram_dom_gen`` parts (empty for labels nobody holds).

    Raises:
        ConfigError: a label has too few samples for its holders (``key.labels_per_client``).
    """
    rs = np.random.RandomState(seed)
    parts: list[list[int]] = []
    for label, (n_l, hold) in enumerate(zip(class_counts, holders, strict=True)):
        if not hold:
            parts.append([])
            continue
        try:
            parts.append(ram_dom_gen(int(n_l), len(hold), rs))
        except _Infeasible:
            raise ConfigError(
                f"{key}.labels_per_client",
                f"label {label} has {int(n_l)} samples, too few for pFedMe's random split into "
                f"{len(hold)} parts; lower {key}.labels_per_client or {key}.clients, or use sizes: equal",
            ) from None
    return parts


def _faithful_pairs(spec, class_counts, parts, start):
    """The faithful generator's (client, label, lo, hi) slices of ``label``'s samples in dataset order."""
    C = len(class_counts)
    held = [label for label in range(C) if parts[label]]
    interleaved = [parts[label][i] for i in range(len(parts[held[0]])) for label in held]
    start = list(start)
    pairs, count = [], 0
    for u in range(spec["clients"]):
        for label in client_labels(u, spec["labels_per_client"], C):
            n = interleaved[count]
            count += 1
            if start[label] + n < class_counts[label]:
                pairs.append((u, label, start[label], n))
                start[label] = int(start[label] + n != 0)  # `idx[l] += n` on a bool array
    return pairs


def _disjoint_pairs(spec, class_counts, parts, holders):
    pairs = []
    for label, hold in enumerate(holders):
        offsets = np.concatenate([[0], np.cumsum(parts[label])]) if hold else []
        for i, u in enumerate(hold):
            pairs.append((u, label, int(offsets[i]), int(offsets[i + 1])))
    return pairs


def _equal_pairs(class_counts, holders):
    pairs = []
    for label, hold in enumerate(holders):
        if hold:
            ends = np.cumsum(split_sizes(int(class_counts[label]), len(hold)))
            starts = np.concatenate([[0], ends[:-1]])
            pairs += [(u, label, int(a), int(b)) for u, a, b in zip(hold, starts, ends, strict=True)]
    return pairs


def _client_sizes(spec, class_counts, seed, key, start=None) -> np.ndarray:
    C = len(class_counts)
    holders = label_holders(spec["clients"], spec["labels_per_client"], C)
    if spec["sizes"] == "equal":
        pairs = _equal_pairs(class_counts, holders)
    else:
        parts = pfedme_parts(class_counts, holders, seed, key)
        if spec["overlap"] == "faithful":
            pairs = _faithful_pairs(spec, class_counts, parts, start if start is not None else [1] * C)
        else:
            pairs = _disjoint_pairs(spec, class_counts, parts, holders)
    sizes = np.zeros(spec["clients"], dtype=np.int64)
    for u, _, lo, hi in pairs:
        sizes[u] += max(hi - lo, 0)
    return sizes


def _check_sizes(spec, sizes, key):
    need = min_client_size(spec["test_fraction"])
    if sizes.min() < need:
        u = int(np.argmin(sizes))
        raise ConfigError(
            f"{key}.clients",
            f"client {u} gets {int(sizes[u])} samples, fewer than the {need} needed for one train and one "
            f"test sample; lower {key}.clients or raise {key}.labels_per_client",
        )


def validate(spec: dict, key: str, info: DatasetInfo) -> dict:
    """Static checks: ``k <= C``; ``faithful`` needs ``sizes: pfedme`` and equal holder counts;
    with ``sizes: equal`` and known class counts, every client gets enough samples."""
    C = info.num_classes
    k = spec["labels_per_client"]
    if k > C:
        raise ConfigError(f"{key}.labels_per_client", f"{k} > {C} classes", allowed=range(1, C + 1))
    holders = label_holders(spec["clients"], k, C)
    if spec["overlap"] == "faithful":
        if spec["sizes"] != "pfedme":
            raise ConfigError(
                f"{key}.overlap",
                "'faithful' reproduces pFedMe's generator: needs sizes: pfedme",
                allowed=("disjoint",),
            )
        if len({len(h) for h in holders if h}) > 1:
            raise ConfigError(
                f"{key}.overlap",
                "'faithful' needs every used label held by the same number of clients "
                f"(choose {key}.clients a multiple of {C})",
                allowed=("disjoint",),
            )
    if spec["sizes"] == "equal" and info.class_counts is not None:
        _check_sizes(spec, _client_sizes(spec, info.class_counts, 0, key), key)
    return spec


def check(spec: dict, info: DatasetInfo, seed: int, key: str) -> None:
    """With known class counts, run pFedMe's size draw for this seed and check every client's size
    (for ``faithful`` with the conservative start offset 1, as the true one needs the labels)."""
    if info.class_counts is not None and spec["sizes"] == "pfedme":
        _check_sizes(spec, _client_sizes(spec, info.class_counts, seed, key), key)


def assign(spec: dict, y: np.ndarray, users: np.ndarray | None, info: DatasetInfo, seed: int, key: str):
    """Build the clients' index lists; a client's list holds its labels in ``client_labels`` order."""
    C = info.num_classes
    by_label = [np.flatnonzero(y == label) for label in range(C)]
    class_counts = np.array([b.size for b in by_label], dtype=np.int64)
    holders = label_holders(spec["clients"], spec["labels_per_client"], C)
    if spec["sizes"] == "equal":
        rng = stream(seed, "assign")
        by_label = [rng.permutation(b) if hold else b for b, hold in zip(by_label, holders, strict=True)]
        pairs = _equal_pairs(class_counts, holders)
        shuffle = "numpy"
    else:
        parts = pfedme_parts(class_counts, holders, seed, key)
        if spec["overlap"] == "faithful":
            start = [int(y.size > label and y[label] == C - 1) for label in range(C)]
            pairs = _faithful_pairs(spec, class_counts, parts, start)
        else:
            pairs = _disjoint_pairs(spec, class_counts, parts, holders)
        shuffle = "python"
    slices: dict[tuple[int, int], np.ndarray] = {}
    for u, label, lo, hi in pairs:
        slices[(u, label)] = by_label[label][lo:hi]
    clients = []
    for u in range(spec["clients"]):
        own = [
            slices[(u, label)]
            for label in client_labels(u, spec["labels_per_client"], C)
            if (u, label) in slices
        ]
        clients.append(np.concatenate(own).astype(np.int64) if own else np.zeros(0, dtype=np.int64))
    return Assignment(clients=clients, shuffle=shuffle)
