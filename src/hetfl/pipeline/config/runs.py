"""One run of a study: its grid expansion, its resolution (algorithm, hyper-parameters, settings, metrics) and
the checks that need the study's other runs (``defaults``, ``init_from``) or its environment (the model)."""

from __future__ import annotations

import contextlib
import itertools
from typing import Any

from hetfl.algorithms import get_algorithm
from hetfl.errors import ConfigError
from hetfl.metrics import metric_names, parse_metric
from hetfl.models import build_model, normalize_model_spec
from hetfl.pipeline.config.specs import FEDERATION, LABEL, RunSpec
from hetfl.pipeline.settings import RUN_SETTINGS, RunSettings
from hetfl.pipeline.tuning import Tuning
from hetfl.requires import inert_options


def require_mapping(value: Any, key: str) -> dict:
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
        axes = require_mapping(grid[label], f"{key}.{label}")
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


def run_settings(values: dict[str, Any], key: str) -> dict[str, Any]:
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
    run = require_mapping(run, key)
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
        own = require_mapping(merged.pop("model", {}), f"{key}.model")
        same = own.get("name", base["model"]["name"]) == base["model"]["name"]
        model = {**base["model"], **own} if same else own  # another model: none of the study model's options
    inherited = {k for k in defaults if k not in run} if defaults_key else set()
    with _blame(key, inherited, defaults_key):
        hp = cls.Hyperparameters.from_dict(merged, key)
        settings = run_settings(settings, key)
    _refuse_inert(hp.as_dict(), set(merged), {k for k in run if k != "algorithm"}, key, defaults_key)
    if federation:
        settings["model"] = normalize_model_spec(model, f"{key}.model")
    cls.check(hp, settings, key)
    names = [m for m in cls.metric_names(hp) if task != "regression" or not parse_metric(m).is_accuracy]
    if (
        settings.get("reference_from") is None
    ):  # the metrics of a reference (an algorithm's reference_metrics)
        names = [m for m in names if m not in getattr(cls, "reference_metrics", ())]
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
    not an error (the run opted out of a shared value; :func:`check_defaults` notes it).

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


def resolve_tuning(tuning: Tuning, spec: RunSpec, point: RunSpec, seeds: list[int], key: str) -> Tuning:
    """Check a run's parsed ``tune`` block (:func:`hetfl.pipeline.tuning.parse_tune`) against the run and one of
    its grid points; the run's spec records it.

    Args:
        tuning: the parsed block.
        spec: the tuned run.
        point: one of its grid points' runs (every point reports the same metrics): with ``tune.val_fraction``
            its partition holds the validation share out, the run's need not.
        seeds: the study's seeds.
        key: the block's config key.

    Raises:
        ConfigError: naming ``key.<field>``: a metric the grid points do not report (no validation data:
            neither ``partition.val_fraction`` nor ``tune.val_fraction`` is set); tuning seeds outside the
            study's for a run that starts from another run (``init_from``).
    """
    if tuning.metric not in point.metrics:
        val = [m for m in point.metrics if parse_metric(m).split == "val"]
        if not val:
            raise ConfigError(
                f"{key}.metric",
                "the run has no validation data to tune on: set tune.val_fraction (held out for the grid "
                "points only) or partition.val_fraction (e.g. 0.1)",
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


def check_defaults(defaults: dict, runs: dict[str, RunSpec], key: str) -> list[str]:
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


def check_run(spec: RunSpec, env: dict[str, Any], key: str, model_key: str | None = None) -> None:
    """Checks that need the run and its environment: S ≤ N, the model fits the data and the algorithm.

    A model that cannot be built on the data is reported under ``model_key`` (the study's ``model`` when
    the run has no model of its own; default ``{key}.model``), at the option its error names
    (``hetfl.models.errors.ModelOptionError.option``; else ``name``)."""
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


def check_init_from(runs: dict[str, RunSpec], key: str) -> None:
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


def check_reference_from(runs: dict[str, RunSpec], key: str) -> None:
    """``reference_from`` names another run of the study, whose algorithm's models are the references the
    run's algorithm measures its distance to (its ``reference_models``, e.g. the minimax algorithms' saddle
    points from a ``minimax_saddle`` run), that run starts from no run and measures against none (so the
    dependencies between runs cannot form a cycle through it), and both have the same model, partition and
    the hyper-parameters that define the objective (the algorithm's ``reference_keys``)."""
    for label, spec in runs.items():
        source = spec.settings.get("reference_from")
        if source is None:
            continue
        where = f"{key}.{label}.reference_from"
        if source not in runs or source == label:
            raise ConfigError(where, f"unknown run '{source}'", allowed=[r for r in runs if r != label])
        needs = getattr(get_algorithm(spec.algorithm), "reference_models", ())
        if not needs:
            raise ConfigError(where, f"algorithm '{spec.algorithm}' measures no distance to a reference run")
        ref = runs[source]
        has = getattr(get_algorithm(ref.algorithm), "models", ())
        if not set(needs) <= set(has):
            raise ConfigError(
                where,
                f"run '{source}' ({ref.algorithm}) has no models {', '.join(needs)}: "
                f"'{spec.algorithm}' needs them (a minimax_saddle run has them)",
            )
        if ref.settings["init_from"] is not None or ref.settings.get("reference_from") is not None:
            raise ConfigError(where, f"run '{source}' must start from no run and measure against none")
        same = {"model": (spec.settings.get("model"), ref.settings.get("model"))}
        same["partition"] = (spec.partition_id, ref.partition_id)
        for name in getattr(get_algorithm(spec.algorithm), "reference_keys", ()):
            same[name] = (spec.hyperparameters.get(name), ref.hyperparameters.get(name))
        for name, (own, theirs) in same.items():
            if own != theirs:
                raise ConfigError(
                    where,
                    f"{name} is {own!r} here but {theirs!r} in run '{source}': the reference must be of the "
                    "same objective, clients and model (set it in the study's defaults)",
                )
