"""Per-client state larger than a job's memory: SCAFFOLD's controls c_i ``[C, P]`` (or pFedMe's θ̃_i and
w_{i,R}) on the device (RAM) or placed by the training job's rule (``hetfl.engine.state``: a memory-mapped file
when the state does not fit the budget), inside a memory limit like a SLURM job's.

SCAFFOLD (``--algorithm pfedme``: pFedMe, whose C clients all train every round, K = 2 inner steps;
``--algorithm fedavg``: FedAvg, no per-client state, whose round holds its S local models, or one chunk of
them with ``--aggregation sequential``;
``--algorithm fedalt``: stateful FedAlt, its clients' personal output layers ``[C, ...]`` kept across rounds and
its round's S local models, or one chunk of them with ``--aggregation sequential``, its evaluation a fine-tuning
step of every client's personal part;
``--algorithm cobo``: CoBo, whose C clients all train every iteration and whose collaboration weights are
updated every iteration from every one of the C(C−1)/2 pairs' gradients at their midpoints, batches of 10) on a
synthetic federation (``--shape`` inputs, default 1×28×28, the mnist5k shape; 3,32,32 is
CIFAR-10's; 10 classes, ``--samples`` training samples per client, random pixels and labels), ``--model``
(default: the DNN, 79,510 parameters),
``--sampled`` clients a round of C = ``--clients``, τ = ``--local-steps`` (20) of batch 10: its controls take
C·P·4 bytes (C = 10,000: 3.2 GB), of which a round touches S rows. Each placement runs in its own process,
one torch thread, float32; with ``--limit-mib L`` inside a new cgroup whose memory limit is L MiB (v1
``memory.limit_in_bytes`` or v2 ``memory.max``, under this process's own cgroup: needs the right to make
one, e.g. root), so that a process that needs more than L is killed, as a SLURM job would be:

- ``device``: every stack in the process's memory (``ClientStates`` without a budget: what a script that
  builds its own ``Federation`` gets);
- ``auto``: the training job's placement and rows per call under ``memory_budget: auto`` (``CPU_SHARE`` of
  the smaller of the RAM and the cgroup's limit, read from the process's own cgroup:
  ``hetfl.engine.memory.cgroup_limit``; ``hetfl.pipeline.train.apply_memory_budget``);
- ``mmap`` (not by default): every stack in a memory-mapped file, whatever the budget (the cost of the file).

Prints, per placement: the state's size and where it went, the rows per call, seconds per round (median after one warm-up, evaluation of
the global model included every round), the peak RSS, the anonymous and file-backed RSS at the end (file
pages are the mapped state's: the kernel writes them back and drops them under the limit) and the exit.
With ``--checkpoint``, the run then saves a checkpoint (``hetfl.engine.checkpoint``, in ``$TMPDIR``) and a
fresh SCAFFOLD on the same federation resumes from it, inside the same limit: seconds to save and to load,
and whether the resumed stacks equal the saved ones (the peak RSS then includes both).

    python benchmarks/client_state.py --clients 10000 --limit-mib 1536
    python benchmarks/client_state.py --clients 10000 --placements device mmap   # no limit: the file's cost
    python benchmarks/client_state.py --clients 10000 --limit-mib 1536 --placements auto --checkpoint
    python benchmarks/client_state.py --algorithm pfedme --clients 2000 --local-steps 2 --limit-mib 1024
    python benchmarks/client_state.py --algorithm fedavg --aggregation sequential --clients 10000 \
        --sampled 10000 --local-steps 1 --limit-mib 1536         # a round's 10,000 local models: 3.2 GB
    python benchmarks/client_state.py --algorithm fedalt --aggregation sequential --clients 10000 \
        --sampled 10000 --local-steps 1 --limit-mib 1536         # and 10,000 personal output layers
    python benchmarks/client_state.py --model resnet18 --shape 3,32,32 --clients 100 --local-steps 1 \
        --limit-mib 4096                                         # 100 clients of ResNet-18: 4.5 GB of c_i

A benchmark, not a test: the numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HYPERPARAMETERS = {
    "scaffold": {"lr": 0.05},
    "fedavg": {"lr": 0.05},  # no per-client state: its round's S local models (with --sampled = --clients)
    "pfedme": {"lr": 0.05, "personal_lr": 0.05, "lam": 15, "K": 2},
    "cobo": {"lr": 0.05, "pair_batch": 10, "pair_probability": 1.0},  # every pair's weight every iteration
    # stateful clients' personal output layers [C, ...]; its round's S local models; one fine-tuning step
    "fedalt": {"lr": 0.05, "stateful": True, "finetune_steps": 1},
}
"""Each algorithm's hyper-parameters besides the batch of 10, ``--local-steps`` and ``--sampled``."""
SPLIT = {"fedalt": "output"}
"""The model's personal part where the algorithm has one (``hetfl.models.adapters``)."""


