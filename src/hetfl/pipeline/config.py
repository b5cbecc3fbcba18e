"""Resolve and validate the workflow configuration: studies -> datasets, partitions and run specs.

Everything the workflow plans comes from ``build_suite(config)``, which fails before any job runs,
with a ``ConfigError`` naming the dotted key and the allowed values, on: an unknown study key,
dataset, partition scheme, model, problem, algorithm, hyper-parameter, metric or run in a
figure/claim; a value of the wrong type or out of range; an impossible partition (more clients than
samples, a Dirichlet split that cannot give every client its minimum); more sampled clients than
clients; an algorithm that does not run on the study's environment; an option that another setting
makes inert (``hetfl.requires``: ``server_momentum`` without a server optimizer that uses it); a user's
data file whose content the ``data`` job would refuse, or a natural split of it with a client lacking
train or test samples (``hetfl.data.verify``: the file, and the sample or user at fault, named).

A study trains on client data (``dataset`` + ``partition`` + ``model``: its environment is a
federation) or on a generated problem (``problem``, see ``hetfl.problems``).

Precedence of a run's settings: study level (``eval_every``, ``sampling``, ``device``, ``dtype``,
``model``) < the study's ``defaults`` < the run's own entry. ``defaults`` holds values shared by every
run; a run takes from it only the keys its algorithm knows. ``grid`` expands a run into the
Cartesian product of the listed values, labelled ``<run>-<key>=<value>[-...]``.
The keys are documented in ``config/README.md``.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hetfl.algorithms import algorithm_module, get_algorithm
from hetfl.data import dataset_id, normalize_dataset_spec
from hetfl.data.partition import check_partition, normalize_partition_spec, partition_id
from hetfl.data.verify import check_dataset, check_natural_split
from hetfl.engine.checkpoint import CHECKPOINT_DEFAULTS, resolve_checkpoint
from hetfl.errors import ConfigError
from hetfl.ids import canonical_json
from hetfl.metrics import metric_names, parse_metric, validation_names
from hetfl.models import build_model, model_class, normalize_model_spec
from hetfl.pipeline.claims import claim_terms, normalize_claims
from hetfl.pipeline.plotting import normalize_figures
from hetfl.pipeline.settings import RUN_SETTINGS, RunSettings, Schedule
from hetfl.pipeline.settings import Suite as SuiteSettings
from hetfl.pipeline.tuning import Tuning, parse_tune
from hetfl.problems import normalize_problem_spec, problem_clients, problem_module
from hetfl.requires import inert_options

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
            if not (k in ("init_from", "eval_models") and v is None)
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
        out = out or _default_figures(self.metrics)
        return [m for i, m in enumerate(out) if m in self.metrics and m not in out[:i]]

    def memory_budget(self, label: str) -> str | float:
        """Run ``label``'s ``memory_budget`` (``auto`` or MiB): a training job's resource (in its params only
        where it could change the results: :func:`budget_changes_results`)."""
        return self.spec(label).settings["memory_budget"]

    def run_json(self, label: str) -> str:
        """Canonical JSON of run ``label``'s spec (the params-trigger value of its training jobs)."""
        return canonical_json(self.spec(label).as_dict(self))


TOP_LEVEL_KEYS = ("select", "studies", "study_files", "checkpoint", "train_jobs")


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


def _require_mapping(value: Any, key: str) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(key, f"expected a mapping, got {type(value).__name__}")
    return value


def _format_value(value: Any) -> str:
    return str(value).replace(" ", "").replace("/", "_")


