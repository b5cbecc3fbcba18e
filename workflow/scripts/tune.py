"""Stage `tune`: score a tuned run's grid points on its validation metric and write the choice."""

import json

from hetfl.logs import redirect

log = redirect(snakemake.log[0])

from hetfl.pipeline.aggregate import load_runs, write_csv  # noqa: E402
from hetfl.pipeline.tuning import Tuning, select  # noqa: E402

spec = json.loads(snakemake.params.tuning)
points = dict(spec["points"])  # [label, values] pairs in the grid's order, as the input files are
tuning = Tuning(
    spec["run"], spec["grid"], spec["seeds"], spec["metric"], spec["at"], points, spec.get("val_fraction")
)
pairs = [(point, seed) for point in tuning.points for seed in tuning.seeds]
entries = [
    {"run": point, "seed": seed, "metrics": m, "info": i}
    for (point, seed), m, i in zip(pairs, snakemake.input.metrics, snakemake.input.info, strict=True)
]
long, status = load_runs(entries)
table, choice = select(tuning, long, status)
write_csv(table, snakemake.output.scores)
with open(snakemake.output.choice, "w") as f:
    json.dump(choice, f, indent=1, sort_keys=True)
print(f"{tuning.run}: chose {choice['point']} ({tuning.metric} {tuning.at} = {choice['score']:.6g})")
