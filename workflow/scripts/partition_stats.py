"""Stage `partition_stats`: a partition's samples per client, split and label, as a table and a picture."""

from hetfl.logs import redirect

log = redirect(snakemake.log[0])

from hetfl.data.clients import Partition  # noqa: E402
from hetfl.data.dataset import Dataset  # noqa: E402
from hetfl.data.stats import partition_stats, plot_partition_stats  # noqa: E402

dataset = Dataset.load(snakemake.input.data)
part = Partition.load(snakemake.input.clients)
stats = partition_stats(part, dataset.y, dataset.num_classes)
stats.to_csv(snakemake.output.stats, index=False)
plot_partition_stats(stats, snakemake.output.plot)
print(f"{part.num_clients} clients, {len(stats)} rows")
