"""Turn a user's arrays (features, labels, optional clients, clusters and train/test division) into a
:class:`~hetfl.data.dataset.Dataset`, with checks that name the config key at fault.

Shared by the datasets that read a user's files (``npz``, ``leaf``). Their common options:

- ``task``: ``auto`` (integer labels: classification; numbers with fractions: regression; float labels
  that are mostly whole numbers are an error asking for the task), ``classification`` or ``regression``;
- ``num_classes``: classes of a classification task (null: the largest label + 1; refused for regression);
- ``normalize``: ``none`` (the features as given), ``zscore`` (per feature, ``(x - mean) / (std + 0.001)``
  with the mean and std of the training samples only: each training job computes them over its partition's
  training samples, so no test or validation sample informs the training data;
  ``Dataset.standardize``) or ``zscore_pooled`` (the same over all samples, test included, in the data job:
  pFedMe's normalization of MNIST, its official code's protocol);
- ``sample_shape``: the shape of one sample, e.g. ``[1, 28, 28]`` for flattened 28 × 28 images a CNN
  should see as images (null: as stored);
- ``min_user_samples``: drop the natural users (clients) with fewer than this many train or test samples
  (the data's own division; without one, fewer samples in all), LEAF's practice (null: keep every user;
  needs natural users).

Errors name the sample or user at fault: a dataset passes ``locate`` (sample index -> the option of its
file and a description, e.g. ``'train.json': user 'u3', sample 4``) and ``names`` (user id -> its name).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from hetfl.config_options import REQUIRED, ConfigOptions, option
from hetfl.data.checks import path_check
from hetfl.data.dataset import Dataset, DatasetInfo, normalize_pixels
from hetfl.errors import ConfigError

TASKS = ("auto", "classification", "regression")

Locate = Callable[[int], tuple[str, str]]
"""Sample index (in the file's order) -> (the option naming its file, a description of the sample)."""


def _shape_check(value: Any, key: str) -> list[int]:
    if not (isinstance(value, list) and value and all(type(v) is int and v > 0 for v in value)):
        raise ConfigError(key, f"expected a list of positive integers, e.g. [1, 28, 28], got {value!r}")
    return list(value)


@dataclasses.dataclass(frozen=True)
class UserFileOptions(ConfigOptions):
    """The options every user-file dataset takes besides its file paths (module docstring); a dataset's
    ``Options`` derives from it and adds its paths (:func:`path_option`)."""

    task: Literal[TASKS] = "auto"
    num_classes: int | None = option(None, lo=1)
    normalize: Literal["none", "zscore", "zscore_pooled"] = "none"
    sample_shape: list | None = option(None, check=_shape_check)
    min_user_samples: int | None = option(None, lo=1)


def path_option() -> Any:
    """A field of a required file path (``hetfl.data.checks.path_check``)."""
    return option(REQUIRED, check=path_check)


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
    """The checked labels and per-sample annotations of a user's data (see :func:`check_labels`), of the
    samples kept (``keep``: those of the users ``min_user_samples`` keeps)."""

    task: str
    y: np.ndarray  # int64 [n]: labels (zeros for regression)
    num_classes: int  # 1 for regression
    targets: np.ndarray | None  # float [n, K] for regression
    users: np.ndarray | None  # int64 [n], renumbered 0..U-1
    user_clusters: np.ndarray | None  # int64 [U]
    split: np.ndarray | None  # int8 [n]: 0 train, 1 test
    keep: np.ndarray | None = None  # bool [n_file]: the file's samples kept (None: all)
    names: list[str] | None = None  # [U]: how messages name each kept user (``client 30``, ``user 'u3'``)
    notes: list[str] = field(default_factory=list)  # said at start: the task inferred, users dropped


def _default_locate(where: str) -> Locate:
    return lambda i: (where, f"sample {i}")


def check_labels(
    spec: dict,
    key: str,
    y: np.ndarray,
    clients: np.ndarray | None = None,
    clusters: np.ndarray | None = None,
    split: np.ndarray | None = None,
    where: str = "path",
    *,
    locate: Locate | None = None,
    names: Callable[[int], str] | None = None,
    num_users: int | None = None,
) -> Labels:
    """Check a user's labels and per-sample annotations; drop the users ``min_user_samples`` drops.

    Args:
        y: ``[n]`` integer labels (classification) or ``[n]`` / ``[n, K]`` float targets (regression);
            the option ``task`` decides (``auto``: integer labels are classification, numbers with
            fractions regression, float labels that are mostly whole numbers an error).
        clients: ``[n]`` integer natural client of each sample (any ids: renumbered 0..U-1 in increasing
            order), or None; clusters: ``[n]`` integer cluster of each sample, constant within a client
            (recorded as the client's ground-truth cluster), or None; split: ``[n]`` 0 (train) / 1 (test),
            the data's own division, or None.
        where: the option naming the file(s), for error messages (``key.where``).
        locate: sample index -> (option of its file, description), for errors naming a sample
            (default: ``where`` and ``sample <i>``).
        names: client id -> how messages name that user (``client 30``, ``user 'f0012'``), kept in
            :attr:`Labels.names` (default: ``user <id>``).
        num_users: the ids are 0..num_users-1 as given (a user may have no sample), not renumbered.

    Returns:
        the labels of the kept samples, with ``keep`` (which samples of the file) when users are dropped,
        and ``notes`` saying which task ``auto`` inferred and why, and how many users were dropped.

    Raises:
        ConfigError: naming ``key.where`` (or the option ``locate`` gives for a sample; or
            ``key.num_classes``, ``key.min_user_samples``): negative, fractional or mostly-whole float
            labels for classification, naming the first such sample; non-finite regression targets; arrays
            of another length than ``y``; clusters without clients or not constant within a client; a
            split other than 0/1; ``num_classes`` below the largest label or with regression;
            ``min_user_samples`` without natural users, or dropping every user.
    """
    at = f"{key}.{where}"
    locate = locate or _default_locate(where)
    y = np.asarray(y)
    n = len(y)
    ids, users = None, None
    if clients is not None:
        ids, users = _renumber(np.asarray(clients), n, at, num_users)
    user_clusters = None
    if clusters is not None:
        if users is None:
            raise ConfigError(at, "cluster needs client: a cluster is recorded per natural client")
        user_clusters = _per_user(np.asarray(clusters), users, n, at, len(ids))
    if split is not None:
        split = np.asarray(split)
        if split.shape != (n,):
            raise ConfigError(at, f"split has shape {split.shape}; it needs one 0 or 1 per sample of y ({n})")
        bad = np.flatnonzero(~np.isin(split, (0, 1)))
        if bad.size:
            raise ConfigError(
                at,
                f"split must hold 0 (train) or 1 (test) for every sample; sample {bad[0]} has {split[bad[0]]}",
            )
        split = split.astype(np.int8)
    notes = []
    task = spec.get("task", "auto")
    if task == "auto":
        task, why = _infer_task(y, locate, key)
        notes.append(f"task auto: {task}, {why} (set the dataset's task to say otherwise)")
    if task == "regression":
        if spec.get("num_classes") is not None:
            raise ConfigError(f"{key}.num_classes", "has no effect on a regression task: remove it")
        if not np.issubdtype(y.dtype, np.number):
            raise ConfigError(at, f"regression targets must be numbers, got {y.dtype}")
        bad = np.flatnonzero(~np.isfinite(y.reshape(n, -1)).all(axis=1))
        if bad.size:
            option, what = locate(int(bad[0]))
            raise ConfigError(
                f"{key}.{option}",
                f"{what}: the regression target {y[bad[0]].tolist()!r} is not finite ({bad.size} samples are not)",
            )
        labels = Labels(task, np.zeros(n, np.int64), 1, y.reshape(n, -1), users, user_clusters, split)
    else:
        labels = _classes(spec, key, y, users, user_clusters, split, locate, at)
    labels.notes = notes
    if ids is not None:
        labels.names = [names(int(i)) if names else f"user {i}" for i in ids]
    return _drop_small_users(spec, key, labels, at)


def _infer_task(y: np.ndarray, locate: Locate, key: str) -> tuple[str, str]:
    """``task: auto``: (the task, why). Integers are classes; numbers with fractions are targets.

    Raises:
        ConfigError: float labels of which at least half are whole numbers (class labels stored as
            floats, or one typo among them): the first fractional one is named, or, when all are whole,
            the choice is asked for.
    """
    if np.issubdtype(y.dtype, np.integer) or y.dtype == bool:
        return "classification", f"since y holds integers ({y.dtype})"
    if not np.issubdtype(y.dtype, np.floating) or y.ndim != 1 or not np.isfinite(y).all():
        return "regression", f"since y holds {y.dtype} values of shape {list(y.shape)}"
    fractional = y != np.round(y)
    if fractional.sum() * 2 > y.size:
        return "regression", f"since y holds {y.dtype} numbers with fractions"
    if not fractional.any():
        option, _ = locate(0)
        raise ConfigError(
            f"{key}.{option}",
            f"y is {y.dtype} but every label is a whole number, so task: auto cannot tell: set the dataset's "
            "task: classification (class labels) or task: regression (numeric targets)",
        )
    first = int(np.flatnonzero(fractional)[0])
    option, what = locate(first)
    raise ConfigError(
        f"{key}.{option}",
        f"{what}: the label {y[first].item()!r} is not a whole number, while {int((~fractional).sum())} of "
        f"{y.size} labels are: fix it, or set the dataset's task: regression if y holds numeric targets",
    )


def _classes(spec, key, y, users, user_clusters, split, locate: Locate, at: str) -> Labels:
    """The labels of a classification task: one non-negative whole number per sample."""
    n = len(y)
    if y.ndim != 1 or not (np.issubdtype(y.dtype, np.number) or y.dtype == bool):
        raise ConfigError(
            at, f"classification labels must be one non-negative integer per sample, got {y.dtype} {y.shape}"
        )
    if not (np.issubdtype(y.dtype, np.integer) or y.dtype == bool):
        bad = np.flatnonzero(~np.isfinite(y) | (y != np.round(np.nan_to_num(y))))
        if bad.size:
            option, what = locate(int(bad[0]))
            raise ConfigError(
                f"{key}.{option}",
                f"{what}: the label {y[bad[0]].item()!r} is not an integer (classification labels are "
                "non-negative integers; set the dataset's task: regression if y holds numeric targets)",
            )
    negative = np.flatnonzero(y < 0) if n else np.empty(0, np.int64)
    if negative.size:
        option, what = locate(int(negative[0]))
        raise ConfigError(
            f"{key}.{option}",
            f"{what}: the label {y[negative[0]].item()!r} is negative ({negative.size} of {n} labels are negative); "
            "classification labels are 0, 1, ..., K-1",
        )
    classes = int(y.max()) + 1 if n else 1
    if spec.get("num_classes") is not None:
        if spec["num_classes"] < classes:
            option, what = locate(int(np.argmax(y)))
            raise ConfigError(
                f"{key}.num_classes",
                f"{spec['num_classes']}, but the labels go up to {classes - 1} ({what} of {option})",
            )
        classes = spec["num_classes"]
    return Labels("classification", y.astype(np.int64), classes, None, users, user_clusters, split)


def _drop_small_users(spec: dict, key: str, labels: Labels, at: str) -> Labels:
    """``labels`` without the users that have fewer than ``min_user_samples`` train or test samples (with
    the data's own split; else samples in all), renumbered; a note says how many were dropped.

    Raises:
        ConfigError: ``key.min_user_samples`` without natural users, or when it would drop every user.
    """
    least = spec.get("min_user_samples")
    if least is None:
        return labels
    if labels.users is None:
        raise ConfigError(
            f"{key}.min_user_samples", f"has no effect: the data of {at} have no natural users (client)"
        )
    num_users = len(labels.names)
    if labels.split is None:
        counts = np.bincount(labels.users, minlength=num_users)[:, None]
        what = "samples"
    else:
        counts = np.stack(
            [np.bincount(labels.users[labels.split == s], minlength=num_users) for s in (0, 1)], axis=1
        )
        what = "train or test samples"
    kept = (counts >= least).all(axis=1)
    if not kept.any():
        raise ConfigError(
            f"{key}.min_user_samples",
            f"{least} drops every one of the {num_users} users (each has fewer than {least} {what})",
        )
    if kept.all():
        labels.notes.append(f"min_user_samples {least}: every one of the {num_users} users is kept")
        return labels
    dropped = [labels.names[u] for u in np.flatnonzero(~kept)]
    shown = ", ".join(dropped[:5]) + (f" and {len(dropped) - 5} more" if len(dropped) > 5 else "")
    labels.notes.append(
        f"min_user_samples {least}: dropped {len(dropped)} of {num_users} users with fewer than {least} {what}: "
        f"{shown}"
    )
    keep = kept[labels.users]
    new_id = np.cumsum(kept) - 1
    return Labels(
        labels.task,
        labels.y[keep],
        labels.num_classes,
        None if labels.targets is None else labels.targets[keep],
        new_id[labels.users[keep]].astype(np.int64),
        None if labels.user_clusters is None else labels.user_clusters[kept],
        None if labels.split is None else labels.split[keep],
        keep,
        [labels.names[u] for u in np.flatnonzero(kept)],
        labels.notes,
    )


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
    num_users = None if labels.users is None else len(labels.names or []) or int(labels.users.max()) + 1
    user_counts = None if labels.users is None else np.bincount(labels.users, minlength=num_users)
    return DatasetInfo(
        name=name,
        num_samples=len(labels.y),
        num_classes=labels.num_classes,
        class_counts=np.bincount(labels.y, minlength=labels.num_classes).astype(np.int64),
        sample_shape=sample_shape(spec, key, stored_shape),
        num_users=num_users,
        user_counts=user_counts,
        task=labels.task,
        num_outputs=labels.num_classes if labels.targets is None else int(labels.targets.shape[1]),
        user_clusters=labels.user_clusters,
        predefined_split=labels.split is not None,
    )


def build_dataset(
    name: str,
    spec: dict,
    key: str,
    x: np.ndarray,
    labels: Labels,
    where: str = "path",
    *,
    locate: Locate | None = None,
) -> Dataset:
    """The dataset of a user's features and checked labels (the samples ``labels.keep`` keeps).

    Args:
        x: ``[n, ...]`` numeric features, one row per sample of the file (per label, when none is dropped).
        locate: as in :func:`check_labels`, for an error naming the first sample with NaN or inf.

    Raises:
        ConfigError: naming ``key.where`` (or the option ``locate`` gives): x not numeric, of another
            length than the labels, or holding NaN/inf (naming the first such sample); ``key.sample_shape``
            of the wrong size.
    """
    x = np.asarray(x)
    n = len(labels.y) if labels.keep is None else len(labels.keep)
    if not np.issubdtype(x.dtype, np.number) or x.ndim < 2 or len(x) != n:
        raise ConfigError(
            f"{key}.{where}",
            f"x must be numeric [n, ...] with one row per label; got {x.dtype} {x.shape}, {n} labels",
        )
    flat = x.reshape(n, -1)
    bad = ~np.isfinite(flat).all(axis=1)
    if labels.keep is not None:
        bad &= labels.keep
    if bad.any():
        first = int(np.argmax(bad))
        feature = int(np.argmin(np.isfinite(flat[first])))
        option, what = (locate or _default_locate(where))(first)
        raise ConfigError(
            f"{key}.{option}",
            f"{what}: x holds {flat[first, feature]} at feature {feature} (NaN or infinite values: "
            f"{int(bad.sum())} of {n} samples)",
        )
    if labels.keep is not None:
        x = x[labels.keep]
    x = x.reshape(len(x), *sample_shape(spec, key, tuple(x.shape[1:]), where))
    float64 = x.dtype == np.float64
    if spec.get("normalize") == "zscore_pooled":
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
        standardize=spec.get("normalize") == "zscore",
    )


