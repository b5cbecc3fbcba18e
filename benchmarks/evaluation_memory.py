"""Peak memory of an evaluation that adapts every client's model (FFGG/FedAlt/FedSim's fine-tuning of the
personal part, FedAvg+FT's, Per-FedAvg's adaptation step) within a ``memory_budget`` (docs/scaling.md).

A synthetic federation of the mnist5k shape (``benchmarks/scaling.py``'s: random pixels and labels, 10
training and 3 test samples a client) with N = ``--clients`` clients and the default CNN (105,866 parameters;
FedAlt and FedAvg+FT with ``split: output``, the personal part 650 of them, FedAvg+FT with ``finetune:
personal``; ``fedavg_ft_all`` and Per-FedAvg adapt the whole model); 10 clients a round, 2 fine-tuning steps
(Per-FedAvg: its one step). Each algorithm runs in its
own process (peak RSS is per process), one torch thread, float32, within ``--budget-mib`` MiB (the rows per
call planned as a training job plans them, ``hetfl.pipeline.train.apply_memory_budget``, convolutions split too as
under a numeric budget in a run's spec), one round, then one evaluation of every model. Prints the plan
(rows per call, whether it fits, its resident estimate), the evaluation's seconds and the peak RSS above the
process's baseline (Python and torch, before the data): after the plan and the round, and after the
evaluation.

    python benchmarks/evaluation_memory.py --clients 2000 --budget-mib 1024

A benchmark, not a test: the numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

RUNS = {  # name -> (algorithm, split, hyper-parameters besides lr 0.05, batch 10, 10 clients a round)
    "fedalt": ("fedalt", "output", {"finetune_steps": 2}),
    "fedavg_ft": ("fedavg_ft", "output", {"local_steps": 1, "finetune_steps": 2, "finetune": "personal"}),
    "fedavg_ft_all": ("fedavg_ft", "none", {"local_steps": 1, "finetune_steps": 2}),  # the whole model
    "perfedavg": ("perfedavg", "none", {"local_steps": 1}),
}


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def measure(name: str, clients: int, budget_mib: float) -> dict:
    """One algorithm in this process: the plan, the evaluation's seconds and the peak RSS (MiB)."""
    import torch
    from scaling import random_federation  # benchmarks/scaling.py, beside this script

    from hetfl.algorithms import get_algorithm
    from hetfl.pipeline.train import apply_memory_budget

    torch.set_num_threads(1)
    base = _peak_mib()
    algorithm_name, split, extra = RUNS[name]
    fed = random_federation(clients, 10, (1, 28, 28), "cnn", split)
    cls = get_algorithm(algorithm_name)
    hp = {"lr": 0.05, "batch_size": 10, "clients_per_round": 10, **extra}
    algorithm = cls(fed, cls.Hyperparameters.from_dict(hp, name), 0, "epoch")
    plan = apply_memory_budget(fed, algorithm, budget_mib, torch.device("cpu"), split_inexact=True)
    algorithm.round(1, torch.arange(10))
    before = _peak_mib() - base
    start = time.perf_counter()
    rows, _ = algorithm.evaluate()
    return {
        "run": name,
        "clients": clients,
        "rows": plan.rows,
        "fits": plan.fits,
        "resident_mib": plan.resident_bytes / 2**20,
        "eval_s": time.perf_counter() - start,
        "peak_before_eval_mib": before,
        "peak_mib": _peak_mib() - base,
        "test_acc": next(v for k, v in rows if k.startswith("test_acc")),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=2000)
    parser.add_argument("--budget-mib", type=float, default=1024.0)
    parser.add_argument("--algorithms", nargs="+", default=list(RUNS), choices=list(RUNS))
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.clients < 1 or not args.budget_mib > 0:
        parser.error("--clients and --budget-mib must be positive")
    if args.one:
        print(json.dumps(measure(args.one, args.clients, args.budget_mib)))
        return
    print(
        f"{args.clients} clients, budget {args.budget_mib:g} MiB; peak RSS above the process's baseline, MiB"
    )
    print(
        f"{'run':<14}{'rows':>6}{'fits':>6}{'planned':>9}{'eval s':>8}{'peak, round':>13}{'peak, eval':>12}"
    )
    for name in args.algorithms:
        cmd = [sys.executable, __file__, "--one", name, "--clients", str(args.clients),
               "--budget-mib", str(args.budget_mib)]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            err = proc.stderr.strip()
            print(f"{name:<14} failed: {err.splitlines()[-1] if err else proc.returncode}")
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        print(
            f"{name:<14}{r['rows'] or 'all':>6}{'yes' if r['fits'] else 'no':>6}{r['resident_mib']:>9.0f}"
            f"{r['eval_s']:>8.2f}{r['peak_before_eval_mib']:>13.0f}{r['peak_mib']:>12.0f}"
        )


if __name__ == "__main__":
    main()
