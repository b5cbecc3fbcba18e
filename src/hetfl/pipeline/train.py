"""Run one training job: (study, run, seed) from its resolved spec to metrics, model and run record.

Called by ``workflow/scripts/train.py``; usable without Snakemake:

    from hetfl.pipeline.train import train
    info = train(spec, seed=0, data="results/data/mnist5k/data.npz",
                 partition="results/partitions/.../seed=0/clients.npz", outputs=paths)
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import platform
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

import numpy as np
import torch
from threadpoolctl import threadpool_limits
from torch import Tensor
from tqdm import tqdm

from hetfl.algorithms import get_algorithm
from hetfl.data.clients import Partition
from hetfl.data.dataset import Dataset
from hetfl.engine.checkpoint import load_checkpoint, save_checkpoint
from hetfl.engine.execution import PRECISIONS, LoopModel, resolve_execution, with_execution
from hetfl.engine.federation import Federation
from hetfl.engine.memory import (
    MIB,
    MemoryPlan,
    budget_bytes,
    peak_rss_bytes,
    plan_memory,
)
from hetfl.engine.participation import participation_schedule
from hetfl.engine.runner import run_rounds
from hetfl.models import build_model
from hetfl.pipeline.records import MetricsWriter, RunRecord
from hetfl.problems import build_problem


@dataclass
class Checkpointing:
    """Where and when a run saves checkpoints (``hetfl.engine.checkpoint``).

    Attributes:
        path: the checkpoint file; resumed from when it exists and belongs to this run.
        key: identifies the run (``checkpoint_key``): a checkpoint with another key is ignored.
        every_rounds: save after every this many rounds (None: not by rounds).
        every_seconds: save at the first round end at least this many wall seconds after the last
            save (0: not by time).
    """

    path: Path
    key: str
    every_rounds: int | None = None
    every_seconds: float = 300.0

    def due(self, t: int, since_last_s: float) -> bool:
        """Whether to save after round ``t``, ``since_last_s`` seconds after the last save."""
        by_rounds = self.every_rounds is not None and t % self.every_rounds == 0
        return by_rounds or (self.every_seconds > 0 and since_last_s >= self.every_seconds)


def mib(nbytes: float) -> str:
    """``nbytes`` in MiB for a log line: whole MiB from 10 MiB, else 3 significant digits (0.5 MiB, not 0)."""
    value = nbytes / MIB
    return f"{value:.0f}" if value >= 10 else f"{value:.3g}"


def checkpoint_key(spec: dict[str, Any], seed: int, code: str = "") -> str:
    """A checkpoint key: SHA-256 of the resolved run spec, the seed and the code fingerprint."""
    blob = json.dumps([spec, int(seed), code], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def apply_choice(spec: dict[str, Any], choice: dict[str, Any]) -> dict[str, Any]:
    """A tuned run's spec with the chosen hyper-parameters in place (and ``tuned``: the choice), as its
    training job runs it and its ``run.json`` records it (``hetfl.pipeline.tuning``: how the choice is made).

    Args:
        spec: the run's resolved spec (``RunSpec.as_dict``); choice: the ``tune`` stage's choice.

    Raises:
        ValueError: the choice names a hyper-parameter the run's spec does not have.
    """
    unknown = sorted(set(choice["hyperparameters"]) - set(spec["hyperparameters"]))
    if unknown:
        raise ValueError(f"the tuning choice sets unknown hyper-parameters {unknown}")
    return {
        **spec,
        "hyperparameters": {**spec["hyperparameters"], **choice["hyperparameters"]},
        "tuned": {
            "point": choice["point"],
            "score": choice["score"],
            "metric": choice["metric"],
            "at": choice["at"],
        },
    }


@dataclass
class RunOutputs:
    """Paths a training job writes."""

    metrics: Path
    client_metrics: Path
    info: Path
    model: Path
    artifacts: Path | None = None  # the algorithm's recorded arrays (.npz), when wanted


def pick_device(name: str, precision: str = "float32") -> torch.device:
    """``auto`` -> CUDA when available, else CPU; ``cpu``; ``cuda`` (raises RuntimeError if unavailable).

    On CUDA it also sets TensorFloat-32 for cuDNN's convolutions and cuBLAS's matrix products (torch's
    ``allow_tf32`` flags) from the run's ``precision``: ``float32`` (the default) turns TF32 off, so that a
    float32 run computes in float32 as on the CPU: with TF32 (cuDNN's default on Ampere and later GPUs) a
    ResNet-18's loss differed from the CPU's by 3e-4 (relative) on an H200, and one CoBo run of
    ``collab_cifar_standin``'s 8×8-digits version (lr 0.1, momentum 0.9) diverged where the CPU's did not. ``tf32`` turns it on, as
    the papers' codes ran (cuDNN's defaults). A CPU has no TF32: there ``tf32`` changes nothing (the training
    job says so, and its ``run.json`` records ``tf32: false``).

    Raises:
        RuntimeError: ``cuda`` without a CUDA device.
        ValueError: ``precision`` not ``float32`` or ``tf32`` (the config refuses it before any job runs).
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision: unknown value {precision!r}; allowed: {', '.join(PRECISIONS)}")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("device 'cuda' requested but torch.cuda.is_available() is False")
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        torch.backends.cudnn.allow_tf32 = precision == "tf32"
    return torch.device(name)


