rule tune:
    input:
        unpack(get_tuning_files),
    output:
        choice="results/tuning/{study}/{run}/choice.json",
        scores="results/tuning/{study}/{run}/scores.csv",
    log:
        "logs/tune/{study}/{run}.log",
    conda:
        ENV
    params:
        code=stage_code("tune"),
        tuning=get_tuning_spec,
    script:
        "../scripts/tune.py"


rule tuning_table:
    input:
        get_study_tuning_scores,
    output:
        "results/tables/{study}/tuning.csv",
    log:
        "logs/tuning_table/{study}.log",
    conda:
        ENV
    params:
        code=stage_code("tuning_table"),
    script:
        "../scripts/tuning_table.py"
