"""The generic ``torch.func`` path against the hand-written batched models: rounds per second.

The hand-written batched MNIST DNN (784-100-10, ``hetfl.models.mlp``: explicit backward through numpy's
OpenBLAS) and CNN (``hetfl.models.cnn``: grouped convolutions, autograd) are timed against the same
architecture given as a plain ``nn.Module`` (their own single-client modules, ``_MLPModule`` and
``_CNNModule``) through ``model: {name: torch, ..., init: uniform}``, which ``vmap``s ``functional_call``
over the clients and takes gradients with ``grad_and_value``. Both train the runs ``fedavg`` (5 sampled
clients × 20 steps a round) and ``pfedme`` (all 20 clients × R = 20 × K = 5 steps) of the study
``pfedme_mnist_dnn`` (mnist5k stand-in, 20 clients, batch 20), once with its DNN and once with the
default ``cnn`` in its place (pFedMe's personal lr 0.02 there: ``OVERRIDES``), on the same data, seed,
participation and minibatches, one torch thread, evaluation excluded.

    python benchmarks/generic_models.py                    # DNN and CNN, FedAvg and pFedMe
    python benchmarks/generic_models.py --models dnn --rounds 5 --blocks 5

The two implementations alternate in blocks of ``--rounds`` rounds (``--blocks`` each); a rate is the
best block's, so that other jobs on a shared machine slow both alike. Prints rounds per second of each,
the ratio generic / hand-written, and the largest difference between the two trained models (the same
numbers up to float32 rounding). A benchmark, not a test: the numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import copy
import os
import tempfile
import time
from pathlib import Path

import torch
from threadpoolctl import threadpool_limits

from hetfl.algorithms import get_algorithm
from hetfl.data import load_dataset, make_partition
from hetfl.data.dataset import Dataset
from hetfl.engine.federation import Federation
from hetfl.engine.participation import participation_schedule
from hetfl.models import build_model
from hetfl.pipeline.config import build_suite, load_config
from hetfl.pipeline.train import pick_device

ROOT = Path(__file__).resolve().parents[1]
STUDY = "pfedme_mnist_dnn"
MODELS = {  # name -> (hand-written spec, the same network as a plain nn.Module through torch.func)
    "dnn": (
        {"name": "dnn", "hidden": 100},
        {
            "name": "torch",
            "module": "hetfl.models.mlp:_MLPModule",
            "kwargs": {"sizes": [[784, 100], [100, 10]]},
            "init": "uniform",
        },
    ),
    "cnn": (
        {"name": "cnn"},  # channels [16, 32], kernel 3, hidden 64
        {
            "name": "torch",
            "module": "hetfl.models.cnn:_CNNModule",
            "kwargs": {"ch": 1, "channels": [16, 32], "kernel": 3, "flat": 32 * 7 * 7, "hidden": 64, "k": 10},
            "init": "uniform",
        },
    ),
}


OVERRIDES = {"cnn": {"pfedme": {"personal_lr": 0.02}}}
"""Run settings changed for a model: pFedMe's personal lr 0.09 makes the CNN's inner steps diverge (NaN in
round 2 on this z-scored data, both implementations), 0.02 keeps them finite."""


def study_with(model: dict, runs: list[str], overrides: dict | None = None):
    """The study ``STUDY`` of the default suite with ``model``, only ``runs``, and run ``overrides``
    (label -> hyper-parameters)."""
    suite = load_config([ROOT / "config" / "config.yaml"], root=ROOT)
    study = copy.deepcopy(suite["studies"][STUDY])
    overrides = overrides or {}
    study["model"] = model
    study["runs"] = {r: {**study["runs"][r], **overrides.get(r, {})} for r in runs}
    study.pop("claims", None), study.pop("figures", None), study.pop("paper", None)
    return build_suite({"studies": {STUDY: study}}).studies[STUDY]


def dataset(study) -> Dataset:
    cached = ROOT / "results" / "data" / study.dataset_id / "data.npz"
    if cached.exists():
        return Dataset.load(cached)
    with tempfile.TemporaryDirectory() as tmp:
        return load_dataset(study.dataset, Path(tmp))


def timed_rounds(algorithm, schedule, done: int, n: int, device: torch.device) -> tuple[int, float]:
    """Rounds ``done + 1 .. done + n`` of ``algorithm``; returns (rounds done, seconds)."""
    start = time.perf_counter()
    for t in range(done + 1, done + n + 1):
        algorithm.round(t, schedule[t - 1])
    if device.type == "cuda":
        torch.cuda.synchronize()
    return done + n, time.perf_counter() - start


def bench(name: str, runs: list[str], rounds: int, blocks: int, device: torch.device) -> list[dict]:
    """Per run: rounds per second of the hand-written and the generic model, and their largest difference."""
    studies = [study_with(spec, runs, OVERRIDES.get(name)) for spec in MODELS[name]]
    data = dataset(studies[0])
    seed = studies[0].seeds[0]
    partition = make_partition(studies[0].partition, data, studies[0].partition_seed(seed))
    out = []
    for label in runs:
        algorithms = []
        for study in studies:
            spec = study.spec(label)
            model = build_model(spec.settings["model"], data.sample_shape, data.num_outputs, data.task)
            fed = Federation.from_partition(
                data, partition, model, device, getattr(torch, spec.settings["dtype"])
            )
            cls = get_algorithm(spec.algorithm)
            hp = cls.Hyperparameters.from_dict(spec.hyperparameters, label)
            algorithms.append(cls(fed, hp, seed, spec.settings["sampling"]))
        total = 1 + rounds * blocks
        schedule = participation_schedule(fed.num_clients, algorithms[0].clients_per_round, total, seed)
        done, best = [0, 0], [float("inf"), float("inf")]
        for i in (0, 1):  # a warm-up round
            done[i] = timed_rounds(algorithms[i], schedule, done[i], 1, device)[0]
        for _ in range(blocks):
            for i in (0, 1):
                done[i], seconds = timed_rounds(algorithms[i], schedule, done[i], rounds, device)
                best[i] = min(best[i], seconds)
        models = [a.eval_models() for a in algorithms]
        diff = max(
            float((models[0][m][k] - models[1][m][k]).abs().max()) for m in models[0] for k in models[0][m]
        )
        hand, generic = rounds / best[0], rounds / best[1]
        out.append({"model": name, "run": label, "hand": hand, "generic": generic, "diff": diff})
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--runs", nargs="+", default=["fedavg", "pfedme"], help="run labels of the study")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per timed block")
    parser.add_argument("--blocks", type=int, default=3, help="timed blocks per implementation (best counts)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"study {STUDY}, device {device}, {args.threads} thread(s), best of {args.blocks} blocks of "
        f"{args.rounds} rounds, load average {load:.2f} on {os.cpu_count()} CPUs at start"
    )
    print(
        f"{'model':<6}{'run':<8}{'hand-written r/s':>18}{'generic r/s':>13}{'generic/hand':>14}{'max |diff|':>12}"
    )
    for name in args.models:
        with threadpool_limits(limits=args.threads):
            rows = bench(name, args.runs, args.rounds, args.blocks, device)
        for r in rows:
            print(
                f"{r['model']:<6}{r['run']:<8}{r['hand']:>18.2f}{r['generic']:>13.2f}"
                f"{r['generic'] / r['hand']:>13.2f}x{r['diff']:>12.1e}"
            )


if __name__ == "__main__":
    main()
