"""``leaf``: federated data in the LEAF JSON format, one client per user, keeping the files' train/test split.

Caldas et al., "LEAF: A Benchmark for Federated Settings" (2018), https://leaf.cmu.edu: FEMNIST,
Shakespeare, Sent140 (as features) and the pFedMe code's own MNIST and Synthetic files use it. Each of the
two files (options ``train`` and ``test``) is one JSON object::

    {"users": ["f0000_14", ...], "num_samples": [143, ...],
     "user_data": {"f0000_14": {"x": [[...], ...], "y": [7, ...]}, ...}}

A sample's ``x`` is a list of numbers (FEMNIST: 784 pixels; ``sample_shape: [1, 28, 28]`` shows them to a
CNN as images) or a string (Shakespeare: 80 characters, each encoded as its index in LEAF's 80-letter
alphabet :data:`LETTERS`, so ``x`` is ``[n, 80]`` of indices); ``y`` an integer, a number (regression) or a
one-letter string (Shakespeare's next character, encoded the same way; then 80 classes unless
``num_classes`` says otherwise). Users are the train
file's ``users`` in their order; the test file must hold the same users. The ``natural`` partition gives
one client per user with exactly the files' train and test samples (other schemes pool them).

Options: ``train``, ``test`` (required paths), ``task``, ``num_classes``, ``normalize``, ``sample_shape``
(``hetfl.data.user_arrays``). Both files are inputs of the ``data`` job: editing one reruns its
partitions and runs. The files are parsed once per process for the partition checks (a large corpus
is faster as an ``npz``: ``Dataset`` arrays with ``client`` and ``split``).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np

from hetfl.data.checks import Option
from hetfl.data.dataset import Dataset, DatasetInfo
from hetfl.data.source import DatasetSource
from hetfl.data.user_arrays import (
    build_dataset,
    check_labels,
    common_options,
    existing_file,
    file_stamp,
    info_from,
    path_option,
)
from hetfl.errors import ConfigError

LETTERS = "\n !\"&'(),-.0123456789:;>?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]abcdefghijklmnopqrstuvwxyz}"
"""LEAF's Shakespeare alphabet (``ALL_LETTERS`` of its ``language_utils.py``): a character's class is its index."""
_INDEX = {c: i for i, c in enumerate(LETTERS)}


def _encode(text: str, where: str) -> list[int]:
    try:
        return [_INDEX[c] for c in text]
    except KeyError as err:
        raise ValueError(f"{where}: character {err.args[0]!r} is not in LEAF's 80-letter alphabet") from None


@cache
def _read(stamp: tuple[str, int, int]) -> tuple[list[str], list[list], list[list]]:
    """(users, per user its x list, per user its y list) of one LEAF file, cached per size and mtime."""
    with open(stamp[0], encoding="utf-8") as f:
        blob = json.load(f)
    if not isinstance(blob, dict) or not {"users", "user_data"} <= set(blob):
        raise ValueError("expected a JSON object with 'users' and 'user_data'")
    users = [str(u) for u in blob["users"]]
    data = blob["user_data"]
    missing = [u for u in users if u not in data]
    if missing:
        raise ValueError(f"user {missing[0]!r} is listed in 'users' but has no 'user_data'")
    xs, ys = [data[u]["x"] for u in users], [data[u]["y"] for u in users]
    for u, x, y in zip(users, xs, ys, strict=True):
        if len(x) != len(y):
            raise ValueError(f"user {u!r} has {len(x)} x and {len(y)} y")
    return users, xs, ys


def _arrays(users: list[str], xs: list[list], ys: list[list], where: str) -> tuple[np.ndarray, np.ndarray]:
    """Stack one file's samples in user order: x ``[n, ...]``, y ``[n]`` (text encoded by :data:`LETTERS`)."""
    x_all = [s for x in xs for s in x]
    y_all = [s for y in ys for s in y]
    if x_all and isinstance(x_all[0], str):
        x_all = [_encode(s, f"{where} x") for s in x_all]
    if y_all and isinstance(y_all[0], str):
        y_all = [_encode(s, f"{where} y")[0] if len(s) == 1 else -1 for s in y_all]
        if -1 in y_all:
            raise ValueError(f"{where} y: a text label must be one character")
    x = np.asarray(x_all)
    if x.dtype == object:
        raise ValueError(f"{where} x: samples of different lengths")
    return x, np.asarray(y_all)


class LeafFiles(DatasetSource):
    """``leaf``: a LEAF train/test pair of JSON files (module docstring)."""

    name = "leaf"

    @classmethod
    def options(cls) -> dict[str, Option]:
        return {"train": path_option(), "test": path_option(), **common_options()}

    @classmethod
    def _arrays(cls, spec: dict, key: str):
        """x ``[n, ...]``, y ``[n]``, user ``[n]`` (train users' order) and split ``[n]``, train samples first."""
        parts = []
        for role in ("train", "test"):
            path = existing_file(spec, role, key)
            try:
                parts.append(_read(file_stamp(path)))
            except (OSError, ValueError, KeyError, TypeError) as err:
                raise ConfigError(f"{key}.{role}", f"cannot read {str(path)!r} as LEAF JSON: {err}") from None
        (users, train_x, train_y), (test_users, test_x, test_y) = parts
        if sorted(users) != sorted(test_users):
            odd = sorted(set(users) ^ set(test_users))[0]
            raise ConfigError(f"{key}.test", f"user {odd!r} is in one of the train and test files only")
        order = {u: i for i, u in enumerate(test_users)}
        test_x = [test_x[order[u]] for u in users]
        test_y = [test_y[order[u]] for u in users]
        arrays = []
        for role, xs, ys in (("train", train_x, train_y), ("test", test_x, test_y)):
            try:
                arrays.append(_arrays(users, xs, ys, role))
            except ValueError as err:
                raise ConfigError(f"{key}.{role}", str(err)) from None
        (x1, y1), (x2, y2) = arrays
        if x1.shape[1:] != x2.shape[1:]:
            raise ConfigError(
                f"{key}.test", f"test samples have shape {x2.shape[1:]}, train samples {x1.shape[1:]}"
            )
        counts = [len(y) for y in train_y], [len(y) for y in test_y]
        user = np.concatenate([np.repeat(np.arange(len(users)), c) for c in counts])
        split = np.concatenate([np.zeros(len(y1), np.int8), np.ones(len(y2), np.int8)])
        return np.concatenate([x1, x2]), np.concatenate([y1, y2]), user, split

    @classmethod
    def _labels(cls, spec: dict, key: str):
        x, y, user, split = cls._arrays(spec, key)
        if cls._text_labels(spec) and spec.get("num_classes") is None:
            spec = {**spec, "num_classes": len(LETTERS)}  # a next-character task: every letter is a class
        return x, check_labels(spec, key, y, user, None, split, where="train")

    @classmethod
    def _text_labels(cls, spec: dict) -> bool:
        _, _, ys = _read(file_stamp(existing_file(spec, "train", "dataset")))
        return any(len(y) and isinstance(y[0], str) for y in ys)

    @classmethod
    def info(cls, spec: dict, key: str = "dataset") -> DatasetInfo:
        x, labels = cls._labels(spec, key)
        return info_from(cls.name, spec, key, tuple(x.shape[1:]), labels)

    @classmethod
    def load(cls, spec: dict, root: Path) -> Dataset:
        x, labels = cls._labels(spec, "dataset")
        return build_dataset(cls.name, spec, "dataset", x, labels, where="train")

    @classmethod
    def files(cls, spec: dict) -> list[str]:
        return [spec["train"], spec["test"]]


DATASETS = [LeafFiles]
