"""CIFAR-10, the binary version: downloaded with pooch, SHA-256 verified, parsed without unpickling.

Krizhevsky, "Learning Multiple Layers of Features from Tiny Images", 2009;
https://www.cs.toronto.edu/~kriz/cifar.html. The archive ``cifar-10-binary.tar.gz`` (170,052,171 bytes)
holds ``cifar-10-batches-bin/data_batch_{1..5}.bin`` and ``test_batch.bin``: 10,000 records each of
1 label byte (0-9) then 3,072 pixel bytes (the red, green and blue 32×32 planes, row-major). The
members are read from the archive in memory (nothing is extracted to disk, nothing is unpickled: the
Python version's pickles are never touched).

A dataset plug-in of ``hetfl.data.registry`` (``NAME``, ``_options``, ``info``, ``load``): option
``normalize`` as for the other image datasets (``zscore`` per pixel by default, ``unit``, ``none``).
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import numpy as np

from hetfl.data.dataset import DatasetInfo
from hetfl.data.download import retrieve, sha256_file
from hetfl.data.source import ImageSource
from hetfl.errors import DataUnavailableError

NAME = "cifar10"
URL = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"
FILENAME = "cifar-10-binary.tar.gz"
SHA256 = "c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd"
MEMBERS = tuple(f"cifar-10-batches-bin/data_batch_{i}.bin" for i in range(1, 6)) + (
    "cifar-10-batches-bin/test_batch.bin",
)
"""The archive members read, training batches first."""
SAMPLE_SHAPE = (3, 32, 32)
RECORD = 1 + 3 * 32 * 32
CLASS_COUNTS = (6000,) * 10  # 5,000 train + 1,000 test per class
CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


def parse_records(raw: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Parse CIFAR-10 binary records.

    Args:
        raw: the bytes of one or more ``*.bin`` batches.

    Returns:
        ``x`` uint8 ``[n, 3, 32, 32]`` and ``y`` int64 ``[n]``.

    Raises:
        ValueError: the length is not a multiple of 3,073 bytes, or a label is not in 0..9.
    """
    if len(raw) % RECORD:
        raise ValueError(f"CIFAR-10 binary data must be a multiple of {RECORD} bytes, got {len(raw)}")
    records = np.frombuffer(raw, dtype=np.uint8).reshape(-1, RECORD)
    y = records[:, 0].astype(np.int64)
    if y.size and y.max() > 9:
        raise ValueError(f"CIFAR-10 labels must be 0..9, found {int(y.max())}")
    return records[:, 1:].reshape(-1, *SAMPLE_SHAPE).copy(), y


def read_archive(
    path: str | os.PathLike, members: tuple[str, ...] = MEMBERS
) -> tuple[np.ndarray, np.ndarray]:
    """Read the train and test batches from the ``.tar.gz`` archive, in ``members`` order.

    Raises:
        ValueError: a member is missing or malformed (see :func:`parse_records`).
    """
    xs, ys = [], []
    with tarfile.open(path, "r:gz") as archive:
        names = set(archive.getnames())
        for member in members:
            if member not in names:
                raise ValueError(f"{path}: the archive has no member {member!r}")
            handle = archive.extractfile(member)
            if handle is None:
                raise ValueError(f"{path}: member {member!r} is not a regular file")
            x, y = parse_records(handle.read())
            xs.append(x)
            ys.append(y)
    return np.concatenate(xs), np.concatenate(ys)


def fetch(raw_dir: str | os.PathLike, url: str = URL, sha256: str = SHA256) -> Path:
    """The verified archive in ``raw_dir``: used as it is when its SHA-256 matches, else downloaded.

    Raises:
        DataUnavailableError: offline, the download failed, or the file's SHA-256 does not match; the
            message names where to put the file and its checksum.
    """
    raw_dir = Path(raw_dir).resolve()
    raw_dir.mkdir(parents=True, exist_ok=True)
    path = raw_dir / FILENAME
    if path.is_file() and sha256_file(path) == sha256:
        return path
    problem = f"the file there has SHA-256 {sha256_file(path)}" if path.is_file() else "missing"
    try:
        retrieve(url, sha256, FILENAME, raw_dir)
    except Exception as err:  # offline, HTTP error, hash mismatch
        raise DataUnavailableError(
            f"dataset 'cifar10' is not available ({problem}; {url}: {type(err).__name__}: {err}). "
            f"To provide it by hand, put {FILENAME} (SHA-256 {sha256}) at {path}"
        ) from None
    if sha256_file(path) != sha256:  # pooch checks too; never use an unverified file
        raise DataUnavailableError(f"{path} does not have SHA-256 {sha256}")
    return path


def load_cifar10_raw(root: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """The 60,000 CIFAR-10 images (50,000 train then 10,000 test), uint8 ``[n, 3, 32, 32]``, and labels.

    Args:
        root: the dataset's folder; the archive lives in ``root/raw``.
    """
    return read_archive(fetch(Path(root) / "raw"))


def info(spec: dict) -> DatasetInfo:
    """Sizes and shapes without downloading (``spec`` normalized)."""
    return DatasetInfo(
        name=NAME,
        num_samples=sum(CLASS_COUNTS),
        num_classes=10,
        class_counts=np.asarray(CLASS_COUNTS, dtype=np.int64),
        sample_shape=SAMPLE_SHAPE,
    )


class CIFAR10(ImageSource):
    """``cifar10``: the CIFAR-10 binary archive, downloaded and checked by SHA-256 (train images first)."""

    name = NAME

    @classmethod
    def info(cls, spec, key="dataset") -> DatasetInfo:
        return info(spec)

    @classmethod
    def raw(cls, root):
        return load_cifar10_raw(root)


DATASETS = [CIFAR10]
