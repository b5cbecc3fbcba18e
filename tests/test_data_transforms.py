"""Per-cluster transforms: rotations, pixel and label permutations."""

from __future__ import annotations

import numpy as np
import pytest

from hetfl.data import apply_transform


def smooth_images(n=3, size=16):
    """Smooth, asymmetric images (bilinear interpolation is accurate on them)."""
    r, c = np.meshgrid(np.linspace(-1, 1, size), np.linspace(-1, 1, size), indexing="ij")
    base = np.exp(-((r - 0.3) ** 2 + (c + 0.1) ** 2) * 2) + 0.5 * r
    return np.stack([base * (k + 1) for k in range(n)])[:, None].astype(np.float32)  # [n, 1, H, W]


def test_none_returns_copies():
    x, y = smooth_images(), np.array([0, 1, 2])
    x2, y2 = apply_transform(x, y, {"kind": "none"}, 3)
    np.testing.assert_array_equal(x2, x)
    assert not np.shares_memory(x2, x) and not np.shares_memory(y2, y)


def test_quarter_turns_are_exact_and_counter_clockwise():
    x = np.arange(2 * 1 * 3 * 3, dtype=np.float32).reshape(2, 1, 3, 3)
    y = np.array([0, 1])
    r90, _ = apply_transform(x, y, {"kind": "rotate", "angle": 90.0}, 2)
    # counter-clockwise: the top row becomes the left column, read bottom-up
    np.testing.assert_array_equal(r90[0, 0, :, 0], x[0, 0, 0, ::-1])
    r360, _ = apply_transform(x, y, {"kind": "rotate", "angle": 360.0}, 2)
    np.testing.assert_array_equal(r360, x)
    r_neg, _ = apply_transform(x, y, {"kind": "rotate", "angle": -90.0}, 2)
    r270, _ = apply_transform(x, y, {"kind": "rotate", "angle": 270.0}, 2)
    np.testing.assert_array_equal(r_neg, r270)
    assert r90.flags.c_contiguous


def test_interpolated_rotation_turns_the_same_way():
    x = smooth_images()
    y = np.zeros(3, dtype=np.int64)
    near, _ = apply_transform(x, y, {"kind": "rotate", "angle": 89.0}, 1)
    ccw, _ = apply_transform(x, y, {"kind": "rotate", "angle": 90.0}, 1)
    cw, _ = apply_transform(x, y, {"kind": "rotate", "angle": -90.0}, 1)
    inner = (slice(None), slice(None), slice(3, -3), slice(3, -3))
    err_ccw = np.abs(near[inner] - ccw[inner]).max()
    err_cw = np.abs(near[inner] - cw[inner]).max()
    assert err_ccw < 0.1 * err_cw
    assert near.shape == x.shape and near.dtype == np.float32


def test_permute_pixels_is_a_fixed_permutation():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 1, 5, 5)).astype(np.float32)
    y = np.arange(4)
    a, ya = apply_transform(x, y, {"kind": "permute_pixels", "seed": 11}, 4)
    b, _ = apply_transform(x, y, {"kind": "permute_pixels", "seed": 11}, 4)
    c, _ = apply_transform(x, y, {"kind": "permute_pixels", "seed": 12}, 4)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c) and not np.array_equal(a, x)
    np.testing.assert_array_equal(ya, y)
    flat_x, flat_a = x.reshape(4, -1), a.reshape(4, -1)
    # the same permutation for every sample: recover it from sample 0, apply to the others
    perm = [int(np.flatnonzero(flat_x[0] == v)[0]) for v in flat_a[0]]
    np.testing.assert_array_equal(flat_a, flat_x[:, perm])
    vec = rng.normal(size=(3, 7)).astype(np.float32)  # works on feature vectors too
    out, _ = apply_transform(vec, np.zeros(3, dtype=np.int64), {"kind": "permute_pixels", "seed": 1}, 2)
    np.testing.assert_array_equal(np.sort(out, 1), np.sort(vec, 1))


def test_permute_labels_is_a_bijection():
    x = np.zeros((20, 2), np.float32)
    y = np.arange(20) % 10
    x2, y2 = apply_transform(x, y, {"kind": "permute_labels", "seed": 7}, 10)
    mapping = {int(a): int(b) for a, b in zip(y, y2, strict=True)}
    assert sorted(mapping.values()) == list(range(10)) and mapping != {i: i for i in range(10)}
    assert y2.dtype == y.dtype
    np.testing.assert_array_equal(y, np.arange(20) % 10)  # input untouched


def test_bad_transforms():
    with pytest.raises(ValueError, match="allowed"):
        apply_transform(np.zeros((1, 2)), np.zeros(1, dtype=np.int64), {"kind": "blur"}, 2)
    with pytest.raises(ValueError, match="images"):
        apply_transform(np.zeros((1, 2)), np.zeros(1, dtype=np.int64), {"kind": "rotate", "angle": 45}, 2)
