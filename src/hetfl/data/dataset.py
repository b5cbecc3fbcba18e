"""The in-memory dataset container, its cheap summary, and pixel normalization.

A :class:`Dataset` is one pool of samples (for MNIST the 60k train and 10k test images together); the
partition decides which client trains and tests on which sample. :class:`DatasetInfo` is what the
workflow needs to validate a partition before any data is loaded.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

NORMALIZATIONS = ("none", "unit", "zscore")
_CHUNK = 8192  # samples per chunk when normalizing


@dataclass
class Dataset:
    """One pool of samples, already normalized.

    Attributes:
        name: the dataset's config name (``mnist5k``, ``synthetic``, ...).
        x: float32 ``[n, *sample_shape]`` (float64 with ``float64=True``); images are ``[n, 1, H, W]``,
            Synthetic is ``[n, dimension]``.
        y: int64 ``[n]``, labels in ``0 .. num_classes - 1`` (all 0 for a regression dataset: partitions
            use labels, and a regression dataset has one "class").
        num_classes: number of classes (1 for regression).
        users: int64 ``[n]``, the natural client (user) of each sample, for datasets that have users
            (Synthetic); ``None`` otherwise.
        targets: float ``[n, d_out]`` regression targets, or ``None`` for a classification dataset.
        user_clusters: int64 ``[num_users]``, the ground-truth cluster of each user (the natural split
            records it as the client's cluster), or ``None``.
        split: int8 ``[n]``, the data's own train/test division (0 train, 1 test; LEAF's train and test
            files), kept by the ``natural`` partition; ``None`` when the partition draws it.
        float64: keep ``x`` and ``targets`` in float64 (exact-math experiments); else float32.
        standardize: ``x`` holds features that each training job z-scores with the per-feature mean and std
            of its partition's training samples (``hetfl.engine.federation.Federation.from_partition``: no
            test or validation sample enters the statistics); False: ``x`` is used as it is.
    """

    name: str
    x: np.ndarray
    y: np.ndarray
    num_classes: int
    users: np.ndarray | None = None
    targets: np.ndarray | None = None
    user_clusters: np.ndarray | None = None
    split: np.ndarray | None = None
    float64: bool = False
    standardize: bool = False

    def __post_init__(self) -> None:
        precision = np.float64 if self.float64 else np.float32
        self.x = np.asarray(self.x, dtype=precision)
        self.y = np.asarray(self.y, dtype=np.int64)
        if self.targets is not None:
            self.targets = np.asarray(self.targets, dtype=precision)
            self.targets = self.targets.reshape(len(self.targets), -1)
            if self.targets.shape[0] != self.x.shape[0]:
                raise ValueError(f"targets {self.targets.shape} and x {self.x.shape} differ in samples")
        if self.user_clusters is not None:
            self.user_clusters = np.asarray(self.user_clusters, dtype=np.int64)
        if self.x.ndim < 1 or self.y.shape != (self.x.shape[0],):
            raise ValueError(f"x {self.x.shape} and y {self.y.shape} do not describe the same samples")
        if self.y.size and (self.y.min() < 0 or self.y.max() >= self.num_classes):
            raise ValueError(f"labels must lie in 0..{self.num_classes - 1}")
        if self.users is not None:
            self.users = np.asarray(self.users, dtype=np.int64)
            if self.users.shape != self.y.shape:
                raise ValueError(f"users {self.users.shape} must have the shape of y {self.y.shape}")
        if self.split is not None:
            self.split = np.asarray(self.split, dtype=np.int8)
            if self.split.shape != self.y.shape or not np.isin(self.split, (0, 1)).all():
                raise ValueError(f"split must be 0 (train) or 1 (test) per sample, shape {self.y.shape}")

    def __len__(self) -> int:
        return int(self.y.shape[0])

    @property
    def task(self) -> str:
        """``"regression"`` when the dataset has float ``targets``, else ``"classification"``."""
        return "classification" if self.targets is None else "regression"

    @property
    def num_outputs(self) -> int:
        """Model outputs: the number of classes, or the target dimension for regression."""
        return self.num_classes if self.targets is None else int(self.targets.shape[1])

    @property
    def sample_shape(self) -> tuple[int, ...]:
        """Shape of one sample, e.g. ``(1, 28, 28)`` or ``(60,)``."""
        return tuple(int(s) for s in self.x.shape[1:])

    def save(self, path: str | os.PathLike) -> None:
        """Write the dataset to one uncompressed ``.npz`` file (atomically: temp file, then rename)."""
        arrays = {
            "name": np.array(self.name),
            "x": self.x,
            "y": self.y,
            "num_classes": np.array(self.num_classes, dtype=np.int64),
        }
        for name in ("users", "targets", "user_clusters", "split"):
            if getattr(self, name) is not None:
                arrays[name] = getattr(self, name)
        if self.standardize:  # written only when set: the other datasets' files keep their bytes
            arrays["standardize"] = np.array(True)
        atomic_savez(path, arrays)

    @classmethod
    def load(cls, path: str | os.PathLike) -> Dataset:
        """Read a file written by :meth:`save` (``allow_pickle=False``: nothing is unpickled)."""
        with np.load(path, allow_pickle=False) as f:
            return cls(
                name=str(f["name"]),
                x=f["x"],
                y=f["y"],
                num_classes=int(f["num_classes"]),
                **{k: f[k] for k in ("users", "targets", "user_clusters", "split") if k in f.files},
                float64=f["x"].dtype == np.float64,
                standardize="standardize" in f.files and bool(f["standardize"]),
            )


@dataclass(frozen=True)
class DatasetInfo:
    """What is known about a dataset without loading it (see ``hetfl.data.dataset_info``).

    Attributes:
        name: the dataset's config name.
        num_samples: total number of samples in the pool.
        num_classes: number of classes.
        class_counts: int64 ``[num_classes]`` samples per label, or ``None`` when unknown without
            generating the data (Synthetic).
        sample_shape: shape of one sample.
        num_users: number of natural users (Synthetic), else ``None``.
        user_counts: int64 ``[num_users]`` samples per user, or ``None``.
        task: ``classification`` or ``regression``.
        num_outputs: model outputs (classes, or the target dimension).
        user_clusters: int64 ``[num_users]`` ground-truth cluster per user, or ``None``.
        predefined_split: the data carry their own train/test division (``Dataset.split``).
    """

    name: str
    num_samples: int
    num_classes: int
    class_counts: np.ndarray | None
    sample_shape: tuple[int, ...]
    num_users: int | None = None
    user_counts: np.ndarray | None = None
    task: str = "classification"
    num_outputs: int | None = None
    user_clusters: np.ndarray | None = None
    predefined_split: bool = False

    @classmethod
    def from_dataset(cls, ds: Dataset) -> DatasetInfo:
        """The exact info of a loaded dataset (or of a labels-only stand-in)."""
        user_counts = None if ds.users is None else np.bincount(ds.users)
        return cls(
            name=ds.name,
            num_samples=len(ds),
            num_classes=ds.num_classes,
            class_counts=np.bincount(ds.y, minlength=ds.num_classes).astype(np.int64),
            sample_shape=ds.sample_shape,
            num_users=None if user_counts is None else int(user_counts.size),
            user_counts=user_counts,
            task=ds.task,
            num_outputs=ds.num_outputs,
            user_clusters=ds.user_clusters,
            predefined_split=ds.split is not None,
        )


def normalize_pixels(raw: np.ndarray, method: str, max_value: float) -> np.ndarray:
    """Normalize raw pixel values; returns float32 of the same shape.

    Args:
        raw: ``[n, ...]`` raw pixels (MNIST 0..255, digits 0..16).
        method: ``zscore`` -- pFedMe's per-pixel z-score over all ``n`` samples,
            ``(x - mean) / (std + 0.001)`` (docs/papers/pfedme.md §4.2; constant pixels become 0);
            ``unit`` -- ``x / max_value``; ``none`` -- unchanged.
        max_value: the nominal maximum raw value, used by ``unit``.

    Raises:
        ValueError: unknown method.
    """
    if method not in NORMALIZATIONS:
        raise ValueError(f"unknown normalization {method!r}; allowed: {', '.join(NORMALIZATIONS)}")
    raw = np.asarray(raw)
    flat = raw.reshape(raw.shape[0], -1)
    shift, scale = np.zeros(flat.shape[1]), np.ones(flat.shape[1])
    if method == "zscore":
        shift, scale = zscore_stats(raw)
    elif method == "unit":
        scale = scale * float(max_value)
    return standardized(raw, shift, scale, np.float32)


def zscore_stats(x: np.ndarray, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature ``(mean, std + 0.001)`` of the rows ``rows`` of ``x`` (all rows when None): two passes
    in float64, chunked, so that no float64 copy of the pool is made; the population std (ddof 0).

    Args:
        x: ``[n, ...]``; a feature is one entry of a flattened sample.
        rows: int ``[m]``, the samples the statistics are taken over (e.g. a partition's training samples).

    Returns:
        float64 ``[d]`` means and ``[d]`` scales, d the features of one sample.
    """
    flat = x.reshape(x.shape[0], -1)
    n = flat.shape[0] if rows is None else len(rows)
    take = (lambda i: flat[i : i + _CHUNK]) if rows is None else (lambda i: flat[rows[i : i + _CHUNK]])
    chunks = range(0, n, _CHUNK)
    shift = sum((take(i).sum(axis=0, dtype=np.float64) for i in chunks), np.zeros(flat.shape[1])) / n
    sq = sum((((take(i) - shift) ** 2).sum(axis=0) for i in chunks), np.zeros_like(shift))
    return shift, np.sqrt(sq / n) + 0.001


def standardized(x: np.ndarray, shift: np.ndarray, scale: np.ndarray, dtype=None) -> np.ndarray:
    """``(x - shift) / scale`` per feature, chunked, as ``dtype`` (default: ``x``'s); same shape as ``x``."""
    flat = x.reshape(x.shape[0], -1)
    out = np.empty(flat.shape, dtype=dtype or x.dtype)
    for i in range(0, flat.shape[0], _CHUNK):
        out[i : i + _CHUNK] = (flat[i : i + _CHUNK] - shift) / scale
    return out.reshape(x.shape)


def atomic_savez(path: str | os.PathLike, arrays: dict[str, np.ndarray]) -> None:
    """``np.savez`` to exactly ``path`` through a temporary file in the same folder, then rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