def expand_grid(runs: dict[str, dict], grid: dict[str, dict], key: str) -> dict[str, dict]:
    """Replace each run named in ``grid`` by its variants, one per combination of the listed values.

    Example: ``{"pfedme": {"lam": [7, 15], "K": [1, 5]}}`` -> runs ``pfedme-lam=7-K=1``, ...

    Raises:
        ConfigError: the grid names an unknown run, or a value list is empty / not a list.
    """
    out: dict[str, dict] = {}
    for label, run in runs.items():
        if label not in grid:
            out[label] = run
            continue
        axes = _require_mapping(grid[label], f"{key}.{label}")
        for name, values in axes.items():
            if not isinstance(values, list) or not values:
                raise ConfigError(f"{key}.{label}.{name}", "expected a non-empty list of values")
        for combo in itertools.product(*axes.values()):
            variant = {**run, **dict(zip(axes, combo, strict=True))}
            suffix = "-".join(f"{n}={_format_value(v)}" for n, v in zip(axes, combo, strict=True))
            out[f"{label}-{suffix}"] = variant
    unknown = set(grid) - set(runs)
    if unknown:
        raise ConfigError(
            f"{key}.{sorted(unknown)[0]}", "grid names a run the study does not have", allowed=runs
        )
    return out


def _settings(values: dict[str, Any], key: str) -> dict[str, Any]:
    """The run settings ``values`` (every name of ``RUN_SETTINGS``), checked (:class:`RunSettings`).

    Raises:
        ConfigError: naming ``{key}.<setting>`` (and, for a choice, the allowed values).
    """
    return RunSettings.from_dict(values, key).as_dict()


def resolve_run(
    study: str,
    label: str,
    run: dict,
    defaults: dict,
    base: dict,
    key: str,
    environment: str = FEDERATION,
    task: str | None = "classification",
    defaults_key: str | None = None,
) -> RunSpec:
    """Resolve one run: its algorithm, hyper-parameters (defaults filled in) and settings.

    Args:
        run: the run's config entry (``algorithm`` plus hyper-parameters and settings).
        defaults: the study's ``defaults`` (only keys the algorithm knows are taken).
        base: study-level settings and, for a federation, the study's model spec.
        key: dotted config path of the run.
        environment: ``"federation"`` or the study's problem name; the algorithm must run on it.
        task: the dataset's task (None for a problem), which sets the metric names.
        defaults_key: dotted config path of ``defaults``: a bad value the run takes from there is
            reported under it (``studies.<study>.defaults.lr``), not under the run.

    Raises:
        ConfigError: naming the key at fault.
    """
    if not LABEL.match(label):
        raise ConfigError(key, f"run label '{label}' may contain only letters, digits and _ . = + -")
    run = _require_mapping(run, key)
    if "algorithm" not in run:
        raise ConfigError(f"{key}.algorithm", "every run names its algorithm")
    cls = get_algorithm(run["algorithm"], key=f"{key}.algorithm", environment=environment)
    known = set(cls.Hyperparameters.names())
    federation = environment == FEDERATION
    merged = {
        k: v for k, v in defaults.items() if k in known or k in RUN_SETTINGS or (federation and k == "model")
    }
    merged.update({k: v for k, v in run.items() if k != "algorithm"})
    settings = {name: merged.pop(name, base[name]) for name in RUN_SETTINGS}
    if federation:
        own = _require_mapping(merged.pop("model", {}), f"{key}.model")
        same = own.get("name", base["model"]["name"]) == base["model"]["name"]
        model = {**base["model"], **own} if same else own  # another model: none of the study model's options
    inherited = {k for k in defaults if k not in run} if defaults_key else set()
    with _blame(key, inherited, defaults_key):
        hp = cls.Hyperparameters.from_dict(merged, key)
        settings = _settings(settings, key)
    _refuse_inert(hp.as_dict(), set(merged), {k for k in run if k != "algorithm"}, key, defaults_key)
    if federation:
        settings["model"] = normalize_model_spec(model, f"{key}.model")
    cls.check(hp, settings, key)
    names = [m for m in cls.metric_names() if task != "regression" or not parse_metric(m).is_accuracy]
    if settings["eval_models"] is not None:
        names = _evaluated_metrics(cls, settings, names, environment, key)
    return RunSpec(study, label, cls.name, hp.as_dict(), tuple(names), settings)


