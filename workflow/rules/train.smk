rule train:
    input:
        unpack(get_train_input),
    output:
        **{kind: f"results/runs/{{study}}/{{run}}/seed={{seed}}/{file}" for kind, file in RUN_FILES.items()},
    params:
        spec=get_run_spec,
        code=get_run_code,
    conda:
        ENV
    log:
        "logs/train/{study}/{run}/seed={seed}.log",
    benchmark:
        "results/benchmarks/train/{study}/{run}/seed={seed}.tsv"
    threads: 1
    resources:
        runtime=get_train_runtime,
        mem_mb=get_train_mem_mb,
        gpu=get_train_gpu,
        memory_budget=get_memory_budget,  # a resource, not a param: changing it reruns nothing
    script:
        "../scripts/train.py"


# train_jobs: run (the default): one job trains a run's seeds one after another and writes the same files as
# rule `train` would for each seed; it saves each seed's process start (about 2 s of Python and torch imports,
# 16 % of the default suite's training time). One rule per distinct list of seeds, as a rule's outputs are
# fixed; `{key}` is "study/run", constrained to the runs of that list. A run on one seed trains in `train`.
for _index, (_seeds, _keys) in enumerate(run_jobs().items()):

    rule:
        name:
            f"train_run_{_index}"
        input:
            unpack(get_run_job_input),
        output:
            **{
                f"{kind}_{seed}": f"results/runs/{{key}}/seed={seed}/{file}"
                for seed in _seeds
                for kind, file in RUN_FILES.items()
            },
        params:
            spec=get_run_spec,
            code=get_run_code,
        conda:
            ENV
        log:
            "logs/train/{key}.log",
        benchmark:
            "results/benchmarks/train/{key}.tsv"
        wildcard_constraints:
            key="|".join(re.escape(k) for k in _keys),
        threads: 1
        resources:
            **{
                "runtime": get_train_runtime,
                "mem_mb": get_train_mem_mb,
                "gpu": get_train_gpu,
                "memory_budget": get_memory_budget,
                **TRAIN_SET_RESOURCES,  # --set-resources train:... (or a profile's): for every training job
            },
        script:
            "../scripts/train.py"

    workflow.ruleorder(f"train_run_{_index}", "train")

