"""Downloaded datasets (MNIST, Fashion-MNIST): mirrors, SHA-256 checksums, fetching and loading.

Every file is verified by SHA-256 before use. A file already in ``root/raw`` with the right hash is used
without any network access; otherwise the mirrors are tried in order (with pooch). When no mirror
delivers a file with the right hash, :class:`~hetfl.errors.DataUnavailableError` says which file to put
where, with its checksum, so an offline machine can be provisioned by hand.

``REMOTE_DATASETS`` is a plain module-level dict: tests register small fake datasets in it.
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hetfl.data.idx import read_idx
from hetfl.errors import DataUnavailableError

ROLES = ("train_images", "train_labels", "test_images", "test_labels")


@dataclass(frozen=True)
class RemoteFile:
    """One downloadable file: its name on the mirrors and in ``raw/``, and its SHA-256 (hex)."""

    filename: str
    sha256: str


@dataclass(frozen=True)
class RemoteDataset:
    """A dataset of four IDX files (train/test images/labels) served by one or more mirrors.

    Attributes:
        mirrors: base URLs tried in order; a file's URL is ``mirror + filename``.
        files: role (one of :data:`ROLES`) -> file.
    """

    mirrors: tuple[str, ...]
    files: dict[str, RemoteFile]


_MNIST_MIRRORS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
)

REMOTE_DATASETS: dict[str, RemoteDataset] = {
    "mnist": RemoteDataset(
        mirrors=_MNIST_MIRRORS,
        files={
            "train_images": RemoteFile(
                "train-images-idx3-ubyte.gz",
                "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
            ),
            "train_labels": RemoteFile(
                "train-labels-idx1-ubyte.gz",
                "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
            ),
            "test_images": RemoteFile(
                "t10k-images-idx3-ubyte.gz",
                "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
            ),
            "test_labels": RemoteFile(
                "t10k-labels-idx1-ubyte.gz",
                "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
            ),
        },
    ),
    "fashion_mnist": RemoteDataset(
        mirrors=("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",),
        files={
            "train_images": RemoteFile(
                "train-images-idx3-ubyte.gz",
                "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
            ),
            "train_labels": RemoteFile(
                "train-labels-idx1-ubyte.gz",
                "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
            ),
            "test_images": RemoteFile(
                "t10k-images-idx3-ubyte.gz",
                "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
            ),
            "test_labels": RemoteFile(
                "t10k-labels-idx1-ubyte.gz",
                "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
            ),
        },
    ),
}

# (connect, read) timeouts in seconds for one download attempt
DOWNLOAD_TIMEOUT = (15, 120)


def sha256_file(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _download(url: str, file: RemoteFile, raw_dir: Path) -> None:
    """One pooch download of ``url`` into ``raw_dir``; pooch checks the hash before keeping the file."""
    import pooch

    logging.getLogger("pooch").setLevel(logging.WARNING)
    pooch.retrieve(
        url=url,
        known_hash=f"sha256:{file.sha256}",
        fname=file.filename,
        path=raw_dir,
        downloader=pooch.HTTPDownloader(progressbar=False, timeout=DOWNLOAD_TIMEOUT),
    )


def fetch_files(name: str, raw_dir: str | os.PathLike) -> dict[str, Path]:
    """Make sure every file of the remote dataset ``name`` is in ``raw_dir`` with its SHA-256.

    Files present with the right hash are used as they are (no network). Missing files, or files
    with a wrong hash, are downloaded from the mirrors in order. After the first file that no
    mirror delivers, the network is not tried again (the machine is taken to be offline).

    Args:
        name: a key of :data:`REMOTE_DATASETS`.
        raw_dir: the folder for the raw files (created if needed).

    Returns:
        role -> absolute path of the verified file.

    Raises:
        KeyError: ``name`` is not registered.
        DataUnavailableError: some file could not be obtained with the right hash; the message names
            each such file's full path, its SHA-256 and what went wrong.
    """
    remote = REMOTE_DATASETS[name]
    raw_dir = Path(raw_dir).resolve()
    raw_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    problems: list[str] = []
    online = True
    for role, file in remote.files.items():
        path = raw_dir / file.filename
        errors: list[str] = []
        if path.is_file():
            actual = sha256_file(path)
            if actual == file.sha256:
                paths[role] = path
                continue
            errors.append(f"the file there has SHA-256 {actual}")
        if online:
            for mirror in remote.mirrors:
                url = mirror + file.filename
                try:
                    _download(url, file, raw_dir)
                except Exception as e:  # network errors, HTTP errors, hash mismatch: try the next mirror
                    errors.append(f"{url}: {type(e).__name__}: {e}")
                    continue
                if path.is_file() and sha256_file(path) == file.sha256:
                    paths[role] = path
                    break
                errors.append(f"{url}: downloaded file does not have the expected SHA-256")
            else:
                online = False
        else:
            errors.append("not downloaded: an earlier file could not be fetched from any mirror")
        if role not in paths:
            problems.append(
                f"put {file.filename} (SHA-256 {file.sha256}) at {path}\n    " + "\n    ".join(errors)
            )
    if problems:
        raise DataUnavailableError(
            f"dataset {name!r} is not available (offline, all mirrors failed, or a checksum mismatch). "
            f"Mirrors tried: {', '.join(remote.mirrors)}. To provide it by hand:\n  " + "\n  ".join(problems)
        )
    return paths


def load_remote_images(name: str, root: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """Fetch (if needed) and read a four-file IDX image dataset; train and test are concatenated.

    Args:
        name: a key of :data:`REMOTE_DATASETS`.
        root: the dataset's folder; the raw files live in ``root/raw``.

    Returns:
        ``x`` uint8 ``[n_train + n_test, 1, H, W]`` raw pixels and ``y`` int64 ``[n_train + n_test]``,
        the training samples first, each in file order.

    Raises:
        DataUnavailableError: see :func:`fetch_files`.
        IDXFormatError: a verified file does not parse.
        ValueError: images and labels do not match.
    """
    paths = fetch_files(name, Path(root) / "raw")
    xs, ys = [], []
    for split in ("train", "test"):
        x = read_idx(paths[f"{split}_images"])
        y = read_idx(paths[f"{split}_labels"])
        if x.ndim != 3 or y.ndim != 1 or x.shape[0] != y.shape[0]:
            raise ValueError(f"{name} {split}: images {x.shape} and labels {y.shape} do not match")
        xs.append(x[:, None])
        ys.append(y.astype(np.int64))
    return np.concatenate(xs), np.concatenate(ys)
