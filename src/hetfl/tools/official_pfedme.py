"""Time the official pFedMe code (github.com/CharlieDinh/pFedMe) on hetfl's data, beside hetfl, the same day.

``python -m hetfl.tools.bench --official --official-code PATH`` (PATH: a checkout of the official repository, which
this project does not ship) measures the official code's seconds per round instead of quoting the figures in
``hetfl.tools.bench.OFFICIAL``: machine speed drifts from day to day (and with the torch version), so only
timings taken in the same sitting are comparable.

How: the federation of a study (the same clients, samples and order as hetfl's run) is written in the
official code's JSON layout (``data/<Mnist|Synthetic>/data/{train,test}/*.json``: ``users``,
``user_data[u] = {x, y}``) in a scratch directory that links the checkout's ``FLAlgorithms`` and ``utils``;
a subprocess (one torch thread) builds the official server with the run's hyper-parameters
(:func:`official_arguments`) and runs its unchanged ``train()`` loop; the clock is read at each round's
``send_parameters`` (the first thing a round does) and around each of its evaluation calls (``evaluate``,
``evaluate_personalized_model``, ``evaluate_one_step``), so a round's time with evaluation is the time
between two rounds and without it that less the evaluation calls. The first round is a warm-up. Saving
results (``h5py``) and models is switched off; ``torchvision`` and ``h5py`` (imported, used only for
CIFAR-10 and saving) are stubbed when absent.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

from hetfl.engine.federation import Federation

DATASETS = {"pfedme_mnist": "Mnist", "pfedme_synthetic": "Synthetic"}
"""hetfl study -> the official code's ``--dataset`` (its MLR is ``Mclr_Logistic(784, 10)`` / ``(60, 10)``)."""

ALGORITHMS = {"pfedme": "pFedMe", "fedavg": "FedAvg", "perfedavg": "PerAvg"}


def official_arguments(spec: dict) -> dict:
    """The official server's constructor arguments for a hetfl run spec (``Study.run_json``): ``batch_size``,
    ``learning_rate`` (η), ``num_users`` (S), ``local_epochs`` (R, local steps), ``beta`` (pFedMe's β,
    Per-FedAvg's second step size), ``lamda`` (λ), ``K`` and ``personal_learning_rate``.

    Raises:
        ValueError: an algorithm the official code does not have.
    """
    name, hp = spec["algorithm"], spec["hyperparameters"]
    if name not in ALGORITHMS:
        raise ValueError(f"the official pFedMe code has no {name!r}; allowed: {', '.join(ALGORITHMS)}")
    out = {
        "algorithm": ALGORITHMS[name],
        "batch_size": hp["batch_size"],
        "learning_rate": hp["lr"],
        "num_users": hp["clients_per_round"],
        "local_epochs": hp["local_steps"],
        "beta": hp.get("beta", 1.0),
        "lamda": hp.get("lam", 15),
        "K": hp.get("K", 5),
        "personal_learning_rate": hp.get("personal_lr", 0.09),
    }
    return out


def export(fed: Federation, root: Path, dataset: str) -> None:
    """Write ``fed``'s train and test data in the official JSON layout under ``root/data/<dataset>/data``.

    Client i is user ``f_{i:05d}`` (the official code sorts user ids, so the order is hetfl's); samples are
    flattened (the official MNIST loader reshapes them to 1×28×28)."""
    for split in ("train", "test"):
        data = getattr(fed, split)
        users, user_data = [], {}
        for i in range(fed.num_clients):
            a, b = int(data.offsets[i]), int(data.offsets[i + 1])
            users.append(f"f_{i:05d}")
            user_data[users[-1]] = {"x": data.x[a:b].reshape(b - a, -1).tolist(), "y": data.y[a:b].tolist()}
        out = root / "data" / dataset / "data" / split
        out.mkdir(parents=True, exist_ok=True)
        sizes = [len(user_data[u]["y"]) for u in users]
        (out / f"{split}.json").write_text(
            json.dumps({"users": users, "user_data": user_data, "num_samples": sizes})
        )