def tf32_active(device: torch.device) -> bool:
    """Whether float32 products on ``device`` run in TensorFloat-32 (CUDA with torch's ``allow_tf32`` flags
    on; never on a CPU)."""
    return device.type == "cuda" and torch.backends.cudnn.allow_tf32 and torch.backends.cuda.matmul.allow_tf32


def execution_taken(env) -> str | None:
    """The path the model's calls took (``hetfl.engine.execution``: ``batched`` or ``loop``), for the run
    record; None on a generated problem (no model)."""
    if not isinstance(env, Federation):
        return None
    return "loop" if isinstance(env.model.inner, LoopModel) else "batched"


def build(
    spec: dict[str, Any],
    seed: int,
    data: Path | str | None,
    partition: Path | str | None,
    device: torch.device,
    init: Path | str | None = None,
    budget: int | None = None,
    reference: Path | str | None = None,
):
    """Build the environment (a federation from the data and partition files, or a generated problem)
    and the algorithm of ``spec``. The federation's model computes its clients one at a time
    (``hetfl.engine.execution.LoopModel``) when the run's ``execution`` resolves to ``loop`` on ``device``.

        init: the ``final.pt`` of the run this one starts from (``init_from``), or None.
        reference: the ``final.pt`` of the run this one measures its distance to (``reference_from``), or None:
            its models become the algorithm's ``reference`` (:func:`load_reference`).
        budget: the run's memory budget in bytes (``hetfl.engine.memory.budget_bytes``), within which the
            algorithm's per-client state stacks are placed on or off the device (``hetfl.engine.state``);
            None: all on the device.

    Returns:
        ``(environment, algorithm)``; the algorithm's ``rounds`` is the run's T (``spec["rounds"]``).
    """
    dtype = getattr(torch, spec["dtype"])
    if "problem" in spec:
        env = build_problem(spec["problem"], seed, device, dtype)
    else:
        dataset = Dataset.load(data)
        model = build_model(spec["model"], dataset.sample_shape, dataset.num_outputs, dataset.task)
        model = with_execution(model, resolve_execution(spec.get("execution", "batched"), model, device))
        init_params = None
        if init is not None:  # init_from: the other run's final global model
            state = torch.load(init, map_location="cpu", weights_only=True)
            init_params = {k.split("/", 1)[1]: v for k, v in state.items() if k.startswith("global/")}
        env = Federation.from_partition(
            dataset,
            Partition.load(partition),
            model,
            device,
            dtype,
            init_params=init_params,
            state_budget=budget,
        )
    algorithm = build_algorithm(spec, env, seed)
    if reference is not None:  # reference_from: the other run's final models, on this run's device
        algorithm.reference = load_reference(reference, env.device, env.dtype)
    return env, algorithm


