"""The two execution paths (``execution: batched | loop``, ``hetfl.engine.execution``) timed side by side:
client steps per second, achieved TFLOP/s and their ratio, per model and number of clients (docs/speed.md,
"Execution paths").

FedAvg trains every one of C clients τ local steps of batch B a round (``clients_per_round`` = C) on a
synthetic federation (random pixels and labels, ``--samples`` per client: the arithmetic, not the accuracy,
is measured), once batched and once looped, from the same seed. One round warms up (the first kernels, cuDNN's
plans) and is reported as such; then ``--rounds`` rounds are timed (evaluation excluded; on CUDA the clock
is read after ``torch.cuda.synchronize``). Models (``--models``):

- ``cnn``: the image studies' CNN (conv 16, conv 32, 64 hidden) on 1×28×28 (the MNIST shape);
- ``vgg11``: VGG-11 (9.2 M parameters) on 3×32×32 (the CIFAR-10 shape; ``minimax_paper_robust``'s model);
- ``resnet18``: ResNet-18 with GroupNorm (11.2 M parameters) on 3×32×32;
- ``mlr``, ``dnn`` (not run unless named): pFedMe's MNIST models (784 → 10; 784 → 100 → 10).

A client step is one minibatch's forward, backward and update of one client; TFLOP/s counts 3 forward passes
a trained sample (forward, and a backward of twice its FLOPs: ``hetfl.engine.execution.forward_flops``).
``ratio`` is the loop's client steps per second over the batched path's (> 1: the loop is faster), and
``max_rel_diff`` the largest relative difference of the two paths' global models after their rounds (float32
rounding: they draw the same minibatches). ``--paths ... rows1`` adds the batched model called one client at
a time (``hetfl.engine.chunks.limit_rows``): the loop's kernels without its module. On CUDA the script also prints the start-up a training job pays
(the CUDA context, and the warm-up round against a timed one).

    python benchmarks/execution.py                                   # CPU: cnn, vgg11, resnet18 at C = 15, 100
    python benchmarks/execution.py --models cnn vgg11 --clients 15 --rounds 2 --csv execution.csv
    python benchmarks/execution.py --device cuda --precision float32 tf32

A benchmark, not a test: the numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
import torch

from hetfl.algorithms import get_algorithm
from hetfl.engine.chunks import limit_rows
from hetfl.engine.execution import PRECISIONS, forward_flops, with_execution
from hetfl.engine.federation import ClientSplit, Federation
from hetfl.engine.participation import participation_schedule
from hetfl.models import build_model, normalize_model_spec
from hetfl.pipeline.train import pick_device

MODELS = {  # name -> (model config, sample shape)
    "cnn": ({"name": "cnn"}, (1, 28, 28)),
    "vgg11": ({"name": "vgg11"}, (3, 32, 32)),
    "resnet18": ({"name": "resnet18"}, (3, 32, 32)),
    "mlr": ({"name": "mlr"}, (1, 28, 28)),  # the small models, for auto's rule on the CPU
    "dnn": ({"name": "dnn"}, (1, 28, 28)),
}
DEFAULT_MODELS = ["cnn", "vgg11", "resnet18"]
CLASSES = 10


def federation(
    model_name: str, clients: int, samples: int, device: torch.device, path: str = "batched"
) -> Federation:
    """``clients`` clients of ``samples`` random samples each (train; 1 test sample each), float32, the model's
    calls on execution ``path`` (``rows1``: the batched model, one client per call)."""
    config, shape = MODELS[model_name]
    rng = np.random.default_rng(0)
    xs = [rng.random((samples, *shape), dtype=np.float32) for _ in range(clients)]
    ys = [rng.integers(0, CLASSES, samples) for _ in range(clients)]
    model = build_model(normalize_model_spec(config, "model"), shape, CLASSES)
    model = with_execution(model, "batched" if path == "rows1" else path)
    train = ClientSplit(xs, ys, device, torch.float32)
    test = ClientSplit([x[:1] for x in xs], [y[:1] for y in ys], device, torch.float32)
    fed = Federation(train, test, model)
    if path == "rows1":  # the batched model, one client per call (hetfl.engine.chunks)
        limit_rows(fed.model, 1)
    return fed


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(model_name, clients, path, args, device) -> dict:
    """Time FedAvg's rounds on one path: a warm-up round, then ``args.rounds`` timed ones."""
    fed = federation(model_name, clients, args.samples, device, path)
    cls = get_algorithm("fedavg", environment="federation")
    hp = {"lr": 0.01, "local_steps": args.local_steps, "batch_size": args.batch, "clients_per_round": clients}
    algorithm = cls(fed, cls.Hyperparameters.from_dict(hp, "benchmark"), 0, "epoch")
    algorithm.rounds = args.rounds + 1
    schedule = participation_schedule(clients, clients, args.rounds + 1, 0)
    sync(device)
    start = time.perf_counter()
    algorithm.round(1, schedule[0])
    sync(device)
    warmup = time.perf_counter() - start
    times = []
    for t in range(2, args.rounds + 2):
        start = time.perf_counter()
        algorithm.round(t, schedule[t - 1])
        sync(device)
        times.append(time.perf_counter() - start)
    seconds = float(np.median(times))
    steps = clients * args.local_steps
    flops = forward_flops(fed.model)
    state = {
        k: v.detach().float().cpu() for k, v in algorithm.state_dict().items() if k.startswith("global/")
    }
    return {
        "model": model_name,
        "params_m": round(fed.model.num_parameters() / 1e6, 3),
        "gflops_per_sample": round(flops / 1e9, 4),
        "clients": clients,
        "path": path,
        "s_per_round": round(seconds, 4),
        "warmup_s": round(warmup, 3),
        "client_steps_per_s": round(steps / seconds, 2),
        "ms_per_client_step": round(1000 * seconds / steps, 3),
        "tflops": round(3 * flops * args.batch * steps / seconds / 1e12, 3),
        "_state": state,
    }


