rule data:
    input:
        get_dataset_files,
    output:
        "results/data/{dataset}/data.npz",
    params:
        spec=get_dataset_spec,
        code=get_data_code,
        files=get_dataset_checksum,
    conda:
        ENV
    log:
        "logs/data/{dataset}.log",
    script:
        "../scripts/data.py"
