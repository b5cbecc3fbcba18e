"""The code fingerprints of the jobs of a config: the modules of each kind a job uses (an algorithm, problem,
model, dataset or partition scheme), for ``hetfl.fingerprint.stage_fingerprint``."""

from __future__ import annotations

from typing import Any

from hetfl.algorithms import algorithm_module
from hetfl.pipeline.config.specs import FEDERATION
from hetfl.problems import problem_module


def train_modules(algorithm: str, problem: str | None = None, model: str | dict | None = None) -> list[str]:
    """The modules of a training job of ``algorithm`` (on ``problem``, if any; with ``model``, on client data)
    that its script does not import by name, for its code fingerprint (``hetfl.fingerprint.stage_fingerprint``,
    which adds the training script and what it and these import from hetfl): the algorithm's module, the
    problem's or the model's. Registries are not followed (``hetfl.fingerprint``): adding an algorithm,
    problem, model or dataset module changes no other job's fingerprint.

    ``model`` is a config name or the run's normalized model spec; the spec of ``name: torch`` adds the
    user's module that defines the ``nn.Module`` (``hetfl.models.model_modules``), so editing it reruns
    exactly the runs that use it."""
    from hetfl.models import model_modules

    modules = [algorithm_module(algorithm, problem or FEDERATION)]
    modules += [problem_module(problem)] if problem else []
    modules += model_modules(model) if model else []
    return modules


def data_modules(dataset: dict[str, Any]) -> list[str]:
    """The module that builds a normalized dataset spec (its ``data`` job's own, not the other datasets')."""
    from hetfl.data.registry import dataset_module

    return [dataset_module(dataset["name"])]


def partition_modules(partition: dict[str, Any]) -> list[str]:
    """The scheme module of a normalized partition spec (its ``partition`` jobs' own, not the other
    schemes')."""
    from hetfl.data.partition import scheme_module

    return [scheme_module(partition["scheme"])]


def train_fingerprint(algorithm: str, problem: str | None = None, model: str | dict | None = None) -> str:
    """The code fingerprint of a training job (its ``code`` param): the training script, the modules of
    :func:`train_modules` and what they import from hetfl (``hetfl.fingerprint.stage_fingerprint``)."""
    from hetfl.fingerprint import stage_fingerprint

    return stage_fingerprint("train", train_modules(algorithm, problem, model))


def data_fingerprint(dataset: dict[str, Any]) -> str:
    """The code fingerprint of the ``data`` job of a normalized dataset spec."""
    from hetfl.fingerprint import stage_fingerprint

    return stage_fingerprint("data", data_modules(dataset))


def partition_fingerprint(partition: dict[str, Any]) -> str:
    """The code fingerprint of the ``partition`` jobs of a normalized partition spec."""
    from hetfl.fingerprint import stage_fingerprint

    return stage_fingerprint("partition", partition_modules(partition))


def splits_fingerprint(models: list[dict[str, Any]]) -> str:
    """The code fingerprint of a study's ``splits`` job: its script and the modules of the models it builds
    (normalized specs; ``hetfl.models.model_modules``), so editing a model's code recounts its shares."""
    from hetfl.fingerprint import stage_fingerprint
    from hetfl.models import model_modules

    return stage_fingerprint("splits", sorted({m for model in models for m in model_modules(model)}))
