rule data:
    output:
        "results/data/{dataset}/data.npz",
    params:
        spec=get_dataset_spec,
        code=DATA_CODE,
    conda:
        ENV
    log:
        "logs/data/{dataset}.log",
    script:
        "../scripts/data.py"
