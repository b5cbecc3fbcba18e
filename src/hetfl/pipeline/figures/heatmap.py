"""Heatmap figures (``kind: heatmap``): N×N matrices a run recorded (e.g. All-for-one's α_ik), a row of
panels per run and one panel per requested round."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hetfl.pipeline.figures.style import STYLE, figure_title, fit_text, save

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def heatmap_matrices(fig: dict, artifacts: dict[tuple[str, int], Path]) -> dict[str, tuple[int, list]]:
    """The matrices a heatmap figure draws: run -> (seed, [(round, matrix [N, N], cluster [N] or None)]).

    For each requested round r the matrix is the last one recorded in a round <= r (the weights in force
    during round r; ``<artifact>_round`` gives each record's round, else records are rounds 1, 2, ...);
    rounds before the first record take the first one.

    Raises:
        ValueError: a run has no artifacts for the seed, or its file lacks the array.
    """
    out = {}
    for run in fig["runs"]:
        seeds = sorted(seed for r, seed in artifacts if r == run)
        seed = fig.get("seed") if fig.get("seed") is not None else (seeds[0] if seeds else None)
        if seed not in seeds:
            raise ValueError(f"figure {fig['name']!r}: no artifacts of run {run!r} for seed {seed}")
        with np.load(artifacts[(run, seed)]) as data:
            name = fig["artifact"]
            if name not in data.files:
                raise ValueError(
                    f"figure {fig['name']!r}: run {run!r} recorded no {name!r} (it has: {', '.join(data.files)})"
                )
            stack = np.asarray(data[name], dtype=np.float64)
            stack = stack[None] if stack.ndim == 2 else stack
            rounds = data[f"{name}_round"] if f"{name}_round" in data.files else np.arange(1, len(stack) + 1)
            cluster = data["cluster"] if "cluster" in data.files else None
        picks = []
        for r in fig["at"]:
            index = max(int(np.searchsorted(rounds, r, side="right")) - 1, 0)
            picks.append((r, stack[index], cluster))
        out[run] = (seed, picks)
    return out


def plot_heatmap(
    fig: dict,
    artifacts: dict[tuple[str, int], Path],
    out_png: str | Path,
    out_pdf: str | Path | None = None,
    title_prefix: str = "",
) -> Figure:
    """Draw recorded N×N matrices (e.g. All-for-one's α_ik) as heatmaps: a row of panels per run, one panel
    per requested round; rows i (the client) and columns k, clients ordered by ground-truth cluster (then
    index) when the run recorded ``cluster``, with the cluster boundaries drawn. The title is wrapped to the
    figure's width.

    Args:
        fig: a ``kind: heatmap`` figure from :func:`hetfl.pipeline.plotting.normalize_figures`.
        artifacts: (run, seed) -> the run's ``artifacts.npz``.

    Returns:
        The matplotlib ``Figure`` (already saved).

    Raises:
        ValueError: see :func:`heatmap_matrices`.
    """
    import matplotlib as mpl
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    matrices = heatmap_matrices(fig, artifacts)
    rows, cols = len(matrices), len(fig["at"])
    with mpl.rc_context(STYLE):
        figure = Figure(figsize=(2.6 * cols + 0.8, 2.5 * rows + 0.6), layout="constrained")
        FigureCanvasAgg(figure)
        axes = figure.subplots(rows, cols, squeeze=False)
        vmax = max(float(np.nanmax(np.abs(m))) for _, picks in matrices.values() for _, m, _ in picks) or 1.0
        image = None
        for row, (run, (seed, picks)) in zip(axes, matrices.items(), strict=True):
            for ax, (r, matrix, cluster) in zip(row, picks, strict=True):
                image = _draw_matrix(ax, matrix, cluster, vmax)
                ax.set_title(f"{fig['labels'].get(run, run)}, round {r}", fontsize=8)
                ax.set_xticks([])
                ax.set_yticks([])
            row[0].set_ylabel(f"client i (seed {seed})", fontsize=8)
        for ax in axes[-1]:
            ax.set_xlabel("collaborator k", fontsize=8)
        figure.colorbar(image, ax=axes, shrink=0.8, label=fig["artifact"])
        title = figure_title(title_prefix, fig)
        if title:
            fit_text(title, figure.suptitle(title), figure.bbox.width * 0.98, figure.canvas.get_renderer())
        save(figure, out_png, out_pdf)
    return figure


def _draw_matrix(ax, matrix: np.ndarray, cluster: np.ndarray | None, vmax: float):
    """One matrix on ``ax``, clients ordered by ``cluster`` (then index) with the clusters' boundaries drawn
    when given; returns the image (for the colorbar)."""
    order = np.lexsort((np.arange(len(matrix)), cluster)) if cluster is not None else np.arange(len(matrix))
    image = ax.imshow(matrix[np.ix_(order, order)], vmin=0.0, vmax=vmax, cmap="viridis")
    if cluster is not None:
        for edge in np.flatnonzero(np.diff(cluster[order])) + 0.5:
            ax.axhline(edge, color="white", lw=0.8)
            ax.axvline(edge, color="white", lw=0.8)
    return image
