"""Datasets (shipped, generated, downloaded) and how they are split across clients.

The public entry points, re-exported here:

- datasets (plug-ins, ``hetfl.data.source``): :func:`dataset_names`, :func:`normalize_dataset_spec`, :func:`dataset_id`, :func:`dataset_info`,
  :func:`load_dataset`, :class:`Dataset`, :class:`DatasetInfo`;
- partitions (``hetfl.data.partition``): :data:`SCHEMES`, :class:`Partition`,
  :func:`normalize_partition_spec`, :func:`check_partition`, :func:`partition_id`, :func:`make_partition`;
- :func:`apply_transform` (``hetfl.data.transforms``); statistics and their figure in ``hetfl.data.stats``.

Nothing here imports torch, so the workflow can validate configs quickly.
"""

from hetfl.data.dataset import Dataset, DatasetInfo
from hetfl.data.partition import (
    SCHEMES,
    Partition,
    check_partition,
    make_partition,
    make_partition_from_labels,
    normalize_partition_spec,
    partition_id,
)
from hetfl.data.registry import dataset_id, dataset_info, dataset_names, load_dataset, normalize_dataset_spec
from hetfl.data.transforms import apply_transform

__all__ = [
    "SCHEMES",
    "Dataset",
    "DatasetInfo",
    "Partition",
    "apply_transform",
    "check_partition",
    "dataset_id",
    "dataset_info",
    "dataset_names",
    "load_dataset",
    "make_partition",
    "make_partition_from_labels",
    "normalize_dataset_spec",
    "normalize_partition_spec",
    "partition_id",
]
