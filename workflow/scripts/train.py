"""Stage `train`: one (study, run, seed) on the batched engine."""

import json

from hetfl.logs import redirect

log = redirect(snakemake.log[0])

from hetfl.train import RunOutputs, train  # noqa: E402

out = snakemake.output
info = train(
    json.loads(snakemake.params.spec),
    int(snakemake.wildcards.seed),
    snakemake.input.get("data"),  # absent for a generated problem
    snakemake.input.get("partition"),
    RunOutputs(out.metrics, out.client_metrics, out.info, out.model, out.artifacts),
    threads=snakemake.threads,
    log=log,
    init=snakemake.input.get("init"),  # init_from: the other run's final model
)
print(
    f"status {info['status']} after {info['rounds_done']} rounds, {info['wall_time_s']} s on {info['device']}"
)
