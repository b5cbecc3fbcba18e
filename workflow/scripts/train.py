"""Stage `train`: one (study, run, seed) on the batched engine, checkpointed as it goes."""

import json
from pathlib import Path

from hetfl.logs import redirect

log = redirect(snakemake.log[0])

from hetfl.config import resolve_checkpoint  # noqa: E402
from hetfl.train import Checkpointing, RunOutputs, run_key, train  # noqa: E402
from hetfl.tuning import apply_choice  # noqa: E402

out = snakemake.output
wc = snakemake.wildcards
spec = json.loads(snakemake.params.spec)
if "choice" in snakemake.input.keys():  # a tuned run: the hyper-parameters its tuning chose
    with open(snakemake.input.choice) as f:
        spec = apply_choice(spec, json.load(f))
policy = resolve_checkpoint(snakemake.config.get("checkpoint"))  # not a param: changing it reruns nothing
checkpoint = Checkpointing(
    Path(f"results/checkpoints/{wc.study}/{wc.run}/seed={wc.seed}.pt"),
    run_key(spec, int(wc.seed), snakemake.params.code),
    policy["every_rounds"],
    policy["every_seconds"],
)
info = train(
    spec,
    int(wc.seed),
    snakemake.input.get("data"),  # absent for a generated problem
    snakemake.input.get("partition"),
    RunOutputs(out.metrics, out.client_metrics, out.info, out.model, out.artifacts),
    threads=snakemake.threads,
    log=log,
    init=snakemake.input.get("init"),  # init_from: the other run's final model
    checkpoint=checkpoint,
    memory_budget=snakemake.resources.get("memory_budget", "auto"),  # --set-resources train:memory_budget=N
)
print(
    f"status {info['status']} after {info['rounds_done']} rounds, {info['wall_time_s']} s on {info['device']}"
)
