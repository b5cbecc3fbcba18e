"""Downloads checked by SHA-256: the one place that talks to the network (pooch), and file hashing.

The MNIST family's sources (a ``raw/`` folder, installed packages, the mirrors) are in
``hetfl.data.idx_sources``; CIFAR-10's archive in ``hetfl.data.cifar10``. Both fetch through
:func:`retrieve`, which keeps a file only when its SHA-256 matches.
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

DOWNLOAD_TIMEOUT = (15, 120)
"""(connect, read) timeouts in seconds for one download attempt."""


def sha256_file(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def retrieve(url: str, sha256: str, fname: str, folder: str | os.PathLike) -> Path:
    """Download ``url`` to ``folder/fname`` with pooch, which keeps the file only if its SHA-256 matches.

    A file already there with the right hash is kept without any network access.

    Args:
        url: what to download.
        sha256: the expected hex SHA-256 of the downloaded file.
        fname: the file's name in ``folder``.
        folder: created if needed.

    Returns:
        the file's path.

    Raises:
        Exception: whatever pooch or the network raises (offline, HTTP error, hash mismatch).
    """
    import pooch

    logging.getLogger("pooch").setLevel(logging.WARNING)
    return Path(
        pooch.retrieve(
            url=url,
            known_hash=f"sha256:{sha256}",
            fname=fname,
            path=folder,
            downloader=pooch.HTTPDownloader(progressbar=False, timeout=DOWNLOAD_TIMEOUT),
        )
    )