def workspace(code: Path) -> tempfile.TemporaryDirectory:
    """A scratch directory linking the checkout's ``FLAlgorithms`` and ``utils`` (data are written beside).

    Raises:
        FileNotFoundError: ``code`` is not a checkout of the official repository.
    """
    code = Path(code).resolve()
    for part in ("FLAlgorithms", "utils"):
        if not (code / part).is_dir():
            raise FileNotFoundError(f"--official-code {code}: no {part}/ (expected a pFedMe checkout)")
    tmp = tempfile.TemporaryDirectory(prefix="hetfl-official-")
    for part in ("FLAlgorithms", "utils"):
        os.symlink(code / part, Path(tmp.name) / part)
    return tmp


def time_rounds(
    root: Path, dataset: str, arguments: dict, rounds: int, threads: int = 1
) -> tuple[float, float]:
    """Median seconds per round of the official code (with its evaluation, without), over ``rounds`` rounds
    after a warm-up one, in a subprocess in ``root`` (:func:`workspace` with :func:`export`'s data).

    Raises:
        RuntimeError: the subprocess failed (its stderr's end in the message).
    """
    command = [sys.executable, "-m", "hetfl.tools.official_pfedme", "--root", str(root), "--dataset", dataset]
    command += ["--rounds", str(rounds + 1), "--arguments", json.dumps(arguments), "--threads", str(threads)]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the official code failed ({' '.join(command[:6])}):\n{done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result["eval_s"], result["train_s"]


def _run(root: Path, dataset: str, arguments: dict, rounds: int, threads: int) -> dict:
    """In the subprocess: the official server, its ``train()`` loop timed per round (module docstring)."""
    os.chdir(root)
    sys.path.insert(0, str(root))
    for name in ("h5py", "torchvision", "torchvision.transforms"):
        try:
            __import__(name)
        except ImportError:
            sys.modules[name] = types.ModuleType(name)
    sys.modules["torchvision"].transforms = sys.modules["torchvision.transforms"]
    import torch

    torch.set_num_threads(threads)
    from FLAlgorithms.servers.serveravg import FedAvg  # the official code
    from FLAlgorithms.servers.serverbase import Server
    from FLAlgorithms.servers.serverperavg import PerAvg
    from FLAlgorithms.servers.serverpFedMe import pFedMe
    from FLAlgorithms.trainmodel.models import Mclr_Logistic

    starts: list[float] = []
    evals: list[float] = []
    send = Server.send_parameters

    def timed_send(self):
        starts.append(time.perf_counter())
        evals.append(0.0)
        return send(self)

    def timed(method):
        def call(self):
            start = time.perf_counter()
            out = method(self)
            evals[-1] += time.perf_counter() - start
            return out

        return call

    Server.send_parameters = timed_send
    for name in ("evaluate", "evaluate_personalized_model", "evaluate_one_step"):
        setattr(Server, name, timed(getattr(Server, name)))
    Server.save_results = Server.save_model = lambda self: None
    args = dict(arguments)
    cls = {"pFedMe": pFedMe, "FedAvg": FedAvg, "PerAvg": PerAvg}[args.pop("algorithm")]
    torch.manual_seed(0)
    model = (Mclr_Logistic() if dataset == "Mnist" else Mclr_Logistic(60, 10)), "mclr"
    k, personal_lr = args.pop("K"), args.pop("personal_learning_rate")
    extra = {"K": k, "personal_learning_rate": personal_lr} if cls is pFedMe else {}
    devnull = open(os.devnull, "w")  # noqa: SIM115  (the official code prints every round)
    stdout, sys.stdout = sys.stdout, devnull
    try:
        server = cls(torch.device("cpu"), dataset, cls.__name__, model, num_glob_iters=rounds, optimizer="SGD",
                     times=0, **args, **extra)  # fmt: skip
        server.train()
    finally:
        sys.stdout = stdout
    ends = [*starts[1:], time.perf_counter()]
    total = [b - a for a, b in zip(starts, ends, strict=True)][1:]
    return {
        "eval_s": statistics.median(total),
        "train_s": statistics.median([t - e for t, e in zip(total, evals[1:], strict=True)]),
        "rounds": len(total),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="one official-code timing (hetfl.tools.bench --official-code)"
    )
    parser.add_argument("--root", required=True)
    parser.add_argument("--dataset", required=True, choices=sorted(DATASETS.values()))
    parser.add_argument("--rounds", type=int, required=True)
    parser.add_argument("--arguments", required=True, help="JSON: official_arguments()")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    print(
        json.dumps(_run(Path(args.root), args.dataset, json.loads(args.arguments), args.rounds, args.threads))
    )


if __name__ == "__main__":
    main()
