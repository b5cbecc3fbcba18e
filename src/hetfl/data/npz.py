"""``npz``: your own data as one NumPy ``.npz`` file.

Arrays (``np.savez(path, x=..., y=..., ...)``; read with ``allow_pickle=False``):

- ``x`` ``[n, ...]``: numeric features, one row per sample (images as ``[n, C, H, W]``);
- ``y`` ``[n]``: integer labels 0..K-1 (classification) or float targets ``[n]`` / ``[n, K]`` (regression);
- ``client`` ``[n]`` (optional): the natural client of each sample, any integers (renumbered 0..U-1 in
  increasing order): the ``natural`` partition gives one client per id;
- ``cluster`` ``[n]`` (optional, needs ``client``): a ground-truth cluster per sample, the same for every
  sample of a client (the partition records it; All-for-one's in-cluster weight uses it);
- ``split`` ``[n]`` (optional): 0 (train) / 1 (test), your own train/test division, kept by the
  ``natural`` partition (other schemes pool the samples and draw ``test_fraction``).

Options: ``path`` (required; relative to the working directory, the repository root in a Snakemake
run), and ``task``, ``num_classes``, ``normalize``, ``sample_shape``, ``min_user_samples``
(``hetfl.data.user_arrays``). The file is an input of the ``data`` job: editing it reruns its partitions
and runs, and nothing else. Every error names the file and, where one is at fault, the sample
(``sample 17``: row 17 of ``x`` and ``y``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import zipfile
from functools import cache
from pathlib import Path

import numpy as np

from hetfl.data.dataset import Dataset, DatasetInfo
from hetfl.data.source import DatasetSource
from hetfl.data.user_arrays import (
    Labels,
    UserFileOptions,
    build_dataset,
    check_labels,
    existing_file,
    file_stamp,
    info_from,
    path_option,
)
from hetfl.errors import ConfigError

OPTIONAL = ("client", "cluster", "split")


def _stored_shape(path: Path, name: str) -> tuple[int, ...]:
    """The shape of array ``name`` of an ``.npz``, from its header (the array is not read)."""
    with zipfile.ZipFile(path) as archive, archive.open(f"{name}.npy") as f:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape = np.lib.format.read_array_header_1_0(f)[0]
        elif version == (2, 0):
            shape = np.lib.format.read_array_header_2_0(f)[0]
        else:  # a newer format: read the array
            with np.load(path, allow_pickle=False) as arrays:
                shape = arrays[name].shape
    return tuple(int(s) for s in shape)


@cache
def _summary(stamp: tuple[str, int, int]) -> tuple[tuple[int, ...], dict[str, np.ndarray]]:
    """(shape of x, the small arrays y/client/cluster/split) of a file, cached per size and modification time."""
    path = Path(stamp[0])
    with np.load(path, allow_pickle=False) as f:
        names = set(f.files)
        missing = {"x", "y"} - names
        if missing:
            raise ValueError(
                f"the array(s) {', '.join(sorted(missing))} are missing: the file has "
                f"{', '.join(sorted(names)) or 'no arrays'}, and needs x and y"
            )
        small = {name: f[name] for name in ("y", *OPTIONAL) if name in names}
    return _stored_shape(path, "x"), small


class NpzFile(DatasetSource):
    """``npz``: a user's ``.npz`` file (module docstring)."""

    name = "npz"

    @dataclasses.dataclass(frozen=True)
    class Options(UserFileOptions):
        """The file and the options of every user-file dataset."""

        path: str = path_option()

    @classmethod
    def _read(cls, spec: dict, key: str) -> tuple[Path, tuple[int, ...], Labels]:
        """(the file, the stored shape of x, the checked labels) of a spec.

        Raises:
            ConfigError: naming ``key.path`` (or ``key.<option>``) and the file: see :func:`check_labels`.
        """
        path = existing_file(spec, "path", key)
        try:
            shape, small = _summary(file_stamp(path))
        except (OSError, zipfile.BadZipFile) as err:
            raise ConfigError(
                f"{key}.path", f"cannot read {str(path)!r} as an .npz of arrays: {err}"
            ) from None
        except (ValueError, KeyError) as err:
            raise ConfigError(f"{key}.path", f"{str(path)!r}: {err}") from None
        with _naming(path):
            if shape[:1] != (len(small["y"]),):
                raise ConfigError(
                    f"{key}.path",
                    f"x has {shape[0] if shape else 0} rows and y {len(small['y'])}: one label per row of x",
                )
            labels = check_labels(
                spec, key, small["y"], *(small.get(name) for name in OPTIONAL), names=lambda c: f"client {c}"
            )
        return path, shape, labels

    @classmethod
    def labels(cls, spec: dict, key: str = "dataset") -> Labels:
        """The checked labels of a spec's file (users' names, what ``task: auto`` inferred)."""
        return cls._read(spec, key)[2]

    @classmethod
    def info(cls, spec: dict, key: str = "dataset") -> DatasetInfo:
        _, shape, labels = cls._read(spec, key)
        with _naming(Path(spec["path"])):
            return info_from(cls.name, spec, key, shape[1:], labels)

    @classmethod
    def load(cls, spec: dict, root: Path) -> Dataset:
        path, _, labels = cls._read(spec, "dataset")
        with np.load(path, allow_pickle=False) as f:
            x = f["x"]
        with _naming(path):
            return build_dataset(cls.name, spec, "dataset", x, labels)

    @classmethod
    def files(cls, spec: dict) -> list[str]:
        return [spec["path"]]


@contextlib.contextmanager
def _naming(path: Path):
    """Re-raise a ``ConfigError`` with the file's path at the head of its message."""
    try:
        yield
    except ConfigError as err:
        raise ConfigError(err.key, f"{str(path)!r}: {err.message}", err.allowed) from None


DATASETS = [NpzFile]
