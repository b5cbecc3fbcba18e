"""``mnist_subset``: a class-balanced, seeded subsample of ``mnist`` or ``fashion_mnist``.

For a study that keeps a paper's proportions (images per client, iterations per epoch, b_α as a share of a
client's data) at a smaller scale than the full 70,000 images: ``per_class`` images of every class, drawn
without replacement from the pooled 60,000 train + 10,000 test images by ``seed`` (``numpy``'s
``default_rng``), kept in the pool's order. The pixels are normalized after the draw (``normalize``, as
every image dataset). The full datasets are read as ``hetfl.data.mnist`` reads them (verified by the
SHA-256 of their content); this module only draws the rows.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np

from hetfl.config_options import REQUIRED, option
from hetfl.data.checks import MAX_SEED
from hetfl.data.dataset import Dataset, DatasetInfo, normalize_pixels
from hetfl.data.idx_sources import load_idx_images
from hetfl.data.mnist import FASHION_CLASS_COUNTS, MNIST_CLASS_COUNTS, SAMPLE_SHAPE
from hetfl.data.source import ImageSource
from hetfl.errors import ConfigError

CLASS_COUNTS = {"mnist": MNIST_CLASS_COUNTS, "fashion_mnist": FASHION_CLASS_COUNTS}
SOURCES = tuple(CLASS_COUNTS)


def subset_rows(y: np.ndarray, per_class: int, seed: int) -> np.ndarray:
    """The rows of a class-balanced subsample.

    Args:
        y: int64 ``[n]`` labels of the pool, classes ``0 .. C - 1``.
        per_class: images drawn of each class (without replacement).
        seed: the draw's seed; class ``c`` uses ``default_rng([seed, c])``, so a class's draw does not
            depend on the other classes' sizes.

    Returns:
        int64 ``[C * per_class]`` row indices into the pool, sorted (the pool's order kept).

    Raises:
        ValueError: a class has fewer than ``per_class`` images.
    """
    rows = []
    for c in range(int(y.max()) + 1):
        members = np.flatnonzero(y == c)
        if len(members) < per_class:
            raise ValueError(f"class {c} has {len(members)} images, fewer than per_class = {per_class}")
        rows.append(np.random.default_rng([seed, c]).choice(members, size=per_class, replace=False))
    return np.sort(np.concatenate(rows)).astype(np.int64)


class MNISTSubset(ImageSource):
    """``mnist_subset``: ``per_class`` images of each class of ``source`` (``mnist`` or ``fashion_mnist``)."""

    name = "mnist_subset"

    @dataclasses.dataclass(frozen=True)
    class Options(ImageSource.Options):
        """``source`` (``mnist``, ``fashion_mnist``), ``per_class`` (required, at most the smallest class:
        6,313 for MNIST, 7,000 for Fashion-MNIST), ``seed`` (the draw's, default 0) and ``normalize``."""

        source: Literal[SOURCES] = "fashion_mnist"
        per_class: int = option(REQUIRED, lo=1, hi=7000)
        seed: int = option(0, lo=0, hi=MAX_SEED)

    @classmethod
    def info(cls, spec, key="dataset") -> DatasetInfo:
        smallest = min(CLASS_COUNTS[spec["source"]])
        if spec["per_class"] > smallest:
            raise ConfigError(
                f"{key}.per_class",
                f"{spec['per_class']} images of each class, but {spec['source']}'s smallest class has {smallest}"
                f" (allowed: 1 .. {smallest})",
            )
        counts = np.full(len(CLASS_COUNTS[spec["source"]]), spec["per_class"], dtype=np.int64)
        return DatasetInfo(cls.name, int(counts.sum()), len(counts), counts, SAMPLE_SHAPE)

    @classmethod
    def load(cls, spec, root):
        x, y = load_idx_images(spec["source"], root)
        rows = subset_rows(y, spec["per_class"], spec["seed"])
        return Dataset(
            cls.name, normalize_pixels(x[rows], spec["normalize"], cls.max_value), y[rows], cls.num_classes
        )


DATASETS = [MNISTSubset]
