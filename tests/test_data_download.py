"""Checksum-verified fetching with a fake registry entry (no real network: an unreachable port)."""

from __future__ import annotations

import hashlib
import shutil

import numpy as np
import pytest

from hetfl.data import download
from hetfl.data.download import REMOTE_DATASETS, RemoteDataset, RemoteFile, fetch_files, load_remote_images
from hetfl.data.idx import write_idx
from hetfl.errors import DataUnavailableError

UNREACHABLE = "http://127.0.0.1:9/"  # the discard port: connection refused at once


def make_source(folder):
    """Four tiny IDX files: 5 train and 3 test 4x4 images; returns role -> (filename, sha256)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    arrays = {
        "train_images": rng.integers(0, 256, (5, 4, 4)).astype(np.uint8),
        "train_labels": np.array([0, 1, 2, 1, 0], dtype=np.uint8),
        "test_images": rng.integers(0, 256, (3, 4, 4)).astype(np.uint8),
        "test_labels": np.array([2, 2, 1], dtype=np.uint8),
    }
    files = {}
    for role, arr in arrays.items():
        name = f"{role}.idx.gz"
        write_idx(folder / name, arr)
        files[role] = RemoteFile(name, hashlib.sha256((folder / name).read_bytes()).hexdigest())
    return arrays, files


@pytest.fixture
def fake(tmp_path, monkeypatch):
    arrays, files = make_source(tmp_path / "source")
    monkeypatch.setitem(REMOTE_DATASETS, "fake", RemoteDataset(mirrors=(UNREACHABLE,), files=files))
    return arrays, files, tmp_path / "source"


def test_files_present_with_right_hash_load_without_network(fake, tmp_path, monkeypatch):
    arrays, files, source = fake
    root = tmp_path / "root"
    (root / "raw").mkdir(parents=True)
    for f in files.values():
        shutil.copy(source / f.filename, root / "raw" / f.filename)

    def no_network(*args, **kwargs):
        raise AssertionError("network used although the files are present")

    monkeypatch.setattr(download, "_download", no_network)
    x, y = load_remote_images("fake", root)
    assert x.shape == (8, 1, 4, 4) and x.dtype == np.uint8
    np.testing.assert_array_equal(x[:5, 0], arrays["train_images"])
    np.testing.assert_array_equal(x[5:, 0], arrays["test_images"])
    np.testing.assert_array_equal(y, [0, 1, 2, 1, 0, 2, 2, 1])
    assert y.dtype == np.int64


def test_load_dataset_mnist_goes_through_the_registry(fake, tmp_path, monkeypatch):
    from hetfl.data import load_dataset

    arrays, files, source = fake
    monkeypatch.setitem(REMOTE_DATASETS, "mnist", REMOTE_DATASETS["fake"])
    (tmp_path / "root" / "raw").mkdir(parents=True)
    for f in files.values():
        shutil.copy(source / f.filename, tmp_path / "root" / "raw" / f.filename)
    ds = load_dataset({"name": "mnist", "normalize": "unit"}, tmp_path / "root")
    assert ds.name == "mnist" and ds.x.shape == (8, 1, 4, 4) and ds.x.dtype == np.float32
    np.testing.assert_allclose(ds.x[:5, 0], arrays["train_images"] / 255.0, rtol=1e-6)
    z = load_dataset({"name": "mnist"}, tmp_path / "root").x  # default: pFedMe's z-score
    np.testing.assert_allclose(z.reshape(8, -1).mean(0), 0, atol=1e-5)


def test_wrong_hash_raises_data_unavailable(fake, tmp_path):
    _, files, source = fake
    raw = tmp_path / "root" / "raw"
    raw.mkdir(parents=True)
    for f in files.values():
        shutil.copy(source / f.filename, raw / f.filename)
    (raw / files["test_labels"].filename).write_bytes(b"corrupted")
    with pytest.raises(DataUnavailableError) as info:
        load_remote_images("fake", tmp_path / "root")
    msg = str(info.value)
    bad = files["test_labels"]
    assert str((raw / bad.filename).resolve()) in msg
    assert bad.sha256 in msg
    assert hashlib.sha256(b"corrupted").hexdigest() in msg  # what was found there
    assert files["train_images"].filename not in msg  # the good files are not reported


def test_missing_file_and_unreachable_mirror_names_the_path(fake, tmp_path):
    _, files, _ = fake
    with pytest.raises(DataUnavailableError) as info:
        fetch_files("fake", tmp_path / "root" / "raw")
    msg = str(info.value)
    for f in files.values():
        assert str((tmp_path / "root" / "raw" / f.filename).resolve()) in msg
        assert f.sha256 in msg
    assert UNREACHABLE in msg


def test_mirrors_tried_in_order_and_offline_after_first_failure(fake, tmp_path, monkeypatch):
    _, files, source = fake
    calls = []

    def fake_download(url, file, raw_dir):
        calls.append(url)
        if url.startswith("http://second/") and file.filename != files["test_images"].filename:
            shutil.copy(source / file.filename, raw_dir / file.filename)
            return
        raise ConnectionError("refused")

    monkeypatch.setitem(
        REMOTE_DATASETS, "fake", RemoteDataset(mirrors=("http://first/", "http://second/"), files=files)
    )
    monkeypatch.setattr(download, "_download", fake_download)
    with pytest.raises(DataUnavailableError) as info:
        fetch_files("fake", tmp_path / "raw")
    names = [f.filename for f in files.values()]  # train_images, train_labels, test_images, test_labels
    assert calls == [
        f"http://first/{names[0]}",
        f"http://second/{names[0]}",
        f"http://first/{names[1]}",
        f"http://second/{names[1]}",
        f"http://first/{names[2]}",
        f"http://second/{names[2]}",
    ]  # after test_images failed on every mirror, test_labels is not tried
    assert names[3] in str(info.value) and names[2] in str(info.value)
    assert (tmp_path / "raw" / names[0]).is_file()


def test_mirror_serving_wrong_bytes_is_rejected(fake, tmp_path, monkeypatch):
    _, files, _ = fake

    def bad_download(url, file, raw_dir):
        (raw_dir / file.filename).write_bytes(b"not the file")

    monkeypatch.setattr(download, "_download", bad_download)
    with pytest.raises(DataUnavailableError, match="expected SHA-256"):
        fetch_files("fake", tmp_path / "raw")


def test_real_registry_lists_the_official_files():
    for name in ("mnist", "fashion_mnist"):
        remote = REMOTE_DATASETS[name]
        assert set(remote.files) == set(download.ROLES)
        assert all(m.startswith("http") and m.endswith("/") for m in remote.mirrors)
        assert all(len(f.sha256) == 64 and int(f.sha256, 16) >= 0 for f in remote.files.values())
    assert REMOTE_DATASETS["mnist"].mirrors[0] == "https://ossci-datasets.s3.amazonaws.com/mnist/"