def _evaluated_metrics(
    cls, settings: dict[str, Any], names: list[str], environment: str, key: str
) -> list[str]:
    """``names`` less the metrics of the models ``eval_models`` leaves out; ``eval_models`` in the algorithm's order.

    Raises:
        ConfigError: ``{key}.eval_models`` on a generated problem, not a non-empty list of the algorithm's
            models, or missing a model the algorithm's own metrics are computed from (``evaluate_needs``).
    """
    where, chosen = f"{key}.eval_models", settings["eval_models"]
    if environment != FEDERATION:
        raise ConfigError(where, "only runs on client data (dataset, partition, model) choose their models")
    models = cls.models
    if not isinstance(chosen, list) or not chosen or not all(isinstance(m, str) for m in chosen):
        raise ConfigError(where, f"expected a non-empty list of model names, got {chosen!r}", allowed=models)
    for model in chosen:
        if model not in models:
            raise ConfigError(where, f"{cls.name} has no model {model!r}", allowed=models)
    for model in cls.evaluate_needs:
        if model not in chosen:
            raise ConfigError(where, f"{cls.name} computes its own metrics from the {model!r} model: keep it")
    settings["eval_models"] = [m for m in models if m in chosen]
    dropped = set(metric_names(tuple(m for m in models if m not in chosen)))
    return [m for m in names if m not in dropped]


def _refuse_inert(
    values: dict[str, Any], given: set[str], own: set[str], key: str, defaults_key: str | None
) -> None:
    """Refuse an option the run sets that another of its settings makes inert (``hetfl.requires``).

    An option the run takes from ``defaults`` while the run itself sets the enabling option otherwise is
    not an error (the run opted out of a shared value; :func:`_check_defaults` notes it).

    Args:
        values: the run's resolved hyper-parameters; given: the names set in the run or in ``defaults``;
            own: the names set in the run's own entry.

    Raises:
        ConfigError: naming the inert option where it is set (``{key}.<option>`` or
            ``{defaults_key}.<option>``), with the enabling option's key and value in the message.
    """
    for item in inert_options(values, sorted(given)):
        enabling = item.requires.option
        if item.option not in own and enabling in own:
            continue
        where = key if item.option in own or defaults_key is None else defaults_key
        enabling_where = defaults_key if enabling in given - own and defaults_key else key
        raise ConfigError(
            f"{where}.{item.option}", item.message(f"{enabling_where}.{enabling}", enabling not in given)
        )


@contextlib.contextmanager
def _blame(key: str, inherited: set[str], defaults_key: str | None):
    """Re-raise a ``ConfigError`` about ``{key}.<name>`` under ``{defaults_key}.<name>`` when the run
    took ``<name>`` from the study's ``defaults`` (``inherited``)."""
    try:
        yield
    except ConfigError as err:
        name = err.key[len(key) + 1 :] if err.key.startswith(key + ".") else None
        if name in inherited:
            raise ConfigError(f"{defaults_key}.{name}", err.message, err.allowed) from None
        raise


