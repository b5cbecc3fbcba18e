"""Per-cluster data transforms of the ``clusters`` partition (feature or label shift between clusters).

A transform is a small JSON-able dict recorded in the partition, one per cluster:

- ``{"kind": "none"}``
- ``{"kind": "rotate", "angle": 90.0}``: rotate images counter-clockwise by ``angle`` degrees in the
  plane of the last two axes (as ``np.rot90``). Multiples of 90° are exact (``np.rot90``); other angles
  use ``scipy.ndimage.rotate(order=1, reshape=False, mode="nearest")`` (bilinear, same size, corners
  filled with the nearest edge pixel, i.e. background for digit images). The rotation acts on the
  already-normalized pixels.
- ``{"kind": "permute_pixels", "seed": 123}``: one fixed permutation of the flattened features,
  ``np.random.default_rng(seed).permutation(prod(sample_shape))``.
- ``{"kind": "permute_labels", "seed": 7}``: labels mapped by
  ``np.random.default_rng(seed).permutation(num_classes)``: ``y -> perm[y]``.
"""

from __future__ import annotations

import numpy as np

TRANSFORM_KINDS = ("none", "permute_labels", "permute_pixels", "rotate")


def pixel_permutation(seed: int, num_features: int) -> np.ndarray:
    """The feature permutation of ``permute_pixels``: int64 ``[num_features]``."""
    return np.random.default_rng(seed).permutation(num_features)


def label_permutation(seed: int, num_classes: int) -> np.ndarray:
    """The label map of ``permute_labels``: int64 ``[num_classes]``, new label = ``perm[old]``."""
    return np.random.default_rng(seed).permutation(num_classes)


def rotate_images(x: np.ndarray, angle: float) -> np.ndarray:
    """Rotate ``x [n, ..., H, W]`` counter-clockwise by ``angle`` degrees in the last two axes (a copy)."""
    if x.ndim < 3:
        raise ValueError(f"rotate needs images [n, ..., H, W], got shape {x.shape}")
    quarter = angle / 90.0
    if float(quarter).is_integer():
        return np.ascontiguousarray(np.rot90(x, k=int(quarter) % 4, axes=(-2, -1)))
    from scipy import ndimage

    return ndimage.rotate(x, angle, axes=(-2, -1), reshape=False, order=1, mode="nearest").astype(x.dtype)


def apply_transform(
    x: np.ndarray, y: np.ndarray, transform: dict, num_classes: int
) -> tuple[np.ndarray, np.ndarray]:
    """Apply one cluster transform to a batch of samples.

    Args:
        x: ``[n, *sample_shape]`` features.
        y: int ``[n]`` labels.
        transform: a transform dict (see the module docstring).
        num_classes: number of classes (for ``permute_labels``).

    Returns:
        transformed copies ``(x', y')`` of the same shapes and dtypes; the inputs are not modified.

    Raises:
        ValueError: unknown kind, missing parameter, or ``rotate`` on non-image samples.
    """
    kind = transform.get("kind")
    x = np.asarray(x)
    y = np.asarray(y)
    if kind == "none":
        return x.copy(), y.copy()
    if kind == "rotate":
        return rotate_images(x, float(transform["angle"])), y.copy()
    if kind == "permute_pixels":
        flat = x.reshape(x.shape[0], -1)
        perm = pixel_permutation(int(transform["seed"]), flat.shape[1])
        return flat[:, perm].reshape(x.shape), y.copy()
    if kind == "permute_labels":
        return x.copy(), label_permutation(int(transform["seed"]), num_classes)[y].astype(y.dtype)
    raise ValueError(f"unknown transform kind {kind!r}; allowed: {', '.join(TRANSFORM_KINDS)}")
