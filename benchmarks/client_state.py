"""Per-client state larger than a job's memory: SCAFFOLD's controls c_i ``[C, P]`` on the device (RAM) or
placed by the training job's rule (``hetfl.engine.state``: a memory-mapped file when the state does not fit
the budget), inside a memory limit like a SLURM job's.

SCAFFOLD on a synthetic federation (``--shape`` inputs, default 1×28×28, the mnist5k shape; 3,32,32 is
CIFAR-10's; 10 classes, ``--samples`` training samples per client, random pixels and labels), ``--model``
(default: the DNN, 79,510 parameters),
``--sampled`` clients a round of C = ``--clients``, τ = ``--local-steps`` (20) of batch 10: its controls take
C·P·4 bytes (C = 10,000: 3.2 GB), of which a round touches S rows. Each placement runs in its own process,
one torch thread, float32; with ``--limit-mib L`` inside a new cgroup whose memory limit is L MiB (v1
``memory.limit_in_bytes`` or v2 ``memory.max``, under this process's own cgroup: needs the right to make
one, e.g. root), so that a process that needs more than L is killed, as a SLURM job would be:

- ``device``: every stack in the process's memory (``ClientStates`` without a budget: what a script that
  builds its own ``Federation`` gets);
- ``auto``: the training job's placement under ``memory_budget: auto`` (``CPU_SHARE`` of the smaller of
  the RAM and the cgroup's limit, read from the process's own cgroup: ``hetfl.engine.memory.cgroup_limit``);
- ``mmap`` (not by default): every stack in a memory-mapped file, whatever the budget (the cost of the file).

Prints, per placement: where the controls went, seconds per round (median after one warm-up, evaluation of
the global model included every round), the peak RSS, the anonymous and file-backed RSS at the end (file
pages are the mapped state's: the kernel writes them back and drops them under the limit) and the exit.

    python benchmarks/client_state.py --clients 10000 --limit-mib 1536
    python benchmarks/client_state.py --clients 10000 --placements device mmap   # no limit: the file's cost
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


def measure(
    placement: str,
    clients: int,
    model: str,
    shape: tuple,
    samples: int,
    sampled: int,
    rounds: int,
    steps: int,
) -> dict:
    """One placement, in this process: seconds per round, placement record and memory (MiB)."""
    import numpy as np
    import torch
    from scaling import random_federation  # benchmarks/scaling.py, beside this script

    from hetfl.algorithms import get_algorithm
    from hetfl.engine.memory import budget_bytes, data_bytes
    from hetfl.engine.participation import participation_schedule
    from hetfl.engine.state import ClientStates

    torch.set_num_threads(1)
    fed = random_federation(clients, samples, shape, model)  # benchmarks/scaling.py's
    cpu = torch.device("cpu")
    if placement != "device":  # mmap: a budget of 0, every stack in a file
        budget = budget_bytes("auto", cpu) if placement == "auto" else 0
        fed.states = ClientStates(cpu, budget, reserved=data_bytes(fed))
    cls = get_algorithm("scaffold")
    hp = {"lr": 0.05, "batch_size": 10, "local_steps": steps, "clients_per_round": sampled}
    algorithm = cls(fed, cls.Hyperparameters.from_dict(hp, "scaffold"), 0, "epoch")
    algorithm.evaluated = ("global",)
    schedule = participation_schedule(clients, sampled, rounds + 1, 0)
    times = []
    for t in range(1, rounds + 2):
        start = time.perf_counter()
        algorithm.round(t, schedule[t - 1])
        algorithm.evaluate()
        times.append(time.perf_counter() - start)
    status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)

    def mib(key: str) -> float:
        return int(status[key].split()[0]) / 1024  # kB

    return {
        "placement": placement,
        "clients": clients,
        "parameters": fed.model.num_parameters(),
        "state_mib": sum(v.numel() * v.element_size() for v in algorithm.c_i.values()) / 2**20,
        "placed": {k: v / 2**20 for k, v in fed.states.record().items()},
        "s_per_round": float(np.median(times[1:])),
        "peak_rss_mib": mib("VmHWM"),
        "anon_mib": mib("RssAnon"),
        "file_mib": mib("RssFile"),
    }


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
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        shape = tuple(int(v) for v in args.shape.split(","))
        result = measure(
            args.one,
            args.clients,
            args.model,
            shape,
            args.samples,
            args.sampled,
            args.rounds,
            args.local_steps,
        )
        print(json.dumps(result))
        return
    procs = None if args.limit_mib is None else make_cgroup(args.limit_mib)
    if args.limit_mib is not None and procs is None:
        print(f"no cgroup could be made here: running without the {args.limit_mib:g} MiB limit")
    limit = f"limit {args.limit_mib:g} MiB" if procs else "no limit"
    print(f"SCAFFOLD, {args.model} on {args.shape}, C = {args.clients}, S = {args.sampled}, {limit}")
    print(
        f"{'placement':<10}{'c_i MiB':>9}{'where':>14}{'s/round':>9}{'peak RSS':>10}{'anon':>8}{'file':>8}  exit"
    )

    def enter() -> None:  # in the child, before it runs: join the limited cgroup
        with open(procs, "w") as f:
            f.write(str(os.getpid()))

    for placement in args.placements:
        cmd = [sys.executable, __file__, "--one", placement, "--clients", str(args.clients), "--model", args.model,
               "--shape", args.shape, "--local-steps", str(args.local_steps), "--samples", str(args.samples),
               "--sampled", str(args.sampled), "--rounds", str(args.rounds)]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=enter if procs else None)
        if proc.returncode != 0:
            why = "killed (out of memory)" if proc.returncode == -9 else proc.stderr.strip()[-200:]
            print(
                f"{placement:<10}{'':>9}{'':>14}{'-':>9}{'-':>10}{'-':>8}{'-':>8}  {proc.returncode}: {why}"
            )
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        where = ", ".join(f"{k.removesuffix('_bytes')} {v:.0f}" for k, v in r["placed"].items() if v)
        print(
            f"{placement:<10}{r['state_mib']:>9.0f}{where:>14}{r['s_per_round']:>9.3f}{r['peak_rss_mib']:>10.0f}"
            f"{r['anon_mib']:>8.0f}{r['file_mib']:>8.0f}  0"
        )
    if procs:
        os.rmdir(os.path.dirname(procs))


if __name__ == "__main__":
    main()
