"""Stage `report_tables`: a study's summary table (with its per-client distribution) and checked claims as
HTML pages for the report."""

import json

from hetfl.logs import redirect

log = redirect(snakemake.log[0])

import pandas as pd  # noqa: E402

from hetfl.pipeline.report import claims_page, summary_page  # noqa: E402

about = snakemake.params.about
paper = json.loads(snakemake.params.paper) or None
summary = pd.read_csv(snakemake.input.summary)
clients = pd.read_csv(snakemake.input.clients)
with open(snakemake.output.summary, "w") as f:
    tuned = json.loads(snakemake.params.tuned)
    f.write(summary_page(summary, about, json.loads(snakemake.params.metrics), paper, clients, tuned))
with open(snakemake.output.claims, "w") as f:
    f.write(claims_page(pd.read_csv(snakemake.input.claims, dtype=str, keep_default_na=False), about))
