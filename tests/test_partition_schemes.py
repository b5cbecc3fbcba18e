"""Partition schemes (iid, dirichlet, clusters, natural) and what every scheme must satisfy."""

from __future__ import annotations

import numpy as np
import pytest

from hetfl.data import (
    SCHEMES,
    Dataset,
    Partition,
    check_partition,
    dataset_info,
    make_partition,
    normalize_partition_spec,
    partition_id,
)
from hetfl.data.dataset import DatasetInfo
from hetfl.data.partition import make_partition_from_labels
from hetfl.data.partitioners.common import min_client_size, stream
from hetfl.data.partitioners.dirichlet import MAX_TRIES, dirichlet_counts
from hetfl.data.transforms import label_permutation
from hetfl.errors import ConfigError

KEY = "studies.s.partition"
# 10 classes of unequal sizes, shuffled: a labels-only stand-in for an image dataset
RNG = np.random.default_rng(0)
Y = RNG.permutation(np.repeat(np.arange(10), np.arange(40, 140, 10)))
IMAGES = Dataset("toy", np.zeros((Y.size, 1, 2, 2), np.float32), Y, 10)
USERS = np.repeat(np.arange(6), [30, 12, 50, 9, 20, 40])
SYNTH = Dataset("toy_users", np.zeros((USERS.size, 3), np.float32), RNG.integers(0, 3, USERS.size), 3, USERS)

SPECS = {
    "iid": {"scheme": "iid", "clients": 7},
    "dirichlet": {"scheme": "dirichlet", "clients": 8, "alpha": 0.3, "min_size": 12},
    "pathological": {"scheme": "pathological", "clients": 10, "labels_per_client": 2},
    "clusters": {"scheme": "clusters", "clients": 9, "num_clusters": 3},
    "clusters_rotate": {"scheme": "clusters", "clients": 6, "num_clusters": 4, "by": "rotate"},
    "clusters_pixels": {"scheme": "clusters", "clients": 6, "num_clusters": 3, "by": "permute_pixels"},
    "clusters_labels": {"scheme": "clusters", "clients": 6, "num_clusters": 3, "by": "permute_labels"},
}


def data_for(name):
    return SYNTH if name.startswith("natural") else IMAGES


ALL = [
    *SPECS.items(),
    ("natural", {"scheme": "natural", "test_fraction": 0.1}),
    ("natural_range", {"scheme": "natural_range", "clients": 6, "test_fraction": 0.1}),  # every user
]


@pytest.mark.parametrize("name,spec", ALL, ids=[n for n, _ in ALL])
def test_common_invariants(name, spec):
    ds = data_for(name)
    part = make_partition(spec, ds, seed=3)
    f = spec.get("test_fraction", 0.25)
    assert part.num_clients == spec.get("clients", 6) == len(part.test) == part.cluster.size
    for tr, te in zip(part.train, part.test, strict=True):
        assert tr.dtype == np.int64 and te.dtype == np.int64
        assert tr.size >= 1 and te.size >= 1
        assert tr.size == int((1 - f) * (tr.size + te.size))
        assert not np.isin(te, tr).any()
    idx = np.concatenate(part.train + part.test)
    assert len(np.unique(idx)) == idx.size and idx.min() >= 0 and idx.max() < len(ds)  # disjoint
    assert idx.size == len(ds)  # every sample used
    # deterministic in the seed, different for another seed
    again = make_partition(spec, ds, seed=3)
    other = make_partition(spec, ds, seed=4)
    assert all(np.array_equal(a, b) for a, b in zip(part.train, again.train, strict=True))
    assert part.transforms == again.transforms
    assert not all(np.array_equal(a, b) for a, b in zip(part.train, other.train, strict=True))


