"""Per-round time and peak memory of the batched engine against the number of clients C, today's unchunked
engine: the measuring instrument of the memory-budget work (README, speed).

A synthetic federation of the mnist5k shape (1×28×28 inputs, 10 classes, ``--samples`` training samples per
client, random pixels and labels: the arithmetic, not the accuracy, is measured), every client trained
every round:

- ``fedavg_mlr``: FedAvg on MLR (784 → 10), τ = 20 local steps of batch 20;
- ``pfedme_mlr``: pFedMe on MLR, R = 20 local rounds of K = 5 inner steps (``train_clients: all``);
- ``fedavg_cnn``: FedAvg on the default CNN, τ = 20.

Each (algorithm, C) runs in its own process (peak RSS is per process), one torch thread, float32, under an
address-space limit of ``--max-gib`` GiB: a configuration that does not fit is reported as such, not run
into swap. Prints the median seconds per round (evaluation excluded), seconds per client-round and the
process's peak RSS.

    python benchmarks/scaling.py                                  # C = 10, 100, 1000, 10000
    python benchmarks/scaling.py --clients 10 100 --algorithms fedavg_cnn --rounds 3

A benchmark, not a test: the numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

RUNS = {
    "fedavg_mlr": ("fedavg", "mlr", {"local_steps": 20}),
    "pfedme_mlr": ("pfedme", "mlr", {"local_steps": 20, "K": 5, "personal_lr": 0.05, "lam": 15.0}),
    "fedavg_cnn": ("fedavg", "cnn", {"local_steps": 20}),
}


def measure(name: str, clients: int, samples: int, rounds: int) -> dict:
    """Seconds per round (median of ``rounds`` after one warm-up) and peak RSS of one configuration, in
    this process."""
    import numpy as np
    import torch

    from hetfl.algorithms import get_algorithm
    from hetfl.engine.federation import ClientSplit, Federation
    from hetfl.models import build_model, normalize_model_spec

    torch.set_num_threads(1)
    algorithm, model, extra = RUNS[name]
    rng = np.random.default_rng(0)

    def split(n: int) -> ClientSplit:
        xs = [rng.normal(size=(n, 1, 28, 28)).astype(np.float32) for _ in range(clients)]
        ys = [rng.integers(0, 10, size=n) for _ in range(clients)]
        return ClientSplit(xs, ys, torch.device("cpu"), torch.float32)

    spec = normalize_model_spec({"name": model}, "model")
    fed = Federation(split(samples), split(max(1, samples // 4)), build_model(spec, (1, 28, 28), 10))
    cls = get_algorithm(algorithm)
    hp = {"lr": 0.05, "batch_size": 20, "clients_per_round": clients, **extra}
    if algorithm == "pfedme":
        hp.pop("clients_per_round")
    algo = cls(fed, cls.Hyperparameters.from_dict(hp, name), 0, "epoch")
    everyone = torch.arange(clients)
    times = []
    for t in range(1, rounds + 2):
        start = time.perf_counter()
        algo.round(t, everyone)
        times.append(time.perf_counter() - start)
    per_round = float(np.median(times[1:]))
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    return {"run": name, "clients": clients, "s_per_round": per_round, "peak_rss_mib": peak_mib}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[10, 100, 1000, 10000])
    parser.add_argument("--algorithms", nargs="+", default=list(RUNS), choices=list(RUNS))
    parser.add_argument("--samples", type=int, default=20, help="training samples per client")
    parser.add_argument("--rounds", type=int, default=2, help="timed rounds (after one warm-up)")
    parser.add_argument("--max-gib", type=float, default=16.0, help="address-space limit per configuration")
    parser.add_argument("--one", nargs=2, metavar=("RUN", "C"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        limit = int(args.max_gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        print(json.dumps(measure(args.one[0], int(args.one[1]), args.samples, args.rounds)))
        return
    print(f"{'run':<12}{'C':>7}{'s/round':>10}{'ms/client-round':>17}{'peak RSS MiB':>14}")
    for name in args.algorithms:
        for clients in args.clients:
            cmd = [sys.executable, __file__, "--one", name, str(clients), "--samples", str(args.samples),
                   "--rounds", str(args.rounds), "--max-gib", str(args.max_gib)]  # fmt: skip
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                why = (
                    proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"
                )
                print(f"{name:<12}{clients:>7}  did not fit in {args.max_gib:g} GiB: {why[:80]}")
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            print(
                f"{name:<12}{clients:>7}{r['s_per_round']:>10.3f}{1000 * r['s_per_round'] / clients:>17.3f}"
                f"{r['peak_rss_mib']:>14.0f}"
            )


if __name__ == "__main__":
    main()
