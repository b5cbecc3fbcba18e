"""Per-round time and peak memory of the batched engine against the number of clients C, unchunked and
within a ``memory_budget`` (``hetfl.engine.memory``; docs/scaling.md).

A synthetic federation of the mnist5k shape (1×28×28 inputs, 10 classes, ``--samples`` training samples per
client, random pixels and labels: the arithmetic, not the accuracy, is measured), every client trained
every round:

- ``fedavg_mlr``: FedAvg on MLR (784 → 10), τ = 20 local steps of batch 20;
- ``pfedme_mlr``: pFedMe on MLR, R = 20 local rounds of K = 5 inner steps (``train_clients: all``);
- ``fedavg_cnn``: FedAvg on the default CNN, τ = 20;
- ``fedavg_vgg11``: FedAvg on VGG-11 (9.2 M parameters) on 3×32×32 inputs (the CIFAR-10 shape), 10
  clients sampled per round (of C), τ = 1 local step of batch 32;
- ``fedavg_mlr_seq``, ``fedavg_cnn_seq``: ``fedavg_mlr`` and ``fedavg_cnn`` with ``aggregation: sequential``
  (within a budget, a chunk of clients is trained, added to the running mean and dropped: the round's C local
  models are never resident at once).

With ``--budget-mib B`` every configuration also runs within B MiB (the engine's row chunks, and its
per-client state placed as a training job places it: ``hetfl.engine.state``), and the table
adds the rows per call, the time ratio to the unchunked engine and whether the peak RSS above the process's
baseline (Python and torch, measured before the data) stayed under B (and says when the plan found that the
resident state alone does not fit B: then the run goes on one client row per call).

Each (algorithm, C) runs in its own process (peak RSS is per process), one torch thread, float32, under an
address-space limit of ``--max-gib`` GiB: a configuration that does not fit is reported as such, not run
into swap. Prints the median seconds per round (evaluation excluded), seconds per client-round and the
process's peak RSS, taken from when the federation is built (its construction's freed NumPy copies given
back and the high-water mark reset: :func:`forget_construction`; rows measured before 2026-11-26 include
them).

    python benchmarks/scaling.py                                  # C = 10, 100, 1000, 10000
    python benchmarks/scaling.py --clients 10 100 --algorithms fedavg_cnn --rounds 3
    python benchmarks/scaling.py --budget-mib 256 --csv scaling.csv --figure docs/figures/scaling.png
    python benchmarks/scaling.py --device cuda --algorithms fedavg_vgg11 --clients 10 100 --budget-mib 2048

``--csv`` keeps every measured row; ``--figure`` draws seconds per round and peak RSS above the baseline
against C (log-log), unchunked and within the budget, from them (or, with ``--from-csv``, from a CSV
written earlier, without measuring).

A benchmark, not a test: the numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

MNIST, CIFAR = (1, 28, 28), (3, 32, 32)
RUNS = {  # name -> (algorithm, model, sample shape, hyper-parameters; clients_per_round None: all C)
    "fedavg_mlr": ("fedavg", "mlr", MNIST, {"local_steps": 20}),
    "pfedme_mlr": ("pfedme", "mlr", MNIST, {"local_steps": 20, "K": 5, "personal_lr": 0.05, "lam": 15.0}),
    "fedavg_cnn": ("fedavg", "cnn", MNIST, {"local_steps": 20}),
    "fedavg_vgg11": ("fedavg", "vgg11", CIFAR, {"local_steps": 1, "batch_size": 32, "clients_per_round": 10}),
    "fedavg_mlr_seq": ("fedavg", "mlr", MNIST, {"local_steps": 20, "aggregation": "sequential"}),
    "fedavg_cnn_seq": ("fedavg", "cnn", MNIST, {"local_steps": 20, "aggregation": "sequential"}),
}


def random_federation(
    clients: int,
    samples: int,
    shape: tuple[int, ...],
    model: str,
    personal: str = "none",
    device: str = "cpu",
    state_budget: int | None = None,
):
    """A federation of ``clients`` clients with ``samples`` training and ``samples // 4`` (at least 1) test
    samples each of ``shape``: random normal inputs and labels in 0..9 (NumPy seed 0), float32, on ``device``,
    with the default ``model`` (a config name) for 10 classes, its personal parameters those of the split
    ``personal`` (``hetfl.models.adapters``), its per-client state within ``state_budget`` bytes (None: all on
    the device; ``Federation``)."""
    import numpy as np
    import torch

    from hetfl.engine.federation import ClientSplit, Federation
    from hetfl.models import build_model, normalize_model_spec

    rng = np.random.default_rng(0)

    def split(n: int) -> ClientSplit:  # one array, as Federation.from_partition gathers a split
        x = rng.standard_normal(size=(clients * n, *shape), dtype=np.float32)
        y = rng.integers(0, 10, size=clients * n)
        return ClientSplit.concatenated(x, y, [n] * clients, torch.device(device), torch.float32)

    spec = normalize_model_spec({"name": model, "split": personal}, "model")
    model = build_model(spec, shape, 10)
    return Federation(split(samples), split(max(1, samples // 4)), model, state_budget=state_budget)


def forget_construction() -> None:
    """Gives the freed copies of the data's construction back to the system (glibc's ``malloc_trim``) and
    resets the process's peak RSS to its current RSS (``/proc/self/clear_refs``, Linux ≥ 4.0), so that the
    peak measured after is the run's (its data, state and rounds), not the construction's transient NumPy
    copies (C = 10,000 MLR clients: 1.2 GiB above the baseline while building 0.75 GiB of data). Does
    nothing where either is missing."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def peak_rss_mib() -> float:
    """The process's peak RSS in MiB since :func:`forget_construction` (``VmHWM``), or ``getrusage``'s."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmHWM"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(
    name: str, clients: int, samples: int, rounds: int, budget_mib: float | None, device_name: str = "cpu"
) -> dict:
    """Seconds per round (median of ``rounds`` after one warm-up), rows per call and peak memory of one
    configuration, in this process (``budget_mib`` None: the unchunked engine). On ``cuda`` the peak is
    ``torch.cuda.max_memory_allocated`` (the data included; baseline 0) and each round ends with the device
    synchronized; on the CPU it is the peak RSS."""
    import numpy as np
    import torch

    from hetfl.algorithms import get_algorithm
    from hetfl.engine.memory import budget_bytes
    from hetfl.pipeline.train import apply_memory_budget, pick_device

    torch.set_num_threads(1)
    device = pick_device(device_name)  # on CUDA: float32 without TF32, as a training job
    cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else lambda: None
    baseline_mib = 0.0 if cuda else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    algorithm, model, shape, extra = RUNS[name]
    state_budget = None if budget_mib is None else budget_bytes(budget_mib, device)
    # per-client state placed within the budget, as a training job does
    fed = random_federation(clients, samples, shape, model, device=device_name, state_budget=state_budget)
    forget_construction()
    cls = get_algorithm(algorithm)
    hp = {"lr": 0.05, "batch_size": 20, "clients_per_round": clients, **extra}
    if algorithm == "pfedme":
        hp.pop("clients_per_round")
    algo = cls(fed, cls.Hyperparameters.from_dict(hp, name), 0, "epoch")
    rows, fits = None, None
    if budget_mib is not None:
        plan = apply_memory_budget(fed, algo, budget_mib, device, split_inexact=True)
        rows, fits = plan.rows, plan.fits
    sampled = torch.randperm(clients, generator=torch.Generator().manual_seed(0))[: algo.clients_per_round]
    times = []
    for t in range(1, rounds + 2):
        start = time.perf_counter()
        algo.round(t, sampled.sort().values)
        sync()
        times.append(time.perf_counter() - start)
    per_round = float(np.median(times[1:]))
    peak_mib = torch.cuda.max_memory_allocated(device) / 2**20 if cuda else peak_rss_mib()
    return {
        "run": name,
        "clients": clients,
        "s_per_round": per_round,
        "rows": rows,
        "fits": fits,
        "peak_rss_mib": peak_mib,
        "baseline_mib": baseline_mib,
        "device": str(device),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[10, 100, 1000, 10000])
    parser.add_argument("--algorithms", nargs="+", default=list(RUNS), choices=list(RUNS))
    parser.add_argument("--samples", type=int, default=20, help="training samples per client")
    parser.add_argument("--rounds", type=int, default=2, help="timed rounds (after one warm-up)")
    parser.add_argument("--max-gib", type=float, default=16.0, help="address-space limit per configuration")
    parser.add_argument("--budget-mib", type=float, help="also run each configuration within this budget")
    parser.add_argument(
        "--device",
        default="cpu",
        choices=["cpu", "cuda"],
        help="cuda: peak = CUDA peak allocated, no --max-gib",
    )
    parser.add_argument("--csv", help="write the measured rows to this CSV file")
    parser.add_argument("--figure", help="draw time and memory against C into this image file")
    parser.add_argument("--from-csv", help="draw --figure from this CSV (written by --csv) without measuring")
    parser.add_argument("--one", nargs=2, metavar=("RUN", "C"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.from_csv:
        import pandas as pd

        draw(pd.read_csv(args.from_csv), args.figure)
        return
    if args.one:
        if args.device == "cpu":  # CUDA reserves far more address space than it uses: no limit there
            limit = int(args.max_gib * 2**30)
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        one = measure(args.one[0], int(args.one[1]), args.samples, args.rounds, args.budget_mib, args.device)
        print(json.dumps(one))
        return
    budgets = [None] if args.budget_mib is None else [None, args.budget_mib]
    measured = []
    print(
        f"{'run':<13}{'C':>6}{'budget':>8}{'rows':>6}{'s/round':>9}{'ms/client-round':>16}{'ratio':>7}"
        f"{'peak RSS MiB' if args.device == 'cpu' else 'CUDA peak':>13}{'above base':>11}{'in budget':>10}"
    )
    for name in args.algorithms:
        for clients in args.clients:
            unchunked = None
            for budget in budgets:
                cmd = [sys.executable, __file__, "--one", name, str(clients), "--samples", str(args.samples),
                       "--rounds", str(args.rounds), "--max-gib", str(args.max_gib), "--device", args.device,
                       *([] if budget is None else ["--budget-mib", str(budget)])]  # fmt: skip
                proc = subprocess.run(cmd, capture_output=True, text=True)
                label = "none" if budget is None else f"{budget:g}"
                if proc.returncode != 0:
                    err = proc.stderr.strip()
                    why = err.splitlines()[-1] if err else f"exit {proc.returncode}"
                    print(
                        f"{name:<13}{clients:>6}{label:>8}  did not fit in {args.max_gib:g} GiB: {why[:70]}"
                    )
                    continue
                r = json.loads(proc.stdout.strip().splitlines()[-1])
                measured.append({**r, "budget_mib": budget})
                unchunked = r["s_per_round"] if budget is None else unchunked
                ratio = f"{r['s_per_round'] / unchunked:.2f}" if unchunked and budget is not None else "-"
                above = r["peak_rss_mib"] - r["baseline_mib"]
                within = "-" if budget is None else ("yes" if above <= budget else "NO")
                within += "" if r["fits"] in (None, True) else " (planned: does not fit)"
                print(
                    f"{name:<13}{clients:>6}{label:>8}{r['rows'] or 'all':>6}{r['s_per_round']:>9.3f}"
                    f"{1000 * r['s_per_round'] / clients:>16.3f}{ratio:>7}{r['peak_rss_mib']:>13.0f}"
                    f"{above:>11.0f}{within:>10}",
                    flush=True,
                )
                if args.csv:  # after every row: a run stopped part-way keeps what it measured
                    import pandas as pd

                    pd.DataFrame(measured).to_csv(args.csv, index=False)

    if args.figure:
        import pandas as pd

        draw(pd.DataFrame(measured), args.figure)


def draw(frame, path: str) -> None:
    """Seconds per round (left) and peak RSS above the process's baseline, MiB (right), against C, one line
    per run, dashed within the budget (each row's budget a grey tick); log-log. ``frame``: the rows of
    ``--csv`` (several files' rows may be concatenated: each row keeps its own budget)."""
    import seaborn as sns
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    within = frame["budget_mib"].notna()
    frame = frame.assign(
        above_mib=frame["peak_rss_mib"] - frame["baseline_mib"],
        memory=within.map({False: "unchunked", True: "within the budget"}),
    )
    runs = list(dict.fromkeys(frame["run"]))
    palette = dict(zip(runs, sns.color_palette(n_colors=len(runs)), strict=True))
    figure = Figure(figsize=(9.0, 3.4), layout="constrained")
    FigureCanvasAgg(figure)
    left, right = figure.subplots(1, 2)
    for ax, y, label in (
        (left, "s_per_round", "seconds per round"),
        (right, "above_mib", "peak RSS above base (MiB)"),
    ):
        sns.lineplot(
            frame, x="clients", y=y, hue="run", style="memory", markers=True, palette=palette, ax=ax,
            legend=ax is right,
        )  # fmt: skip
        ax.set(xscale="log", yscale="log", xlabel="clients C", ylabel=label)
    for run, rows in frame[within].groupby("run", sort=False):
        right.scatter(
            rows["clients"], rows["budget_mib"], marker="_", s=300, color=palette[run], linewidths=2.5
        )
    right.scatter([], [], marker="_", s=300, color="0.4", linewidths=2.5, label="its budget")
    right.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small")
    figure.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
