rule train:
    input:
        unpack(get_train_input),
    output:
        **{kind: f"results/runs/{{study}}/{{run}}/seed={{seed}}/{file}" for kind, file in RUN_FILES.items()},
    log:
        "logs/train/{study}/{run}/seed={seed}.log",
    benchmark:
        "results/benchmarks/train/{study}/{run}/seed={seed}.tsv"
    group:
        get_train_group
    conda:
        ENV
    threads: 1
    resources:
        **train_resource_settings(gpu=False),
    params:
        spec=get_run_spec,
        code=get_run_code,
    script:
        "../scripts/train.py"


# The other training rules (common.smk, training_rules): one per list of seeds that one job per run trains in
# turn (`train_jobs: run`, the default: one process start, about 2 s of Python and torch imports, per run instead
# of per seed; the files are the same as rule `train` writes for each seed), and `train_gpu*` for the runs with
# `device: cuda`, so that `set-resources: train_gpu:` places them (profiles/slurm). As a rule's outputs are fixed,
# `{key}` is "study/run", constrained to the runs of that rule; each is ordered before `train`.
TRAINING_RULES = training_rules()
_gpu_partition = str(TRAIN_GPU_SET_RESOURCES.get("slurm_partition", "")).strip("'\"")
_gpu_runs = [k for name, (_, keys) in TRAINING_RULES.items() if name.startswith("train_gpu") for k in keys]
if _gpu_partition == GPU_PARTITION_PLACEHOLDER and any(k.split("/")[0] in SUITE.selected for k in _gpu_runs):
    raise WorkflowError(
        f"set-resources train_gpu: slurm_partition is still the placeholder {GPU_PARTITION_PLACEHOLDER!r} of "
        f"profiles/slurm/config.yaml, and runs with device: cuda would train there ({', '.join(_gpu_runs[:3])}"
        f"{', ...' if len(_gpu_runs) > 3 else ''}): set your cluster's GPU partition (sinfo -s) in that file"
    )

for _name, (_seeds, _keys) in TRAINING_RULES.items():
    _gpu = _name.startswith("train_gpu")
    _outputs = (
        {kind: f"results/runs/{{key}}/seed={{seed}}/{file}" for kind, file in RUN_FILES.items()}
        if _seeds is None  # one seed per job
        else {
            f"{kind}_{s}": f"results/runs/{{key}}/seed={s}/{file}"
            for s in _seeds
            for kind, file in RUN_FILES.items()
        }
    )
    _path = "{key}/seed={seed}" if _seeds is None else "{key}"  # a seed's job, or a run's

    rule:
        name:
            _name
        input:
            unpack(get_train_input),
        output:
            **_outputs,
        log:
            f"logs/train/{_path}.log",
        benchmark:
            f"results/benchmarks/train/{_path}.tsv"
        wildcard_constraints:
            key="|".join(re.escape(k) for k in _keys),
        group:
            None if _gpu else get_train_group
        conda:
            ENV
        threads: 1
        resources:
            **train_resource_settings(_gpu),
        params:
            spec=get_run_spec,
            code=get_run_code,
        script:
            "../scripts/train.py"

    workflow.ruleorder(_name, "train")
