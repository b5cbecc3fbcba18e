"""Stage `figure`: one figure of a study (mean over seeds with a ±1 sd band, or recorded matrices as
heatmaps), drawn for print by :func:`hetfl.pipeline.plotting.draw` as a PNG and a PDF."""

import json

from hetfl.logs import redirect

log = redirect(snakemake.log[0])

import pandas as pd  # noqa: E402

from hetfl.pipeline.plotting import draw  # noqa: E402

keys = [(run, seed) for run, seed in json.loads(snakemake.params.runs)]
draw(
    json.loads(snakemake.params.figure),
    pd.read_csv(snakemake.input.metrics),
    pd.read_csv(snakemake.input.status),
    dict(zip(keys, snakemake.input.artifacts, strict=True)),
    snakemake.output.png,
    snakemake.output.pdf,
    title_prefix=f"{snakemake.params.study}:",
)