def resolve_study(name: str, study: dict, data_checks: str | os.PathLike | None = None) -> Study:
    """Validate and resolve one study (see the module docstring).

    Args:
        data_checks: the folder where the verdicts of the checks of a user's data files are cached
            (``hetfl.data.verify``), or None: check them every time.

    Raises:
        ConfigError: naming the offending key.
    """
    key = f"studies.{name}"
    study = _require_mapping(study, key)
    for k in study:
        if k not in STUDY_KEYS:
            raise ConfigError(f"{key}.{k}", "unknown study key", allowed=STUDY_KEYS)
    for k in REQUIRED_STUDY_KEYS:
        if k not in study:
            raise ConfigError(f"{key}.{k}", "missing required study key")
    rounds, seeds = study["rounds"], study["seeds"]
    Schedule.from_dict({"rounds": rounds, "seeds": seeds}, key)

    base = {name: study.get(name, default) for name, default in RUN_SETTINGS.items()}
    _settings(base, key)  # a bad study-level setting is named where it is set, not under its first run
    if "problem" in study:
        env = _problem_environment(study, key)
    else:
        env = _data_environment(study, seeds, key, data_checks)
        base["model"] = normalize_model_spec(_require_mapping(study["model"], f"{key}.model"), f"{key}.model")
    environment = env["problem"]["name"] if env["problem"] else FEDERATION
    defaults = _require_mapping(study.get("defaults", {}), f"{key}.defaults")
    runs_cfg = _require_mapping(study["runs"], f"{key}.runs")
    if not runs_cfg:
        raise ConfigError(f"{key}.runs", "a study needs at least one run")
    runs_cfg = expand_grid(runs_cfg, _require_mapping(study.get("grid", {}), f"{key}.grid"), f"{key}.grid")
    runs, tuning, points = {}, {}, {}
    for label, run in runs_cfg.items():
        run = _require_mapping(run, f"{key}.runs.{label}")
        own = {k: v for k, v in run.items() if k not in ("partition", "problem", "tune")}

        def resolve(values: dict, where: str, run_seeds: list[int], label=label, run=run) -> RunSpec:
            spec = resolve_run(
                name, label, values, defaults, base, where, environment, env["task"], f"{key}.defaults"
            )
            _set_partition(spec, env, run.get("partition"), run_seeds, f"{key}.runs.{label}.partition")
            _set_problem(spec, env, run.get("problem"), f"{key}.runs.{label}.problem")
            if spec.partition and spec.partition.get("val_fraction"):  # validation data: val_* metrics too
                spec.metrics += tuple(validation_names(spec.metrics))
            return spec

        runs[label] = resolve(own, f"{key}.runs.{label}", seeds)
        if "tune" in run:
            where = f"{key}.runs.{label}.tune"
            tuning[label] = _tuning(run["tune"], runs[label], seeds, where)
            for point, values in tuning[label].points.items():
                points[point] = resolve({**own, **values}, f"{where}.grid", tuning[label].seeds)
                points[point].label = point
    notes = env.get("notes", []) + _check_defaults(defaults, runs, f"{key}.defaults")
    for label, spec in runs.items():
        own_model = spec.settings.get("model") != base.get("model")  # a run's own model, or the study's
        _check_run(
            spec, env, f"{key}.runs.{label}", f"{key}.runs.{label}.model" if own_model else f"{key}.model"
        )
    _check_init_from(runs, f"{key}.runs")

    metrics = {m for spec in runs.values() for m in spec.metrics}
    figures_cfg = study.get("figures")  # omitted or null: the default figures; [] : none
    figures_cfg = _default_figures(metrics) if figures_cfg is None else figures_cfg
    figures = normalize_figures(figures_cfg, list(runs), metrics, f"{key}.figures")
    claims = normalize_claims(study.get("claims") or [], list(runs), metrics, f"{key}.claims")
    _check_reported(figures, claims, runs, key)
    paper = _paper_numbers(study.get("paper", {}), runs, metrics, f"{key}.paper")
    return Study(
        name=name,
        dataset=env["dataset"],
        dataset_id=env["dataset_id"],
        partition=env["partition"],
        partition_id=env["partition_id"],
        problem=env["problem"],
        num_clients=env["num_clients"],
        rounds=rounds,
        seeds=list(seeds),
        runs=runs,
        metrics=metrics,
        figures=figures,
        claims=claims,
        paper=paper,
        description=str(study.get("description", "")),
        tuning=tuning,
        points=points,
        notes=notes,
    )


