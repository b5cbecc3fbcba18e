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

Options: ``train``, ``test`` (required paths), ``task``, ``num_classes``, ``normalize``, ``sample_shape``,
``min_user_samples`` (``hetfl.data.user_arrays``: LEAF's practice of dropping users with too few
samples). Both files are inputs of the ``data`` job: editing one reruns its partitions and runs. A file's
``num_samples`` must match its ``user_data``, every user must be in both files, and every error names
the file and, where one is at fault, the user and the sample (``'train.json': user 'u3', sample 4``).
"""

from __future__ import annotations

import dataclasses
import json
from functools import cache
from pathlib import Path

import numpy as np

from hetfl.data.dataset import Dataset, DatasetInfo
from hetfl.data.source import DatasetSource
from hetfl.data.user_arrays import (
    Labels,
    UserFileOptions,
    build_dataset,
    check_labels,
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
    """(users, per user its x list, per user its y list) of one LEAF file, cached per size and mtime.

    Raises:
        ValueError: not JSON (e.g. a truncated file: the position is named), not a LEAF object, a user listed
            twice or without ``user_data``, a user's ``x`` and ``y`` of different lengths, or
            ``num_samples`` other than the users' numbers of samples (the user is named).
    """
    with open(stamp[0], encoding="utf-8") as f:
        try:
            blob = json.load(f)
        except json.JSONDecodeError as err:
            raise ValueError(f"not valid JSON (a truncated or damaged file?): {err}") from None
    if not isinstance(blob, dict) or not {"users", "user_data"} <= set(blob):
        raise ValueError("expected a JSON object with 'users' and 'user_data'")
    users = [str(u) for u in blob["users"]]
    data = blob["user_data"]
    seen = set()
    for u in users:
        if u in seen:
            raise ValueError(f"user {u!r} is listed twice in 'users'")
        seen.add(u)
        if u not in data:
            raise ValueError(f"user {u!r} is listed in 'users' but has no 'user_data'")
        if not isinstance(data[u], dict) or not {"x", "y"} <= set(data[u]):
            raise ValueError(f"user {u!r}: its 'user_data' needs 'x' and 'y' lists")
    xs, ys = [data[u]["x"] for u in users], [data[u]["y"] for u in users]
    for u, x, y in zip(users, xs, ys, strict=True):
        if not isinstance(x, list) or not isinstance(y, list) or len(x) != len(y):
            raise ValueError(f"user {u!r} has {_size(x)} x and {_size(y)} y: one y per sample")
    counts = blob.get("num_samples")
    if counts is not None:
        if not isinstance(counts, list) or len(counts) != len(users):
            raise ValueError(f"'num_samples' has {_size(counts)} entries for {len(users)} users")
        for u, c, y in zip(users, counts, ys, strict=True):
            if c != len(y):
                raise ValueError(
                    f"user {u!r}: 'num_samples' says {c!r}, its 'user_data' has {len(y)} samples"
                )
    return users, xs, ys


def _size(value) -> str:
    return str(len(value)) if isinstance(value, list) else f"no list ({type(value).__name__})"


def _arrays(users: list[str], xs: list[list], ys: list[list], where: str) -> tuple[np.ndarray, np.ndarray]:
    """Stack one file's samples in user order: x ``[n, ...]``, y ``[n]`` (text encoded by :data:`LETTERS`).

    Raises:
        ValueError: naming the user and sample: a character outside :data:`LETTERS`, a text label of more
            than one character, a sample of another length than the first.
    """
    x_all = [s for x in xs for s in x]
    y_all = [s for y in ys for s in y]
    place = _placer(users, [len(y) for y in ys])
    if x_all and isinstance(x_all[0], str):
        x_all = [_encode(s, f"{place(i)} x") for i, s in enumerate(x_all)]
    if y_all and isinstance(y_all[0], str):
        long = [i for i, s in enumerate(y_all) if not isinstance(s, str) or len(s) != 1]
        if long:
            raise ValueError(f"{place(long[0])}: the text label {y_all[long[0]]!r} is not one character")
        y_all = [_encode(s, f"{place(i)} y")[0] for i, s in enumerate(y_all)]
    try:
        x = np.asarray(x_all)
    except ValueError:  # numpy refuses ragged nested lists
        x = np.asarray(x_all, dtype=object)
    if x.dtype == object:
        first = np.shape(x_all[0])
        odd = next(i for i, s in enumerate(x_all) if np.shape(s) != first)
        raise ValueError(
            f"{place(odd)}: x has shape {list(np.shape(x_all[odd]))}, the first sample {list(first)}: "
            "samples of different lengths"
        )
    return x, np.asarray(y_all)


def _placer(users: list[str], counts: list[int]):
    """Sample index in a file's user order -> ``user 'u3', sample 4``."""
    bounds = np.cumsum([0, *counts])

    def place(i: int) -> str:
        u = int(np.searchsorted(bounds, i, side="right")) - 1
        return f"user {users[u]!r}, sample {i - int(bounds[u])}"

    return place


