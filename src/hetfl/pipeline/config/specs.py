"""The resolved config's types: a run (:class:`RunSpec`), a study (:class:`Study`), the suite (:class:`Suite`),
and the keys a config may hold."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from hetfl.data import dataset_id, normalize_dataset_spec
from hetfl.engine.checkpoint import CHECKPOINT_DEFAULTS
from hetfl.ids import canonical_json
from hetfl.metrics import parse_metric
from hetfl.models import model_class
from hetfl.pipeline.tuning import Tuning

STUDY_KEYS = (
    "description", "dataset", "partition", "model", "problem", "rounds", "seeds", "eval_every", "sampling",
    "device", "dtype", "memory_budget", "execution", "precision", "defaults", "runs", "grid", "figures", "claims", "paper",
)  # fmt: skip
REQUIRED_STUDY_KEYS = ("rounds", "seeds", "runs")
DATA_KEYS = ("dataset", "partition", "model")
FEDERATION = "federation"
SPEC_UNLESS = {"execution": "batched", "precision": "float32"}
"""Settings a run's spec names only when they differ from these values: the specs (and so the results) of
the runs that do not set them stay what they were before the settings existed."""
LABEL = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.=+-]*$")
TOP_LEVEL_KEYS = ("select", "studies", "study_files", "checkpoint", "train_jobs")


@dataclass
class RunSpec:
    """One run of a study: algorithm, hyper-parameters, data and engine settings (seed excluded)."""

    study: str
    label: str
    algorithm: str
    hyperparameters: dict[str, Any]
    metrics: tuple[str, ...]
    settings: dict[str, Any]
    partition: dict[str, Any] | None = None  # the study's, or the run's own (a partition override)
    partition_id: str | None = None
    problem: dict[str, Any] | None = None  # the run's own problem options (a problem override), else None
    num_clients: int = 0
    tune: dict[str, Any] | None = (
        None  # the run's tune block (hetfl.pipeline.tuning), whose choice it trains with
    )

    def partition_seed(self, seed: int) -> int:
        """The partition seed of run seed ``seed``: the fixed ``partition.seed`` if set, else ``seed``."""
        fixed = self.partition.get("seed")
        return int(seed) if fixed is None else int(fixed)

    def as_dict(self, study: Study) -> dict[str, Any]:
        """The fully resolved spec a training job receives (JSON-serializable)."""
        env = (
            {"problem": self.problem or study.problem}
            if study.problem
            else {"dataset": study.dataset, "partition": self.partition}
        )
        settings = {
            k: v
            for k, v in self.settings.items()
            if not (k in ("init_from", "reference_from", "eval_models") and v is None)
            and (k != "memory_budget" or budget_changes_results(self.settings))
            and not (k in SPEC_UNLESS and v == SPEC_UNLESS[k])
        }
        return {
            "study": self.study,
            "run": self.label,
            "algorithm": self.algorithm,
            "hyperparameters": self.hyperparameters,
            **env,
            **settings,
            "rounds": self.settings["rounds"] or study.rounds,
            **({"tune": self.tune} if self.tune else {}),
        }


RUN_SEED = "run"
"""A generated dataset's ``seed: run``: each run seed draws its own data (its generator's seed is the run's)."""


def data_of(dataset: dict[str, Any], seed: int, key: str = "dataset") -> tuple[dict[str, Any], str]:
    """The dataset run seed ``seed`` trains on, and its id: ``dataset`` itself, or, where its ``seed`` is
    ``run`` (:data:`RUN_SEED`), the generator's draw of ``seed``.

    Raises:
        ConfigError: naming ``key.seed``: ``seed: run`` on a dataset without a seed, or a seed out of its
            range.
    """
    if dataset.get("seed") != RUN_SEED:
        return dataset, dataset_id(dataset)
    spec = normalize_dataset_spec({**dataset, "seed": int(seed)}, key)
    return spec, dataset_id(spec)