@pytest.mark.parametrize("name,spec", ALL, ids=[n for n, _ in ALL])
def test_save_load_roundtrip(tmp_path, name, spec):
    part = make_partition(spec, data_for(name), seed=1)
    part.save(tmp_path / "clients.npz")
    back = Partition.load(tmp_path / "clients.npz")
    assert back.num_clients == part.num_clients and back.transforms == part.transforms
    np.testing.assert_array_equal(back.cluster, part.cluster)
    for a, b in zip(part.train + part.test, back.train + back.test, strict=True):
        np.testing.assert_array_equal(a, b)
        assert b.dtype == np.int64
    with np.load(tmp_path / "clients.npz", allow_pickle=False) as f:
        assert f["transforms"].dtype.kind == "U"  # JSON strings, no objects


def test_iid_sizes_are_equal():
    part = make_partition({"scheme": "iid", "clients": 7}, IMAGES, seed=0)
    sizes = [len(a) + len(b) for a, b in zip(part.train, part.test, strict=True)]
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == len(IMAGES)


# ---------------------------------------------------------------------------------------------------
# dirichlet


def label_matrix(part, y, num_classes):
    return np.stack([np.bincount(y[np.concatenate([a, b])], minlength=num_classes)
                     for a, b in zip(part.train, part.test, strict=True)])  # fmt: skip


def test_dirichlet_uses_the_count_draw_that_check_partition_runs():
    spec = SPECS["dirichlet"]
    part = make_partition(spec, IMAGES, seed=5)
    counts = dirichlet_counts(np.bincount(Y), 8, 0.3, 12, stream(5, "counts"), KEY)
    np.testing.assert_array_equal(label_matrix(part, Y, 10), counts)
    assert counts.sum(1).min() >= 12
    info = DatasetInfo.from_dataset(IMAGES)
    check_partition(spec, info, [5, 6, 7], KEY)


def test_dirichlet_alpha_controls_label_skew():
    def mean_entropy(alpha):
        m = label_matrix(
            make_partition({"scheme": "dirichlet", "clients": 8, "alpha": alpha}, IMAGES, 0), Y, 10
        )
        p = m / m.sum(1, keepdims=True)
        return float(-(p * np.log(np.where(p > 0, p, 1))).sum(1).mean())

    assert mean_entropy(0.1) < mean_entropy(1.0) < mean_entropy(100.0)
    assert mean_entropy(100.0) > 0.95 * np.log(10)


def test_dirichlet_impossible_requests_fail_at_once():
    info = DatasetInfo.from_dataset(IMAGES)  # 900 samples
    with pytest.raises(ConfigError) as e:
        normalize_partition_spec({"scheme": "dirichlet", "clients": 50, "min_size": 20}, KEY, info)
    assert e.value.key == f"{KEY}.min_size" and "clients" in str(e.value)
    # feasible on paper, hopeless in practice: bounded retries, then an error naming alpha
    spec = {"scheme": "dirichlet", "clients": 60, "alpha": 0.001, "min_size": 14}
    normalize_partition_spec(spec, KEY, info)
    with pytest.raises(ConfigError) as e:
        check_partition(spec, info, [0], KEY)
    assert e.value.key == f"{KEY}.alpha" and str(MAX_TRIES) in str(e.value)
    with pytest.raises(ConfigError, match="alpha"):
        make_partition(spec, IMAGES, seed=0)


def test_dirichlet_min_size_covers_the_split():
    """With min_size 1 and a 50/50 split, a client needs 2 samples: the draw must enforce that floor."""
    spec = {"scheme": "dirichlet", "clients": 30, "alpha": 0.05, "min_size": 1, "test_fraction": 0.5}
    assert min_client_size(0.5) == 2
    for seed in range(5):
        part = make_partition(spec, IMAGES, seed=seed)
        assert min(len(t) for t in part.test) >= 1 and min(len(t) for t in part.train) >= 1
    raw = [
        dirichlet_counts(np.bincount(Y), 30, 0.05, 1, stream(s, "counts"), KEY).sum(1).min() for s in range(5)
    ]
    assert min(raw) < 2  # without the floor some client would get a single sample


