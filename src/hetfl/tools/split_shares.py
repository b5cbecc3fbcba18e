"""Each split's share of a model's parameters: which fraction of the model partial personalization keeps per client.

    python -m hetfl.tools.split_shares [--configfile config/config.yaml] [--select ffgg_writers,...]

For every study of the suite whose runs use a split (``model: {split: input | output | adapter}``), and the
model and data those runs use, prints one markdown row per (study, model, split): the model's parameters
with that split (an adapter adds its own), the personal ones, and their share. The shares decide what a
"personal input layer" means: in FFGG's ResNet-18 (TMLR 2025, Sec. 5.3; Pillutla et al., ICML 2022) the
first convolution is a hundredth of a percent of the model, in a 784-64-10 perceptron it is almost all of it.
Reads the studies as the workflow does (``hetfl.pipeline.config.load_config``) and the datasets' info
(``hetfl.data.registry.dataset_info``: no data is loaded).
"""

from __future__ import annotations

import argparse
import json

from hetfl.data.registry import dataset_info
from hetfl.models import build_model
from hetfl.pipeline.config import build_suite, load_config


def split_share(model_spec: dict, sample_shape: tuple[int, ...], num_outputs: int) -> tuple[int, int]:
    """``(parameters, personal parameters)`` of one client's model under a normalized model spec's split.

    Args:
        model_spec: a normalized ``model`` spec (``hetfl.models.normalize_model_spec``).
        sample_shape: one sample's shape; num_outputs: classes or targets.

    Raises:
        ValueError: the model cannot take this input (``hetfl.models.build_model``).
    """
    model = build_model(model_spec, sample_shape, num_outputs)
    return model.num_parameters(), model.num_parameters(model.personal_keys())


def study_rows(config: dict, select: list[str] | None = None) -> list[tuple[str, str, str, int, int]]:
    """``(study, model, split, parameters, personal)`` for every split a study's runs use, in study order.

    Args:
        config: a suite config with its study files loaded (``hetfl.pipeline.config.load_config``).
        select: only these studies (None: every study with a split).

    Raises:
        ConfigError: the config does not validate (``hetfl.pipeline.config.build_suite``).
    """
    suite = build_suite(config)
    out = []
    for name, study in suite.studies.items():
        if select and name not in select:
            continue
        seen = set()
        for label in study.runs:
            spec = json.loads(study.run_json(label))
            model = spec.get("model") or {}
            if model.get("split", "none") == "none" or "dataset" not in spec:
                continue
            skip = {"name", "split"}  # and the adapter options the split does not use
            if model["split"] != "adapter":
                skip |= {"adapter_rank", "adapter_kind"}
            elif model.get("adapter_kind") == "residual":
                skip |= {"adapter_rank"}
            options = ", ".join(f"{k} {v}" for k, v in model.items() if k not in skip)
            if (options, model["split"]) in seen:
                continue
            seen.add((options, model["split"]))
            info = dataset_info(spec["dataset"])
            total, personal = split_share(model, info.sample_shape, info.num_outputs or info.num_classes)
            out.append((name, f"{model['name']} ({options})", model["split"], total, personal))
    return out


def markdown(rows: list[tuple[str, str, str, int, int]]) -> str:
    """The rows as a markdown table: study, model, split, parameters, personal, share (%)."""
    lines = ["| study | model | split | parameters | personal | share, % |", "|---|---|---|---|---|---|"]
    for study, model, split, total, personal in rows:
        lines.append(
            f"| `{study}` | {model} | {split} | {total:,} | {personal:,} | {100 * personal / total:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Print the table (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--configfile", nargs="+", default=["config/config.yaml"], help="config files, merged"
    )
    parser.add_argument(
        "--select", default=None, help="comma-separated studies (default: every one with a split)"
    )
    args = parser.parse_args(argv)
    config = load_config(args.configfile)
    print(markdown(study_rows(config, args.select.split(",") if args.select else None)))


if __name__ == "__main__":
    main()
