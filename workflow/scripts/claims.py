"""Stage `claims`: check each of the study's claims on the aggregate: holds or not on the means, a statistical
status from paired intervals over seeds, with the numbers."""

import json

from hetfl.logs import redirect

log = redirect(snakemake.log[0])

import pandas as pd  # noqa: E402

from hetfl.pipeline.aggregate import write_csv  # noqa: E402
from hetfl.pipeline.claims_check import check_claims, claims_markdown  # noqa: E402

long = pd.read_csv(snakemake.input.metrics)
status = pd.read_csv(snakemake.input.status)
client_rounds = pd.read_csv(snakemake.input.clients_rounds)
result = check_claims(json.loads(snakemake.params.claims), long, status, client_rounds)
write_csv(result, snakemake.output.csv)
with open(snakemake.output.markdown, "w") as f:
    f.write(f"# Claims: {snakemake.wildcards.study}\n\n{claims_markdown(result)}\n")