def load_reference(
    path: Path | str, device: torch.device, dtype: torch.dtype
) -> dict[str, dict[str, Tensor]]:
    """The models of a run's ``final.pt`` (``{"<model>/<param>": tensor}``) as ``{model: {param: tensor}}``,
    each tensor on ``device`` in ``dtype``: the references a run with ``reference_from`` measures its distance
    to (e.g. ``minimax_saddle``'s saddle points, ``hetfl.algorithms.minimax.saddle``)."""
    state = torch.load(path, map_location="cpu", weights_only=True)
    out: dict[str, dict[str, Tensor]] = {}
    for key, value in state.items():
        model, name = key.split("/", 1)
        out.setdefault(model, {})[name] = value.to(device=device, dtype=dtype)
    return out


def build_algorithm(spec: dict[str, Any], env, seed: int):
    """The algorithm of ``spec`` on its built environment ``env`` (a ``Federation`` or a generated problem),
    as a training job builds it: hyper-parameters checked (``ConfigError`` naming the run's key), ``rounds``
    = the run's T (``spec["rounds"]``, for what depends on the run's length: a cosine schedule) and the
    models it scores (``eval_models``, ``hetfl.pipeline.config``)."""
    environment = spec["problem"]["name"] if "problem" in spec else "federation"
    cls = get_algorithm(spec["algorithm"], environment=environment)
    hp = cls.Hyperparameters.from_dict(spec["hyperparameters"], f"studies.{spec['study']}.runs.{spec['run']}")
    algorithm = cls(env, hp, seed, spec["sampling"])
    algorithm.rounds = spec["rounds"]
    if spec.get("eval_models") is not None:
        algorithm.evaluated = tuple(spec["eval_models"])
    return algorithm


def apply_memory_budget(
    env, algorithm, budget: Any, device: torch.device, split_inexact: bool = False
) -> MemoryPlan | None:
    """Fit a run on client data into its ``memory_budget`` (``hetfl.engine.memory``): plan the rows per
    batched call and limit the model's calls to them. None for a generated problem (no batched model).
    A float32 model whose rows are not exact whatever the rows per call (``BatchedModel.rows_exact_in_float32``:
    convolutions) is split only with ``split_inexact``, which the training job sets when the budget is part
    of the run's spec (``hetfl.pipeline.config.budget_changes_results``): never under ``auto`` (its results must not
    depend on the machine's memory) nor under a budget from the command line (``--set-resources``). What the
    plan leaves free holds the evaluation's gathered blocks (``Federation.eval_cache_bytes``: the same sums).

    Args:
        budget: the run's ``memory_budget``: ``auto`` (None too) or MiB.

    Raises:
        ValueError: a budget that is neither ``auto`` nor a positive number.
    """
    if not isinstance(env, Federation):
        return None
    batch = int(getattr(algorithm.hp, "batch_size", 1) or 1)
    # the bytes the job placed its per-client state within (measured once, before the data: on a GPU,
    # ``auto`` depends on the free memory), else the setting's
    nbytes = env.states.budget if env.states.budget is not None else budget_bytes(budget, device)
    plan = plan_memory(env, algorithm, nbytes, batch)
    exact = env.dtype != torch.float32 or env.model.rows_exact_in_float32
    looped = isinstance(env.model.inner, LoopModel)
    if looped:  # one client per call already
        plan = replace(plan, rows=1)
    elif not exact and (budget in (None, "auto") or not split_inexact):
        plan = replace(plan, rows=None)
    # what the plan leaves beside the resident bytes and the larger of a training call's rows and an
    # evaluation's working set: the evaluation's gathered blocks may stay there (the same sums, no gathers)
    working = max(plan.eval_bytes, plan.row_bytes * (plan.rows or plan.call_rows))
    env.set_call_limits(
        None if looped else plan.rows, max(0, plan.budget_bytes - plan.resident_bytes - working)
    )
    return plan


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "platform": platform.platform()}
    for pkg in ("hetfl", "torch", "numpy", "pandas", "snakemake"):
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def train(
    spec: dict[str, Any],
    seed: int,
    data: Path | str | None,
    partition: Path | str | None,
    outputs: RunOutputs,
    threads: int = 1,
    log: IO[str] | None = None,
    init: Path | str | None = None,
    checkpoint: Checkpointing | None = None,
    memory_budget: Any = "auto",
    reference: Path | str | None = None,
) -> dict[str, Any]:
    """Train one (study, run, seed) and write its outputs.

    Args:
        spec: the resolved run spec (``hetfl.pipeline.config.Study.run_json``, parsed).
        seed: the run seed.
        data: the dataset ``.npz``; partition: the partition ``.npz`` (both None for a generated problem).
        outputs: where to write metrics, per-client metrics, run record and final model.
        threads: torch intra-op threads (the job's ``threads:``).
        log: progress-bar stream (the job's log file); stderr when None.
        init: the ``final.pt`` of the run named by ``init_from`` (its global model is the start), or None.
        reference: the ``final.pt`` of the run named by ``reference_from`` (the models this run measures its
            distance to), or None.
        checkpoint: save the run's state as it trains and resume from a saved state of the same
            run (after a kill: the outputs end up byte-identical to an uninterrupted run's); None:
            no checkpoints. The file is removed when the run ends.
        memory_budget: MiB the run's tensors may use, or ``auto`` (``hetfl.engine.memory``): sets how many
            clients one batched call takes; the results do not depend on it (so it is not part of the spec).

    Returns:
        The run record written to ``outputs.info`` (:class:`hetfl.pipeline.records.RunRecord`; status ``ok`` or
        ``diverged``).
    """
    threads = max(1, int(threads))
    torch.set_num_threads(threads)
    with threadpool_limits(limits=threads):  # numpy's BLAS too (hetfl.models.linalg)
        return _train(spec, seed, data, partition, outputs, log, init, checkpoint, memory_budget, reference)


