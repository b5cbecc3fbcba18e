#!/usr/bin/env bash
# The CUDA checks of a GPU machine, in one go (docs/gpu.md). Run from the repository
# root with hetfl importable (installed, or PYTHONPATH=src) and Snakemake on the path as `python3 -m snakemake`:
#
#   bash benchmarks/cuda/check.sh OUT [CORES]
#
# 1. tests/test_cuda.py and the generic model's CUDA test: every algorithm on CUDA equals its CPU run;
# 2. the default suite's CNN studies (collab_mnist, collab_cifar_standin; `device: auto` takes the GPU) and
#    one VGG-11 study (benchmarks/cuda/vgg11_digits.yaml) through Snakemake, CORES jobs at a time (default
#    8); OUT/runs.csv gets each of their runs' device, wall seconds and CUDA peak memory from its run.json,
#    OUT/results.tar.gz their tables, figures, run records and benchmark tables, and OUT/plan.txt the GPU-hours
#    that `python -m hetfl.tools.plan` estimates from them for the paper-scale GPU studies (config/paper.yaml);
# 3. benchmarks/all_for_one.py --device cuda (the batched All-for-one against its per-pair loop);
# 4. benchmarks/scaling.py --device cuda: FedAvg CNN (batched and sequential aggregation) and VGG-11 against C,
#    unchunked and within a budget; then FedAvg and pFedMe (all clients train) on MLR at C = 1,000 and 10,000;
# 5. benchmarks/generic_models.py --device cuda: the hand-written DNN and CNN against the same networks through
#    torch.func;
# 6. (execution) benchmarks/execution.py --device cuda: the batched path against the per-client loop
#    (hetfl.engine.execution) for the CNN, VGG-11 and ResNet-18 at 15 and 100 clients, batch 32, TF32 off and
#    on: client steps per second, TFLOP/s, ratio; OUT/execution.csv;
# 7. (jobs) the VGG-11 study's training jobs one at a time, each in its own process, without Snakemake
#    (benchmarks/cuda/train_jobs.py: batched, loop, loop with TF32), then `python -m hetfl.tools.plan` on them for the
#    paper-scale GPU studies, per execution path (gpu_hours_<path>): OUT/jobs.txt, OUT/plan_paths.txt.
#
# Each step has its own time limit (seconds: T_TESTS, T_SUITE, T_A41, T_SCALING, T_SCALING_MLR, T_GENERIC,
# T_EXECUTION, T_JOBS) and
# the script goes on after a failed step; OUT/log.txt has everything. DEVICE=cpu runs the same steps on the CPU
# (a dry run of the script);
# STUDIES=a,b replaces the studies of step 2; ONLY=tests,suite,... runs only the steps named (environment,
# tests, suite, all_for_one, scaling, scaling_mlr, generic, execution, jobs). EXECUTION_ARGS replaces the
# execution benchmark's arguments after --device (the dry run: small ones).
set -uo pipefail
out=${1:?usage: check.sh OUT [CORES]}
cores=${2:-8}
device=${DEVICE:-cuda}
mkdir -p "$out"
log="$out/log.txt"
wanted() { [ -z "${ONLY:-}" ] || [[ ",$ONLY," == *",$1,"* ]]; }
step() {  # step NAME SECONDS COMMAND...: run COMMAND under a time limit, log it, report its exit status
    local name=$1 limit=$2
    shift 2
    wanted "$name" || return 0
    echo "=== $name (limit ${limit}s): $*" | tee -a "$log"
    local start=$SECONDS
    timeout "$limit" "$@" >>"$log" 2>&1
    local rc=$?
    echo "=== $name: exit $rc after $((SECONDS - start)) s" | tee -a "$log"
}

step environment 60 bash -c 'nvidia-smi; python3 -c "import torch, sys; print(sys.version); print(torch.__version__, torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)"'

step tests "${T_TESTS:-150}" python3 -m pytest -q -p no:cacheprovider tests/test_cuda.py \
    tests/test_generic_models.py -k "cuda"

if wanted suite; then
    mkdir -p results && python3 benchmarks/cuda/digits32.py results/digits32.npz
    studies=${STUDIES:-collab_mnist,collab_cifar_standin,cuda_vgg11_digits}
    if [ "$device" = cpu ]; then  # the dry run: the VGG-11 study on the CPU, one round
        sed 's/device: cuda/device: cpu/; s/rounds: 10/rounds: 1/' benchmarks/cuda/vgg11_digits.yaml >"$out/vgg.yaml"
    else
        cp benchmarks/cuda/vgg11_digits.yaml "$out/vgg.yaml"
    fi
    step suite "${T_SUITE:-240}" python3 -m snakemake --cores "$cores" --keep-going \
        --configfile config/config.yaml "$out/vgg.yaml" --config "select=$studies"
    python3 - "$out/runs.csv" "$studies" <<'PY' 2>&1 | tee -a "$log"
