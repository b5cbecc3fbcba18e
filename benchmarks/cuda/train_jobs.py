"""The training jobs of some studies, each in a process of its own as the workflow runs them, on a machine
without Snakemake (a lent GPU machine: ``benchmarks/cuda/check.sh``, step ``jobs``). One job at a time, so
that its timing is its own.

Writes what ``python -m hetfl.tools.plan`` fits on, in the workflow's layout: each job's outputs and run record
under ``RESULTS/runs/<study>/<run>/seed=<s>/`` and a benchmark table
``RESULTS/benchmarks/train/<study>/<run>/seed=<s>.tsv`` whose column ``s`` is the job's whole wall time
(the process's start, imports and CUDA's context included: its ``s`` less the run's ``wall_time_s`` is
the start-up a job pays). Prints one line per job: its device, execution path, TF32, wall seconds and
training seconds.

    python benchmarks/cuda/train_jobs.py --configfile config/config.yaml benchmarks/cuda/vgg11_digits.yaml \\
        --select cuda_vgg11_digits --results results
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path


def job(spec_json: str, seed: int, data: str, partition: str, out: str) -> None:
    """One training job (the child process)."""
    from hetfl.pipeline.train import RunOutputs, train

    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    outputs = RunOutputs(*(folder / n for n in ("metrics.csv", "clients.csv", "run.json", "final.pt")))
    train(json.loads(spec_json), seed, data, partition, outputs)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configfile", nargs="+", help="config files, merged in order")
    parser.add_argument("--select", help="comma-separated studies")
    parser.add_argument("--results", default="results")
    parser.add_argument(
        "--job", nargs=5, metavar=("SPEC", "SEED", "DATA", "PARTITION", "OUT"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.job:
        spec, seed, data, partition, out = args.job
        job(spec, int(seed), data, partition, out)
        return
    if not args.configfile or not args.select:
        parser.error("--configfile and --select are required")
    from hetfl.data import load_dataset, make_partition
    from hetfl.pipeline.config import build_suite, load_config
    from hetfl.pipeline.records import RunRecord

    config = load_config(args.configfile)
    config["select"] = args.select.split(",")
    suite = build_suite(config)
    results = Path(args.results)
    failed = 0
    for name in suite.selected:
        study = suite.studies[name]
        folder = results / "cuda_jobs" / name
        folder.mkdir(parents=True, exist_ok=True)
        dataset = load_dataset(study.dataset, folder)
        dataset.save(folder / "data.npz")
        for label in study.runs:
            spec = study.run_json(label)
            for seed in study.seeds:
                partition = folder / f"partition_{seed}.npz"
                if not partition.exists():
                    make_partition(study.partition, dataset, study.partition_seed(seed)).save(partition)
                out = results / "runs" / name / label / f"seed={seed}"
                command = [sys.executable, __file__, "--job", spec, str(seed), str(folder / "data.npz"),
                           str(partition), str(out)]  # fmt: skip
                start = time.perf_counter()
                done = subprocess.run(command, check=False)
                seconds = time.perf_counter() - start
                if done.returncode:
                    failed += 1
                    print(
                        f"{name}/{label}/seed={seed}: exit {done.returncode} after {seconds:.1f} s",
                        flush=True,
                    )
                    continue
                bench = results / "benchmarks" / "train" / name / label / f"seed={seed}.tsv"
                bench.parent.mkdir(parents=True, exist_ok=True)
                bench.write_text(f"s\n{seconds:.4f}\n")
                info = RunRecord.read(out / "run.json")
                print(
                    f"{name}/{label}/seed={seed}: {info.status} on {info.device} ({info.device_name}), "
                    f"execution {info.execution}, tf32 {info.tf32}: job {seconds:.1f} s, training "
                    f"{info.wall_time_s:.1f} s, start-up {seconds - info.wall_time_s:.1f} s, CUDA peak "
                    f"{(info.cuda_peak_memory_bytes or 0) / 2**20:.0f} MiB",
                    flush=True,
                )
    if failed:
        raise SystemExit(f"{failed} training jobs failed")


if __name__ == "__main__":
    main()
