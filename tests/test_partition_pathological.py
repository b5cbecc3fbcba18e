"""pFedMe's pathological split against the tables of docs/papers/pfedme.md §4.2, §4.4 and §6.2.

The expected numbers below are those of these notes (derived from the official generator's logic), not
outputs of our code. The partition needs only the labels, so no images are loaded except for mnist5k.
"""

from __future__ import annotations

import numpy as np
import pytest

from hetfl.data import check_partition, dataset_info, load_dataset, make_partition, normalize_partition_spec
from hetfl.data.dataset import DatasetInfo
from hetfl.data.partition import make_partition_from_labels
from hetfl.errors import ConfigError

MNIST_COUNTS = [6903, 7877, 6990, 7141, 6824, 6313, 6876, 7293, 6825, 6958]
MNIST_FIRST_LABELS = [5, 0, 4, 1, 9, 2, 1, 3, 1, 4]  # the first ten MNIST training labels (openml order)

# pfedme.md §4.2 table: per-user total and train size of the paper-time (faithful) generator
TABLE_TOTAL = [5112, 4987, 3889, 4252, 3215, 3072, 3271, 3013, 3881, 4356,
               2940, 1554, 2201, 1851, 1780, 3651, 4313, 4028, 4178, 4425]  # fmt: skip
TABLE_TRAIN = [3834, 3740, 2916, 3189, 2411, 2304, 2453, 2259, 2910, 3267,
               2205, 1165, 1650, 1388, 1335, 2738, 3234, 3021, 3133, 3318]  # fmt: skip
# pfedme.md §4.2 table: user 0 holds 2441 zeros and 2671 ones, user 1 holds 2357 ones and 2630 twos, ...
TABLE_USER_LABELS = {
    0: {0: 2441, 1: 2671},
    1: {1: 2357, 2: 2630},
    3: {3: 2042, 4: 2210},
    11: {1: 840, 2: 714},
}
# pfedme.md §4.4: disjoint sizes with MNIST counts; §6.2: mnist5k and digits disjoint sizes
MNIST_DISJOINT = (
    "5112 4304 3700 3923 4103 3123 3575 4024 4190 3005 2942 2734 3436 2695 3170 3217 2812 2540 3473 3922"
)
MNIST5K_DISJOINT = "309 307 376 223 191 416 322 297 383 238 173 156 160 228 240 210 151 166 215 239"
DIGITS_DISJOINT = "116 76 94 70 119 93 122 132 107 74 57 90 108 118 75 68 79 52 70 77"
SPEC = {"scheme": "pathological", "clients": 20, "labels_per_client": 2}


def mnist_labels(first_labels=MNIST_FIRST_LABELS) -> np.ndarray:
    """70,000 labels with MNIST's per-digit counts: the given first labels, then the rest sorted by class.

    Only the order within each label and the first ten labels matter to the generator."""
    rest = np.array(MNIST_COUNTS) - np.bincount(first_labels, minlength=10)
    return np.concatenate([np.asarray(first_labels, dtype=np.int64), np.repeat(np.arange(10), rest)])


def sizes(part) -> list[int]:
    return [len(a) + len(b) for a, b in zip(part.train, part.test, strict=True)]


def test_faithful_reproduces_the_paper_table():
    y = mnist_labels()
    part = make_partition_from_labels({**SPEC, "overlap": "faithful"}, y, 10, seed=1)
    assert sizes(part) == TABLE_TOTAL
    assert [len(t) for t in part.train] == TABLE_TRAIN
    assert min(TABLE_TRAIN) == 1165 and max(TABLE_TRAIN) == 3834
    for u, expected in TABLE_USER_LABELS.items():
        got = np.bincount(y[np.concatenate([part.train[u], part.test[u]])], minlength=10)
        assert {int(k): int(got[k]) for k in np.flatnonzero(got)} == expected
    all_idx = np.concatenate(part.train + part.test)
    assert len(np.unique(all_idx)) == 23_536
    assert sum(len(t) for t in part.train) == 52_470 and sum(len(t) for t in part.test) == 17_499
    # the leak: 15,589 / 17,499 = 89.1 % of test samples are in another client's train set (needs the
    # official per-user python random.shuffle order), none in the client's own train set
    leak = 0
    for u in range(20):
        others = np.concatenate([part.train[v] for v in range(20) if v != u])
        leak += int(np.isin(part.test[u], others).sum())
        assert not np.isin(part.test[u], part.train[u]).any()
    assert leak == 15_589


def test_faithful_start_offset_comes_from_the_leftover_mask():
    """With labels sorted by class, no early sample has label 9, so label 4's first holder (user 3)
    starts at image 0 instead of 1: one more image for user 3 and one more distinct image."""
    y = mnist_labels(first_labels=[])
    part = make_partition_from_labels({**SPEC, "overlap": "faithful"}, y, 10, seed=1)
    expected = list(TABLE_TOTAL)
    expected[3] += 1
    assert sizes(part) == expected
    assert len(np.unique(np.concatenate(part.train + part.test))) == 23_537


def test_faithful_clients_share_nested_prefixes():
    y = mnist_labels()
    part = make_partition_from_labels({**SPEC, "overlap": "faithful"}, y, 10, seed=1)
    zeros = np.flatnonzero(y == 0)
    for u in (0, 9, 10, 19):  # the holders of label 0: the first starts at image 0, later ones at 1
        own = np.concatenate([part.train[u], part.test[u]])
        z = np.sort(own[y[own] == 0])
        start = 0 if u == 0 else 1
        np.testing.assert_array_equal(z, zeros[start : start + z.size])  # in dataset order