def _check_reported(figures: list[dict], claims: list[dict], runs: dict[str, RunSpec], key: str) -> None:
    """Nothing a figure or claim names is silently left out: every run a figure names reports one of its
    metrics (and its ``x`` metric), every metric of a figure is reported by one of its runs (a figure
    without ``runs`` draws every run that reports its metrics), every operand of a claim is a metric its
    run reports.

    Raises:
        ConfigError: naming ``{key}.figures[i]`` or ``{key}.claims[i].check``, with the metrics the run
            reports (or the runs that report the metric).
    """
    for i, fig in enumerate(figures):
        if fig.get("kind") == "heatmap" or fig["runs"] is None:
            continue
        where = f"{key}.figures[{i}]"
        for run in fig["runs"]:
            reported = runs[run].metrics
            if not set(fig["metrics"]) & set(reported):
                raise ConfigError(where, f"run '{run}' reports none of {fig['metrics']}", allowed=reported)
            if fig.get("x", "round") != "round" and fig["x"] not in reported:
                raise ConfigError(
                    where, f"run '{run}' does not report the x axis {fig['x']!r}", allowed=reported
                )
        for metric in fig["metrics"]:
            if not any(metric in runs[run].metrics for run in fig["runs"]):
                raise ConfigError(
                    where,
                    f"none of the figure's runs reports {metric!r}",
                    allowed=[r for r, spec in runs.items() if metric in spec.metrics],
                )
    for i, claim in enumerate(claims):
        where = f"{key}.claims[{i}].check"
        for term in claim_terms(claim, where):
            if term.metric not in runs[term.run].metrics:
                raise ConfigError(
                    where, f"run '{term.run}' does not report {term.metric!r}", allowed=runs[term.run].metrics
                )


def _tuning(value: Any, spec: RunSpec, seeds: list[int], key: str) -> Tuning:
    """A run's validated ``tune`` block (``hetfl.pipeline.tuning``); the run's spec records it.

    Raises:
        ConfigError: naming ``key`` or ``key.<field>``: see :func:`hetfl.pipeline.tuning.parse_tune`; a metric the
            run does not report (no validation data: ``partition.val_fraction`` is 0); tuning seeds outside
            the study's for a run that starts from another run (``init_from``).
    """
    tuning = parse_tune(value, spec.label, seeds, key)
    if tuning.metric not in spec.metrics:
        val = [m for m in spec.metrics if parse_metric(m).split == "val"]
        if not val:
            raise ConfigError(
                f"{key}.metric",
                "the run has no validation data to tune on: set partition.val_fraction (e.g. 0.1)",
            )
        raise ConfigError(
            f"{key}.metric", f"run '{spec.label}' does not report {tuning.metric!r}", allowed=val
        )
    if spec.settings["init_from"] is not None and not set(tuning.seeds) <= set(seeds):
        raise ConfigError(
            f"{key}.seeds",
            "a run that starts from another run (init_from) tunes on the study's seeds",
            allowed=seeds,
        )
    spec.tune = tuning.as_dict()
    return tuning


def _data_environment(
    study: dict, seeds: list[int], key: str, data_checks: str | os.PathLike | None = None
) -> dict[str, Any]:
    """Dataset, partition and their ids for a study on client data; a user's data files are checked whole
    (``hetfl.data.verify``: verdicts cached under ``data_checks``), and what they tell is in ``notes``."""
    for k in DATA_KEYS:
        if k not in study:
            raise ConfigError(f"{key}.{k}", "missing required study key (or declare a 'problem')")
    dataset = normalize_dataset_spec(_require_mapping(study["dataset"], f"{key}.dataset"), f"{key}.dataset")
    data = check_dataset(dataset, f"{key}.dataset", data_checks)
    info = data.info
    partition = normalize_partition_spec(
        _require_mapping(study["partition"], f"{key}.partition"), f"{key}.partition", info
    )
    fixed = partition.get("seed")
    check_partition(
        partition, info, sorted({s if fixed is None else fixed for s in seeds}), f"{key}.partition"
    )
    check_natural_split(data, partition, dataset, f"{key}.dataset", f"{key}.partition")
    return {
        "dataset": dataset,
        "dataset_id": dataset_id(dataset),
        "partition": partition,
        "partition_given": dict(study["partition"]),
        "partition_id": partition_id({k: v for k, v in partition.items() if k != "seed"}),
        "problem": None,
        "num_clients": int(partition["clients"]),
        "info": info,
        "task": info.task,
        "data": data,
        "dataset_key": f"{key}.dataset",
        "notes": [f"{key}.dataset: {note}" for note in data.notes],
    }


