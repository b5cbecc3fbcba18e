"""The values of the workflow configuration's own settings, as typed options (``hetfl.options.Options``).

The schema (``workflow/schemas/config.schema.yaml``) checks the config's structure only: which keys exist,
which are required, which hold a mapping or a list. Every value is checked here, by the same mechanism
as a dataset's or a partition's options (``hetfl.config_options.ConfigOptions``, an
``hetfl.options.Options``): a frozen dataclass whose fields' types (``Literal[...]`` for a choice) and ranges
say what is valid, and whose errors name the dotted key and the allowed values. :class:`Suite` holds the
top-level settings, :class:`Schedule` a study's ``rounds`` and ``seeds``, :class:`RunSettings` the engine and
schedule settings a study sets for its runs and a run may override (``sampling``, ``device``, ``dtype``,
``execution``, ``precision``, ``eval_every``, ...).

This module is read when the config is resolved (``hetfl.pipeline.config``), never by a job: it is in
no job's code fingerprint (``hetfl.fingerprint``), so tightening a check or rewording a message reruns
nothing.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from hetfl.config_options import REQUIRED, ConfigOptions, option
from hetfl.engine.execution import EXECUTIONS, PRECISIONS
from hetfl.engine.memory import is_budget
from hetfl.engine.sampler import MODES as SAMPLING_MODES
from hetfl.errors import ConfigError
from hetfl.options import number_from_text

DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("float32", "float64")
TRAIN_JOBS = ("run", "seed")
# ``train_jobs``: ``run``: one training job per run trains its seeds one after another (one process start,
# about 2 s of Python and torch imports, instead of one per seed: the laptop default); ``seed``: one job per
# seed (a cluster: the seeds run in parallel, each job is shorter). The files written are the same.


@dataclasses.dataclass(frozen=True)
class Suite(ConfigOptions):
    """The top-level settings besides ``studies``, ``study_files`` and ``checkpoint``
    (``hetfl.engine.checkpoint.resolve_checkpoint``).

    ``train_jobs``: one training job per run, its seeds in turn (``run``), or one per seed (``seed``).
    """

    train_jobs: Literal[TRAIN_JOBS] = "run"


@dataclasses.dataclass(frozen=True)
class Schedule(ConfigOptions):
    """A study's ``rounds`` (an integer ≥ 1) and ``seeds`` (a non-empty list of distinct integers ≥ 0):
    both required (``hetfl.pipeline.config`` says so when one is missing)."""

    rounds: int = option(REQUIRED, lo=1, expected="a positive integer")
    seeds: list = option(REQUIRED, expected="a non-empty list of distinct non-negative integers")

    def check(self, key: str) -> None:
        """Raises ConfigError: ``seeds`` empty, repeated or not integers ≥ 0."""
        seeds = self.seeds
        if (
            not seeds
            or len(set(seeds)) != len(seeds)
            or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds)
        ):
            raise ConfigError(f"{key}.seeds", "out of range")


def _budget(value: Any, key: str) -> float | str:
    """A ``memory_budget``: ``auto`` or a number of MiB > 0 (its text too), kept as given (512 stays 512:
    the number is in the spec of a run whose results it could change)."""
    value = number_from_text(value)
    if not is_budget(value):
        raise ConfigError(key, "out of range")
    return value


@dataclasses.dataclass(frozen=True)
class RunSettings(ConfigOptions):
    """A run's settings that are not its algorithm's hyper-parameters, with their defaults.

    A study sets them for its runs (``init_from``, ``reference_from`` and ``eval_models`` are a run's own), its ``defaults``
    and a run's own entry override them (``hetfl.pipeline.config``'s precedence).
    """

    eval_every: int = option(1, lo=1, expected="a positive integer")  # rounds between evaluations
    sampling: Literal[SAMPLING_MODES] = "epoch"  # how a client draws its batches (hetfl.engine.sampler)
    device: Literal[DEVICES] = "auto"
    dtype: Literal[DTYPES] = "float32"
    rounds: int | None = option(None, lo=1, expected="a positive integer")  # None: the study's rounds
    # a run of the same study whose final global model (same seed) is this run's start
    init_from: str | None = option(None, expected="a run label")
    # a run of the same study whose final models (same seed) this run measures its distance to: the
    # minimax algorithms' saddle points, from a minimax_saddle run (hetfl.algorithms.minimax.saddle)
    reference_from: str | None = option(None, expected="a run label")
    # MiB of a job's tensors (hetfl.engine.memory); see hetfl.pipeline.config.budget_changes_results
    memory_budget: float | Literal["auto"] = option(
        "auto", check=_budget, expected="'auto' or a finite number of MiB > 0"
    )
    # the models a run on client data scores (a subset of its algorithm's; checked against them by
    # hetfl.pipeline.config, which lists them); None: all
    eval_models: object = None
    execution: Literal[EXECUTIONS] = "batched"  # hetfl.engine.execution; in the spec unless batched
    precision: Literal[PRECISIONS] = "float32"  # hetfl.pipeline.train.pick_device; in the spec unless float32

    def check(self, key: str) -> None:
        """Raises ConfigError: ``precision: tf32`` with a ``dtype`` other than float32."""
        if self.precision == "tf32" and self.dtype != "float32":
            raise ConfigError(
                f"{key}.precision",
                f"tf32 computes float32 products in TensorFloat-32; the run's dtype is {self.dtype}",
                allowed=("float32",),
            )


RUN_SETTINGS = {f.name: f.default for f in dataclasses.fields(RunSettings)}
"""Each run setting's default (the study-level value when the study sets none)."""
