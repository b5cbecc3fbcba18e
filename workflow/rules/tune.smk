rule tune:
    input:
        unpack(get_tuning_files),
    output:
        choice="results/tuning/{study}/{run}/choice.json",
        scores="results/tuning/{study}/{run}/scores.csv",
    params:
        tuning=get_tuning_spec,
    conda:
        ENV
    log:
        "logs/tune/{study}/{run}.log",
    script:
        "../scripts/tune.py"


rule tuning_table:
    input:
        get_study_tuning_scores,
    output:
        "results/tables/{study}/tuning.csv",
    conda:
        ENV
    log:
        "logs/tuning_table/{study}.log",
    script:
        "../scripts/tuning_table.py"