def _set_partition(spec: RunSpec, env: dict[str, Any], own: Any, seeds: list[int], key: str) -> None:
    """The run's partition: the study's, or its own override merged over it (a different ``scheme``
    starts from that scheme's defaults), checked like the study's (e.g. an α sweep in one study)."""
    if env["partition"] is None:
        if own is not None:
            raise ConfigError(key, "a study on a generated problem has no partition")
        spec.num_clients = env["num_clients"]
        return
    if own is None:
        spec.partition, spec.partition_id, spec.num_clients = (
            env["partition"],
            env["partition_id"],
            env["num_clients"],
        )
        return
    own = _require_mapping(own, key)
    same = own.get("scheme", env["partition"]["scheme"]) == env["partition"]["scheme"]
    merged = {**env["partition_given"], **own} if same else own
    partition = normalize_partition_spec(merged, key, env["info"])
    fixed = partition.get("seed")
    check_partition(partition, env["info"], sorted({s if fixed is None else fixed for s in seeds}), key)
    check_natural_split(env["data"], partition, env["dataset"], env["dataset_key"], key)
    spec.partition = partition
    spec.partition_id = partition_id({k: v for k, v in partition.items() if k != "seed"})
    spec.num_clients = int(partition["clients"])


def _set_problem(spec: RunSpec, env: dict[str, Any], own: Any, key: str) -> None:
    """The run's problem options merged over the study's (e.g. a ζ sweep in one study), when it has its own."""
    if own is None:
        return
    if env["problem"] is None:
        raise ConfigError(key, "a study on client data has no problem")
    own = _require_mapping(own, key)
    if own.get("name", env["problem"]["name"]) != env["problem"]["name"]:
        raise ConfigError(
            f"{key}.name",
            "a run may change its problem's options, not the problem",
            allowed=[env["problem"]["name"]],
        )
    spec.problem = normalize_problem_spec({**env["problem"], **own}, key)
    spec.num_clients = problem_clients(spec.problem)


def _problem_environment(study: dict, key: str) -> dict[str, Any]:
    """The normalized problem of a study on a generated problem."""
    for k in DATA_KEYS:
        if k in study:
            raise ConfigError(
                f"{key}.{k}", "a study on a generated problem has no dataset, partition or model"
            )
    problem = normalize_problem_spec(_require_mapping(study["problem"], f"{key}.problem"), f"{key}.problem")
    return {
        "dataset": None,
        "dataset_id": None,
        "partition": None,
        "partition_id": None,
        "problem": problem,
        "num_clients": problem_clients(problem),
        "info": None,
        "task": None,
    }


def _default_figures(metrics: set[str]) -> list[str]:
    shown = (("test", "acc"), ("train", "loss"))
    return sorted(m for m in metrics if (parse_metric(m).split, parse_metric(m).statistic) in shown)


def _paper_numbers(value: Any, runs: dict[str, RunSpec], metrics: set[str], key: str) -> dict[str, dict]:
    """The study's ``paper`` numbers, ``{run: {metric: number}}``: known runs and metrics, finite numbers.

    Raises:
        ConfigError: naming ``{key}.<run>`` or ``{key}.<run>.<metric>``.
    """
    out: dict[str, dict] = {}
    for run, numbers in _require_mapping(value if value is not None else {}, key).items():
        if run not in runs:
            raise ConfigError(
                f"{key}.{run}", "the paper's numbers name a run the study does not have", allowed=runs
            )
        out[run] = {}
        for metric, number in _require_mapping(numbers, f"{key}.{run}").items():
            if metric not in metrics:
                raise ConfigError(
                    f"{key}.{run}.{metric}", "no run of this study reports this metric", allowed=metrics
                )
            if isinstance(number, bool) or not isinstance(number, int | float) or not math.isfinite(number):
                raise ConfigError(f"{key}.{run}.{metric}", f"expected a finite number, got {number!r}")
            out[run][metric] = number
    return out