def measure(
    algorithm_name: str,
    placement: str,
    clients: int,
    model: str,
    shape: tuple,
    samples: int,
    sampled: int,
    rounds: int,
    steps: int,
    checkpoint: bool = False,
    aggregation: str | None = None,
) -> dict:
    """One placement, in this process: seconds per round, placement record and memory (MiB); with
    ``checkpoint``, seconds to save and resume (``save_s``, ``load_s``) and ``resumed_equal``."""
    import numpy as np
    import torch
    from scaling import random_federation  # benchmarks/scaling.py, beside this script

    from hetfl.algorithms import get_algorithm
    from hetfl.engine.memory import budget_bytes
    from hetfl.engine.participation import participation_schedule
    from hetfl.pipeline.train import apply_memory_budget

    torch.set_num_threads(1)
    cpu = torch.device("cpu")
    budget = None  # device: every stack on the device; mmap: a budget of 0, every stack in a file
    if placement != "device":
        budget = budget_bytes("auto", cpu) if placement == "auto" else 0
    split = SPLIT.get(algorithm_name, "none")
    fed = random_federation(clients, samples, shape, model, split, state_budget=budget)
    cls = get_algorithm(algorithm_name)
    hp = {**HYPERPARAMETERS[algorithm_name], "batch_size": 10, "local_steps": steps}
    if "clients_per_round" in cls.Hyperparameters.names():  # CoBo: every client, every round
        hp["clients_per_round"] = sampled
    if aggregation is not None:  # the order of the server's sums (FedAvg-like, FedAlt)
        hp["aggregation"] = aggregation
    algorithm = cls(fed, cls.Hyperparameters.from_dict(hp, algorithm_name), 0, "epoch")
    algorithm.evaluated = cls.models[:1]  # the global model (CoBo: the personal models)
    plan = apply_memory_budget(fed, algorithm, "auto", cpu) if placement == "auto" else None
    schedule = participation_schedule(clients, sampled, rounds + 1, 0)
    times = []
    for t in range(1, rounds + 2):
        start = time.perf_counter()
        algorithm.round(t, schedule[t - 1])
        algorithm.evaluate()
        times.append(time.perf_counter() - start)
    placed = {k: v / 2**20 for k, v in fed.states.record().items()}  # the run's (a resumed one adds its own)
    extra = (
        _checkpoint(algorithm, lambda: cls(fed, algorithm.hp, 0, "epoch"), rounds + 1) if checkpoint else {}
    )
    status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)

    def mib(key: str) -> float:
        return int(status[key].split()[0]) / 1024  # kB

    return {
        "placement": placement,
        "clients": clients,
        "parameters": fed.model.num_parameters(),
        "state_mib": sum(placed.values()),
        "rows_per_call": None if plan is None else plan.rows,
        "placed": placed,
        "s_per_round": float(np.median(times[1:])),
        "peak_rss_mib": mib("VmHWM"),
        "anon_mib": mib("RssAnon"),
        "file_mib": mib("RssFile"),
        **extra,
    }


def _checkpoint(algorithm, fresh, round_done: int) -> dict:
    """Save ``algorithm``'s checkpoint to ``$TMPDIR``, resume ``fresh()`` from it: seconds and equality."""
    import tempfile

    import torch

    from hetfl.engine.checkpoint import load_checkpoint, save_checkpoint

    path = os.path.join(tempfile.gettempdir(), f"hetfl-bench-{os.getpid()}.ckpt")
    try:
        start = time.perf_counter()
        save_checkpoint(path, "bench", algorithm, round_done, b"", b"", 0.0)
        saved = time.perf_counter()
        resumed = fresh()
        made = time.perf_counter()
        loaded = load_checkpoint(path, "bench", resumed) is not None
        done = time.perf_counter()
        off = lambda t: isinstance(t, torch.Tensor) and algorithm.fed.states.is_off(t)  # noqa: E731
        stacks = {
            n: v
            for n, v in vars(algorithm).items()
            if isinstance(v, dict) and v and all(map(off, v.values()))
        }
        equal = loaded and all(
            torch.equal(getattr(resumed, n)[k], t) for n, v in stacks.items() for k, t in v.items()
        )
        return {"save_s": saved - start, "load_s": done - made, "resumed_equal": bool(equal)}
    finally:
        if os.path.exists(path):
            os.unlink(path)