# ---------------------------------------------------------------------------------------------------
# clusters


def test_clusters_by_labels_default_groups():
    part = make_partition(SPECS["clusters"], IMAGES, seed=0)
    np.testing.assert_array_equal(part.cluster, np.arange(9) % 3)
    groups = [{0, 1, 2, 3}, {4, 5, 6}, {7, 8, 9}]  # np.array_split of 0..9 into 3
    for u in range(9):
        own = np.concatenate([part.train[u], part.test[u]])
        assert set(np.unique(Y[own])) <= groups[u % 3]
    assert part.transforms == [{"kind": "none"}] * 3
    # within a cluster the split is near-equal
    for c in range(3):
        sizes = [len(part.train[u]) + len(part.test[u]) for u in range(c, 9, 3)]
        assert max(sizes) - min(sizes) <= 1


def test_clusters_custom_groups_all_for_one_literal_split():
    spec = {
        "scheme": "clusters",
        "clients": 4,
        "num_clusters": 2,
        "groups": [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9]],
    }
    part = make_partition(spec, IMAGES, seed=0)
    for u in range(4):
        labels = set(Y[np.concatenate([part.train[u], part.test[u]])].tolist())
        assert labels == ({0, 1, 2, 3, 4, 5} if u % 2 == 0 else {6, 7, 8, 9})


def test_clusters_transforms():
    rot = make_partition(SPECS["clusters_rotate"], IMAGES, seed=0)
    assert rot.transforms == [{"kind": "rotate", "angle": a} for a in (0.0, 90.0, 180.0, 270.0)]
    np.testing.assert_array_equal(rot.cluster, [0, 1, 2, 3, 0, 1])
    lab = make_partition(SPECS["clusters_labels"], IMAGES, seed=0)
    assert lab.transforms[0] == {"kind": "none"}
    seeds = [t["seed"] for t in lab.transforms[1:]]
    assert all(t["kind"] == "permute_labels" for t in lab.transforms[1:]) and all(
        type(s) is int for s in seeds
    )
    perms = {tuple(label_permutation(s, 10)) for s in seeds}
    assert len(perms) == 2 and tuple(range(10)) not in perms
    other = make_partition(SPECS["clusters_labels"], IMAGES, seed=1)
    assert other.transforms != lab.transforms
    pix = make_partition(SPECS["clusters_pixels"], IMAGES, seed=0)
    assert [t["kind"] for t in pix.transforms] == ["none", "permute_pixels", "permute_pixels"]


def test_permute_labels_with_two_classes_gets_the_only_other_permutation():
    y = np.repeat([0, 1], 20)
    spec = {"scheme": "clusters", "clients": 4, "num_clusters": 2, "by": "permute_labels"}
    for seed in range(5):
        t = make_partition_from_labels(spec, y, 2, seed).transforms[1]
        assert label_permutation(t["seed"], 2).tolist() == [1, 0]
    with pytest.raises(ConfigError) as e:
        make_partition_from_labels({**spec, "num_clusters": 3}, y, 2, 0, key=KEY)
    assert e.value.key == f"{KEY}.num_clusters"


@pytest.mark.parametrize(
    "extra,bad_key",
    [
        ({"num_clusters": 10}, "num_clusters"),  # more clusters than clients
        ({"groups": [[0, 1], [1, 2], [3]]}, "groups"),  # overlapping
        ({"groups": [[0, 1], [2]]}, "groups"),  # wrong count
        ({"groups": [[0], [1], [10]]}, "groups"),  # unknown label
        ({"groups": [[0], [1], []]}, "groups"),  # empty
        ({"groups": "0,1"}, "groups"),
        ({"by": "rotate", "angles": [0, 90]}, "angles"),
        ({"angles": [0, 90, 180]}, "angles"),  # angles without by: rotate
        ({"by": "shift"}, "by"),
    ],
)
def test_clusters_bad_options(extra, bad_key):
    with pytest.raises(ConfigError) as e:
        normalize_partition_spec({**SPECS["clusters"], **extra}, KEY, DatasetInfo.from_dataset(IMAGES))
    assert e.value.key == f"{KEY}.{bad_key}"


