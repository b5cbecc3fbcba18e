"""The protocol of a dataset plug-in: a config name, options, a cheap summary and a loader.

A dataset is a class derived from :class:`DatasetSource`, declared by its module in a module-level list
``DATASETS = [MyDataset]`` anywhere under ``hetfl.data`` (``hetfl.discovery`` finds it; no registry file
is edited). The ``data`` stage builds it once (``load``) and saves it as ``results/data/<id>/data.npz``;
partitions and training jobs read that file, never the dataset's code, so a dataset module's code is
fingerprinted by its own ``data`` jobs only and adding one reruns nothing else.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from hetfl.config_options import ConfigOptions
from hetfl.data.dataset import NORMALIZATIONS, Dataset, DatasetInfo, normalize_pixels


@dataclasses.dataclass(frozen=True)
class NoOptions(ConfigOptions):
    """The options of a dataset that takes none."""


class DatasetSource:
    """Base of a dataset plug-in. Subclasses set ``name`` and override :meth:`info` and :meth:`load`.

    Class attributes:
        name: the config name (``dataset: {name: ...}``).
        Options: the dataset's config options, a frozen dataclass of ``hetfl.config_options.ConfigOptions``
            (typed fields, ``option(default, lo=..., ...)``; ``REQUIRED`` as the default of a required
            option); none by default.
    """

    name: ClassVar[str]
    Options: ClassVar[type[ConfigOptions]] = NoOptions

    @classmethod
    def info(cls, spec: dict[str, Any], key: str = "dataset") -> DatasetInfo:
        """What partition validation needs, without loading the data (milliseconds if possible).

        Args:
            spec: the normalized spec (every option present).
            key: the spec's dotted config key, for error messages.

        Raises:
            ConfigError: the data cannot be summarized (e.g. a missing file), naming ``key.<option>``.
        """
        raise NotImplementedError

    @classmethod
    def load(cls, spec: dict[str, Any], root: Path) -> Dataset:
        """Build the dataset of a normalized spec.

        Args:
            root: this dataset's results folder (downloads go to ``root/"raw"``).

        Raises:
            DataUnavailableError: a download is needed and impossible.
        """
        raise NotImplementedError

    @classmethod
    def files(cls, spec: dict[str, Any]) -> list[str]:
        """The user's files the dataset reads (their paths as given): the ``data`` job's inputs, so that
        editing one reruns the dataset's partitions and runs. None for shipped or generated data."""
        return []


class ImageSource(DatasetSource):
    """An image dataset of raw pixels normalized by the option ``normalize`` (``zscore``, pFedMe's per-pixel
    z-score; ``unit``; ``none``): subclasses set ``max_value`` and override :meth:`raw`."""

    max_value: ClassVar[float] = 255.0
    num_classes: ClassVar[int] = 10

    @dataclasses.dataclass(frozen=True)
    class Options(ConfigOptions):
        """``normalize``: ``zscore`` (pFedMe's per-pixel z-score), ``unit`` or ``none``."""

        normalize: Literal[NORMALIZATIONS] = "zscore"

    @classmethod
    def raw(cls, root: Path) -> tuple[np.ndarray, np.ndarray]:
        """Raw pixels ``[n, C, H, W]`` and int64 labels ``[n]``, in stored order."""
        raise NotImplementedError

    @classmethod
    def load(cls, spec: dict[str, Any], root: Path) -> Dataset:
        x, y = cls.raw(root)
        return Dataset(cls.name, normalize_pixels(x, spec["normalize"], cls.max_value), y, cls.num_classes)
