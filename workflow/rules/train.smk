rule train:
    input:
        unpack(get_train_input),
    output:
        metrics="results/runs/{study}/{run}/seed={seed}/metrics.csv",
        client_metrics="results/runs/{study}/{run}/seed={seed}/metrics_clients.csv",
        info="results/runs/{study}/{run}/seed={seed}/run.json",
        model="results/runs/{study}/{run}/seed={seed}/final.pt",
        artifacts="results/runs/{study}/{run}/seed={seed}/artifacts.npz",
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
