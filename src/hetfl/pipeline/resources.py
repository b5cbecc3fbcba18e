"""Cluster resources of a training job, estimated from the size of its run (``profiles/slurm``).

The rule (constants below; a local run ignores all of it):

- size ``W = rounds × clients × P``: the run's rounds, its clients (all of them: every evaluation
  covers every client) and ``P``, the parameters of its model (every parameter, global and personal).
  A generated problem (``problem:``) counts ``P = PROBLEM_PARAMETERS``.
- ``runtime`` (minutes) ``= W / WORK_PER_MINUTE``, divided by ``GPU_SPEEDUP`` on ``device: cuda``,
  at least ``RUNTIME_FLOOR``, times the attempt (a job that hit its time limit gets more the next
  time), at most ``RUNTIME_CAP``. ``WORK_PER_MINUTE`` is measured on this project's 2-core machine
  (the ``pfedme_mnist`` DNN, pFedMe's R·K = 100 inner steps a round: 4.8e8 units in 2 minutes on one
  core) with a margin of 2.
- ``mem_mb`` ``= MEM_BASE_MB + 3 × the dataset in float32`` (the file, its tensor and the clients'
  view) ``+ clients × P × STATE_BYTES`` on the CPU (the engine stacks every client's model,
  gradients and personal state; on a GPU they live in GPU memory), at least ``MEM_FLOOR_MB``, times
  the attempt. A run with a numeric ``memory_budget`` (MiB; ``hetfl.engine.memory``) on the CPU asks for
  ``MEM_BASE_MB + 3 × the dataset + the budget`` instead of the clients' term: the engine keeps its
  tensors within the budget, in row chunks.
- ``gpu = 1`` for a run with ``device: cuda`` (a study-level or per-run setting), else 0:
  ``device: auto`` uses a GPU only where the node it lands on has one.
- **Short jobs go in groups.** A CPU job whose runtime before the floor is at most ``RUNTIME_FLOOR``
  (:func:`is_short`) is one the cluster would see start and end within minutes: ``profiles/slurm`` submits
  such jobs ``group`` at a time (Snakemake's ``group-components``), one after another on one core, so the
  submitted job asks for the sum of their runtimes and the largest of their memories. The floor then
  applies per submitted job: each of the ``group`` jobs asks for at least ``RUNTIME_FLOOR / group``
  minutes, a full group for at least ``RUNTIME_FLOOR``.

Override any of them for every training job with ``--set-resources train:runtime=...`` (or in the
profile's ``set-resources``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache

from hetfl.data import dataset_info
from hetfl.ids import canonical_json
from hetfl.models import build_model
from hetfl.pipeline.config import Study

WORK_PER_MINUTE = 1e8
GPU_SPEEDUP = 10
RUNTIME_FLOOR = 30  # minutes
RUNTIME_CAP = 24 * 60  # minutes: a common partition limit; longer runs resume from their checkpoint
PROBLEM_PARAMETERS = 10_000
MEM_FLOOR_MB = 2000
MEM_BASE_MB = 1000  # Python, torch and the run's bookkeeping
STATE_BYTES = 64  # per client and model parameter: 16 float32 copies


@dataclass(frozen=True)
class TrainResources:
    """What one training job asks the cluster for.

    Attributes:
        runtime: wall-clock limit in minutes.
        mem_mb: memory in MB.
        gpu: GPUs (0 or 1).
    """

    runtime: int
    mem_mb: int
    gpu: int


@cache
def _parameters(model_json: str, dataset_json: str) -> tuple[int, int]:
    """(model parameters, dataset float32 MB) of a model spec on a dataset spec (both canonical JSON)."""
    info = dataset_info(json.loads(dataset_json))
    model = build_model(
        json.loads(model_json), tuple(info.sample_shape), info.num_outputs or info.num_classes, info.task
    )
    params = sum(math.prod(shape) for shape, _ in model.shapes().values())
    data_mb = info.num_samples * math.prod(info.sample_shape) * 4 / 2**20
    return int(params), math.ceil(data_mb)


def run_size(study: Study, run: str) -> tuple[int, int, int, int]:
    """``(rounds, clients, P, dataset MB)`` of run ``run`` of ``study`` (see the module docstring)."""
    spec = study.spec(run)
    rounds = spec.settings["rounds"] or study.rounds
    if study.dataset is None:
        return rounds, spec.num_clients, PROBLEM_PARAMETERS, 0
    dataset = study.data_of(study.seeds_of(run)[0])[0]  # the first seed's (each seed's is the same size)
    params, data_mb = _parameters(canonical_json(spec.settings["model"]), canonical_json(dataset))
    return rounds, spec.num_clients, params, data_mb


def on_cuda(study: Study, run: str) -> bool:
    """Whether run ``run`` of ``study`` says ``device: cuda`` (its jobs ask for a GPU)."""
    return study.spec(run).settings["device"] == "cuda"


def train_minutes(study: Study, run: str, seeds: int = 1) -> float:
    """The estimated minutes of a training job of run ``run`` of ``study`` that trains ``seeds`` seeds, before
    the floor, the attempt and the cap (see the module docstring)."""
    rounds, clients, params, _ = run_size(study, run)
    return seeds * rounds * clients * params / WORK_PER_MINUTE / (GPU_SPEEDUP if on_cuda(study, run) else 1)


def is_short(study: Study, run: str, seeds: int = 1) -> bool:
    """Whether a training job of run ``run`` (``seeds`` seeds) is short: on the CPU (not ``device: cuda``) and
    estimated at most ``RUNTIME_FLOOR`` minutes. ``profiles/slurm`` submits short jobs in groups."""
    return not on_cuda(study, run) and train_minutes(study, run, seeds) <= RUNTIME_FLOOR


def train_resources(
    study: Study, run: str, attempt: int = 1, seeds: int = 1, group: int = 1
) -> TrainResources:
    """The runtime, memory and GPUs of a training job of run ``run`` of ``study`` at ``attempt`` (1, 2, ...)
    that trains ``seeds`` seeds one after another (``train_jobs: run``; 1 for a job per seed), submitted in a
    group of ``group`` short jobs (1: a job of its own).

    See the module docstring for the rule; the runtime is ``seeds`` times a seed's, the memory a seed's, the
    runtime's floor ``RUNTIME_FLOOR / group``.

    Raises:
        ValueError: ``attempt``, ``seeds`` or ``group`` below 1.
    """
    if min(attempt, seeds, group) < 1:
        raise ValueError(f"attempt, seeds and group must be >= 1, got {attempt}, {seeds}, {group}")
    _, clients, params, data_mb = run_size(study, run)
    cuda = on_cuda(study, run)
    floor = math.ceil(RUNTIME_FLOOR / group)
    runtime = min(RUNTIME_CAP, max(floor, math.ceil(train_minutes(study, run, seeds))) * attempt)
    budget = study.spec(run).settings.get("memory_budget", "auto")
    states_mb = 0 if cuda else clients * params * STATE_BYTES / 2**20 if budget == "auto" else budget
    mem_mb = max(MEM_FLOOR_MB, math.ceil(MEM_BASE_MB + 3 * data_mb + states_mb)) * attempt
    return TrainResources(runtime=runtime, mem_mb=mem_mb, gpu=int(cuda))