def _check_defaults(defaults: dict, runs: dict[str, RunSpec], key: str) -> list[str]:
    """A ``defaults`` key no run uses is an error (a typo); one that some runs' algorithms do not take, or
    that has no effect in a run that sets the option it depends on otherwise (``hetfl.requires``), is
    reported: the notes returned name the key and those runs.

    Raises:
        ConfigError: naming ``{key}.<k>``, with the keys the study's runs use.
    """
    known = set(RUN_SETTINGS) | {"model"}
    for spec in runs.values():
        known |= set(spec.hyperparameters)
    notes = []
    for k in defaults:
        if k not in known:
            raise ConfigError(f"{key}.{k}", "no run of this study uses this key", allowed=known)
        if k in RUN_SETTINGS or k == "model":
            continue
        opted_out = [
            (label, item)
            for label, spec in runs.items()
            for item in inert_options(spec.hyperparameters, [k] if k in spec.hyperparameters else [])
        ]
        if opted_out:
            notes.append(
                f"{key}.{k}: no effect in run(s) "
                + ", ".join(f"{label} ({item.requires.option}: {item.value})" for label, item in opted_out)
            )
        skipped = [label for label, spec in runs.items() if k not in spec.hyperparameters]
        if skipped:
            algorithms = sorted({runs[label].algorithm for label in skipped})
            notes.append(
                f"{key}.{k}: not used by run(s) {', '.join(skipped)} (algorithm(s) {', '.join(algorithms)} "
                "take no such hyper-parameter)"
            )
    return notes


def _check_run(spec: RunSpec, env: dict[str, Any], key: str, model_key: str | None = None) -> None:
    """Checks that need the run and its environment: S ≤ N, the model fits the data and the algorithm.

    A model that cannot be built on the data is reported under ``model_key`` (the study's ``model`` when
    the run has no model of its own; default ``{key}.model``), at the option its error names
    (``hetfl.models.generic.ModelOptionError.option``; else ``name``)."""
    for name in ("clients_per_round", "active_clients"):
        s = spec.hyperparameters.get(name)
        if s is not None and s > spec.num_clients:
            raise ConfigError(f"{key}.{name}", f"{s}, but the run has {spec.num_clients} clients")
    if env["info"] is not None:
        info = env["info"]
        try:
            model = build_model(
                spec.settings["model"],
                tuple(info.sample_shape),
                info.num_outputs or info.num_classes,
                info.task,
            )
        except ValueError as err:
            raise ConfigError(
                f"{model_key or key + '.model'}.{getattr(err, 'option', 'name')}", str(err)
            ) from None
        get_algorithm(spec.algorithm).check_model(model, key)


def _check_init_from(runs: dict[str, RunSpec], key: str) -> None:
    """``init_from`` names another run of the study that has a global model, without cycles."""
    for label, spec in runs.items():
        source, seen = spec.settings["init_from"], [label]
        while source is not None:
            where = f"{key}.{label}.init_from"
            if source not in runs:
                raise ConfigError(where, f"unknown run '{source}'", allowed=[r for r in runs if r != label])
            if source in seen:
                raise ConfigError(
                    where, f"runs start from each other in a cycle ({' -> '.join([*seen, source])})"
                )
            if not any(m.endswith("_global") for m in runs[source].metrics):
                raise ConfigError(where, f"run '{source}' has no global model to start from")
            seen.append(source)
            source = runs[source].settings["init_from"]


def merge_config(base: dict, override: dict) -> dict:
    """``override`` merged over ``base`` key by key (nested mappings merged, other values replaced),
    as Snakemake merges ``--configfile`` files over the workflow's ``configfile``."""
    out = dict(base)
    for key, value in override.items():
        out[key] = (
            merge_config(out[key], value)
            if isinstance(value, dict) and isinstance(out.get(key), dict)
            else value
        )
    return out


