"""Speed benchmark: the batched engine against the sequential per-client reference.

    python -m hetfl.bench                       # FedAvg and pFedMe of the default study
    python -m hetfl.bench --study pfedme_mnist --runs pfedme --rounds 10 --configfile my.yaml

Both implementations train the same study run on the same data, partition, seed, participation and
minibatches, with one torch thread; evaluation is excluded. Prints rounds per second of each and the
ratio. A benchmark, not a test: the numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch
import yaml
from threadpoolctl import threadpool_limits

from hetfl.algorithms import get_algorithm
from hetfl.config import build_suite
from hetfl.data import load_dataset, make_partition
from hetfl.data.dataset import Dataset
from hetfl.engine.federation import Federation
from hetfl.engine.participation import participation_schedule
from hetfl.models import build_model
from hetfl.reference import REFERENCES
from hetfl.train import pick_device


def _dataset(study) -> Dataset:
    cached = Path("results/data") / study.dataset_id / "data.npz"
    if cached.exists():
        return Dataset.load(cached)
    with tempfile.TemporaryDirectory() as tmp:
        return load_dataset(study.dataset, Path(tmp))


def _rate(step, rounds: int) -> float:
    step()  # warm-up round
    start = time.perf_counter()
    for _ in range(rounds):
        step()
    return rounds / (time.perf_counter() - start)


def bench_run(study, label: str, rounds: int, seed: int, device: torch.device) -> dict:
    """Rounds per second of run ``label`` of ``study``, batched and sequential."""
    spec = json.loads(study.run_json(label))
    dataset = _dataset(study)
    run = study.runs[label]
    partition = make_partition(run.partition, dataset, run.partition_seed(seed))
    model = build_model(spec["model"], dataset.sample_shape, dataset.num_outputs, dataset.task)
    fed = Federation.from_partition(dataset, partition, model, device, getattr(torch, spec["dtype"]))
    cls = get_algorithm(spec["algorithm"])
    hp = cls.Hyperparameters.from_dict(spec["hyperparameters"], label)
    algorithm = cls(fed, hp, seed, spec["sampling"])
    schedule = participation_schedule(fed.num_clients, algorithm.clients_per_round, rounds + 1, seed)
    counter = iter(range(1, rounds + 2))

    def batched_step():
        t = next(counter)
        algorithm.round(t, schedule[t - 1])
        if device.type == "cuda":
            torch.cuda.synchronize()

    reference = REFERENCES[spec["algorithm"]](fed, hp, seed, schedule, spec["sampling"])
    batched = _rate(batched_step, rounds)
    sequential = _rate(lambda: next(reference), rounds)
    return {
        "run": label,
        "algorithm": spec["algorithm"],
        "clients": fed.num_clients,
        "batched_rounds_per_s": batched,
        "sequential_rounds_per_s": sequential,
        "speedup": batched / sequential,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configfile", default="config/config.yaml")
    parser.add_argument("--study", default="pfedme_mnist")
    parser.add_argument("--runs", nargs="+", default=["fedavg", "pfedme"], help="run labels of the study")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds per implementation")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    suite = build_suite(yaml.safe_load(Path(args.configfile).read_text()))
    study = suite.studies[args.study]
    device = pick_device(args.device)
    print(
        f"study {args.study}: {study.num_clients} clients, device {device}, {args.threads} thread(s), "
        f"{args.rounds} timed rounds each"
    )
    print(f"{'run':<12}{'batched r/s':>14}{'sequential r/s':>16}{'speedup':>10}")
    for label in args.runs:
        with threadpool_limits(limits=args.threads):
            r = bench_run(study, label, args.rounds, args.seed, device)
        print(
            f"{label:<12}{r['batched_rounds_per_s']:>14.2f}{r['sequential_rounds_per_s']:>16.2f}"
            f"{r['speedup']:>9.1f}x"
        )


if __name__ == "__main__":
    main()