def relative_difference(a: dict, b: dict) -> float:
    return max(float((a[k] - b[k]).abs().max() / b[k].abs().max().clamp_min(1e-30)) for k in b)


def main(argv=None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    parser.add_argument("--models", nargs="+", default=DEFAULT_MODELS, choices=list(MODELS))
    parser.add_argument("--clients", nargs="+", type=int, default=[15, 100])
    parser.add_argument("--precision", nargs="+", default=["float32"], choices=list(PRECISIONS))
    parser.add_argument(
        "--paths",
        nargs="+",
        default=["batched", "loop"],
        choices=["batched", "loop", "rows1"],
        help="rows1: the batched model one client per call (a memory budget's row chunks of 1)",
    )
    parser.add_argument("--rounds", type=int, default=2, help="timed rounds after the warm-up round")
    parser.add_argument("--local-steps", type=int, default=2, help="τ, local steps per client and round")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--samples", type=int, default=64, help="training samples per client")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (a training job's: 1)")
    parser.add_argument("--csv", help="write every measured row here")
    args = parser.parse_args(argv)
    for name, value in (("rounds", args.rounds), ("local-steps", args.local_steps), ("batch", args.batch)):
        if value < 1:
            parser.error(f"--{name} must be at least 1, got {value}")
    if any(c < 1 for c in args.clients):
        parser.error(f"--clients must be at least 1, got {args.clients}")
    torch.set_num_threads(args.threads)
    rows = []
    for precision in args.precision:
        device = pick_device(args.device, precision)
        if device.type == "cuda" and not rows:
            start = time.perf_counter()
            torch.zeros(1, device=device)
            sync(device)
            print(f"CUDA context: {time.perf_counter() - start:.2f} s ({torch.cuda.get_device_name(device)})")
        for model_name in args.models:
            for clients in args.clients:
                pair = {}
                for path in args.paths:
                    try:
                        pair[path] = measure(model_name, clients, path, args, device)
                    except (RuntimeError, MemoryError) as err:  # out of memory: reported, not fatal
                        print(f"{model_name} C={clients} {path}: {type(err).__name__}: {str(err)[:200]}")
                    if device.type == "cuda":
                        torch.cuda.empty_cache()
                for row in pair.values():
                    other = pair.get("batched")
                    row["precision"] = precision if device.type == "cuda" else "float32 (cpu)"
                    row["ratio"] = (
                        round(row["client_steps_per_s"] / other["client_steps_per_s"], 2) if other else None
                    )
                    row["max_rel_diff"] = (
                        relative_difference(row["_state"], other["_state"]) if other else None
                    )
                    rows.append({k: v for k, v in row.items() if k != "_state"})
                    print(pd.DataFrame(rows[-1:]).to_string(index=False, header=len(rows) == 1), flush=True)
    frame = pd.DataFrame(rows)
    print()
    print(frame.to_string(index=False))
    if args.csv:
        frame.to_csv(args.csv, index=False)
    return frame


if __name__ == "__main__":
    main()
