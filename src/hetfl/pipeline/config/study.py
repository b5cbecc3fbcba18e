"""Resolve a study (:func:`resolve_study`, in steps) and the suite of a config (:func:`build_suite`)."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any

from hetfl.config_options import check_number
from hetfl.engine.checkpoint import resolve_checkpoint
from hetfl.errors import ConfigError
from hetfl.metrics import validation_names
from hetfl.models import normalize_model_spec
from hetfl.pipeline.claims import claim_terms, normalize_claims
from hetfl.pipeline.config.environment import (
    data_environment,
    problem_environment,
    set_partition,
    set_problem,
)
from hetfl.pipeline.config.files import resolve_extends
from hetfl.pipeline.config.runs import (
    check_defaults,
    check_init_from,
    check_reference_from,
    check_run,
    expand_grid,
    require_mapping,
    resolve_run,
    resolve_tuning,
    run_settings,
)
from hetfl.pipeline.config.specs import (
    FEDERATION,
    REQUIRED_STUDY_KEYS,
    STUDY_KEYS,
    TOP_LEVEL_KEYS,
    RunSpec,
    Study,
    Suite,
    default_figures,
)
from hetfl.pipeline.plotting import normalize_figures
from hetfl.pipeline.settings import RUN_SETTINGS, Schedule
from hetfl.pipeline.settings import Suite as SuiteSettings
from hetfl.pipeline.tuning import Tuning, parse_tune


def resolve_study(name: str, study: dict, data_checks: str | os.PathLike | None = None) -> Study:
    """Validate and resolve one study (see ``hetfl.pipeline.config``): its keys, its environment, its runs (and
    their tuning grid points), the checks across its runs, and what it reports (figures, claims, paper numbers).

    Args:
        data_checks: the folder where the verdicts of the checks of a user's data files are cached
            (``hetfl.data.verify``), or None: check them every time.

    Raises:
        ConfigError: naming the offending key.
    """
    key = f"studies.{name}"
    study = _check_study_keys(study, key)
    context = _study_context(name, study, key, data_checks)
    runs, tuning, points = _resolve_runs(context, _run_entries(study, key))
    notes = context.env.get("notes", []) + check_defaults(context.defaults, runs, f"{key}.defaults")
    _check_runs(context, runs)
    metrics = {m for spec in runs.values() for m in spec.metrics}
    figures, claims, paper = _reported(study, runs, metrics, key)
    env = context.env
    return Study(
        name=name,
        dataset=env["dataset"],
        dataset_id=env["dataset_id"],
        partition=env["partition"],
        partition_id=env["partition_id"],
        problem=env["problem"],
        num_clients=env["num_clients"],
        rounds=study["rounds"],
        seeds=list(study["seeds"]),
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


@dataclass
class _StudyContext:
    """What every run of a study is resolved against."""

    name: str
    key: str  # studies.<name>
    seeds: list[int]  # the study's
    base: dict[str, Any]  # the study-level run settings and, on client data, the study's model spec
    env: dict[str, Any]  # data_environment / problem_environment
    defaults: dict[str, Any]  # the study's defaults

    @property
    def environment(self) -> str:
        return self.env["problem"]["name"] if self.env["problem"] else FEDERATION

    def resolve(self, label: str, run: dict, values: dict, where: str, seeds: list[int]) -> RunSpec:
        """Run ``label`` (config entry ``run``) resolved with ``values`` (its own, or a tuning grid point's) at
        ``where``, its partition (checked on ``seeds``) or problem set."""
        spec = resolve_run(
            self.name,
            label,
            values,
            self.defaults,
            self.base,
            where,
            self.environment,
            self.env["task"],
            f"{self.key}.defaults",
        )
        at = f"{self.key}.runs.{label}"
        set_partition(spec, self.env, run.get("partition"), seeds, f"{at}.partition")
        set_problem(spec, self.env, run.get("problem"), f"{at}.problem")
        if spec.partition and spec.partition.get("val_fraction"):  # validation data: val_* metrics too
            spec.metrics += tuple(validation_names(spec.metrics))
        return spec


def _check_study_keys(study: Any, key: str) -> dict:
    """The study's entry: a mapping of known keys, with the required ones, and a valid schedule."""
    study = require_mapping(study, key)
    for k in study:
        if k not in STUDY_KEYS:
            raise ConfigError(f"{key}.{k}", "unknown study key", allowed=STUDY_KEYS)
    for k in REQUIRED_STUDY_KEYS:
        if k not in study:
            raise ConfigError(f"{key}.{k}", "missing required study key")
    Schedule.from_dict({"rounds": study["rounds"], "seeds": study["seeds"]}, key)
    return study


def _study_context(name: str, study: dict, key: str, data_checks: str | os.PathLike | None) -> _StudyContext:
    """The study-level settings, its environment (client data, checked, or a problem) and its ``defaults``."""
    base = {setting: study.get(setting, default) for setting, default in RUN_SETTINGS.items()}
    run_settings(base, key)  # a bad study-level setting is named where it is set, not under its first run
    if "problem" in study:
        env = problem_environment(study, key)
    else:
        env = data_environment(study, study["seeds"], key, data_checks)
        base["model"] = normalize_model_spec(require_mapping(study["model"], f"{key}.model"), f"{key}.model")
    defaults = require_mapping(study.get("defaults", {}), f"{key}.defaults")
    return _StudyContext(name, key, study["seeds"], base, env, defaults)


def _run_entries(study: dict, key: str) -> dict[str, dict]:
    """The study's run entries, label -> entry, its ``grid`` expanded (:func:`expand_grid`)."""
    runs_cfg = require_mapping(study["runs"], f"{key}.runs")
    if not runs_cfg:
        raise ConfigError(f"{key}.runs", "a study needs at least one run")
    return expand_grid(runs_cfg, require_mapping(study.get("grid", {}), f"{key}.grid"), f"{key}.grid")


def _resolve_runs(
    context: _StudyContext, runs_cfg: dict[str, dict]
) -> tuple[dict[str, RunSpec], dict[str, Tuning], dict[str, RunSpec]]:
    """The study's runs, the tuning of those with a ``tune`` block, and the runs of their grid points."""
    key, seeds = context.key, context.seeds
    runs, tuning, points = {}, {}, {}
    for label, run in runs_cfg.items():
        run = require_mapping(run, f"{key}.runs.{label}")
        own = {k: v for k, v in run.items() if k not in ("partition", "problem", "tune")}
        runs[label] = context.resolve(label, run, own, f"{key}.runs.{label}", seeds)
        if "tune" in run:
            where = f"{key}.runs.{label}.tune"
            parsed = parse_tune(run["tune"], label, seeds, where)
            point_run = _point_entry(context, run, parsed, where)
            for point, values in parsed.points.items():
                with _blame_val_fraction(parsed, where):
                    points[point] = context.resolve(
                        label, point_run, {**own, **values}, f"{where}.grid", parsed.seeds
                    )
                points[point].label = point
            tuning[label] = resolve_tuning(parsed, runs[label], points[point], seeds, where)
    return runs, tuning, points


def _point_entry(context: _StudyContext, run: dict, tuning: Tuning, where: str) -> dict:
    """The config entry the grid points of ``run`` resolve: the run's, with ``tune.val_fraction`` (if set) as its
    partition's ``val_fraction``."""
    if tuning.val_fraction is None:
        return run
    if context.env["partition"] is None:
        raise ConfigError(
            f"{where}.val_fraction", "a study on a generated problem has no partition to hold samples out of"
        )
    return {**run, "partition": {**(run.get("partition") or {}), "val_fraction": tuning.val_fraction}}


@contextlib.contextmanager
def _blame_val_fraction(tuning: Tuning, where: str):
    """Name ``tune.val_fraction`` in an error about the grid points' ``partition.val_fraction`` (e.g. a client
    left with a single training sample) when the tune block set it."""
    try:
        yield
    except ConfigError as err:
        if tuning.val_fraction is not None and err.key.endswith("partition.val_fraction"):
            raise ConfigError(f"{where}.val_fraction", err.message, err.allowed) from None
        raise


def _check_runs(context: _StudyContext, runs: dict[str, RunSpec]) -> None:
    """The checks of each run on its environment (:func:`check_run`) and of ``init_from`` and ``reference_from`` across the runs."""
    key = context.key
    for label, spec in runs.items():
        own_model = spec.settings.get("model") != context.base.get(
            "model"
        )  # a run's own model, or the study's
        check_run(
            spec,
            context.env,
            f"{key}.runs.{label}",
            f"{key}.runs.{label}.model" if own_model else f"{key}.model",
        )
    check_init_from(runs, f"{key}.runs")
    check_reference_from(runs, f"{key}.runs")


def _reported(
    study: dict, runs: dict[str, RunSpec], metrics: set[str], key: str
) -> tuple[list[dict], list[dict], dict[str, dict]]:
    """The study's figures (omitted or null: the default figures; ``[]``: none), claims and paper numbers,
    checked against what its runs report."""
    figures_cfg = study.get("figures")
    figures_cfg = default_figures(metrics) if figures_cfg is None else figures_cfg
    figures = normalize_figures(figures_cfg, list(runs), metrics, f"{key}.figures")
    claims = normalize_claims(study.get("claims") or [], list(runs), metrics, f"{key}.claims")
    _check_reported(figures, claims, runs, key)
    _check_heatmap_rounds(figures, runs, study.get("rounds"), key)
    paper = _paper_numbers(study.get("paper", {}), runs, metrics, f"{key}.paper")
    return figures, claims, paper


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


def _check_heatmap_rounds(figures: list[dict], runs: dict[str, RunSpec], rounds: Any, key: str) -> None:
    """A heatmap's rounds (``at``) lie within each of its runs' rounds: past a run's last round it would draw
    the last matrix under a round the run never reached.

    Raises:
        ConfigError: naming ``{key}.figures[i].at``, with the rounds the runs train.
    """
    for i, fig in enumerate(figures):
        if fig.get("kind") != "heatmap":
            continue
        last = min(int(runs[run].settings.get("rounds") or rounds) for run in fig["runs"])
        if max(fig["at"]) > last:
            raise ConfigError(
                f"{key}.figures[{i}].at",
                f"round {max(fig['at'])} is past the last round of its runs ({last}); allowed: 0 to {last}",
            )


def _paper_numbers(value: Any, runs: dict[str, RunSpec], metrics: set[str], key: str) -> dict[str, dict]:
    """The study's ``paper`` numbers, ``{run: {metric: number}}``: known runs and metrics, finite numbers.

    Raises:
        ConfigError: naming ``{key}.<run>`` or ``{key}.<run>.<metric>``.
    """
    out: dict[str, dict] = {}
    for run, numbers in require_mapping(value if value is not None else {}, key).items():
        if run not in runs:
            raise ConfigError(
                f"{key}.{run}", "the paper's numbers name a run the study does not have", allowed=runs
            )
        out[run] = {}
        for metric, number in require_mapping(numbers, f"{key}.{run}").items():
            if metric not in metrics:
                raise ConfigError(
                    f"{key}.{run}.{metric}", "no run of this study reports this metric", allowed=metrics
                )
            value = check_number(number, f"{key}.{run}.{metric}")  # a finite number, or the text of one
            out[run][metric] = number if type(number) in (int, float) else value  # 82 stays 82
    return out


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
    config = resolve_extends(config)  # as the workflow's expand_study_files does; idempotent
    if config.get("study_files") and not config.get("studies"):
        raise ConfigError(
            "studies", "none declared, and the config's study_files are not loaded (load_config)"
        )
    studies_cfg = require_mapping(config.get("studies"), "studies")
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
