"""Writes scikit-learn's 1,797 handwritten digits as 3×32×32 images (each 8×8 pixel a 4×4 block, the gray
value in all three channels) to an ``npz`` dataset file (``x`` float32 ``[1797, 3, 32, 32]`` in [0, 1],
``y`` int64 ``[1797]``): real images of the CIFAR-10 shape, for a VGG-11 study on a machine that cannot
download CIFAR-10 (``benchmarks/cuda/vgg11_digits.yaml``).

    python benchmarks/cuda/digits32.py results/digits32.npz
"""

from __future__ import annotations

import sys

import numpy as np
from sklearn.datasets import load_digits


def main(path: str) -> None:
    digits = load_digits()
    x = np.kron(digits.images / 16.0, np.ones((4, 4))).astype(np.float32)  # [n, 32, 32]
    np.savez(path, x=np.repeat(x[:, None], 3, axis=1), y=digits.target.astype(np.int64))


if __name__ == "__main__":
    main(sys.argv[1])
