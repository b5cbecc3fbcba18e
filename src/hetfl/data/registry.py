"""The dataset registry: config names, their options, cheap summaries and loaders.

A dataset spec is the ``dataset:`` mapping of a study, e.g. ``{name: mnist5k}`` or
``{name: synthetic, alpha: 1.0, beta: 1.0}``. :func:`normalize_dataset_spec` checks it and fills the
defaults; :func:`dataset_id` names its folder; :func:`dataset_info` answers what partition validation
needs without loading anything; :func:`load_dataset` builds the :class:`~hetfl.data.dataset.Dataset`.

Datasets are plug-ins (:class:`~hetfl.data.source.DatasetSource`), discovered from the ``DATASETS``
lists of the modules under ``hetfl.data``: this module imports none of them, so adding a dataset
changes no fingerprint but its own (:func:`dataset_module`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from functools import cache
from pathlib import Path

from hetfl.data.dataset import Dataset, DatasetInfo
from hetfl.data.source import DatasetSource
from hetfl.discovery import discover
from hetfl.errors import ConfigError
from hetfl.ids import spec_id


@cache
def registry() -> dict[str, type[DatasetSource]]:
    """Config name -> dataset class, for every dataset declared under ``hetfl.data``."""
    return discover("hetfl.data", "DATASETS")


def dataset_names() -> tuple[str, ...]:
    """The config names of every dataset, sorted."""
    return tuple(sorted(registry()))


def dataset_module(name: str) -> str:
    """The module that declares dataset ``name`` (what its ``data`` jobs fingerprint).

    Raises:
        ConfigError: unknown dataset (key ``dataset.name``, listing the known ones).
    """
    return _source(name, "dataset.name").__module__


def _source(name: object, key: str) -> type[DatasetSource]:
    datasets = registry()
    if name not in datasets:
        raise ConfigError(key, f"unknown dataset {name!r}", allowed=datasets)
    return datasets[name]


def normalize_dataset_spec(spec: dict, key: str) -> dict:
    """Validate a dataset spec and fill its defaults.

    Args:
        spec: e.g. ``{"name": "synthetic", "alpha": 1}``.
        key: dotted config key of the spec, e.g. ``studies.pfedme_mnist.dataset``.

    Returns:
        a new dict with ``name`` and every option of that dataset (numbers canonicalized: floats as
        float), so equal datasets give equal dicts.

    Raises:
        ConfigError: naming ``key.name`` (unknown dataset, allowed: :func:`dataset_names`) or
            ``key.<option>`` (unknown option, missing required option or bad value, with the allowed ones).
    """
    if not isinstance(spec, Mapping):
        raise ConfigError(key, f"must be a mapping with a 'name', got {type(spec).__name__}")
    source = _source(spec.get("name"), f"{key}.name")
    return source.Options.parse(spec, key, f"dataset {source.name!r}", fixed=("name",))


def dataset_id(spec: dict) -> str:
    """Folder name of a dataset: its name when every option has its default, else ``name-<hash of options>``.

    Raises:
        ConfigError: see :func:`normalize_dataset_spec` (key ``dataset``).
    """
    spec = normalize_dataset_spec(spec, "dataset")
    options = {k: v for k, v in spec.items() if k != "name"}
    defaults = _source(spec["name"], "dataset.name").Options.defaults()
    return (
        spec["name"]
        if options == {k: v for k, v in defaults.items() if v is not None}
        else spec_id(spec["name"], options)
    )


def dataset_info(spec: dict, key: str = "dataset") -> DatasetInfo:
    """What is known about a dataset without loading it (milliseconds for shipped and generated data;
    a user's file is read once per process for its sizes).

    Raises:
        ConfigError: see :func:`normalize_dataset_spec`; a user's file that cannot be read, naming
            ``key.<option>``.
    """
    spec = normalize_dataset_spec(spec, key)
    return _source(spec["name"], f"{key}.name").info(spec, key)


def dataset_files(spec: dict) -> list[str]:
    """The user's files a dataset reads (the ``data`` job's inputs), as given in its spec; [] for shipped
    and generated data."""
    spec = normalize_dataset_spec(spec, "dataset")
    return _source(spec["name"], "dataset.name").files(spec)


def dataset_checksum(spec: dict) -> str:
    """SHA-256 over the content of :func:`dataset_files` (empty string when there are none): a params
    value of the ``data`` job, so that a file replaced by one with other content but an older
    modification time still reruns its dataset. Cached per file size and modification time."""
    files = dataset_files(spec)
    return (
        hashlib.sha256("".join(_file_sha256(*_stamp(f)) for f in files).encode()).hexdigest() if files else ""
    )


def _stamp(path: str) -> tuple[str, int, int]:
    stat = os.stat(path)
    return str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns


@cache
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def load_dataset(spec: dict, root: str | os.PathLike) -> Dataset:
    """Build a dataset.

    Args:
        spec: a dataset spec (normalized here).
        root: this dataset's folder; downloads go to ``root/"raw"`` (MNIST, Fashion-MNIST, CIFAR-10).
            Unused by shipped, generated and user-file datasets.

    Returns:
        the dataset; images are ``[n, 1, H, W]`` float32, normalized by the ``normalize`` option.

    Raises:
        ConfigError: a bad spec (key ``dataset``).
        DataUnavailableError: a download is needed and impossible (see ``hetfl.data.download``).
    """
    spec = normalize_dataset_spec(spec, "dataset")
    return _source(spec["name"], "dataset.name").load(spec, Path(root))
