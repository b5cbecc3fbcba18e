rule data:
    input:
        get_dataset_files,
    output:
        "results/data/{dataset}/data.npz",
    log:
        "logs/data/{dataset}.log",
    conda:
        ENV
    params:
        spec=get_dataset_spec,
        code=get_data_code,
        files=get_dataset_checksum,
    script:
        "../scripts/data.py"
