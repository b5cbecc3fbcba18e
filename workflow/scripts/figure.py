"""Stage `figure`: one figure of a study (seaborn; mean over seeds with a ±1 sd band)."""

import json

from hetfl.logs import redirect

log = redirect(snakemake.log[0])

import pandas as pd  # noqa: E402

from hetfl.plotting import plot_figure  # noqa: E402

long = pd.read_csv(snakemake.input.metrics)
status = pd.read_csv(snakemake.input.status)
plot_figure(
    long,
    json.loads(snakemake.params.figure),
    snakemake.output.png,
    snakemake.output.pdf,
    title_prefix=f"{snakemake.params.study}:",
    status=status,
)
