"""``natural``: one client per natural user of the dataset (Synthetic's users), in user order.

When the dataset knows each user's ground-truth cluster (``Dataset.user_clusters``), the partition
records it as the client's cluster.
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
    """The common options, ``clients`` optional (the number of users, which it must equal)."""

    clients: int | None = option(None, lo=1)


def validate(spec: dict, key: str, info: DatasetInfo) -> dict:
    """``clients`` defaults to the number of users and must equal it; every user needs enough samples
    (with the data's own train/test division, checked when the partition is made).

    Raises:
        ConfigError: the dataset has no users (``key.scheme``), ``clients`` differs from the number of
            users (``key.clients``), or a user is too small for a train and a test sample.
    """
    if info.num_users is None:
        raise ConfigError(
            f"{key}.scheme",
            f"'natural' needs a dataset with natural users; {info.name!r} has none",
            allowed=("clusters", "dirichlet", "iid", "pathological"),
        )
    spec = dict(spec)
    spec.setdefault("clients", info.num_users)
    if spec["clients"] != info.num_users:
        raise ConfigError(
            f"{key}.clients",
            f"the natural split has one client per user; {info.name!r} has {info.num_users} users",
            allowed=(info.num_users,),
        )
    if info.user_counts is not None and not info.predefined_split:
        need = min_client_size(spec["test_fraction"])
        small = np.flatnonzero(info.user_counts < need)
        if small.size:
            raise ConfigError(
                f"{key}.test_fraction",
                f"user {int(small[0])} has {int(info.user_counts[small[0]])} samples; each needs >= {need} "
                "for one train and one test sample",
            )
    return spec


def check(spec: dict, info: DatasetInfo, seed: int, key: str) -> None:
    """Sizes do not depend on the seed: nothing to check."""


def assign(spec: dict, y: np.ndarray, users: np.ndarray | None, info: DatasetInfo, seed: int, key: str):
    """Client ``u`` gets the samples of user ``u`` in dataset order."""
    if users is None:
        raise ConfigError(f"{key}.scheme", "'natural' needs a dataset with natural users")
    order = np.argsort(users, kind="stable")
    bounds = np.searchsorted(users[order], np.arange(spec["clients"] + 1))
    clients = [order[a:b].astype(np.int64) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    if info.user_clusters is None:
        return Assignment(clients=clients)
    cluster = np.asarray(info.user_clusters, dtype=np.int64)
    return Assignment(
        clients=clients, cluster=cluster, transforms=[{"kind": "none"}] * (int(cluster.max()) + 1)
    )
