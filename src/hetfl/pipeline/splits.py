"""Each personalized run's split and its share of the model's parameters: the ``splits`` stage's table.

Partial personalization keeps one part of the model per client (``model: {split: input | output | adapter}``):
the first layer, the last layer, or adapters added to the shared model (FFGG, TMLR 2025, Sec. 5.3; FedAlt
and FedSim, Pillutla et al., ICML 2022). What that part is worth depends on its share of the parameters: in
ResNet-18 the first convolution is a hundredth of a percent of the model, in a 784-64-10 perceptron it is
almost all of it. Every study whose runs use a split gets ``results/tables/<study>/splits.md`` (and ``.csv``):
one row per such run with its model, its split, the parameters of one client's model and the personal ones.
``python -m hetfl.tools.split_shares`` prints the same counts for a whole suite, once per (model, split).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from hetfl.models import build_model, model_class

COLUMNS = ["run", "model", "split", "parameters", "personal", "share_pct"]
RESIDUAL_ONLY = frozenset(
    {"resnet18"}
)  # models whose adapter split is residual adapters, no rank (hetfl.models.resnet)


def split_share(model_spec: dict, sample_shape: tuple[int, ...], num_outputs: int) -> tuple[int, int]:
    """``(parameters, personal parameters)`` of one client's model under a normalized model spec's split
    (an adapter's own parameters count in both).

    Args:
        model_spec: a normalized ``model`` spec (``hetfl.models.normalize_model_spec``).
        sample_shape: one sample's shape, e.g. ``(1, 28, 28)``; num_outputs: classes or targets.

    Raises:
        ValueError: the model cannot take this input (``hetfl.models.build_model``).
    """
    model = build_model(model_spec, tuple(sample_shape), num_outputs)
    return model.num_parameters(), model.num_parameters(model.personal_keys())


def model_label(model: dict) -> str:
    """A model spec as a short label: its name and the options its split uses, e.g.
    ``cnn (adapter_kind residual, channels [8, 16], hidden 32, kernel 3)``, options by name; an adapter's rank only for LoRA (not
    for residual adapters, ``adapter_kind: residual`` or a module's own, ``ModuleModel.module_adapters``)."""
    skip = {"name", "split"}
    if model["split"] != "adapter":
        skip |= {"adapter_rank", "adapter_kind"}
    elif model.get("adapter_kind") == "residual" or getattr(
        model_class(model["name"]), "module_adapters", False
    ):
        skip |= {"adapter_rank"}  # residual adapters, the CNN's or a module's own (resnet18's): no rank
    return f"{model['name']} ({', '.join(f'{k} {v}' for k, v in sorted(model.items()) if k not in skip)})"


def study_splits(study) -> dict[str, dict[str, Any]]:
    """What the ``splits`` stage needs of a study: for each run whose model has a split, in run order,
    ``{"model": normalized spec, "sample_shape": [...], "num_outputs": n}`` (the dataset's info, no data
    loaded: ``hetfl.data.registry.dataset_info``). Empty for a study on a generated problem or without
    a split.

    Args:
        study: a resolved study (``hetfl.pipeline.config.Study``).

    Raises:
        ConfigError: a user's data file that cannot be read for its sizes (``dataset_info``).
    """
    from hetfl.data.registry import dataset_info

    if study.dataset is None:
        return {}
    runs = {
        label: run.settings["model"]
        for label, run in study.runs.items()
        if (run.settings.get("model") or {}).get("split", "none") != "none"
    }
    if not runs:
        return {}
    info = dataset_info(study.data_of(study.seeds[0])[0], f"studies.{study.name}.dataset")
    shape, outputs = list(info.sample_shape), info.num_outputs or info.num_classes
    return {
        label: {"model": model, "sample_shape": shape, "num_outputs": outputs}
        for label, model in runs.items()
    }


def splits_table(splits: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """One row per run of :func:`study_splits`'s output: ``run, model, split, parameters, personal,
    share_pct`` (personal / parameters, in %).

    Raises:
        ValueError: a model that cannot take its input (:func:`split_share`).
    """
    rows = []
    for run, s in splits.items():
        total, personal = split_share(s["model"], s["sample_shape"], s["num_outputs"])
        rows.append(
            (run, model_label(s["model"]), s["model"]["split"], total, personal, 100 * personal / total)
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def format_share(percent: float) -> str:
    """A share in %, to two decimals, or two significant digits below 0.1 % (ResNet-18's stem: ``0.0049``)."""
    return f"{percent:.2f}" if percent >= 0.1 or percent == 0 else f"{percent:.2g}"


def splits_markdown(table: pd.DataFrame) -> str:
    """:func:`splits_table`'s rows as a markdown table, shares as :func:`format_share`."""
    lines = ["| run | model | split | parameters | personal | share, % |", "|---|---|---|---|---|---|"]
    for r in table.itertuples(index=False):
        lines.append(
            f"| {r.run} | {r.model} | {r.split} | {r.parameters:,} | {r.personal:,} | {format_share(r.share_pct)} |"
        )
    return "\n".join(lines)