def _renumber(
    ids: np.ndarray, n: int, where: str, num_users: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct ids in increasing order ``[U]``, each sample's user 0..U-1 ``[n]``); with ``num_users``
    the ids are the users as given (0..num_users-1)."""
    if ids.shape != (n,):
        raise ConfigError(
            where, f"client has shape {ids.shape}; it needs one integer per sample of y ({n} samples)"
        )
    if not np.issubdtype(ids.dtype, np.integer):
        raise ConfigError(where, f"client must hold one integer per sample, got {ids.dtype}")
    if num_users is not None:
        return np.arange(num_users), ids.astype(np.int64)
    unique, users = np.unique(ids, return_inverse=True)
    return unique, users.astype(np.int64)


def _per_user(clusters: np.ndarray, users: np.ndarray, n: int, where: str, num_users: int) -> np.ndarray:
    if clusters.shape != (n,):
        raise ConfigError(where, f"cluster has shape {clusters.shape}; it needs one per sample of y ({n})")
    if not np.issubdtype(clusters.dtype, np.integer) or (n and clusters.min() < 0):
        raise ConfigError(where, "cluster must be one non-negative integer per sample")
    per_user = np.full(num_users, -1, dtype=np.int64)
    per_user[users] = clusters
    changes = np.flatnonzero(per_user[users] != clusters)
    if changes.size:
        raise ConfigError(
            where,
            f"cluster must be the same for every sample of a client; sample {changes[0]} has "
            f"{clusters[changes[0]]}, another sample of its client {per_user[users[changes[0]]]}",
        )
    return per_user
