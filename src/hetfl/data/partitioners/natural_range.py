"""``natural_range``: one client per natural user whose id is in ``[first, first + clients)``, in user order.

For a dataset whose users have parts of different roles, e.g. ``mnist_landmarks``' users
``0 .. U − 1`` and its public part (the users ``U ..``) that a pretraining run trains on: ``{scheme:
natural_range, first: 0, clients: U}`` is the federation, ``{scheme: natural_range, first: U, clients: P}`` the
public part. The samples of the other users belong to no client. ``natural`` is the whole range.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from hetfl.config_options import option
from hetfl.data.dataset import DatasetInfo
from hetfl.data.partitioners.common import Assignment, PartitionOptions, min_client_size
from hetfl.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class Options(PartitionOptions):
    """The common options (``clients`` required: the number of users taken) and ``first``, the first user's id
    (0)."""

    first: int = option(0, lo=0)


def validate(spec: dict, key: str, info: DatasetInfo) -> dict:
    """The range lies within the dataset's users, and every user in it has enough samples.

    Raises:
        ConfigError: the dataset has no users or carries its own train/test division, which this scheme
            would not keep (``key.scheme``), the range ends past the last user
            (``key.clients``, naming the allowed largest), or a user in it is too small for a train and a
            test sample (``key.test_fraction``).
    """
    if info.num_users is None:
        raise ConfigError(
            f"{key}.scheme",
            f"'natural_range' needs a dataset with natural users; {info.name!r} has none",
            allowed=("clusters", "dirichlet", "iid", "pathological"),
        )
    if info.predefined_split:  # the partition core keeps a dataset's own division for `natural` only
        raise ConfigError(
            f"{key}.scheme",
            f"{info.name!r} carries its own train/test division, which 'natural_range' would not keep (it draws "
            "each user's at test_fraction): use 'natural', or data without a division (mnist_landmarks has none)",
            allowed=("natural",),
        )
    if spec["first"] + spec["clients"] > info.num_users:
        raise ConfigError(
            f"{key}.clients",
            f"users {spec['first']} .. {spec['first'] + spec['clients'] - 1} asked for; {info.name!r} has users "
            f"0 .. {info.num_users - 1} (allowed with first {spec['first']}: clients 1 .. "
            f"{max(info.num_users - spec['first'], 0)})",
        )
    if info.user_counts is not None:
        need = min_client_size(spec["test_fraction"])
        counts = info.user_counts[spec["first"] : spec["first"] + spec["clients"]]
        small = np.flatnonzero(counts < need)
        if small.size:
            u = spec["first"] + int(small[0])
            raise ConfigError(
                f"{key}.test_fraction",
                f"user {u} has {int(info.user_counts[u])} samples; each needs >= {need} for one train and one "
                "test sample",
            )
    return dict(spec)


def check(spec: dict, info: DatasetInfo, seed: int, key: str) -> None:
    """Sizes do not depend on the seed: nothing to check."""


def assign(spec: dict, y: np.ndarray, users: np.ndarray | None, info: DatasetInfo, seed: int, key: str):
    """Client ``i`` gets the samples of user ``first + i`` in dataset order."""
    if users is None:
        raise ConfigError(f"{key}.scheme", "'natural_range' needs a dataset with natural users")
    order = np.argsort(users, kind="stable")
    bounds = np.searchsorted(users[order], spec["first"] + np.arange(spec["clients"] + 1))
    return Assignment(
        clients=[order[a:b].astype(np.int64) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    )