def _train(spec, seed, data, partition, outputs, log, init, checkpoint, memory_budget="auto", reference=None):
    """The steps of :func:`train`, under its thread limits: build the run, say where its memory goes, run
    its rounds (from a checkpoint when one of this run is there), then write its model and run record."""
    log = log or sys.stderr
    device = pick_device(spec["device"], spec.get("precision", "float32"))
    if spec.get("precision") == "tf32" and device.type != "cuda":
        print("precision tf32: the CPU has no TensorFloat-32; the run computes in float32", file=log)
    start = time.perf_counter()
    rss_before = peak_rss_bytes()
    env, algorithm, memory = _build_run(spec, seed, data, partition, device, init, memory_budget, reference)
    _report_memory(env, algorithm, memory, log)
    resumed = None if checkpoint is None else load_checkpoint(checkpoint.path, checkpoint.key, algorithm)
    if resumed is not None:
        print(f"resuming from the checkpoint after round {resumed.round}: {checkpoint.path}", file=log)
    schedule = participation_schedule(env.num_clients, algorithm.clients_per_round, spec["rounds"], seed)
    outcome = _run(spec, seed, algorithm, schedule, outputs, device, log, checkpoint, resumed, start)
    torch.save(algorithm.state_dict(), outputs.model)
    if outputs.artifacts is not None:
        np.savez_compressed(outputs.artifacts, **algorithm.artifacts())
    record = _run_record(
        spec, seed, env, algorithm, memory, device, outcome, resumed, schedule, start, rss_before
    )
    record.write(outputs.info)
    if checkpoint is not None:
        checkpoint.path.unlink(missing_ok=True)
    return record


def _build_run(spec, seed, data, partition, device, init, memory_budget, reference=None):
    """The run's environment, algorithm and memory plan (:func:`build`, :func:`apply_memory_budget`): under
    the spec's ``memory_budget`` when it has one (its results depend on it:
    ``hetfl.pipeline.config.budget_changes_results``), else under the job's."""
    in_spec = "memory_budget" in spec
    budget = spec["memory_budget"] if in_spec else memory_budget
    env, algorithm = build(spec, seed, data, partition, device, init, budget_bytes(budget, device), reference)
    memory = apply_memory_budget(env, algorithm, budget, device, split_inexact=in_spec)
    return env, algorithm, memory