def test_disjoint_with_mnist_counts_matches_section_4_4():
    y = mnist_labels()
    part = make_partition_from_labels(SPEC, y, 10, seed=1)
    assert sizes(part) == [int(v) for v in MNIST_DISJOINT.split()]
    assert_disjoint_cover(part, y.size)


def assert_disjoint_cover(part, n):
    idx = np.concatenate(part.train + part.test)
    assert idx.size == n and len(np.unique(idx)) == n


@pytest.fixture(scope="module")
def mnist5k():
    return load_dataset({"name": "mnist5k"}, "unused")


def test_mnist5k_disjoint_matches_section_6_2(mnist5k):
    part = make_partition(SPEC, mnist5k, seed=1)
    assert sizes(part) == [int(v) for v in MNIST5K_DISJOINT.split()]
    assert_disjoint_cover(part, 5000)
    for u in range(20):
        own = np.concatenate([part.train[u], part.test[u]])
        assert set(np.unique(mnist5k.y[own])) == {u % 10, (u + 1) % 10}
        assert len(part.train[u]) == int(0.75 * len(own))
    assert (part.cluster == 0).all() and part.transforms == [{"kind": "none"}]


def test_digits_disjoint_matches_section_6_2():
    y = load_dataset({"name": "digits", "normalize": "none"}, "unused").y
    # the generator takes each label's samples in dataset order; digits are not sorted, which does
    # not change the sizes
    part = make_partition_from_labels(SPEC, y, 10, seed=1)
    assert sizes(part) == [int(v) for v in DIGITS_DISJOINT.split()]
    assert_disjoint_cover(part, y.size)


def test_other_seed_other_sizes_same_invariants(mnist5k):
    a = make_partition(SPEC, mnist5k, seed=2)
    assert sizes(a) != [int(v) for v in MNIST5K_DISJOINT.split()]
    assert_disjoint_cover(a, 5000)
    b = make_partition(SPEC, mnist5k, seed=2)
    for u in range(20):
        np.testing.assert_array_equal(a.train[u], b.train[u])
        np.testing.assert_array_equal(a.test[u], b.test[u])


@pytest.mark.parametrize("clients,k", [(20, 2), (10, 3), (7, 4), (30, 1)])
def test_equal_sizes(clients, k):
    y = np.repeat(np.arange(10), 60)
    part = make_partition_from_labels(
        {"scheme": "pathological", "clients": clients, "labels_per_client": k, "sizes": "equal"},
        y,
        10,
        seed=0,
    )
    assert_disjoint_cover(part, 600)
    for u in range(clients):
        own = np.concatenate([part.train[u], part.test[u]])
        assert set(np.unique(y[own])) == {(u + j) % 10 for j in range(k)}
    for label in range(10):  # each label's samples are split near-equally among its holders
        per_holder = [
            int((y[np.concatenate([part.train[u], part.test[u]])] == label).sum()) for u in range(clients)
        ]
        held = [c for c in per_holder if c]
        assert max(held) - min(held) <= 1


def test_static_errors_name_the_key():
    info = dataset_info({"name": "mnist5k"})
    with pytest.raises(ConfigError) as e:
        normalize_partition_spec({**SPEC, "labels_per_client": 11}, "s.partition", info)
    assert e.value.key == "s.partition.labels_per_client" and "10" in e.value.allowed
    with pytest.raises(ConfigError) as e:
        normalize_partition_spec({**SPEC, "overlap": "faithful", "sizes": "equal"}, "s.partition", info)
    assert e.value.key == "s.partition.overlap"
    with pytest.raises(ConfigError) as e:  # 15 clients: labels held by 3 or 4 clients
        normalize_partition_spec({**SPEC, "clients": 15, "overlap": "faithful"}, "s.partition", info)
    assert e.value.key == "s.partition.overlap"
    with pytest.raises(ConfigError) as e:
        normalize_partition_spec({**SPEC, "sizes": "random"}, "s.partition", info)
    assert e.value.key == "s.partition.sizes" and e.value.allowed == ["equal", "pfedme"]


def test_seed_dependent_infeasibility_is_found_from_class_counts():
    info = DatasetInfo("tiny", 30, 10, np.full(10, 3), (1, 2, 2))
    spec = {"scheme": "pathological", "clients": 10, "labels_per_client": 2}
    normalize_partition_spec(spec, "s.partition", info)  # statically fine
    with pytest.raises(ConfigError) as e:  # randint(3 // 3, 3 // 2) has an empty range
        check_partition(spec, info, [0], "s.partition")
    assert e.value.key == "s.partition.labels_per_client"
    y = np.repeat(np.arange(10), 3)
    with pytest.raises(ConfigError) as e:
        make_partition_from_labels(spec, y, 10, seed=0, key="s.partition")
    assert e.value.key == "s.partition.labels_per_client"
    # three holders: parts like 0, 0, 3 leave some client with fewer than the 2 samples it needs
    with pytest.raises(ConfigError) as e:
        check_partition({**spec, "labels_per_client": 3}, info, [0], "s.partition")
    assert e.value.key == "s.partition.clients" and "client" in str(e.value)
    check_partition(SPEC, dataset_info({"name": "mnist5k"}), [0, 1, 2], "s.partition")
    check_partition({**SPEC, "overlap": "faithful"}, dataset_info({"name": "mnist"}), [1], "s.partition")
