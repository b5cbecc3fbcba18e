"""Turn a user's arrays (features, labels, optional clients, clusters and train/test division) into a
:class:`~hetfl.data.dataset.Dataset`, with checks that name the config key at fault.

Shared by the datasets that read a user's files (``npz``, ``leaf``). Their common options:

- ``task``: ``auto`` (integer labels: classification; float labels: regression), ``classification`` or
  ``regression``;
- ``num_classes``: classes of a classification task (null: the largest label + 1);
- ``normalize``: ``none`` (the features as given) or ``zscore`` (per feature, over all samples:
  ``(x - mean) / (std + 0.001)``, pFedMe's normalization of MNIST);
- ``sample_shape``: the shape of one sample, e.g. ``[1, 28, 28]`` for flattened 28 × 28 images a CNN
  should see as images (null: as stored).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hetfl.data.checks import Option, choice_check, int_check, path_check
from hetfl.data.dataset import Dataset, DatasetInfo, normalize_pixels
from hetfl.errors import ConfigError

TASKS = ("auto", "classification", "regression")


def _shape_check(value: Any, key: str) -> list[int]:
    if not (isinstance(value, list) and value and all(type(v) is int and v > 0 for v in value)):
        raise ConfigError(key, f"expected a list of positive integers, e.g. [1, 28, 28], got {value!r}")
    return list(value)


def common_options() -> dict[str, Option]:
    """The options every user-file dataset takes besides its file paths (module docstring)."""
    return {
        "task": Option("auto", choice_check(*TASKS)),
        "num_classes": Option(None, int_check(lo=1)),
        "normalize": Option("none", choice_check("none", "zscore")),
        "sample_shape": Option(None, _shape_check),
    }


def path_option() -> Option:
    """A required file path."""
    from hetfl.data.checks import REQUIRED

    return Option(REQUIRED, path_check)


def existing_file(spec: dict, option: str, key: str) -> Path:
    """The file of option ``option``, which must exist.

    Raises:
        ConfigError: naming ``key.option`` when there is no such file.
    """
    path = Path(spec[option])
    if not path.is_file():
        raise ConfigError(f"{key}.{option}", f"no file {str(path)!r} (relative paths start at {os.getcwd()})")
    return path


def file_stamp(path: Path) -> tuple[str, int, int]:
    """(resolved path, size, modification time in ns): a cache key that changes with the file."""
    stat = path.stat()
    return str(path.resolve()), stat.st_size, stat.st_mtime_ns


@dataclass
class Labels:
    """The checked labels and per-sample annotations of a user's data (see :func:`check_labels`)."""

    task: str
    y: np.ndarray  # int64 [n]: labels (zeros for regression)
    num_classes: int  # 1 for regression
    targets: np.ndarray | None  # float [n, K] for regression
    users: np.ndarray | None  # int64 [n], renumbered 0..U-1
    user_clusters: np.ndarray | None  # int64 [U]
    split: np.ndarray | None  # int8 [n]: 0 train, 1 test


def check_labels(
    spec: dict,
    key: str,
    y: np.ndarray,
    clients: np.ndarray | None = None,
    clusters: np.ndarray | None = None,
    split: np.ndarray | None = None,
    where: str = "path",
) -> Labels:
    """Check a user's labels and per-sample annotations.

    Args:
        y: ``[n]`` integer labels (classification) or ``[n]`` / ``[n, K]`` float targets (regression);
            the option ``task`` (``auto``: integer labels are classification) decides.
        clients: ``[n]`` integer natural client of each sample (any ids: renumbered 0..U-1 in increasing
            order), or None; clusters: ``[n]`` integer cluster of each sample, constant within a client
            (recorded as the client's ground-truth cluster), or None; split: ``[n]`` 0 (train) / 1 (test),
            the data's own division, or None.
        where: the option naming the file(s), for error messages (``key.where``).

    Raises:
        ConfigError: naming ``key.where`` (or ``key.num_classes``): negative or non-integer labels for
            classification, non-finite regression targets, arrays of another length than ``y``, clusters
            without clients or not constant within a client, a split other than 0/1.
    """
    at = f"{key}.{where}"
    y = np.asarray(y)
    n = len(y)
    users = None if clients is None else _renumber(np.asarray(clients), n, at)
    user_clusters = None
    if clusters is not None:
        if users is None:
            raise ConfigError(at, "cluster needs client: a cluster is recorded per natural client")
        user_clusters = _per_user(np.asarray(clusters), users, n, at)
    if split is not None:
        split = np.asarray(split)
        if split.shape != (n,) or not np.isin(split, (0, 1)).all():
            raise ConfigError(at, "split must hold 0 (train) or 1 (test) for every sample")
        split = split.astype(np.int8)
    task = spec.get("task", "auto")
    if task == "auto":
        task = "classification" if np.issubdtype(y.dtype, np.integer) or y.dtype == bool else "regression"
    if task == "regression":
        if not np.issubdtype(y.dtype, np.number) or not np.isfinite(y).all():
            raise ConfigError(at, "regression targets must be finite numbers")
        return Labels(task, np.zeros(n, np.int64), 1, y.reshape(n, -1), users, user_clusters, split)
    integral = np.issubdtype(y.dtype, np.integer) or (
        np.issubdtype(y.dtype, np.floating) and np.isfinite(y).all() and (y == np.round(y)).all()
    )
    if not integral or y.ndim != 1 or (n and y.min() < 0):
        raise ConfigError(
            at, f"classification labels must be one non-negative integer per sample, got {y.dtype} {y.shape}"
        )
    classes = int(y.max()) + 1 if n else 1
    if spec.get("num_classes") is not None:
        if spec["num_classes"] < classes:
            raise ConfigError(
                f"{key}.num_classes", f"{spec['num_classes']}, but the labels go up to {classes - 1}"
            )
        classes = spec["num_classes"]
    return Labels(task, y.astype(np.int64), classes, None, users, user_clusters, split)