def expand_study_files(config: dict, root: str | os.PathLike = ".") -> dict:
    """``config`` with the studies of the files its ``study_files`` lists, in order, under its own ``studies``:
    a study of ``studies`` is merged over the file's study of that name key by key (as ``--configfile``
    merges files; so ``--configfile config/config.yaml my.yaml`` overrides a default study), or added.

    ``study_files`` are YAML files holding ``studies:`` only, at paths relative to ``root`` (the directory the
    workflow runs in: the repository's root). A config without ``study_files`` is returned as it is. The
    workflow calls this on its merged config before validating it; :func:`load_config` on the files it reads.

    Raises:
        ConfigError: ``study_files`` is not a list of paths; a file is missing, not YAML, or holds anything but
            a mapping ``studies``; a study is defined in two files.
    """
    files = config.get("study_files")
    if files is None:
        return config
    if not isinstance(files, list) or not all(isinstance(f, str) and f for f in files):
        raise ConfigError("study_files", f"expected a list of YAML file paths, got {files!r}")
    studies: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for i, name in enumerate(files):
        key, path = f"study_files[{i}]", Path(root) / name
        if name in files[:i]:
            raise ConfigError(key, f"{name} is listed twice")
        if not path.is_file():
            raise ConfigError(
                key, f"no such study file: {name} (paths are relative to {Path(root).resolve()})"
            )
        try:
            content = yaml.safe_load(path.read_text())
        except yaml.YAMLError as err:
            raise ConfigError(key, f"{name} is not valid YAML: {err}") from None
        if (
            not isinstance(content, dict)
            or set(content) != {"studies"}
            or not isinstance(content["studies"], dict)
        ):
            raise ConfigError(
                key, f"{name} must hold one mapping, 'studies' (name -> study), and nothing else"
            )
        for study, spec in content["studies"].items():
            if study in origin:
                raise ConfigError(
                    f"studies.{study}", f"defined in two study files: {origin[study]} and {name}"
                )
            origin[study] = name
            studies[study] = spec
    inline = config.get("studies") or {}
    if not isinstance(inline, dict):
        raise ConfigError("studies", f"expected a mapping, got {type(inline).__name__}")
    return {**config, "studies": merge_config(studies, inline)}


def load_config(paths: Iterable[str | os.PathLike], root: str | os.PathLike = ".") -> dict:
    """The config of YAML files as the workflow reads them: merged key by key, later ones over earlier ones
    (as ``--configfile`` merges them), then their ``study_files`` loaded (:func:`expand_study_files`, paths
    relative to ``root``). ``load_config(["config/config.yaml"])`` is the default suite.

    Raises:
        yaml.YAMLError: a file is not valid YAML.
        ConfigError: as :func:`expand_study_files`.
    """
    config: dict = {}
    for path in paths:
        config = merge_config(config, yaml.safe_load(Path(path).read_text()) or {})
    return expand_study_files(config, root)


def build_suite(config: dict, data_checks: str | os.PathLike | None = None) -> Suite:
    """Resolve every study of ``config`` and the selection.

    Args:
        config: the Snakemake config: ``studies`` (name -> study) and optional ``select`` (list of names).
        data_checks: the folder where the verdicts of the checks of a user's data files are cached, keyed by
            the files' SHA-256 (``hetfl.data.verify``; the workflow: ``.snakemake/hetfl/data_checks``), or
            None: check them every time.

    Raises:
        ConfigError: naming the offending key.
    """
    if config.get("study_files") and not config.get("studies"):
        raise ConfigError(
            "studies", "none declared, and the config's study_files are not loaded (load_config)"
        )
    studies_cfg = _require_mapping(config.get("studies"), "studies")
    if not studies_cfg:
        raise ConfigError("studies", "the config declares no study")
    for k in config:
        if k not in TOP_LEVEL_KEYS:
            raise ConfigError(k, "unknown top-level key", allowed=TOP_LEVEL_KEYS)
    studies = {name: resolve_study(name, study, data_checks) for name, study in studies_cfg.items()}
    select = config.get("select") or list(studies)
    if isinstance(select, str):
        select = [s for s in select.split(",") if s]
    for name in select:
        if name not in studies:
            raise ConfigError("select", f"unknown study '{name}'", allowed=studies)
    settings = SuiteSettings.from_dict({k: config[k] for k in ("train_jobs",) if k in config}, "")
    return Suite(studies, list(select), resolve_checkpoint(config.get("checkpoint")), settings.train_jobs)


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
