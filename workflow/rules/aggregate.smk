rule aggregate:
    input:
        unpack(get_study_run_files),
    output:
        metrics="results/tables/{study}/metrics.csv",
        status="results/tables/{study}/status.csv",
        summary="results/tables/{study}/summary.csv",
        markdown="results/tables/{study}/summary.md",
    params:
        runs=get_study_run_keys,
        paper=get_study_paper,
        metrics=get_study_table_metrics,
    conda:
        ENV
    log:
        "logs/aggregate/{study}.log",
    script:
        "../scripts/aggregate.py"