def make_cgroup(limit_mib: float) -> str | None:
    """A new cgroup under this process's own, limited to ``limit_mib`` MiB; its ``cgroup.procs`` path, or
    None when none can be made here."""
    for line in open("/proc/self/cgroup").read().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            base, name = f"/sys/fs/cgroup/memory{path}", "memory.limit_in_bytes"
        elif controllers == "":
            base, name = f"/sys/fs/cgroup{path}", "memory.max"
        else:
            continue
        group = os.path.join(base, f"hetfl-bench-{os.getpid()}")
        try:
            os.makedirs(group, exist_ok=True)
            with open(os.path.join(group, name), "w") as f:
                f.write(str(int(limit_mib * 2**20)))
        except OSError:
            continue
        return os.path.join(group, "cgroup.procs")
    return None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algorithm", default="scaffold", choices=sorted(HYPERPARAMETERS))
    parser.add_argument("--clients", type=int, default=10000)
    parser.add_argument("--model", default="dnn")
    parser.add_argument("--shape", default="1,28,28", help="sample shape (3,32,32: the CIFAR-10 shape)")
    parser.add_argument("--local-steps", type=int, default=20, help="τ, local steps of batch 10")
    parser.add_argument("--samples", type=int, default=10, help="training samples per client")
    parser.add_argument("--sampled", type=int, default=10, help="clients sampled per round")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (after one warm-up)")
    parser.add_argument(
        "--limit-mib", type=float, help="run each placement in a cgroup with this memory limit"
    )
    parser.add_argument(
        "--placements", nargs="+", default=["device", "auto"], choices=["device", "auto", "mmap"]
    )
    parser.add_argument(
        "--checkpoint", action="store_true", help="then save a checkpoint and resume a fresh run from it"
    )
    parser.add_argument(
        "--aggregation", choices=["batched", "sequential"], help="the server's sums (FedAvg-like, FedAlt)"
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        shape = tuple(int(v) for v in args.shape.split(","))
        result = measure(
            args.algorithm,
            args.one,
            args.clients,
            args.model,
            shape,
            args.samples,
            args.sampled,
            args.rounds,
            args.local_steps,
            args.checkpoint,
            args.aggregation,
        )
        print(json.dumps(result))
        return
    procs = None if args.limit_mib is None else make_cgroup(args.limit_mib)
    if args.limit_mib is not None and procs is None:
        print(f"no cgroup could be made here: running without the {args.limit_mib:g} MiB limit")
    limit = f"limit {args.limit_mib:g} MiB" if procs else "no limit"
    order = f", aggregation: {args.aggregation}" if args.aggregation else ""
    print(
        f"{args.algorithm}{order}, {args.model} on {args.shape}, C = {args.clients}, S = {args.sampled}, {limit}"
    )
    ckpt = f"{'save s':>8}{'load s':>8}{'equal':>7}" if args.checkpoint else ""
    print(
        f"{'placement':<10}{'state MiB':>10}{'where':>15}{'rows':>6}{'s/round':>9}{'peak RSS':>10}{'anon':>8}{'file':>8}{ckpt}"
        "  exit"
    )

    def enter() -> None:  # in the child, before it runs: join the limited cgroup
        with open(procs, "w") as f:
            f.write(str(os.getpid()))

    for placement in args.placements:
        cmd = [sys.executable, __file__, "--one", placement, "--algorithm", args.algorithm, "--clients", str(args.clients), "--model", args.model,
               "--shape", args.shape, "--local-steps", str(args.local_steps), "--samples", str(args.samples),
               "--sampled", str(args.sampled), "--rounds", str(args.rounds)]  # fmt: skip
        cmd += ["--checkpoint"] if args.checkpoint else []
        cmd += ["--aggregation", args.aggregation] if args.aggregation else []
        proc = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=enter if procs else None)
        if proc.returncode != 0:
            why = "killed (out of memory)" if proc.returncode == -9 else proc.stderr.strip()[-200:]
            print(
                f"{placement:<10}{'':>10}{'':>15}{'':>6}{'-':>9}{'-':>10}{'-':>8}{'-':>8}  {proc.returncode}: {why}"
            )
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        where = ", ".join(f"{k.removesuffix('_bytes')} {v:.0f}" for k, v in r["placed"].items() if v)
        ckpt = f"{r['save_s']:>8.1f}{r['load_s']:>8.1f}{r['resumed_equal']!s:>7}" if args.checkpoint else ""
        print(
            f"{placement:<10}{r['state_mib']:>10.0f}{where:>15}{r['rows_per_call'] or 'all':>6}{r['s_per_round']:>9.3f}{r['peak_rss_mib']:>10.0f}"
            f"{r['anon_mib']:>8.0f}{r['file_mib']:>8.0f}{ckpt}  0"
        )
    if procs:
        os.rmdir(os.path.dirname(procs))


if __name__ == "__main__":
    main()
