"""Your own data: the ``npz`` and ``leaf`` datasets, their natural split, and validation hold-outs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hetfl.data import dataset_id, dataset_info, load_dataset, make_partition, partition_id
from hetfl.data.leaf import LETTERS
from hetfl.data.partition import normalize_partition_spec
from hetfl.data.registry import dataset_checksum, dataset_files
from hetfl.errors import ConfigError
from hetfl.pipeline.config import build_suite


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
        ({"x": np.zeros((4, 2)), "y": np.array([0, 1, -1, 0])}, "sample 2: the label -1 is negative"),
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
    assert err.value.key == "d.test" and "user 'u1' of the train file" in str(err.value)
    assert str(files["test"]) in str(err.value)


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


# --- bad files: every refusal names the study's key, the file and the element, before any job ---------------


def write_split_npz(path, **extra):
    """:func:`write_npz` with its own train/test division (every 4th sample of a client is a test sample)."""
    arrays = write_npz(path, split=np.tile([0, 0, 0, 1], 12), **extra)
    return arrays


def _npz_case(change):
    def write(path):
        arrays = dict(np.load(path))
        change(arrays)
        np.savez(path, **arrays)

    return write


def _set(arrays, name, index, value):
    arrays[name] = arrays[name].astype(type(value)) if isinstance(value, float) else arrays[name]
    arrays[name][index] = value


BAD_NPZ = {  # case -> (make the file bad, the option at fault, what the message says of the element)
    "nan_x": (_npz_case(lambda a: _set(a, "x", (5, 1), np.nan)), "path", "sample 5: x holds nan at feature 1"),
    "inf_x": (_npz_case(lambda a: _set(a, "x", (7, 0), np.inf)), "path", "sample 7: x holds inf at feature 0"),
    "negative_label": (_npz_case(lambda a: _set(a, "y", 3, -1)), "path", "sample 3: the label -1 is negative"),
    "fractional_label": (
        _npz_case(lambda a: _set(a, "y", 3, 1.5)), "path", "sample 3: the label 1.5 is not a whole number",
    ),
    "client_length": (
        _npz_case(lambda a: a.update(client=a["client"][:-1])), "path", "client has shape (47,)",
    ),
    "missing_y": (_npz_case(lambda a: a.pop("y")), "path", "the array(s) y are missing"),
    "client_without_train": (
        _npz_case(lambda a: a["split"].__setitem__(a["client"] == 30, 1)),
        "path",
        "client 30 (client 2 of the natural split) has 0 train and 12 test samples",
    ),
}  # fmt: skip


def _leaf_case(role, change):
    def write(folder):
        path = folder / f"{role}.json"
        blob = json.loads(path.read_text())
        text = change(blob)
        path.write_text(text if isinstance(text, str) else json.dumps(blob))

    return write


def _empty_user(blob):
    blob["user_data"]["u0"] = {"x": [], "y": []}
    blob["num_samples"][blob["users"].index("u0")] = 0


def _stranger(blob):
    blob["users"][blob["users"].index("u1")] = "stranger"
    blob["user_data"]["stranger"] = blob["user_data"].pop("u1")


BAD_LEAF = {
    "num_samples": (
        _leaf_case("train", lambda b: b["num_samples"].__setitem__(0, 7)),
        "train",
        "user 'u2': 'num_samples' says 7, its 'user_data' has 6 samples",
    ),
    "user_in_one_file": (_leaf_case("test", _stranger), "test", "user 'u1' of the train file"),
    "truncated_json": (
        _leaf_case("train", lambda b: json.dumps(b)[:300]), "train", "not valid JSON (a truncated",
    ),
    "user_without_samples": (
        _leaf_case("train", _empty_user), "train", "user 'u0' (client 1 of the natural split) has 0 train",
    ),
    "fractional_label": (
        _leaf_case("test", lambda b: b["user_data"]["u1"]["y"].__setitem__(2, 0.5)),
        "test",
        "user 'u1', sample 2: the label 0.5 is not a whole number",
    ),
}  # fmt: skip


def two_studies(bad: dict, good: dict, partition: dict | None = None) -> dict:
    """A config of two studies on your own files: ``mine`` on ``bad``, ``other`` on ``good``."""

    def study(dataset):
        return {
            "dataset": dataset,
            "partition": partition or {"scheme": "natural"},
            "model": {"name": "mlr"},
            "rounds": 1,
            "seeds": [0],
            "runs": {"fedavg": {"algorithm": "fedavg"}},
        }

    return {"studies": {"other": study(good), "mine": study(bad)}}


@pytest.mark.parametrize("case", list(BAD_NPZ))
def test_a_bad_npz_is_refused_naming_the_study_the_file_and_the_sample(tmp_path, case):
    write_split_npz(tmp_path / "good.npz")
    write_split_npz(tmp_path / "mine.npz")
    change, option, element = BAD_NPZ[case]
    build_suite(
        two_studies(
            {"name": "npz", "path": str(tmp_path / "mine.npz")},
            {"name": "npz", "path": str(tmp_path / "good.npz")},
        )
    )
    change(tmp_path / "mine.npz")
    with pytest.raises(ConfigError) as err:
        build_suite(
            two_studies(
                {"name": "npz", "path": str(tmp_path / "mine.npz")},
                {"name": "npz", "path": str(tmp_path / "good.npz")},
            )
        )
    assert err.value.key == f"studies.mine.dataset.{option}"
    assert str(tmp_path / "mine.npz") in err.value.message and element in err.value.message


@pytest.mark.parametrize("case", list(BAD_LEAF))
def test_a_bad_leaf_pair_is_refused_naming_the_study_the_file_and_the_user(tmp_path, case):
    (tmp_path / "good").mkdir()
    (tmp_path / "mine").mkdir()
    good, mine = write_leaf(tmp_path / "good"), write_leaf(tmp_path / "mine")
    spec = {"name": "leaf", "train": str(mine["train"]), "test": str(mine["test"])}
    other = {"name": "leaf", "train": str(good["train"]), "test": str(good["test"])}
    build_suite(two_studies(spec, other))
    change, option, element = BAD_LEAF[case]
    change(tmp_path / "mine")
    with pytest.raises(ConfigError) as err:
        build_suite(two_studies(spec, other))
    assert err.value.key == f"studies.mine.dataset.{option}"
    assert spec[option] in err.value.message and element in err.value.message


def test_min_user_samples_drops_small_users_and_says_how_many(tmp_path):
    (tmp_path / "leaf").mkdir()
    files = write_leaf(tmp_path / "leaf")
    _empty_user(json_blob := json.loads(files["train"].read_text()))
    files["train"].write_text(json.dumps(json_blob))
    spec = {"name": "leaf", "train": str(files["train"]), "test": str(files["test"]), "min_user_samples": 1}
    study = build_suite(two_studies(spec, spec)).studies["mine"]
    assert study.num_clients == 2
    assert any(
        "dropped 1 of 3 users with fewer than 1 train or test samples: user 'u0'" in n for n in study.notes
    )
    ds = load_dataset(spec, tmp_path)  # the data job drops them too
    assert (len(ds), int(ds.users.max()) + 1) == (18, 2)
    part = make_partition({"scheme": "natural"}, ds, 0)
    assert [len(t) for t in part.train] == [6, 6] and [len(t) for t in part.test] == [3, 3]
    with pytest.raises(ConfigError) as err:
        build_suite(two_studies({**spec, "min_user_samples": 7}, spec))
    assert err.value.key == "studies.mine.dataset.min_user_samples" and "every one of the 3 users" in str(
        err.value
    )
    np.savez(tmp_path / "flat.npz", x=np.zeros((4, 2)), y=np.zeros(4, int))
    with pytest.raises(ConfigError) as err:  # no natural users: the option has no effect
        dataset_info({"name": "npz", "path": str(tmp_path / "flat.npz"), "min_user_samples": 2}, "d")
    assert err.value.key == "d.min_user_samples" and "no natural users" in str(err.value)


def test_npz_without_a_split_drops_users_with_few_samples_in_all(tmp_path):
    arrays = write_npz(tmp_path / "mine.npz")
    keep = ~((arrays["client"] == 20) & (np.arange(48) % 12 >= 2))  # client 20 keeps 2 of its 12 samples
    np.savez(tmp_path / "mine.npz", **{k: v[keep] for k, v in arrays.items()})
    spec = {"name": "npz", "path": str(tmp_path / "mine.npz"), "min_user_samples": 3}
    info = dataset_info(spec)
    assert (
        info.num_users == 3
        and info.user_counts.tolist() == [12, 12, 12]
        and info.user_clusters.tolist() == [0, 0, 1]
    )
    ds = load_dataset(spec, tmp_path)
    np.testing.assert_array_equal(ds.x, arrays["x"][keep][np.repeat(arrays["client"][keep] != 20, 1)])


def test_task_auto_says_what_it_inferred_and_refuses_float_class_labels(tmp_path):
    write_split_npz(tmp_path / "mine.npz")
    write_split_npz(tmp_path / "good.npz")
    spec, good = ({"name": "npz", "path": str(tmp_path / f"{name}.npz")} for name in ("mine", "good"))
    notes = build_suite(two_studies(spec, good)).studies["mine"].notes
    assert "studies.mine.dataset: task auto: classification, since y holds integers (int64)" in notes[0]
    arrays = dict(np.load(tmp_path / "mine.npz"))
    np.savez(
        tmp_path / "mine.npz", **{**arrays, "y": arrays["y"].astype(np.float32)}
    )  # whole numbers as floats
    with pytest.raises(ConfigError) as err:
        build_suite(two_studies(spec, good))
    assert err.value.key == "studies.mine.dataset.path" and "task: classification" in err.value.message
    assert build_suite(two_studies({**spec, "task": "classification"}, good)).studies["mine"].notes == []
    np.savez(tmp_path / "mine.npz", **{**arrays, "y": np.linspace(0, 1, 48)})  # numeric targets
    study = build_suite(two_studies(spec, good, {"scheme": "iid", "clients": 2})).studies["mine"]
    assert "task auto: regression, since y holds float64 numbers with fractions" in study.notes[0]
    with pytest.raises(ConfigError) as err:
        build_suite(two_studies({**spec, "num_classes": 3}, good))
    assert err.value.key == "studies.mine.dataset.num_classes" and "regression" in err.value.message


def test_a_cached_verdict_skips_the_content_check_but_never_hides_a_changed_file(tmp_path, monkeypatch):
    from hetfl.data import verify
    from hetfl.data.npz import NpzFile

    write_split_npz(tmp_path / "mine.npz")
    spec = {"name": "npz", "path": str(tmp_path / "mine.npz")}
    cache = tmp_path / "checks"
    first = build_suite(two_studies(spec, spec), data_checks=cache).studies["mine"]
    assert len(list(cache.glob("*.json"))) == 1
    verify._MEMO.clear()

    def refuse(*args):
        raise AssertionError("the file was read again")

    monkeypatch.setattr(NpzFile, "load", classmethod(refuse))
    monkeypatch.setattr(NpzFile, "info", classmethod(refuse))
    again = build_suite(two_studies(spec, spec), data_checks=cache).studies["mine"]  # from the cache
    assert again.notes == first.notes and again.num_clients == first.num_clients == 4
    assert again.run_json("fedavg") == first.run_json("fedavg")
    monkeypatch.undo()
    BAD_NPZ["nan_x"][0](tmp_path / "mine.npz")  # same size, other bytes
    with pytest.raises(ConfigError) as err:
        build_suite(two_studies(spec, spec), data_checks=cache)
    assert "sample 5" in str(err.value)
    assert len(list(cache.glob("*.json"))) == 1  # a failure is not cached


def _federation(spec, root, partition):
    import torch

    from hetfl.engine.federation import Federation
    from hetfl.models import build_model

    ds = load_dataset(spec, root)
    ds.save(root / "data.npz")  # through the file, as a training job reads it
    from hetfl.data.dataset import Dataset

    ds = Dataset.load(root / "data.npz")
    part = make_partition(partition, ds, 0)
    model = build_model({"name": "mlr"}, ds.sample_shape, ds.num_outputs, ds.task)
    return ds, part, Federation.from_partition(ds, part, model, torch.device("cpu"), torch.float64)


@pytest.mark.parametrize("own_split", [False, True])
def test_npz_zscore_uses_the_training_samples_only(tmp_path, own_split):
    """``normalize: zscore`` standardizes with the mean and std of the partition's training samples: the
    training split has mean 0 and std 1 per feature (up to the +0.001), and changing every test (and
    validation) sample leaves the training data as they were; ``zscore_pooled`` (pFedMe's protocol) takes
    every sample, test included, in the data job."""
    rng = np.random.default_rng(3)
    n = 80
    client = np.repeat(np.arange(4), n // 4)
    split = (np.arange(n) % 4 == 3).astype(np.int8)  # 20 test samples
    x = (rng.normal(size=(n, 3)) * [1.0, 5.0, 0.1] + [2.0, -3.0, 10.0]).astype(np.float64)
    y = rng.integers(0, 2, size=n)
    extra = {"split": split} if own_split else {}
    partition = (
        {"scheme": "natural"}
        if own_split
        else {"scheme": "natural", "test_fraction": 0.25, "val_fraction": 0.2}
    )
    np.savez(tmp_path / "a.npz", x=x, y=y, client=client, **extra)
    spec = {"name": "npz", "path": str(tmp_path / "a.npz"), "normalize": "zscore"}
    (tmp_path / "a").mkdir()
    ds, part, fed = _federation(spec, tmp_path / "a", partition)
    assert ds.standardize and np.array_equal(ds.x, x)  # the data job keeps the features as given
    train = fed.train.x.numpy()
    rows = np.concatenate(part.train)
    np.testing.assert_allclose(train.mean(0), 0, atol=1e-12)
    np.testing.assert_allclose(train.std(0), x[rows].std(0) / (x[rows].std(0) + 0.001), rtol=1e-12)
    held = np.setdiff1d(np.arange(n), rows)  # test and validation samples
    assert len(held) >= 20
    x2 = x.copy()
    x2[held] += 100.0
    np.savez(tmp_path / "b.npz", x=x2, y=y, client=client, **extra)
    (tmp_path / "b").mkdir()
    _, part2, fed2 = _federation({**spec, "path": str(tmp_path / "b.npz")}, tmp_path / "b", partition)
    assert all(np.array_equal(a, b) for a, b in zip(part.train, part2.train, strict=True))
    assert np.array_equal(fed2.train.x.numpy(), train)  # held-out samples never reach the statistics
    assert not np.array_equal(fed2.test.x.numpy(), fed.test.x.numpy())
    pooled = load_dataset({**spec, "normalize": "zscore_pooled"}, tmp_path / "a")
    assert not pooled.standardize
    np.testing.assert_allclose(pooled.x.mean(0), 0, atol=1e-5)  # over every sample, test included
