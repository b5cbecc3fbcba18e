"""Partitions: which samples each client trains and tests on (indices only, never copies of the data).

A partition spec is the ``partition:`` mapping of a study, e.g.
``{scheme: pathological, clients: 20, labels_per_client: 2}``. Common keys:

- ``scheme``: one of :data:`SCHEMES` (the schemes live in ``hetfl.data.partitioners``);
- ``clients``: number of clients N (required, except for ``natural`` where it defaults to the users);
- ``test_fraction`` (0.25): per client, shuffle and keep the first ``int((1 - f) n)`` samples for
  training, the rest for testing (pFedMe's ``int(0.75 * n)``);
- ``val_fraction`` (optional, default 0): per client, a share of its training samples held out for
  validation (metrics ``val_*``; what ``tune:`` selects on), never trained on;
- ``seed`` (optional): a fixed partition seed; accepted here, the caller decides which seed to pass.

A dataset with its own train/test division (LEAF files, an npz with ``split``) keeps it under the
``natural`` scheme; ``test_fraction`` then does not apply.

Every client must end with at least one train and one test sample. Bad keys and infeasible requests
raise :class:`~hetfl.errors.ConfigError` naming the dotted key, before any data is loaded where the
:class:`~hetfl.data.dataset.DatasetInfo` allows it (:func:`normalize_partition_spec`,
:func:`check_partition`), else when the partition is made.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from hetfl.data.checks import check_seed
from hetfl.data.clients import Partition
from hetfl.data.dataset import Dataset, DatasetInfo
from hetfl.data.partitioners import SCHEME_MODULES
from hetfl.data.partitioners.common import min_client_size, split_train_test, split_validation
from hetfl.errors import ConfigError
from hetfl.ids import spec_id

SCHEMES: tuple[str, ...] = tuple(sorted(SCHEME_MODULES))


def scheme_module(scheme: str) -> str:
    """The module of partition scheme ``scheme`` (what its ``partition`` jobs fingerprint)."""
    return SCHEME_MODULES[scheme].__name__


# ----------------------------------------------------------------------------------------------------
# specs


def _check_scheme(spec: dict, key: str) -> str:
    if not isinstance(spec, Mapping):
        raise ConfigError(key, f"must be a mapping with a 'scheme', got {type(spec).__name__}")
    scheme = spec.get("scheme")
    if scheme not in SCHEMES:
        raise ConfigError(f"{key}.scheme", f"unknown partition scheme {scheme!r}", allowed=SCHEMES)
    return scheme


def normalize_partition_spec(spec: dict, key: str, info: DatasetInfo) -> dict:
    """Validate a partition spec against a dataset, fill the defaults, check static feasibility.

    Args:
        spec: the user's partition mapping.
        key: its dotted config key, e.g. ``studies.pfedme_mnist.partition``.
        info: the dataset's :func:`~hetfl.data.dataset_info`.

    Returns:
        a new dict with ``scheme``, the common keys and the scheme's options (defaults filled,
        including dataset-dependent ones such as the cluster label groups).

    Raises:
        ConfigError: naming ``key.<option>``: unknown scheme or option (with the allowed ones), bad
            values, ``clients`` x the smallest client > samples, and each scheme's static checks
            (e.g. ``labels_per_client`` > classes, Dirichlet ``clients * min_size`` > samples).
    """
    scheme = _check_scheme(spec, key)
    if info.task == "regression" and (
        scheme in ("dirichlet", "pathological")
        or (scheme == "clusters" and spec.get("by", "labels") in ("labels", "permute_labels"))
    ):
        raise ConfigError(
            f"{key}.scheme",
            f"{info.name!r} is a regression dataset; label-based splits do not apply",
            allowed=("clusters (by: rotate or permute_pixels)", "iid", "natural"),
        )
    if info.predefined_split and scheme == "natural" and "test_fraction" in spec:
        raise ConfigError(
            f"{key}.test_fraction",
            f"{info.name!r} carries its own train/test division, which the natural split keeps: "
            "remove test_fraction (or use another scheme, which pools the samples)",
        )
    module = SCHEME_MODULES[scheme]
    out = module.Options.parse(spec, key, f"partition scheme {scheme!r}", fixed=("scheme",))
    if not out.get("val_fraction"):  # 0 and omitted are the same partition (the same id)
        out.pop("val_fraction", None)
    if info.predefined_split and scheme == "natural":  # the data's own division: no test_fraction
        out.pop("test_fraction")
    if "clients" in out and "test_fraction" in out:
        need = min_client_size(out["test_fraction"])
        if out["clients"] * need > info.num_samples:
            raise ConfigError(
                f"{key}.clients",
                f"{out['clients']} clients need >= {out['clients'] * need} samples (>= {need} each for one "
                f"train and one test sample); {info.name!r} has {info.num_samples}",
            )
    return module.validate(out, key, info)


def check_partition(spec: dict, info: DatasetInfo, seeds: list[int], key: str) -> None:
    """Check that the partition can be made for each seed, from ``info`` alone (no data loaded).

    Runs the seed-dependent parts that need only class counts: the Dirichlet count draw, pFedMe's
    ``ram_dom_gen`` sizes. Checks that need the labels themselves (e.g. label-based schemes on
    Synthetic, whose class counts are unknown before generation) are left to :func:`make_partition`.

    Raises:
        ConfigError: a bad spec (see :func:`normalize_partition_spec`), a bad seed (``key.seed``),
            or a seed for which the partition is infeasible (naming the option to change).
    """
    spec = normalize_partition_spec(spec, key, info)
    module = SCHEME_MODULES[spec["scheme"]]
    for seed in seeds:
        seed = check_seed(seed, f"{key}.seed")
        module.check(spec, info, seed, key)


def partition_id(spec: dict) -> str:
    """Folder name of a partition: ``spec_id(scheme, other options)``.

    Pass the output of :func:`normalize_partition_spec` so that equal partitions get equal ids.

    Raises:
        ConfigError: no known ``scheme`` (key ``partition``).
    """
    scheme = _check_scheme(spec, "partition")
    return spec_id(scheme, {k: v for k, v in spec.items() if k != "scheme"})


def make_partition(spec: dict, dataset: Dataset, seed: int, key: str = "partition") -> Partition:
    """Partition a dataset; deterministic in ``(spec, dataset, seed)``.

    Args:
        spec: a partition spec (normalized here against the dataset).
        dataset: the dataset; only its labels, users and sample shape are used.
        seed: the partition seed (0 .. 2**32 - 1).
        key: dotted config key of the spec, for error messages.

    Returns:
        the partition.

    Raises:
        ConfigError (a ValueError): a bad spec or seed, or a client left with no train or no test sample.
    """
    return make_partition_from_labels(
        spec,
        dataset.y,
        dataset.num_classes,
        seed,
        users=dataset.users,
        sample_shape=dataset.sample_shape,
        name=dataset.name,
        key=key,
        task=dataset.task,
        user_clusters=dataset.user_clusters,
        split=dataset.split,
    )


def make_partition_from_labels(
    spec: dict,
    y: np.ndarray,
    num_classes: int,
    seed: int,
    users: np.ndarray | None = None,
    sample_shape: tuple[int, ...] = (),
    name: str = "labels",
    key: str = "partition",
    task: str = "classification",
    user_clusters: np.ndarray | None = None,
    split: np.ndarray | None = None,
) -> Partition:
    """:func:`make_partition` from the labels alone (what a partition depends on).

    Args:
        y: int ``[n]`` labels in ``0 .. num_classes - 1``, in dataset order.
        users: int ``[n]`` natural user per sample, or ``None``.
        sample_shape: shape of one sample (``rotate`` needs images, ``permute_pixels`` the size).
        task: the dataset's task (label-based schemes refuse a regression dataset).
        user_clusters: ground-truth cluster per user (the natural split records it), or ``None``.
        split: int ``[n]``, the data's own train (0) / test (1) division, kept by the ``natural`` scheme
            (each client's train and test samples in dataset order); ``None``: drawn by ``test_fraction``.
        Other arguments as in :func:`make_partition`.

    With ``val_fraction`` f > 0 each client's validation samples are ``max(1, int(f · n_train))`` of its
    training samples, drawn with the partition seed's stream ``val``; the rest stay in training, in
    their order (:func:`~hetfl.data.partitioners.common.split_validation`).
    """
    y = np.asarray(y, dtype=np.int64)
    users = None if users is None else np.asarray(users, dtype=np.int64)
    user_counts = None if users is None else np.bincount(users)
    info = DatasetInfo(
        name=name,
        num_samples=int(y.size),
        num_classes=int(num_classes),
        class_counts=np.bincount(y, minlength=num_classes).astype(np.int64),
        sample_shape=tuple(sample_shape),
        num_users=None if user_counts is None else int(user_counts.size),
        user_counts=user_counts,
        task=task,
        user_clusters=user_clusters,
        predefined_split=split is not None,
    )
    spec = normalize_partition_spec(spec, key, info)
    seed = check_seed(seed, f"{key}.seed")
    assignment = SCHEME_MODULES[spec["scheme"]].assign(spec, y, users, info, seed, key)
    if split is not None and spec["scheme"] == "natural":
        split = np.asarray(split)
        train = [idx[split[idx] == 0] for idx in assignment.clients]
        test = [idx[split[idx] == 1] for idx in assignment.clients]
    else:
        train, test = split_train_test(assignment.clients, spec["test_fraction"], seed, assignment.shuffle)
    for u, (tr, te) in enumerate(zip(train, test, strict=True)):
        if tr.size == 0 or te.size == 0:
            raise ConfigError(
                f"{key}.clients",
                f"client {u} got {tr.size + te.size} samples ({tr.size} train, {te.size} test); every client "
                f"needs >= 1 of each: change {key}.clients, {key}.test_fraction or the scheme's options",
            )
    val = None
    if spec.get("val_fraction"):
        train, val = split_validation(train, spec["val_fraction"], seed, f"{key}.val_fraction")
    return Partition(
        train=train, test=test, cluster=assignment.cluster, transforms=assignment.transforms, val=val
    )
