rule partition:
    input:
        "results/data/{dataset}/data.npz",
    output:
        clients="results/partitions/{dataset}/{partition}/seed={seed}/clients.npz",
    log:
        "logs/partition/{dataset}/{partition}/seed={seed}.log",
    conda:
        ENV
    params:
        spec=get_partition_spec,
        code=get_partition_code,
    script:
        "../scripts/partition.py"


# The statistics and picture of a partition: a stage of its own, so that changing how they are computed or
# drawn redoes them alone (no training job reads them).
rule partition_stats:
    input:
        data="results/data/{dataset}/data.npz",
        clients="results/partitions/{dataset}/{partition}/seed={seed}/clients.npz",
    output:
        stats="results/partitions/{dataset}/{partition}/seed={seed}/stats.csv",
        plot=report(
            "results/partitions/{dataset}/{partition}/seed={seed}/stats.png",
            caption="../report/partition.rst",
            category="Partitions",
            subcategory="{dataset}",
            labels={"partition": "{partition}", "seed": "{seed}"},
        ),
    log:
        "logs/partition_stats/{dataset}/{partition}/seed={seed}.log",
    conda:
        ENV
    params:
        spec=get_partition_spec,  # the report's caption shows it
        code=stage_code("partition_stats"),
    script:
        "../scripts/partition_stats.py"