def test_rotate_needs_images():
    info = dataset_info({"name": "synthetic"})
    with pytest.raises(ConfigError) as e:
        normalize_partition_spec({"scheme": "clusters", "clients": 10, "by": "rotate"}, KEY, info)
    assert e.value.key == f"{KEY}.by" and "permute_pixels" in e.value.allowed


# ---------------------------------------------------------------------------------------------------
# natural


def test_natural_one_client_per_user():
    part = make_partition({"scheme": "natural", "test_fraction": 0.1}, SYNTH, seed=0)
    for u in range(6):
        own = np.concatenate([part.train[u], part.test[u]])
        assert (USERS[own] == u).all() and own.size == (USERS == u).sum()
        assert len(part.train[u]) == int(0.9 * own.size)


def test_natural_errors():
    info = dataset_info({"name": "synthetic", "num_users": 7})
    assert normalize_partition_spec({"scheme": "natural"}, KEY, info)["clients"] == 7
    with pytest.raises(ConfigError) as e:
        normalize_partition_spec({"scheme": "natural", "clients": 8}, KEY, info)
    assert e.value.key == f"{KEY}.clients" and e.value.allowed == ["7"]
    with pytest.raises(ConfigError) as e:
        normalize_partition_spec({"scheme": "natural"}, KEY, dataset_info({"name": "mnist5k"}))
    assert e.value.key == f"{KEY}.scheme"
    with pytest.raises(ConfigError) as e:  # user 3 has 9 samples; f = 0.95 needs 20
        make_partition({"scheme": "natural", "test_fraction": 0.95}, SYNTH, seed=0, key=KEY)
    assert e.value.key == f"{KEY}.test_fraction"


def test_natural_range_takes_a_range_of_users_and_leaves_the_rest_out():
    part = make_partition(
        {"scheme": "natural_range", "first": 2, "clients": 3, "test_fraction": 0.1}, SYNTH, 0
    )
    assert part.num_clients == 3
    for i, u in enumerate(range(2, 5)):
        own = np.concatenate([part.train[i], part.test[i]])
        assert (USERS[own] == u).all() and own.size == (USERS == u).sum()
    whole = make_partition({"scheme": "natural", "test_fraction": 0.1}, SYNTH, seed=0)
    first = make_partition({"scheme": "natural_range", "clients": 2, "test_fraction": 0.1}, SYNTH, seed=0)
    for a, b in zip(first.train + first.test, whole.train[:2] + whole.test[:2], strict=True):
        assert np.array_equal(a, b)  # from user 0: the natural split's first clients


def test_natural_range_errors():
    info = dataset_info({"name": "synthetic", "num_users": 7})
    with pytest.raises(ConfigError) as e:
        normalize_partition_spec({"scheme": "natural_range", "first": 5, "clients": 3}, KEY, info)
    assert e.value.key == f"{KEY}.clients" and "clients 1 .. 2" in str(e.value)
    with pytest.raises(ConfigError) as e:
        normalize_partition_spec({"scheme": "natural_range"}, KEY, info)
    assert e.value.key == f"{KEY}.clients"  # required
    with pytest.raises(ConfigError) as e:
        normalize_partition_spec(
            {"scheme": "natural_range", "clients": 2}, KEY, dataset_info({"name": "mnist5k"})
        )
    assert e.value.key == f"{KEY}.scheme"
    with pytest.raises(ConfigError) as e:
        normalize_partition_spec({"scheme": "natural_range", "clients": 2, "first": -1}, KEY, info)
    assert e.value.key == f"{KEY}.first"
    own_split = DatasetInfo(
        "leafy", 10, 2, None, (3,), num_users=2, user_counts=np.array([5, 5]), predefined_split=True
    )
    with pytest.raises(ConfigError) as e:  # it would re-split the users silently
        normalize_partition_spec({"scheme": "natural_range", "clients": 2}, KEY, own_split)
    assert e.value.key == f"{KEY}.scheme" and e.value.allowed == ["natural"]


