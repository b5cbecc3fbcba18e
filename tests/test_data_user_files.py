"""Your own data: the ``npz`` and ``leaf`` datasets, their natural split, and validation hold-outs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hetfl.config import build_suite
from hetfl.data import dataset_id, dataset_info, load_dataset, make_partition, partition_id
from hetfl.data.leaf import LETTERS
from hetfl.data.partition import normalize_partition_spec
from hetfl.data.registry import dataset_checksum, dataset_files
from hetfl.errors import ConfigError


def write_npz(path, n_clients=4, per_client=12, features=5, seed=0, **extra):
    """A small classification set: ``client`` ids 10, 20, ... (renumbered), clusters by client parity."""
    rng = np.random.default_rng(seed)
    n = n_clients * per_client
    arrays = {
        "x": rng.normal(size=(n, features)).astype(np.float32),
        "y": rng.integers(0, 3, size=n),
        "client": np.repeat(np.arange(n_clients) * 10 + 10, per_client),
        "cluster": np.repeat(np.arange(n_clients) % 2, per_client),
        **extra,
    }
    np.savez(path, **arrays)
    return arrays


def write_leaf(folder, users=("u2", "u0", "u1"), text=False, seed=0):
    """A LEAF train/test pair; the test file lists the users in another order."""
    rng = np.random.default_rng(seed)
    files = {}
    for role, per_user in (("train", 6), ("test", 3)):
        data = {}
        for u in users:
            if text:
                x = ["".join(rng.choice(list(LETTERS[:40]), size=8)) for _ in range(per_user)]
                y = [str(rng.choice(list(LETTERS[:40]))) for _ in range(per_user)]
            else:
                x = rng.normal(size=(per_user, 4)).round(3).tolist()
                y = rng.integers(0, 2, size=per_user).tolist()
            data[u] = {"x": x, "y": y}
        order = list(users) if role == "train" else list(reversed(users))
        blob = {"users": order, "num_samples": [len(data[u]["y"]) for u in order], "user_data": data}
        files[role] = folder / f"{role}.json"
        files[role].write_text(json.dumps(blob))
    return files


def test_npz_info_load_and_natural_split(tmp_path):
    arrays = write_npz(tmp_path / "mine.npz")
    spec = {"name": "npz", "path": str(tmp_path / "mine.npz")}
    info = dataset_info(spec)
    assert (info.num_samples, info.num_classes, info.sample_shape, info.num_users) == (48, 3, (5,), 4)
    assert info.user_clusters.tolist() == [0, 1, 0, 1] and not info.predefined_split
    ds = load_dataset(spec, tmp_path)
    np.testing.assert_array_equal(ds.x, arrays["x"])
    np.testing.assert_array_equal(ds.users, np.repeat(np.arange(4), 12))  # ids 10..40 renumbered
    part = make_partition({"scheme": "natural", "test_fraction": 0.25}, ds, 0)
    assert [len(t) for t in part.train] == [9] * 4 and part.cluster.tolist() == [0, 1, 0, 1]
    assert dataset_files(spec) == [spec["path"]] and len(dataset_checksum(spec)) == 64
    assert dataset_id(spec).startswith("npz-")


def test_npz_regression_shape_and_own_split(tmp_path):
    rng = np.random.default_rng(1)
    np.savez(
        tmp_path / "reg.npz",
        x=rng.normal(size=(20, 16)),
        y=rng.normal(size=20),
        client=np.repeat([0, 1], 10),
        split=np.tile([0, 0, 0, 1, 0], 4),
    )
    spec = {"name": "npz", "path": str(tmp_path / "reg.npz"), "sample_shape": [1, 4, 4]}
    info = dataset_info(spec)
    assert info.task == "regression" and info.sample_shape == (1, 4, 4) and info.predefined_split
    ds = load_dataset(spec, tmp_path)
    assert ds.x.shape == (20, 1, 4, 4) and ds.targets.shape == (20, 1) and ds.x.dtype == np.float64
    part = make_partition({"scheme": "natural"}, ds, 3)
    for c in range(2):  # the file's own division, in file order
        assert (ds.split[part.train[c]] == 0).all() and (ds.split[part.test[c]] == 1).all()
        assert part.train[c].tolist() == sorted(part.train[c].tolist()) and len(part.test[c]) == 2


@pytest.mark.parametrize(
    "extra,key,message",
    [
        ({}, "studies.s.dataset.path", "required"),
        ({"path": "no/such/file.npz"}, "studies.s.dataset.path", "no file"),
        ({"path": 3}, "studies.s.dataset.path", "file path"),
        ({"path": "{bad}", "task": "ranking"}, "studies.s.dataset.task", "classification"),
    ],
)
def test_npz_bad_options_name_the_key(tmp_path, extra, key, message):
    (tmp_path / "bad").write_text("not a zip")
    extra = {k: (str(tmp_path / "bad") if v == "{bad}" else v) for k, v in extra.items()}
    with pytest.raises(ConfigError) as err:
        dataset_info({"name": "npz", **extra}, "studies.s.dataset")
    assert err.value.key == key and message in str(err.value)


@pytest.mark.parametrize(
    "arrays,message",
    [
        ({"x": np.zeros((4, 2)), "y": np.array([0, 1, -1, 0])}, "non-negative integer"),
        ({"x": np.zeros((4, 2)), "y": np.zeros(5, int)}, "rows"),
        ({"x": np.zeros((4, 2)), "y": np.zeros(4, int), "cluster": np.zeros(4, int)}, "cluster needs client"),
        (
            {"x": np.zeros((4, 2)), "y": np.zeros(4, int), "client": [0, 0, 1, 1], "cluster": [0, 1, 1, 1]},
            "same for every sample of a client",
        ),
        ({"x": np.zeros((4, 2)), "y": np.zeros(4, int), "split": [0, 1, 2, 0]}, "0 (train) or 1 (test)"),
        ({"y": np.zeros(4, int)}, "missing"),
        ({"x": np.zeros((4, 2)), "y": np.zeros(4, int), "client": [0.5, 0, 1, 1]}, "integer per sample"),
    ],
)
def test_npz_bad_arrays_are_config_errors(tmp_path, arrays, message):
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ConfigError) as err:
        dataset_info({"name": "npz", "path": str(tmp_path / "bad.npz")}, "studies.s.dataset")
    assert err.value.key == "studies.s.dataset.path" and message in str(err.value)


def test_npz_non_finite_features_are_refused_when_loaded(tmp_path):
    x = np.zeros((4, 2))
    x[1, 1] = np.nan
    np.savez(tmp_path / "nan.npz", x=x, y=np.zeros(4, int))
    with pytest.raises(ConfigError, match="NaN"):
        load_dataset({"name": "npz", "path": str(tmp_path / "nan.npz")}, tmp_path)


def test_leaf_keeps_the_files_users_and_train_test_division(tmp_path):
    files = write_leaf(tmp_path)
    spec = {"name": "leaf", "train": str(files["train"]), "test": str(files["test"])}
    info = dataset_info(spec)
    assert (info.num_users, info.num_samples, info.sample_shape) == (3, 27, (4,)) and info.predefined_split
    ds = load_dataset(spec, tmp_path)
    part = make_partition({"scheme": "natural"}, ds, 0)
    train, test = (json.loads(files[r].read_text())["user_data"] for r in ("train", "test"))
    for client, user in enumerate(("u2", "u0", "u1")):  # the train file's user order
        np.testing.assert_allclose(ds.x[part.train[client]], train[user]["x"], rtol=1e-6)
        np.testing.assert_allclose(ds.x[part.test[client]], test[user]["x"], rtol=1e-6)
        assert ds.y[part.test[client]].tolist() == test[user]["y"]
    with pytest.raises(ConfigError) as err:
        normalize_partition_spec({"scheme": "natural", "test_fraction": 0.2}, "studies.s.partition", info)
    assert err.value.key == "studies.s.partition.test_fraction"
    pooled = make_partition({"scheme": "iid", "clients": 3}, ds, 0)  # other schemes pool the samples
    assert sum(len(t) for t in pooled.train + pooled.test) == 27


def test_leaf_text_is_encoded_by_leafs_alphabet(tmp_path):
    files = write_leaf(tmp_path, text=True)
    ds = load_dataset({"name": "leaf", "train": str(files["train"]), "test": str(files["test"])}, tmp_path)
    first = json.loads(files["train"].read_text())["user_data"]["u2"]
    assert ds.x.shape == (27, 8) and ds.num_classes == len(LETTERS) == 80
    assert [LETTERS[int(i)] for i in ds.x[0]] == list(first["x"][0])
    assert LETTERS[int(ds.y[0])] == first["y"][0]


def test_leaf_users_must_match(tmp_path):
    files = write_leaf(tmp_path)
    blob = json.loads(files["test"].read_text())
    blob["users"][0] = "stranger"
    blob["user_data"]["stranger"] = blob["user_data"].pop("u1")
    files["test"].write_text(json.dumps(blob))
    with pytest.raises(ConfigError) as err:
        dataset_info({"name": "leaf", "train": str(files["train"]), "test": str(files["test"])}, "d")
    assert err.value.key == "d.test" and "train and test files only" in str(err.value)


def test_validation_is_held_out_of_training_deterministically(tmp_path):
    write_npz(tmp_path / "mine.npz", per_client=20)
    ds = load_dataset({"name": "npz", "path": str(tmp_path / "mine.npz")}, tmp_path)
    plain = make_partition({"scheme": "natural", "test_fraction": 0.25}, ds, 5)
    held = make_partition({"scheme": "natural", "test_fraction": 0.25, "val_fraction": 0.2}, ds, 5)
    again = make_partition({"scheme": "natural", "test_fraction": 0.25, "val_fraction": 0.2}, ds, 5)
    for c in range(4):
        assert len(held.val[c]) == 3 and len(held.train[c]) == 12  # int(0.2 * 15) = 3 of 15
        assert sorted([*held.train[c], *held.val[c]]) == sorted(plain.train[c])  # from training only
        np.testing.assert_array_equal(held.test[c], plain.test[c])
        assert [i for i in plain.train[c] if i not in held.val[c]] == held.train[c].tolist()  # order kept
        np.testing.assert_array_equal(held.val[c], again.val[c])
    info = dataset_info({"name": "npz", "path": str(tmp_path / "mine.npz")})
    zero = normalize_partition_spec({"scheme": "natural", "val_fraction": 0}, "p", info)
    assert partition_id(zero) == partition_id(normalize_partition_spec({"scheme": "natural"}, "p", info))
    path = tmp_path / "clients.npz"
    held.save(path)
    loaded = type(held).load(path)
    assert [v.tolist() for v in loaded.val] == [v.tolist() for v in held.val]


def test_validation_metrics_are_declared_and_a_tiny_client_is_an_error(tmp_path):
    write_npz(tmp_path / "mine.npz")
    study = {
        "dataset": {"name": "npz", "path": str(tmp_path / "mine.npz")},
        "partition": {"scheme": "natural", "val_fraction": 0.1},
        "model": {"name": "mlr"},
        "rounds": 2,
        "seeds": [0],
        "runs": {"fedavg": {"algorithm": "fedavg"}},
    }
    metrics = build_suite({"studies": {"s": study}}).studies["s"].runs["fedavg"].metrics
    assert {"val_acc_global", "val_loss_global", "test_acc_global"} <= set(metrics)
    ds = load_dataset(study["dataset"], tmp_path)
    with pytest.raises(ConfigError) as err:
        make_partition({"scheme": "iid", "clients": 24, "val_fraction": 0.5}, ds, 0, "studies.s.partition")
    assert err.value.key == "studies.s.partition.val_fraction"
