"""Check a study's data files before any job runs, and remember the verdict by the files' checksum.

Partition validation needs only a dataset's summary (:func:`~hetfl.data.registry.dataset_info`). For a
dataset that reads a user's files (``DatasetSource.files``) that is not enough: NaN in ``x`` or a label
the summary does not read would fail the ``data`` job, after Snakemake has removed that job's previous
output. :func:`check_dataset` builds the dataset as the ``data`` job will (``DatasetSource.load``), so every
content error stops the workflow before any job, under the study's key (``studies.<study>.dataset.<option>``),
naming the file and, where the dataset's checks do (``hetfl.data.user_arrays``), the sample or user.

The verdict (the summary, the notes said at start, each user's train and test samples) is cached as one
small JSON file under a folder the caller names (the workflow: ``.snakemake/hetfl/data_checks``), keyed by
the SHA-256 of the files' content (:func:`~hetfl.data.registry.dataset_checksum`, the ``data`` job's own
parameter), the normalized spec and the fingerprint of the checking code: a changed file, option or check
gets another key, so a cached verdict never hides it. Only files that pass are cached; a later call reads
the files only to hash them, which the workflow does anyway.

:func:`check_natural_split` then refuses a natural split in which a user of the data's own train/test
division has no train or no test sample, naming the user and the option that drops such users.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from hetfl.data.dataset import Dataset, DatasetInfo
from hetfl.data.registry import dataset_checksum, dataset_module, normalize_dataset_spec, registry
from hetfl.data.source import DatasetSource
from hetfl.errors import ConfigError
from hetfl.ids import canonical_json

FORMAT = 1  # of a cached verdict
_MEMO: dict[str, DataCheck] = {}  # verdicts of this process, by cache key


@dataclass
class DataCheck:
    """What the checks of a dataset found.

    Attributes:
        info: the dataset's summary (:class:`~hetfl.data.dataset.DatasetInfo`).
        notes: what to say at start (e.g. the task ``task: auto`` inferred, the users dropped).
        users: ``[U]`` how messages name each natural user (``client 30``, ``user 'u3'``), or None.
        train_test: int64 ``[U, 2]``: each user's train and test samples in the data's own division, or
            None (no users, or no own division).
    """

    info: DatasetInfo
    notes: list[str]
    users: list[str] | None = None
    train_test: np.ndarray | None = None


def check_dataset(spec: dict, key: str, cache: str | os.PathLike | None = None) -> DataCheck:
    """Check a dataset before any job: its summary and, for a user's files, their whole content.

    Args:
        spec: a dataset spec (normalized here).
        key: the spec's dotted config key (``studies.<study>.dataset``), which every error names.
        cache: the folder of cached verdicts (created when needed), or None: check every time (once per
            process).

    Returns:
        the verdict; for shipped, generated and downloaded data just the summary (nothing is loaded).

    Raises:
        ConfigError: naming ``key.<option>`` of the file at fault, with the file's path and, where the
            dataset's checks say, the sample, user or client: anything the dataset's ``info`` or ``load``
            refuses (a ``ValueError`` of ``load`` is reported under the first file's option).
    """
    spec = normalize_dataset_spec(spec, key)
    source = registry()[spec["name"]]
    if not source.files(spec):
        return DataCheck(source.info(spec, key), [])
    try:
        checksum = dataset_checksum(spec)
    except OSError:
        source.info(spec, key)  # names the option of the missing or unreadable file
        raise
    entry = _entry_key(spec, checksum)
    if entry in _MEMO:
        return _MEMO[entry]
    path = None if cache is None else Path(cache) / f"{entry}.json"
    found = None if path is None else _read(path)
    if found is None:
        found = _check(source, spec, key)
        if path is not None:
            _write(path, found)
    _MEMO[entry] = found
    return found


def check_natural_split(check: DataCheck, partition: dict, spec: dict, key: str, partition_key: str) -> None:
    """Refuse a ``natural`` partition of data with their own train/test division in which a user (a client)
    has no train or no test sample, or, with ``val_fraction``, a single train sample.

    Args:
        check: the dataset's :func:`check_dataset`; partition: the normalized partition spec; spec: the
            normalized dataset spec; key: the dataset's dotted key; partition_key: the partition's.

    Raises:
        ConfigError: naming ``key.<option>`` of the file whose side is empty (``val_fraction``: under
            ``partition_key``), the file, the user and its client index, and the option that drops such
            users (``min_user_samples``, when the dataset has it).
    """
    if partition["scheme"] != "natural" or check.train_test is None:
        return
    source = registry()[spec["name"]]
    counts = check.train_test
    name = (lambda u: check.users[u]) if check.users else (lambda u: f"user {u}")
    drops = "min_user_samples" in source.Options.names()
    empty = np.flatnonzero((counts == 0).any(axis=1))
    if empty.size:
        u = int(empty[0])
        train, test = (int(c) for c in counts[u])
        option = _file_option(source, spec, 0 if train == 0 else 1)
        fix = (
            "set the dataset's min_user_samples (e.g. 1) to drop the users with fewer train or test samples "
            "(LEAF's practice), or give the user samples on both sides"
            if drops
            else "give the user samples on both sides"
        )
        raise ConfigError(
            f"{key}.{option}",
            f"{spec[option]!r}: {name(u)} (client {u} of the natural split) has {train} train and {test} test "
            f"samples ({empty.size} of {len(counts)} users lack one side); each client of the natural split "
            f"trains and tests on the data's own division: {fix}",
        )
    single = np.flatnonzero(counts[:, 0] < 2)
    if partition.get("val_fraction") and single.size:
        u = int(single[0])
        raise ConfigError(
            f"{partition_key}.val_fraction",
            f"{name(u)} (client {u} of the natural split) has 1 train sample: too few to hold out validation "
            f"samples ({single.size} users have 1)" + ("; min_user_samples: 2 drops them" if drops else ""),
        )


def _file_option(source: type[DatasetSource], spec: dict, side: int) -> str:
    """The option of the file holding the train (``side`` 0) or test (1) samples: ``train``/``test`` where
    the dataset has both options, else the option of its first file."""
    options = source.Options.names()
    if "train" in options and "test" in options:
        return ("train", "test")[side]
    first = source.files(spec)[0]
    return next(k for k in options if spec.get(k) == first)


def _check(source: type[DatasetSource], spec: dict, key: str) -> DataCheck:
    """The verdict of a user's files: the summary, then the dataset built as the ``data`` job builds it."""
    info = source.info(spec, key)
    with tempfile.TemporaryDirectory() as root, _under(key, source, spec):
        dataset = source.load(spec, Path(root))
    labels = source.labels(spec, key) if hasattr(source, "labels") else None
    return DataCheck(
        info,
        list(labels.notes) if labels is not None else [],
        list(labels.names) if labels is not None and labels.names is not None else None,
        _train_test(dataset, info.num_users),
    )


def _train_test(dataset: Dataset, num_users: int | None) -> np.ndarray | None:
    """int64 ``[U, 2]``: each user's samples in the data's own train (0) and test (1) parts."""
    if dataset.users is None or dataset.split is None:
        return None
    users = num_users or int(dataset.users.max()) + 1
    return np.stack(
        [np.bincount(dataset.users[dataset.split == s], minlength=users) for s in (0, 1)], axis=1
    ).astype(np.int64)


@contextlib.contextmanager
def _under(key: str, source: type[DatasetSource], spec: dict):
    """Report an error of ``load`` (which names ``dataset.<option>``) under ``key.<option>``, with the file's
    path when its message has none; a ``ValueError`` under the first file's option."""
    files = source.files(spec)
    try:
        yield
    except ConfigError as err:
        option = err.key.split(".", 1)[1] if "." in err.key else _file_option(source, spec, 0)
        message = err.message
        if not any(f in message for f in files):
            message = f"{', '.join(map(repr, files))}: {message}"
        raise ConfigError(f"{key}.{option}", message, err.allowed) from None
    except ValueError as err:
        option = _file_option(source, spec, 0)
        raise ConfigError(f"{key}.{option}", f"{', '.join(map(repr, files))}: {err}") from None


def _entry_key(spec: dict, checksum: str) -> str:
    """The cache key of a verdict: the files' SHA-256, the normalized spec and the checking code."""
    from hetfl.fingerprint import fingerprint

    code = fingerprint([__name__, dataset_module(spec["name"])])
    blob = canonical_json({"format": FORMAT, "spec": spec, "files": checksum, "code": code})
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def _read(path: Path) -> DataCheck | None:
    """A cached verdict, or None (absent, unreadable or of another format: checked again)."""
    try:
        blob = json.loads(path.read_text())
        if blob.get("format") != FORMAT:
            return None
        info = blob["info"]
        for name in ("class_counts", "user_counts", "user_clusters"):
            if info[name] is not None:
                info[name] = np.asarray(info[name], dtype=np.int64)
        info["sample_shape"] = tuple(info["sample_shape"])
        tt = blob["train_test"]
        return DataCheck(
            DatasetInfo(**info),
            list(blob["notes"]),
            blob["users"],
            None if tt is None else np.asarray(tt, dtype=np.int64).reshape(-1, 2),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _write(path: Path, check: DataCheck) -> None:
    """Cache a verdict (atomically: a temporary file, then a rename); a folder that cannot be written is
    skipped (the next call checks again)."""
    info: dict[str, Any] = {f.name: getattr(check.info, f.name) for f in fields(DatasetInfo)}
    info = {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in info.items()}
    blob = {
        "format": FORMAT,
        "info": info,
        "notes": check.notes,
        "users": check.users,
        "train_test": None if check.train_test is None else check.train_test.tolist(),
    }
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(blob, f, default=int)
        os.replace(tmp, path)
    except OSError:
        if tmp is not None:
            with contextlib.suppress(OSError):
                Path(tmp).unlink()
