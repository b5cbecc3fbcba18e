"""Partition statistics table and figure."""

from __future__ import annotations

import numpy as np
import pytest

from hetfl.data.partition import make_partition_from_labels
from hetfl.data.stats import partition_stats, plot_partition_stats

Y = np.repeat(np.arange(10), 100)


def test_stats_table_is_tidy_and_complete():
    spec = {"scheme": "clusters", "clients": 6, "num_clusters": 2}
    part = make_partition_from_labels(spec, Y, 10, seed=0)
    stats = partition_stats(part, Y, 10)
    assert list(stats.columns) == ["client", "cluster", "split", "label", "count"]
    assert len(stats) == 2 * 6 * 10  # zeros included
    assert (stats["count"] == 0).any()
    for (client, split), rows in stats.groupby(["client", "split"]):
        idx = (part.train if split == "train" else part.test)[client]
        assert rows["count"].sum() == idx.size
        np.testing.assert_array_equal(rows.sort_values("label")["count"], np.bincount(Y[idx], minlength=10))
        assert (rows["cluster"] == part.cluster[client]).all()
    assert set(stats["split"]) == {"train", "test"}


@pytest.mark.parametrize("clients,spec", [
    (20, {"scheme": "pathological", "labels_per_client": 2}),
    (100, {"scheme": "dirichlet", "alpha": 0.5, "min_size": 4}),
])  # fmt: skip
def test_plot_writes_a_png(tmp_path, clients, spec):
    part = make_partition_from_labels({**spec, "clients": clients}, Y, 10, seed=0)
    path = tmp_path / "stats.png"
    plot_partition_stats(partition_stats(part, Y, 10), path)
    head = path.read_bytes()[:8]
    assert head == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
