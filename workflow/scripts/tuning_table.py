"""Stage `tuning_table`: one table of every tuned run's grid scores and choice, for the study."""

import pandas as pd

from hetfl.logs import redirect

log = redirect(snakemake.log[0])

from hetfl.pipeline.aggregate import write_csv  # noqa: E402

write_csv(pd.concat([pd.read_csv(path) for path in snakemake.input], ignore_index=True), snakemake.output[0])
