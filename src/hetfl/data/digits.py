"""``digits``: scikit-learn's ``load_digits`` (1,797 handwritten digits, 8x8, values 0..16).

Shipped inside the scikit-learn wheel, so it works offline (docs/papers/pfedme.md §6.2).
"""

from __future__ import annotations

import numpy as np

from hetfl.data.dataset import DatasetInfo
from hetfl.data.source import ImageSource

NUM_SAMPLES = 1797
NUM_CLASSES = 10
CLASS_COUNTS = (178, 182, 177, 183, 181, 182, 181, 179, 174, 180)
SAMPLE_SHAPE = (1, 8, 8)
MAX_VALUE = 16.0


def load_digits_raw() -> tuple[np.ndarray, np.ndarray]:
    """The raw digits.

    Returns:
        ``x`` float64 ``[1797, 1, 8, 8]`` raw values 0..16 and ``y`` int64 ``[1797]``, in stored order.
    """
    from sklearn.datasets import load_digits

    bunch = load_digits()
    return bunch.data.astype(np.float64).reshape(-1, *SAMPLE_SHAPE), bunch.target.astype(np.int64)


class Digits(ImageSource):
    """``digits``: scikit-learn's 1,797 handwritten 8×8 digits, shipped in its wheel (offline)."""

    name = "digits"
    max_value = MAX_VALUE

    @classmethod
    def info(cls, spec, key="dataset") -> DatasetInfo:
        return DatasetInfo(
            cls.name, NUM_SAMPLES, NUM_CLASSES, np.asarray(CLASS_COUNTS, np.int64), SAMPLE_SHAPE
        )

    @classmethod
    def raw(cls, root):
        return load_digits_raw()


DATASETS = [Digits]
