"""pFedMe's Synthetic(α, β) generator against the values derived in docs/papers/pfedme.md §4.1."""

from __future__ import annotations

import numpy as np
import pytest

from hetfl.data import dataset_info, load_dataset
from hetfl.data.synthetic import generate_synthetic, synthetic_sizes

# docs/papers/pfedme.md §4.1: sorted per-user sizes of the official generator with seed 0 (an external
# reference)
SPEC_SORTED_SIZES = """
250 255 255 255 260 260 260 260 265 270 270 275 275 280 280 285 290 295 295 295
295 300 310 315 320 325 335 345 345 360 370 370 375 380 380 385 395 395 425 430
435 440 450 470 505 525 545 550 555 560 595 600 600 610 620 620 635 660 745 760
780 805 830 840 855 855 860 870 890 910 935 940 1255 1370 1420 1500 1540 1785 1900 2075
2175 2180 2495 2915 3130 3270 3395 3445 5250 5405 5605 5665 6100 9545 9960 11685 12350 13755 24380 25810
"""


@pytest.fixture(scope="module")
def default():
    return load_dataset({"name": "synthetic"}, "unused")


def test_sizes_match_the_spec_list():
    expected = [int(v) for v in SPEC_SORTED_SIZES.split()]
    sizes = synthetic_sizes(100, 0)
    assert sorted(sizes.tolist()) == expected
    info = dataset_info({"name": "synthetic"})
    assert info.num_samples == 205_795 == sum(expected)
    assert info.class_counts is None and info.num_users == 100 and info.sample_shape == (60,)
    np.testing.assert_array_equal(info.user_counts, sizes)


def test_full_generation_matches_its_info(default):
    assert default.x.shape == (205_795, 60) and default.x.dtype == np.float32
    assert default.y.min() >= 0 and default.y.max() <= 9 and len(np.unique(default.y)) == 10
    np.testing.assert_array_equal(np.bincount(default.users), synthetic_sizes(100, 0))
    assert (np.diff(default.users) >= 0).all()  # users contiguous, user 0 first


def test_feature_means_follow_the_documented_call_order(default):
    """Replay calls 1-4 (lognormal sizes, mean_W, B, per-user mean_x) with a fresh legacy generator:
    each user's empirical feature mean must be close to its mean_x."""
    rs = np.random.RandomState(0)
    rs.lognormal(4, 2, 100)
    rs.normal(0, 0.5, 100)
    b_prior = rs.normal(0, 0.5, 100)
    mean_x = np.stack([rs.normal(b_prior[i], 1, 60) for i in range(100)])
    sizes = np.bincount(default.users)
    for user in np.argsort(sizes)[-3:]:  # the three largest users: tight empirical means
        emp = default.x[default.users == user].mean(0)
        np.testing.assert_allclose(emp, mean_x[user], atol=0.05)
    # negative control: a different call order (B drawn right after the sizes) predicts other means
    rs = np.random.RandomState(0)
    rs.lognormal(4, 2, 100)
    wrong_b = rs.normal(0, 0.5, 100)
    wrong_mean_x = np.stack([rs.normal(wrong_b[i], 1, 60) for i in range(100)])
    user = int(np.argmax(sizes))
    assert not np.allclose(default.x[default.users == user].mean(0), wrong_mean_x[user], atol=0.05)


def test_labels_are_a_linear_argmax_per_user():
    """Within one user, y = argmax(x W + b) is linearly separable: a least-squares one-vs-rest fit on the
    true classes recovers far more than chance, and the iid variant shares one model across users."""
    x, y, users = generate_synthetic(num_users=4, dimension=10, num_classes=3, seed=5)
    for u in range(4):
        xu, yu = x[users == u], y[users == u]
        feats = np.hstack([xu, np.ones((len(xu), 1))])
        target = np.eye(3)[yu]
        coef, *_ = np.linalg.lstsq(feats, target, rcond=None)
        assert (np.argmax(feats @ coef, 1) == yu).mean() > 0.8


def test_iid_variant_uses_constant_feature_means_and_one_model():
    x, y, users = generate_synthetic(alpha=0.0, beta=0.0, num_users=3, dimension=8, seed=2, iid=True)
    # beta = 0: every B_k = 0, so every user's features are centred at 0 in every coordinate
    for u in range(3):
        assert np.abs(x[users == u].mean(0)).max() < 0.5
    # one shared (W, b): a single linear model fits all users' labels
    feats = np.hstack([x, np.ones((len(x), 1))])
    coef, *_ = np.linalg.lstsq(feats, np.eye(10)[y], rcond=None)
    assert (np.argmax(feats @ coef, 1) == y).mean() > 0.6


def test_deterministic_in_the_seed_and_the_options():
    a = generate_synthetic(num_users=5, dimension=6, seed=1)
    b = generate_synthetic(num_users=5, dimension=6, seed=1)
    c = generate_synthetic(num_users=5, dimension=6, seed=2)
    e = generate_synthetic(beta=1.0, num_users=5, dimension=6, seed=1)
    for u, v in zip(a, b, strict=True):
        np.testing.assert_array_equal(u, v)
    assert a[0].shape != c[0].shape or not np.array_equal(a[0], c[0])
    np.testing.assert_array_equal(a[2], e[2])  # beta moves the features, not the sizes
    assert not np.array_equal(a[0], e[0]) and not np.array_equal(a[1], e[1])


def test_alpha_does_not_change_the_data():
    """The prior mean u_k ~ N(0, α) shifts every entry of W and b by the same scalar, which adds the same
    amount to every class's logit: with the same draws, α leaves x and y unchanged (documented quirk)."""
    a = generate_synthetic(alpha=0.0, num_users=4, dimension=6, seed=3)
    d = generate_synthetic(alpha=5.0, num_users=4, dimension=6, seed=3)
    for u, v in zip(a, d, strict=True):
        np.testing.assert_array_equal(u, v)