import glob, sys
import pandas as pd
from hetfl.pipeline.records import RunRecord
rows = []
for study in sys.argv[2].split(","):
    for path in sorted(glob.glob(f"results/runs/{study}/*/seed=*/run.json")):
        d = RunRecord.read(path)
        rows.append({
            "study": study, "run": d.run, "seed": d.seed, "status": d.status, "device": d.device,
            "device_name": d.device_name, "wall_time_s": d.wall_time_s, "execution": d.execution, "tf32": d.tf32,
            "cuda_peak_mib": (d.cuda_peak_memory_bytes or 0) / 2**20,
            "peak_rss_mib": (d.memory.get("peak_rss_bytes") or 0) / 2**20,
            "budget_mib": (d.memory.get("budget_bytes") or 0) / 2**20,  # none on a generated problem
            "rows_per_call": d.memory.get("rows_per_call"),
        })
frame = pd.DataFrame(rows)
frame.to_csv(sys.argv[1], index=False)
if len(frame):
    print(frame.groupby("study").agg(
        runs=("run", "size"), ok=("status", lambda s: (s == "ok").sum()), wall_s=("wall_time_s", "sum"),
        max_wall_s=("wall_time_s", "max"), max_cuda_peak_mib=("cuda_peak_mib", "max"),
        max_rss_mib=("peak_rss_mib", "max"), device=("device", "first")).to_string())
PY
    tar czf "$out/results.tar.gz" $(for s in ${studies//,/ }; do
        echo results/tables/$s results/figures/$s results/benchmarks/train/$s; done) \
        $(for s in ${studies//,/ }; do ls results/runs/$s/*/seed=*/run.json; done 2>/dev/null) 2>/dev/null
    gpu_studies=$(python3 -c 'import yaml; print(",".join(name for name, s in yaml.safe_load(
        open("config/paper.yaml"))["studies"].items() if s.get("device") == "cuda"))')
    echo "=== plan: python3 -m hetfl.tools.plan ... --select $gpu_studies" | tee -a "$log"
    timeout 120 python3 -m hetfl.tools.plan --configfile config/config.yaml config/paper.yaml "$out/vgg.yaml" \
        --select "$gpu_studies" --csv "$out/plan.csv" 2>&1 | tee "$out/plan.txt" >>"$log"
fi

step all_for_one "${T_A41:-120}" python3 benchmarks/all_for_one.py --device "$device" \
    --studies collab_synth_d10 collab_mnist
step scaling "${T_SCALING:-150}" python3 benchmarks/scaling.py --device "$device" \
    --algorithms fedavg_cnn fedavg_cnn_seq fedavg_vgg11 --clients 10 100 1000 --budget-mib 1024 --csv "$out/scaling.csv"
step scaling_mlr "${T_SCALING_MLR:-150}" python3 benchmarks/scaling.py --device "$device" \
    --algorithms fedavg_mlr pfedme_mlr --clients 1000 10000 --budget-mib 1024 --csv "$out/scaling_mlr.csv"
step generic "${T_GENERIC:-120}" python3 benchmarks/generic_models.py --device "$device" --rounds 2 --blocks 2
step execution "${T_EXECUTION:-240}" python3 benchmarks/execution.py --device "$device" \
    ${EXECUTION_ARGS:---models cnn vgg11 resnet18 --clients 15 100 --precision float32 tf32} --csv "$out/execution.csv"
if wanted jobs; then
    mkdir -p results && python3 benchmarks/cuda/digits32.py results/digits32.npz
    if [ "$device" = cpu ]; then  # the dry run: one round of a narrow VGG-11
        sed 's/device: cuda/device: cpu/; s/rounds: 10/rounds: 1/; s/name: vgg11}/name: vgg11, width: 8}/' \
            benchmarks/cuda/vgg11_digits.yaml >"$out/vgg.yaml"
    else
        cp benchmarks/cuda/vgg11_digits.yaml "$out/vgg.yaml"
    fi
    step jobs "${T_JOBS:-300}" bash -c "python3 benchmarks/cuda/train_jobs.py --configfile config/config.yaml \
        $out/vgg.yaml --select cuda_vgg11_digits --results results | tee $out/jobs.txt; exit \${PIPESTATUS[0]}"
    gpu_studies=$(python3 -c 'import yaml; print(",".join(name for name, s in yaml.safe_load(
        open("config/paper.yaml"))["studies"].items() if s.get("device") == "cuda"))')
    echo "=== plan by execution path: --select $gpu_studies" | tee -a "$log"
    timeout 120 python3 -m hetfl.tools.plan --configfile config/config.yaml config/paper.yaml "$out/vgg.yaml" \
        --select "$gpu_studies" --csv "$out/plan_paths.csv" 2>&1 | tee "$out/plan_paths.txt" >>"$log"
fi
echo "=== done" | tee -a "$log"
