rule partition:
    input:
        "results/data/{dataset}/data.npz",
    output:
        clients="results/partitions/{dataset}/{partition}/seed={seed}/clients.npz",
        stats="results/partitions/{dataset}/{partition}/seed={seed}/stats.csv",
        plot=report(
            "results/partitions/{dataset}/{partition}/seed={seed}/stats.png",
            caption="../report/partition.rst",
            category="Partitions",
            subcategory="{dataset}",
            labels={"partition": "{partition}", "seed": "{seed}"},
        ),
    params:
        spec=get_partition_spec,
        code=get_partition_code,
    conda:
        ENV
    log:
        "logs/partition/{dataset}/{partition}/seed={seed}.log",
    script:
        "../scripts/partition.py"
