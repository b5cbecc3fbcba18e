rule aggregate:
    input:
        unpack(get_study_run_files),
    output:
        metrics="results/tables/{study}/metrics.csv",
        status="results/tables/{study}/status.csv",
        summary="results/tables/{study}/summary.csv",
        markdown="results/tables/{study}/summary.md",
        clients="results/tables/{study}/clients.csv",
        clients_markdown="results/tables/{study}/clients.md",
        clients_rounds="results/tables/{study}/clients_rounds.csv",
    log:
        "logs/aggregate/{study}.log",
    conda:
        ENV
    params:
        code=stage_code("aggregate"),
        runs=get_study_run_keys,
        paper=get_study_paper,
        metrics=get_study_table_metrics,
        tuned=get_study_tuned,
    script:
        "../scripts/aggregate.py"


rule splits:
    output:
        csv="results/tables/{study}/splits.csv",
        markdown="results/tables/{study}/splits.md",
    log:
        "logs/splits/{study}.log",
    conda:
        ENV
    params:
        code=get_splits_code,
        splits=get_study_splits,
    script:
        "../scripts/splits.py"