def _report_memory(env, algorithm, memory: MemoryPlan | None, log: IO[str]) -> None:
    """Say in the job's log when the memory budget is below what the run holds, and where per-client state
    went off the device."""
    if memory is not None and not memory.fits:
        batched = getattr(algorithm.hp, "aggregation", None) == "batched"  # a round holds its S local models
        hint = "; `aggregation: sequential` would not hold the round's local models" if batched else ""
        print(
            f"memory_budget {mib(memory.budget_bytes)} MiB is below the run's resident "
            f"{mib(memory.resident_bytes)} MiB: one client per call{hint}",
            file=log,
        )
    elif memory is not None and not memory.eval_fits:
        print(
            f"memory_budget {mib(memory.budget_bytes)} MiB is below the run's resident "
            f"{mib(memory.resident_bytes)} MiB plus an evaluation call's {mib(memory.eval_bytes)} MiB "
            "(an evaluation's blocks are never split: they set its sums)",
            file=log,
        )
    off = {"host": "host memory", "mmap": "a memory-mapped file"}
    placed = env.states.placed if isinstance(env, Federation) else {}
    for where, what in off.items():
        if placed.get(where):
            print(
                f"per-client state off the device within memory_budget {mib(memory.budget_bytes)} MiB: "
                f"{mib(placed[where])} MiB in {what}",
                file=log,
            )


def _run(spec, seed, algorithm, schedule, outputs, device, log, checkpoint, resumed, start):
    """Run the rounds (after the checkpoint's, when ``resumed``), writing the metrics as they come and
    saving checkpoints when due; returns ``run_rounds``'s outcome."""
    before_s = 0.0 if resumed is None else resumed.elapsed_s
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    bar = tqdm(
        total=spec["rounds"],
        desc=f"{spec['study']}/{spec['run']}/seed={seed}",
        file=log,
        mininterval=5.0,
        ascii=True,
        dynamic_ncols=False,
        initial=0 if resumed is None else resumed.round,
    )
    last_save = [time.perf_counter()]
    with MetricsWriter(
        outputs.metrics,
        outputs.client_metrics,
        None if resumed is None else (resumed.metrics, resumed.client_metrics),
    ) as writer:

        def on_round(t: int) -> None:
            bar.update(1)
            now = time.perf_counter()
            if checkpoint is not None and t < spec["rounds"] and checkpoint.due(t, now - last_save[0]):
                save_checkpoint(
                    checkpoint.path, checkpoint.key, algorithm, t, *writer.snapshot(), before_s + now - start
                )
                last_save[0] = time.perf_counter()

        outcome = run_rounds(
            algorithm,
            schedule,
            spec["eval_every"],
            writer.write,
            on_round=on_round,
            start_round=0 if resumed is None else resumed.round,
        )
    bar.close()
    return outcome


def _run_record(spec, seed, env, algorithm, memory, device, outcome, resumed, schedule, start, rss_before):
    """The run's record (``run.json``), its wall time and peak RSS measured now."""
    before_s = 0.0 if resumed is None else resumed.elapsed_s
    return RunRecord(
        study=spec["study"],
        run=spec["run"],
        algorithm=spec["algorithm"],
        seed=seed,
        status=outcome.status,
        diverged_round=outcome.diverged_round,
        rounds_done=outcome.rounds_done,
        wall_time_s=round(before_s + time.perf_counter() - start, 3),
        resumed_from_round=None if resumed is None else resumed.round,
        device=str(device),
        device_name=torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor(),
        cuda_peak_memory_bytes=torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None,
        execution=execution_taken(env),
        tf32=tf32_active(device),
        memory={
            **(memory.record() if memory is not None else {}),
            **({"client_state": env.states.record()} if isinstance(env, Federation) else {}),
            "rss_before_bytes": rss_before,  # the process's peak RSS before the run's data (Python, torch)
            "peak_rss_bytes": peak_rss_bytes(),
        },
        threads=torch.get_num_threads(),
        num_clients=env.num_clients,
        clients_per_round=algorithm.clients_per_round,
        # the same for every run of a study with the same seed and S: they see the same clients each round
        participation_sha256=hashlib.sha256(schedule.numpy().tobytes()).hexdigest()[:16],
        versions=_versions(),
        spec=spec,
    )
