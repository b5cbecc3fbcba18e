"""``mnist_landmarks``: the GLDv2-like population of users photographing a few landmarks, and its public part."""

from __future__ import annotations

import numpy as np
import pytest

from hetfl.data import mnist_landmarks
from hetfl.data.mnist_landmarks import SOURCE_CLASSES, build, plan
from hetfl.data.registry import dataset_info, normalize_dataset_spec
from hetfl.errors import ConfigError


def spec(**options):
    return normalize_dataset_spec({"name": "mnist_landmarks", **options}, "dataset")


SMALL = {"users": 30, "size_median": 12.0, "size_max": 30, "public_per_class": 6, "public_users": 3}


def numbered_images(per_class=120):
    """uint8 ``[10·per_class, 1, 28, 28]`` images, each with its own index written in its first pixels (so a
    row can be told from every other), labels 0..9 in turn."""
    n = SOURCE_CLASSES * per_class
    x = np.zeros((n, 1, 28, 28), dtype=np.uint8)
    x[:, 0, 0, 0], x[:, 0, 0, 1] = np.arange(n) // 256, np.arange(n) % 256
    return x, np.arange(n, dtype=np.int64) % SOURCE_CLASSES


def test_users_live_in_their_cities_and_sizes_are_bounded():
    s = spec(users=300)
    p = plan(s)
    landmarks = SOURCE_CLASSES * s["landmarks_per_class"]
    assert p.counts.shape == (300, landmarks) and p.landmarks == landmarks
    sizes = p.counts.sum(1)
    assert sizes.min() >= s["size_min"] and sizes.max() <= s["size_max"]
    assert np.median(sizes) == pytest.approx(s["size_median"], rel=0.15)
    for row in p.counts:  # user_classes 1: every landmark a user photographs is a view of one digit
        assert np.unique(np.flatnonzero(row) % SOURCE_CLASSES).size == 1
    owned = (p.counts > 0).sum(1)
    assert owned.min() >= 1 and owned.mean() == pytest.approx(s["user_landmarks"], rel=0.2)
    two = plan(spec(users=300, user_classes=2)).counts
    assert max(np.unique(np.flatnonzero(r) % SOURCE_CLASSES).size for r in two) == 2
    assert np.array_equal(plan(s).counts, p.counts)  # deterministic from the seed
    assert not np.array_equal(plan(spec(users=300, seed=1)).counts, p.counts)


def test_popular_landmarks_are_shared_by_many_users():
    p = plan(spec(users=300))
    users_per_landmark = (p.counts > 0).sum(0)
    assert users_per_landmark.max() >= 5 * max(np.median(users_per_landmark), 1)  # Zipf popularity
    assert p.popularity.sum() == pytest.approx(1.0)


def test_info_matches_the_built_data(monkeypatch):
    s = spec(**SMALL)
    images, labels = numbered_images()
    dataset, record = build(s, images, labels)
    info = dataset_info(s)
    assert info.num_samples == len(dataset) and info.num_users == SMALL["users"] + SMALL["public_users"]
    assert np.array_equal(info.user_counts, np.bincount(dataset.users))
    assert np.array_equal(info.class_counts, np.bincount(dataset.y, minlength=info.num_classes))
    assert info.num_classes == dataset.num_classes == 10 * s["landmarks_per_class"] + SOURCE_CLASSES
    assert (
        len(record["landmarks"]) == 10 * s["landmarks_per_class"] and len(record["users"]) == info.num_users
    )


def test_the_public_part_is_plain_disjoint_and_has_classes_of_its_own(monkeypatch):
    monkeypatch.setattr(mnist_landmarks, "render", lambda x, style: x)  # keep each photo's index readable
    s = spec(**SMALL)
    images, labels = numbered_images()
    dataset, _ = build(s, images, labels)
    pixels = np.rint(dataset.x[:, 0, 0, :2] * 255).astype(np.int64)
    rows = pixels[:, 0] * 256 + pixels[:, 1]
    assert np.unique(rows).size == len(dataset)  # no source image is used twice
    landmarks = 10 * s["landmarks_per_class"]
    assert np.array_equal(
        labels[rows], np.where(dataset.y < landmarks, dataset.y, dataset.y - landmarks) % 10
    )
    public = dataset.users >= SMALL["users"]
    assert (dataset.y[public] >= landmarks).all() and (dataset.y[~public] < landmarks).all()
    assert np.array_equal(np.bincount(dataset.y[public] - landmarks), np.full(10, SMALL["public_per_class"]))
    assert dataset.split is None  # the partition draws each user's train/test division


def test_a_landmarks_view_does_not_depend_on_the_users():
    images, labels = numbered_images()
    _, a = build(spec(**SMALL), images, labels)
    _, b = build(spec(**(SMALL | {"users": 20})), images, labels)
    assert a["landmarks"] == b["landmarks"]


@pytest.mark.parametrize(
    "options,key",
    [
        ({"users": 5000, "size_median": 200.0}, "users"),  # more images of a class than MNIST has
        ({"size_min": 1}, "size_min"),  # below the option's range
        ({"size_min": 40, "size_max": 30}, "size_min"),
        ({"public_per_class": 1, "public_users": 10}, "public_per_class"),  # a public user with one image
        ({"user_classes": 11}, "user_classes"),
        ({"popularity": float("nan")}, "popularity"),
    ],
)
def test_bad_options_name_their_key(options, key):
    with pytest.raises(ConfigError) as e:
        dataset_info(spec(**options))
    assert e.value.key == f"dataset.{key}"
