"""The partition file: which samples each client trains and tests on (indices into one dataset).

Written by the ``partition`` stage (``clients.npz``), read by every training job; kept apart from the
partition schemes (``hetfl.data.partition``) so that a training job's code fingerprint does not
include them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import numpy as np

from hetfl.data.dataset import atomic_savez
from hetfl.ids import canonical_json


@dataclass
class Partition:
    """Per-client train, test (and validation) indices into one dataset, and the clients' clusters.

    A client's train, validation and test indices are disjoint. Different clients' indices are disjoint too, except
    under ``pathological`` with ``overlap: faithful``, which reproduces pFedMe's overlapping split.

    Attributes:
        train: per client, int64 indices into the dataset.
        test: per client, int64 indices into the dataset.
        cluster: int64 ``[num_clients]`` cluster id of each client (all 0 without clusters).
        transforms: per cluster id, the transform its clients' data get (see ``hetfl.data.transforms``),
            e.g. ``{"kind": "none"}`` or ``{"kind": "rotate", "angle": 90.0}``.
        val: per client, int64 validation indices (held out of training, ``val_fraction``), or ``None``.
    """

    train: list[np.ndarray]
    test: list[np.ndarray]
    cluster: np.ndarray
    transforms: list[dict]
    val: list[np.ndarray] | None = None

    def __post_init__(self) -> None:
        self.train = [np.asarray(t, dtype=np.int64) for t in self.train]
        self.test = [np.asarray(t, dtype=np.int64) for t in self.test]
        if self.val is not None:
            self.val = [np.asarray(t, dtype=np.int64) for t in self.val]
            if len(self.val) != len(self.train):
                raise ValueError("val must have one entry per client")
        self.cluster = np.asarray(self.cluster, dtype=np.int64)
        if len(self.train) != len(self.test) or self.cluster.shape != (len(self.train),):
            raise ValueError("train, test and cluster must have one entry per client")
        if self.cluster.size and (self.cluster.min() < 0 or self.cluster.max() >= len(self.transforms)):
            raise ValueError("every cluster id needs a transform")

    @property
    def num_clients(self) -> int:
        """Number of clients N."""
        return len(self.train)

    def save(self, path: str | os.PathLike) -> None:
        """Write one ``.npz`` (atomically): the concatenated indices with ``[N + 1]`` offsets per split
        (``val_*`` only with validation data), ``cluster``, and ``transforms`` as an array of JSON strings
        (no pickles)."""
        arrays = {
            "cluster": self.cluster,
            "transforms": np.array([canonical_json(t) for t in self.transforms]),
        }
        splits = [("train", self.train), ("test", self.test)] + (
            [("val", self.val)] if self.val is not None else []
        )
        for split, parts in splits:
            arrays[f"{split}_indices"] = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
            arrays[f"{split}_offsets"] = np.concatenate([[0], np.cumsum([p.size for p in parts])]).astype(
                np.int64
            )
        atomic_savez(path, arrays)

    @classmethod
    def load(cls, path: str | os.PathLike) -> Partition:
        """Read a file written by :meth:`save` (``allow_pickle=False``)."""
        with np.load(path, allow_pickle=False) as f:
            splits = {}
            for split in ("train", "test", "val"):
                if f"{split}_indices" not in f.files:
                    continue
                idx, off = f[f"{split}_indices"], f[f"{split}_offsets"]
                splits[split] = [idx[a:b] for a, b in zip(off[:-1], off[1:], strict=True)]
            transforms = [json.loads(s) for s in f["transforms"].tolist()]
            return cls(
                train=splits["train"],
                test=splits["test"],
                cluster=f["cluster"],
                transforms=transforms,
                val=splits.get("val"),
            )
