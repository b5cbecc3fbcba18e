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
        ),
    params:
        spec=get_partition_spec,
        code=PARTITION_CODE,
    log:
        "logs/partition/{dataset}/{partition}/seed={seed}.log",
    script:
        "../scripts/partition.py"
