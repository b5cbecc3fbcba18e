"""Stage `aggregate`: every run and seed of a study into one tidy table, the cross-seed summary, and the
per-client distribution of each metric (clients.csv, clients.md; at every round, per seed: clients_rounds.csv,
for the claims over clients)."""

import json

from hetfl.logs import redirect

log = redirect(snakemake.log[0])

from hetfl.pipeline.aggregate import (  # noqa: E402
    client_round_stats,
    client_summary,
    clients_markdown,
    load_clients,
    load_runs,
    summarize,
    summary_markdown,
    write_csv,
)

keys = json.loads(snakemake.params.runs)
entries = [
    {"run": run, "seed": seed, "metrics": m, "info": i, "clients": c}
    for (run, seed), m, i, c in zip(
        keys, snakemake.input.metrics, snakemake.input.info, snakemake.input.clients, strict=True
    )
]
long, status = load_runs(entries)
write_csv(long, snakemake.output.metrics)
write_csv(status, snakemake.output.status)
paper = json.loads(snakemake.params.paper) or None
summary = summarize(long, status, paper)
write_csv(summary, snakemake.output.summary)
tuned = json.loads(snakemake.params.tuned)
table = summary_markdown(summary, metrics=json.loads(snakemake.params.metrics), paper=paper, tuned=tuned)
with open(snakemake.output.markdown, "w") as f:
    f.write(f"# {snakemake.wildcards.study}\n\n{table}")
per_client = load_clients(entries)
clients = client_summary(per_client, long, status)
write_csv(clients, snakemake.output.clients)
write_csv(client_round_stats(per_client, status), snakemake.output.clients_rounds)
with open(snakemake.output.clients_markdown, "w") as f:
    f.write(f"# {snakemake.wildcards.study}: per-client distribution\n\n{clients_markdown(clients)}")