# ---------------------------------------------------------------------------------------------------
# common keys, ids, errors


def test_normalize_fills_defaults_and_id_is_canonical():
    info = dataset_info({"name": "mnist5k"})
    spec = normalize_partition_spec({"scheme": "pathological", "clients": 20}, KEY, info)
    assert spec == {"scheme": "pathological", "clients": 20, "test_fraction": 0.25, "labels_per_client": 2,
                    "sizes": "pfedme", "overlap": "disjoint"}  # fmt: skip
    same = normalize_partition_spec({**spec, "test_fraction": 0.25}, KEY, info)
    assert partition_id(spec) == partition_id(same)
    assert partition_id(spec).startswith("pathological-")
    assert partition_id(spec) != partition_id({**spec, "clients": 10})
    with_seed = normalize_partition_spec({"scheme": "iid", "clients": 5, "seed": 7}, KEY, info)
    assert with_seed["seed"] == 7 and partition_id(with_seed) != partition_id({**with_seed, "seed": 8})
    assert normalize_partition_spec(spec, KEY, info) == spec  # idempotent


@pytest.mark.parametrize(
    "spec,bad_key,allowed",
    [
        (
            {"scheme": "shards", "clients": 3},
            "scheme",
            "clusters, dirichlet, iid, natural, natural_range, pathological",
        ),
        ({"clients": 3}, "scheme", "iid"),
        ({"scheme": "iid", "clients": 3, "alpha": 0.1}, "alpha", "clients, scheme, seed, test_fraction"),
        (
            {"scheme": "dirichlet", "clients": 3, "labels_per_client": 2},
            "labels_per_client",
            "alpha, clients",
        ),
        ({"scheme": "iid"}, "clients", None),
        ({"scheme": "iid", "clients": 0}, "clients", None),
        ({"scheme": "iid", "clients": 5001}, "clients", None),  # more clients than samples
        ({"scheme": "iid", "clients": 2501}, "clients", None),  # 2 samples each needed for a split
        ({"scheme": "iid", "clients": 3, "test_fraction": 1.0}, "test_fraction", None),
        ({"scheme": "iid", "clients": 3, "test_fraction": 0}, "test_fraction", None),
        ({"scheme": "iid", "clients": 3, "seed": -1}, "seed", None),
        ({"scheme": "dirichlet", "clients": 3, "alpha": 0}, "alpha", None),
    ],
)
def test_bad_partition_specs_name_the_key(spec, bad_key, allowed):
    with pytest.raises(ConfigError) as e:
        normalize_partition_spec(spec, KEY, dataset_info({"name": "mnist5k"}))
    assert e.value.key == f"{KEY}.{bad_key}"
    assert f"'{KEY}.{bad_key}'" in str(e.value)
    if allowed:
        assert allowed in str(e.value)


def test_check_partition_rejects_bad_seeds():
    info = dataset_info({"name": "mnist5k"})
    with pytest.raises(ConfigError) as e:
        check_partition({"scheme": "iid", "clients": 5}, info, [0, -3], KEY)
    assert e.value.key == f"{KEY}.seed"


def test_make_time_error_for_an_empty_client():
    # label-based clusters on data whose class counts are unknown before loading (e.g. Synthetic) are
    # checked when the partition is made, against the real labels
    y = np.array([0] * 30 + [1] * 2)
    spec = {"scheme": "clusters", "clients": 4, "num_clusters": 2, "groups": [[0], [1]]}
    with pytest.raises(ValueError) as e:
        make_partition_from_labels(spec, y, 2, seed=0, key=KEY)
    assert f"{KEY}.clients" in str(e.value)


def test_every_scheme_is_covered():
    assert set(SCHEMES) == {s["scheme"] for _, s in ALL}
