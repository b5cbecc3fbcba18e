"""The values of the workflow configuration's own settings, as typed options (``hetfl.options.Options``).

The schema (``workflow/schemas/config.schema.yaml``) checks the config's structure only: which keys exist,
which are required, which hold a mapping or a list. Every value is checked here, by the same mechanism
as an algorithm's hyper-parameters: a frozen dataclass whose fields' types (``Literal[...]`` for a
choice) and ``check`` (ranges) say what is valid, and whose errors name the dotted key and the allowed
values. :class:`Suite` holds the top-level settings, :class:`Schedule` a study's ``rounds`` and
``seeds``, :class:`RunSettings` the engine and schedule settings a study sets for its runs and a run may
override (``sampling``, ``device``, ``dtype``, ``execution``, ``precision``, ``eval_every``, ...).

This module is read when the config is resolved (``hetfl.pipeline.config``), never by a job: it is in
no job's code fingerprint (``hetfl.fingerprint``), so tightening a check or rewording a message reruns
nothing.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Literal

from hetfl.engine.execution import EXECUTIONS, PRECISIONS
from hetfl.engine.memory import is_budget
from hetfl.engine.sampler import MODES as SAMPLING_MODES
from hetfl.errors import ConfigError
from hetfl.options import Options

DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("float32", "float64")
TRAIN_JOBS = ("run", "seed")
# ``train_jobs``: ``run``: one training job per run trains its seeds one after another (one process start,
# about 2 s of Python and torch imports, instead of one per seed: the laptop default); ``seed``: one job per
# seed (a cluster: the seeds run in parallel, each job is shorter). The files written are the same.


def described(default: Any = dataclasses.MISSING, expected: str = "") -> Any:
    """A field of a :class:`ConfigOptions` whose every error (type, finiteness or range) reads
    ``expected <expected>, got <value>``: one description of the valid values, whatever was wrong.

    Args:
        default: the field's default (none: the option is required; the caller checks it is given).
        expected: what a valid value is, e.g. ``"a positive integer"``.
    """
    return dataclasses.field(default=default, metadata={"expected": expected})


@dataclasses.dataclass(frozen=True)
class ConfigOptions(Options):
    """Typed options of the config's own settings: ``Options`` whose errors on a choice
    (``Literal[...]``) list the allowed values (``ConfigError.allowed``), and whose fields declared with
    :func:`described` say what a valid value is in every error about them."""

    @classmethod
    def from_dict(cls, values: dict[str, Any], key: str):
        """Parse and validate ``values`` (see ``Options.from_dict``).

        Args:
            values: the settings given (unknown names are errors).
            key: the dotted config key they sit under; an error names ``{key}.<name>`` (``<name>`` when
                ``key`` is empty: the top level).

        Raises:
            ConfigError: an unknown name (listing the allowed ones); a value outside its ``Literal``
                choices (``unknown value``, the choices as ``allowed``); a wrong type, a number that is not
                finite or a value out of range (the field's :func:`described` text, when it has one).
        """
        hints = typing.get_type_hints(cls)
        for name, value in values.items():
            tp = hints.get(name)
            if typing.get_origin(tp) is Literal and value not in typing.get_args(tp):
                raise ConfigError(_dotted(key, name), f"unknown value {value!r}", allowed=typing.get_args(tp))
        try:
            return super().from_dict(values, key)
        except ConfigError as err:
            if not err.key.startswith(f"{key}."):
                raise
            name = err.key[len(key) + 1 :]
            field = next((f for f in dataclasses.fields(cls) if f.name == name), None)
            expected = field.metadata.get("expected") if field is not None else None
            if not expected and key:
                raise
            message = f"expected {expected}, got {values.get(name)!r}" if expected else err.message
            raise ConfigError(_dotted(key, name), message, err.allowed) from None


def _dotted(key: str, name: str) -> str:
    """``key.name``, or ``name`` at the top level (``key`` empty)."""
    return f"{key}.{name}" if key else name


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

    rounds: int = described(expected="a positive integer")
    seeds: list = described(expected="a non-empty list of distinct non-negative integers")

    def check(self, key: str) -> None:
        """Raises ConfigError: ``rounds`` < 1 or ``seeds`` empty, repeated or not integers ≥ 0."""
        if self.rounds < 1:
            raise ConfigError(f"{key}.rounds", "out of range")
        seeds = self.seeds
        if (
            not seeds
            or len(set(seeds)) != len(seeds)
            or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds)
        ):
            raise ConfigError(f"{key}.seeds", "out of range")


@dataclasses.dataclass(frozen=True)
class RunSettings(ConfigOptions):
    """A run's settings that are not its algorithm's hyper-parameters, with their defaults.

    A study sets them for its runs (``init_from`` and ``eval_models`` are a run's own), its ``defaults``
    and a run's own entry override them (``hetfl.pipeline.config``'s precedence).
    """

    eval_every: int = described(1, "a positive integer")  # rounds between evaluations
    sampling: Literal[SAMPLING_MODES] = "epoch"  # how a client draws its batches (hetfl.engine.sampler)
    device: Literal[DEVICES] = "auto"
    dtype: Literal[DTYPES] = "float32"
    rounds: int | None = described(None, "a positive integer")  # None: the study's rounds
    # a run of the same study whose final global model (same seed) is this run's start
    init_from: str | None = described(None, "a run label")
    # MiB of a job's tensors (hetfl.engine.memory); see hetfl.pipeline.config.budget_changes_results
    memory_budget: float | Literal["auto"] = described("auto", "'auto' or a finite number of MiB > 0")
    # the models a run on client data scores (a subset of its algorithm's; checked against them by
    # hetfl.pipeline.config, which lists them); None: all
    eval_models: object = None
    execution: Literal[EXECUTIONS] = "batched"  # hetfl.engine.execution; in the spec unless batched
    precision: Literal[PRECISIONS] = "float32"  # hetfl.pipeline.train.pick_device; in the spec unless float32

    def check(self, key: str) -> None:
        """Raises ConfigError: ``eval_every`` or ``rounds`` < 1, a ``memory_budget`` ≤ 0, ``precision: tf32``
        with a ``dtype`` other than float32 (naming ``{key}.<setting>``)."""
        if self.eval_every < 1:
            raise ConfigError(f"{key}.eval_every", "out of range")
        if self.rounds is not None and self.rounds < 1:
            raise ConfigError(f"{key}.rounds", "out of range")
        if not is_budget(self.memory_budget):
            raise ConfigError(f"{key}.memory_budget", "out of range")
        if self.precision == "tf32" and self.dtype != "float32":
            raise ConfigError(
                f"{key}.precision",
                f"tf32 computes float32 products in TensorFloat-32; the run's dtype is {self.dtype}",
                allowed=("float32",),
            )


RUN_SETTINGS = {f.name: f.default for f in dataclasses.fields(RunSettings)}
"""Each run setting's default (the study-level value when the study sets none)."""