class LeafFiles(DatasetSource):
    """``leaf``: a LEAF train/test pair of JSON files (module docstring)."""

    name = "leaf"

    @dataclasses.dataclass(frozen=True)
    class Options(UserFileOptions):
        """The two files and the options of every user-file dataset."""

        train: str = path_option()
        test: str = path_option()

    @classmethod
    def _arrays(cls, spec: dict, key: str):
        """x ``[n, ...]``, y ``[n]``, user ``[n]`` (train users' order), split ``[n]`` (train samples first),
        the users, and ``locate`` (sample index -> its file's option and ``'<path>': user 'u3', sample 4``).

        Raises:
            ConfigError: naming ``key.train`` or ``key.test`` and the file: unreadable, not LEAF JSON (see
                :func:`_read`), a user in one of the files only (named), samples of other shapes.
        """
        parts, paths = [], {}
        for role in ("train", "test"):
            path = paths[role] = existing_file(spec, role, key)
            try:
                parts.append(_read(file_stamp(path)))
            except OSError as err:
                raise ConfigError(f"{key}.{role}", f"cannot read {str(path)!r}: {err}") from None
            except ValueError as err:
                raise ConfigError(f"{key}.{role}", f"{str(path)!r}: {err}") from None
            except (KeyError, TypeError) as err:
                raise ConfigError(f"{key}.{role}", f"{str(path)!r} is not LEAF JSON: {err!r}") from None
        (users, train_x, train_y), (test_users, test_x, test_y) = parts
        train_path, test_path = (repr(str(paths[r])) for r in ("train", "test"))
        only = [u for u in users if u not in set(test_users)]
        if only:
            raise ConfigError(
                f"{key}.test",
                f"user {only[0]!r} of the train file {train_path} is not in the test file {test_path} "
                f"({len(only)} of its {len(users)} users are not): every user needs samples in both",
            )
        only = [u for u in test_users if u not in set(users)]
        if only:
            raise ConfigError(
                f"{key}.train",
                f"user {only[0]!r} of the test file {test_path} is not in the train file {train_path} "
                f"({len(only)} of its {len(test_users)} users are not): every user needs samples in both",
            )
        order = {u: i for i, u in enumerate(test_users)}
        test_x = [test_x[order[u]] for u in users]
        test_y = [test_y[order[u]] for u in users]
        arrays = []
        for role, xs, ys in (("train", train_x, train_y), ("test", test_x, test_y)):
            try:
                arrays.append(_arrays(users, xs, ys, role))
            except ValueError as err:
                raise ConfigError(f"{key}.{role}", f"{str(paths[role])!r}: {err}") from None
        (x1, y1), (x2, y2) = arrays
        if x1.shape[1:] != x2.shape[1:]:
            raise ConfigError(
                f"{key}.test",
                f"{test_path}: test samples have shape {list(x2.shape[1:])}, train samples "
                f"{list(x1.shape[1:])} ({train_path})",
            )
        counts = [len(y) for y in train_y], [len(y) for y in test_y]
        user = np.concatenate([np.repeat(np.arange(len(users)), c) for c in counts]).astype(np.int64)
        split = np.concatenate([np.zeros(len(y1), np.int8), np.ones(len(y2), np.int8)])
        places = {r: _placer(users, c) for r, c in zip(("train", "test"), counts, strict=True)}

        def locate(i: int) -> tuple[str, str]:
            role, j = ("train", i) if i < len(y1) else ("test", i - len(y1))
            return role, f"{str(paths[role])!r}: {places[role](j)}"

        return np.concatenate([x1, x2]), np.concatenate([y1, y2]), user, split, users, locate

    @classmethod
    def _labels(cls, spec: dict, key: str):
        x, y, user, split, users, locate = cls._arrays(spec, key)
        if cls._text_labels(spec) and spec.get("num_classes") is None:
            spec = {**spec, "num_classes": len(LETTERS)}  # a next-character task: every letter is a class
        labels = check_labels(
            spec,
            key,
            y,
            user,
            None,
            split,
            where="train",
            locate=locate,
            names=lambda u: f"user {users[u]!r}",
            num_users=len(users),
        )
        return x, labels, locate

    @classmethod
    def _text_labels(cls, spec: dict) -> bool:
        _, _, ys = _read(file_stamp(existing_file(spec, "train", "dataset")))
        return any(len(y) and isinstance(y[0], str) for y in ys)

    @classmethod
    def labels(cls, spec: dict, key: str = "dataset") -> Labels:
        """The checked labels of a spec's files (users' names, what ``task: auto`` inferred)."""
        return cls._labels(spec, key)[1]

    @classmethod
    def info(cls, spec: dict, key: str = "dataset") -> DatasetInfo:
        x, labels, _ = cls._labels(spec, key)
        return info_from(cls.name, spec, key, tuple(x.shape[1:]), labels)

    @classmethod
    def load(cls, spec: dict, root: Path) -> Dataset:
        x, labels, locate = cls._labels(spec, "dataset")
        return build_dataset(cls.name, spec, "dataset", x, labels, where="train", locate=locate)

    @classmethod
    def files(cls, spec: dict) -> list[str]:
        return [spec["train"], spec["test"]]


DATASETS = [LeafFiles]
