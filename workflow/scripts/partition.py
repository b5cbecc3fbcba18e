"""Stage `partition`: split a dataset into clients (indices only); its statistics and picture are the stage
`partition_stats`, so that restyling them retrains nothing."""

import json

from hetfl.logs import redirect

log = redirect(snakemake.log[0])

from hetfl.data.dataset import Dataset  # noqa: E402
from hetfl.data.partition import make_partition  # noqa: E402

spec = json.loads(snakemake.params.spec)
dataset = Dataset.load(snakemake.input[0])
part = make_partition(spec, dataset, int(snakemake.wildcards.seed))
part.save(snakemake.output.clients)
sizes = [len(t) for t in part.train]
print(f"{part.num_clients} clients, train sizes {min(sizes)}..{max(sizes)}")
