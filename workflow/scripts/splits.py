"""Stage `splits`: each personalized run's split and its share of the model's parameters (one row per run whose
model has a split), as the study's `splits.csv` and `splits.md`."""

import json

from hetfl.logs import redirect

log = redirect(snakemake.log[0])

from hetfl.pipeline.aggregate.files import write_csv  # noqa: E402
from hetfl.pipeline.splits import splits_markdown, splits_table  # noqa: E402

table = splits_table(dict(json.loads(snakemake.params.splits)))  # [run, spec] pairs, in run order
write_csv(table, snakemake.output.csv)
with open(snakemake.output.markdown, "w") as f:
    f.write(
        f"# Personal parts: {snakemake.wildcards.study}\n\n"
        "Each run's split and its share of one client's model (parameters, personal ones).\n\n"
        f"{splits_markdown(table)}\n"
    )
