"""Drawing a study's figures: their look (:mod:`~hetfl.pipeline.figures.style`), line figures
(:mod:`~hetfl.pipeline.figures.lines`) and heatmaps (:mod:`~hetfl.pipeline.figures.heatmap`).
What a figure spec holds, and the figure stage's entry point ``draw``, are in :mod:`hetfl.pipeline.plotting`."""