def sample_shape(spec: dict, key: str, stored: tuple[int, ...], where: str = "path") -> tuple[int, ...]:
    """The shape of one sample: ``sample_shape`` if given (it must hold ``stored``), else ``stored``.

    Raises:
        ConfigError: ``key.where`` when samples have no feature axis; ``key.sample_shape`` when its size
            differs from the stored sample's.
    """
    if not stored:
        raise ConfigError(f"{key}.{where}", "x must be [n, ...] with at least one feature per sample")
    if spec.get("sample_shape") is None:
        return tuple(stored)
    shape = tuple(spec["sample_shape"])
    if int(np.prod(shape)) != int(np.prod(stored)):
        raise ConfigError(
            f"{key}.sample_shape", f"{list(shape)} does not hold a sample of shape {list(stored)}"
        )
    return shape


def info_from(name: str, spec: dict, key: str, stored_shape: tuple[int, ...], labels: Labels) -> DatasetInfo:
    """The info of a user's dataset from its labels and the stored shape of one sample (x unread)."""
    user_counts = None if labels.users is None else np.bincount(labels.users)
    return DatasetInfo(
        name=name,
        num_samples=len(labels.y),
        num_classes=labels.num_classes,
        class_counts=np.bincount(labels.y, minlength=labels.num_classes).astype(np.int64),
        sample_shape=sample_shape(spec, key, stored_shape),
        num_users=None if user_counts is None else int(user_counts.size),
        user_counts=user_counts,
        task=labels.task,
        num_outputs=labels.num_classes if labels.targets is None else int(labels.targets.shape[1]),
        user_clusters=labels.user_clusters,
        predefined_split=labels.split is not None,
    )


def build_dataset(
    name: str, spec: dict, key: str, x: np.ndarray, labels: Labels, where: str = "path"
) -> Dataset:
    """The dataset of a user's features and checked labels.

    Args:
        x: ``[n, ...]`` numeric features, one row per label.

    Raises:
        ConfigError: naming ``key.where``: x not numeric, of another length than the labels, or holding
            NaN/inf; ``key.sample_shape`` of the wrong size.
    """
    x = np.asarray(x)
    n = len(labels.y)
    if not np.issubdtype(x.dtype, np.number) or x.ndim < 2 or len(x) != n:
        raise ConfigError(
            f"{key}.{where}",
            f"x must be numeric [n, ...] with one row per label; got {x.dtype} {x.shape}, {n} labels",
        )
    if not np.isfinite(x).all():
        raise ConfigError(f"{key}.{where}", "x holds NaN or infinite values")
    x = x.reshape(n, *sample_shape(spec, key, tuple(x.shape[1:]), where))
    float64 = x.dtype == np.float64
    if spec.get("normalize") == "zscore":
        x = normalize_pixels(x, "zscore", 1.0)
    return Dataset(
        name,
        x,
        labels.y,
        labels.num_classes,
        labels.users,
        labels.targets,
        labels.user_clusters,
        labels.split,
        float64,
    )


def _renumber(ids: np.ndarray, n: int, where: str) -> np.ndarray:
    if ids.shape != (n,) or not np.issubdtype(ids.dtype, np.integer):
        raise ConfigError(where, f"client must be one integer per sample, got {ids.dtype} {ids.shape}")
    return np.unique(ids, return_inverse=True)[1].astype(np.int64)


def _per_user(clusters: np.ndarray, users: np.ndarray, n: int, where: str) -> np.ndarray:
    if clusters.shape != (n,) or not np.issubdtype(clusters.dtype, np.integer) or (n and clusters.min() < 0):
        raise ConfigError(where, "cluster must be one non-negative integer per sample")
    per_user = np.full(int(users.max()) + 1, -1, dtype=np.int64)
    per_user[users] = clusters
    if (per_user[users] != clusters).any():
        raise ConfigError(where, "cluster must be the same for every sample of a client")
    return per_user
