"""Per-client label statistics of a partition, as a tidy table and a figure (cf. FedLab's
``partition_report``, FL-bench's ``all_stats.json``)."""

from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd

from hetfl.data.clients import Partition


def partition_stats(part: Partition, y: np.ndarray, num_classes: int) -> pd.DataFrame:
    """Label counts per client and split.

    Args:
        part: the partition.
        y: int ``[n]`` labels of the dataset the partition indexes.
        num_classes: C.

    Returns:
        tidy DataFrame with columns ``client, cluster, split, label, count`` (int), one row per
        (client, split, label), zeros included: ``2 * N * C`` rows (``3 * N * C`` with validation data:
        split ``val``), clients in order, ``train`` first.
    """
    y = np.asarray(y)
    frames = []
    splits = [("train", part.train), ("test", part.test)] + (
        [("val", part.val)] if part.val is not None else []
    )
    for split, parts in splits:
        counts = np.stack([np.bincount(y[idx], minlength=num_classes) for idx in parts])  # [N, C]
        clients = np.repeat(np.arange(part.num_clients), num_classes)
        frames.append(
            pd.DataFrame(
                {
                    "client": clients,
                    "cluster": part.cluster[clients],
                    "split": split,
                    "label": np.tile(np.arange(num_classes), part.num_clients),
                    "count": counts.reshape(-1).astype(np.int64),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def plot_partition_stats(stats: pd.DataFrame, path: str | os.PathLike) -> None:
    """Samples per client stacked by label, one panel per split (train, validation if any, test); png.

    The figure widens with the number of clients and labels every ``ceil(N / 25)``-th client, so it
    stays readable for 20 and for 100 clients; with more than one cluster the x labels read
    ``client (cluster)`` where space allows and the title gives the number of clusters.

    Args:
        stats: the output of :func:`partition_stats`.
        path: output file (png).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    num_clients = int(stats["client"].max()) + 1
    labels = sorted(stats["label"].unique())
    num_clusters = int(stats["cluster"].nunique())
    palette = sns.color_palette("tab10" if len(labels) <= 10 else "husl", len(labels))
    width = min(24.0, max(7.0, 0.16 * num_clients + 3.0))
    splits = [s for s in ("train", "val", "test") if (stats["split"] == s).any()]
    fig, axes = plt.subplots(len(splits), 1, figsize=(width, 3.25 * len(splits)), sharex=True)
    step = max(1, math.ceil(num_clients / 25))
    for ax, split in zip(axes, splits, strict=True):
        data = stats[stats["split"] == split]
        sns.histplot(
            data=data,
            x="client",
            hue="label",
            weights="count",
            multiple="stack",
            discrete=True,
            shrink=0.85,
            palette=palette,
            hue_order=labels,
            linewidth=0,
            ax=ax,
            legend=ax is axes[0],
        )
        ax.set_ylabel(f"{split} samples")
        ax.set_xlim(-0.75, num_clients - 0.25)
    ticks = np.arange(0, num_clients, step)
    axes[-1].set_xticks(ticks)
    if num_clusters > 1 and step == 1:
        cluster = stats.drop_duplicates("client").set_index("client")["cluster"]
        axes[-1].set_xticklabels([f"{t}\n({cluster[t]})" for t in ticks], fontsize=8)
    axes[-1].set_xlabel("client (cluster)" if num_clusters > 1 and step == 1 else "client")
    legend = axes[0].get_legend()
    if legend is not None:
        sns.move_legend(
            axes[0],
            "upper left",
            bbox_to_anchor=(1.0, 1.0),
            ncol=1 if len(labels) <= 20 else 2,
            title="label",
            frameon=False,
        )
    title = f"{num_clients} clients"
    if num_clusters > 1:
        title += f", {num_clusters} clusters"
    axes[0].set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