@dataclass
class Study:
    """A resolved study."""

    name: str
    dataset: dict[str, Any] | None
    dataset_id: str | None
    partition: dict[str, Any] | None
    partition_id: str | None
    problem: dict[str, Any] | None
    num_clients: int
    rounds: int
    seeds: list[int]
    runs: dict[str, RunSpec]
    metrics: set[str]
    figures: list[dict[str, Any]]
    claims: list[dict[str, Any]]
    paper: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    tuning: dict[str, Tuning] = field(default_factory=dict)  # tuned run -> its tune block and grid points
    points: dict[str, RunSpec] = field(default_factory=dict)  # grid point label -> its run (tuning seeds)
    notes: list[str] = field(default_factory=list)  # what the config ignores, said at start (not errors)

    def data_of(self, seed: int) -> tuple[dict[str, Any], str]:
        """The dataset spec and id run seed ``seed`` trains on (:func:`data_of`: one dataset, or with
        ``seed: run`` each seed's own draw); ``dataset_id`` is the first seed's."""
        return data_of(self.dataset, seed, f"studies.{self.name}.dataset")

    def spec(self, label: str) -> RunSpec:
        """The run ``label``: one of the study's runs or a tuning grid point."""
        return self.runs[label] if label in self.runs else self.points[label]

    def seeds_of(self, label: str) -> list[int]:
        """The seeds run ``label`` trains on: the study's, or its tuning's for a grid point."""
        if label in self.runs:
            return self.seeds
        return next(t.seeds for t in self.tuning.values() if label in t.points)

    @property
    def environment(self) -> str:
        """``"federation"`` for a study on client data, else the name of its problem."""
        return self.problem["name"] if self.problem else FEDERATION

    def partition_seed(self, seed: int) -> int:
        """The seed of the study's partition (runs with their own partition: ``RunSpec.partition_seed``)."""
        fixed = self.partition.get("seed")
        return int(seed) if fixed is None else int(fixed)

    @property
    def table_metrics(self) -> list[str]:
        """Columns of ``summary.md``: the metrics of the study's figures, then those of its paper numbers
        (a study without either: the metrics of the default figures)."""
        out = [m for fig in self.figures for m in fig["metrics"]]
        out += [m for numbers in self.paper.values() for m in numbers]
        out = out or default_figures(self.metrics)
        return [m for i, m in enumerate(out) if m in self.metrics and m not in out[:i]]

    def memory_budget(self, label: str) -> str | float:
        """Run ``label``'s ``memory_budget`` (``auto`` or MiB): a training job's resource (in its params only
        where it could change the results: :func:`budget_changes_results`)."""
        return self.spec(label).settings["memory_budget"]

    def run_json(self, label: str) -> str:
        """Canonical JSON of run ``label``'s spec (the params-trigger value of its training jobs)."""
        return canonical_json(self.spec(label).as_dict(self))


@dataclass
class Suite:
    """All studies of the config, and the selected ones (``select``, default: all)."""

    studies: dict[str, Study]
    selected: list[str]
    checkpoint: dict[str, Any] = field(default_factory=lambda: dict(CHECKPOINT_DEFAULTS))
    train_jobs: str = "run"  # one training job per run (its seeds in turn) or per seed: settings.Suite


def budget_changes_results(settings: dict[str, Any]) -> bool:
    """Whether a run's rows per call could change its results: a numeric ``memory_budget`` in float32 on a
    model whose rows are not exact in float32 (``BatchedModel.rows_exact_in_float32``: the convolutional
    and ``torch.func`` models). Such a budget is part of the run's spec (changing it reruns the run);
    ``auto`` never splits their calls (``hetfl.engine.memory``)."""
    model = settings.get("model")
    if settings.get("memory_budget", "auto") == "auto" or model is None or settings.get("dtype") != "float32":
        return False
    return not model_class(model["name"]).rows_exact_in_float32


def default_figures(metrics: set[str]) -> list[str]:
    shown = (("test", "acc"), ("train", "loss"))
    return sorted(m for m in metrics if (parse_metric(m).split, parse_metric(m).statistic) in shown)
