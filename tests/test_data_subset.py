"""``mnist_subset``: a class-balanced, seeded draw of the full MNIST or Fashion-MNIST."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hetfl.data import dataset_id, dataset_info, load_dataset, normalize_dataset_spec
from hetfl.data.image_subset import subset_rows
from hetfl.data.mnist import FashionMNIST
from hetfl.errors import ConfigError

FASHION_PACKAGE = Path("/usr/share/datasets/fashion-mnist")


def test_rows_are_balanced_sorted_distinct_and_seeded():
    y = np.random.default_rng(0).integers(0, 4, size=400)
    rows = subset_rows(y, 20, seed=3)
    assert rows.dtype == np.int64 and len(rows) == 80 and len(set(rows.tolist())) == 80
    assert (np.diff(rows) > 0).all()  # the pool's order kept
    np.testing.assert_array_equal(np.bincount(y[rows]), [20] * 4)
    np.testing.assert_array_equal(rows, subset_rows(y, 20, seed=3))
    assert not np.array_equal(rows, subset_rows(y, 20, seed=4))


def test_a_class_draw_does_not_depend_on_the_other_classes():
    y = np.repeat([0, 1], 50)
    y_more = np.concatenate([y, np.full(30, 2)])  # a third class appended after the others
    a, b = subset_rows(y, 10, 7), subset_rows(y_more, 10, 7)
    np.testing.assert_array_equal(a, b[y_more[b] < 2])


def test_too_few_images_of_a_class():
    with pytest.raises(ValueError, match="class 1 has 5 images"):
        subset_rows(np.array([0] * 10 + [1] * 5), 6, 0)


def test_spec_info_and_errors_name_the_key():
    spec = normalize_dataset_spec({"name": "mnist_subset", "per_class": 600}, "d")
    assert spec == {"name": "mnist_subset", "normalize": "zscore", "source": "fashion_mnist", "per_class": 600,
                    "seed": 0}  # fmt: skip
    info = dataset_info({"name": "mnist_subset", "per_class": 600})
    assert info.num_samples == 6000 and info.sample_shape == (1, 28, 28)
    np.testing.assert_array_equal(info.class_counts, [600] * 10)
    assert dataset_id({"name": "mnist_subset", "per_class": 600}) != dataset_id(
        {"name": "mnist_subset", "per_class": 600, "seed": 1}
    )
    with pytest.raises(ConfigError) as err:
        dataset_info({"name": "mnist_subset", "source": "mnist", "per_class": 6500}, "studies.s.dataset")
    assert err.value.key == "studies.s.dataset.per_class" and "6313" in str(err.value)
    with pytest.raises(ConfigError) as err:
        normalize_dataset_spec({"name": "mnist_subset"}, "studies.s.dataset")
    assert err.value.key == "studies.s.dataset.per_class"
    with pytest.raises(ConfigError) as err:
        normalize_dataset_spec(
            {"name": "mnist_subset", "per_class": 9, "source": "cifar10"}, "studies.s.dataset"
        )
    assert err.value.key == "studies.s.dataset.source" and "fashion_mnist" in err.value.allowed


@pytest.mark.skipif(not FASHION_PACKAGE.is_dir(), reason="Debian's dataset-fashion-mnist is not installed")
def test_the_draw_of_fashion_mnist_is_its_rows(tmp_path):
    sub = load_dataset({"name": "mnist_subset", "per_class": 50, "normalize": "none"}, tmp_path / "sub")
    full = load_dataset({"name": "fashion_mnist", "normalize": "none"}, tmp_path / "full")
    rows = subset_rows(full.y, 50, 0)
    np.testing.assert_array_equal(sub.x, full.x[rows])
    np.testing.assert_array_equal(sub.y, full.y[rows])
    assert sub.name == "mnist_subset" and sub.num_classes == FashionMNIST.num_classes
    np.testing.assert_array_equal(np.bincount(sub.y), [50] * 10)
