"""Each split's share of a model's parameters: which fraction of the model partial personalization keeps per client.

    python -m hetfl.tools.split_shares [--configfile config/config.yaml] [--select ffgg_writers,...]

For every study of the suite whose runs use a split (``model: {split: input | output | adapter}``), and the
model and data those runs use, prints one markdown row per (study, model, split): the model's parameters
with that split (an adapter adds its own), the personal ones, and their share. The shares decide what a
"personal input layer" means: in FFGG's ResNet-18 (TMLR 2025, Sec. 5.3; Pillutla et al., ICML 2022) the
first convolution is a hundredth of a percent of the model, in a 784-64-10 perceptron it is almost all of it.
Reads the studies as the workflow does (``hetfl.pipeline.config.load_config``) and the datasets' info
(``hetfl.data.registry.dataset_info``: no data is loaded). The workflow writes each study's own table, one row
per run, as ``results/tables/<study>/splits.md`` (``hetfl.pipeline.splits``).
"""

from __future__ import annotations

import argparse

from hetfl.pipeline.config import build_suite, load_config
from hetfl.pipeline.splits import format_share, model_label, split_share, study_splits

__all__ = ["markdown", "split_share", "study_rows"]


def study_rows(config: dict, select: list[str] | None = None) -> list[tuple[str, str, str, int, int]]:
    """``(study, model, split, parameters, personal)`` for every split a study's runs use, in study order,
    each (model, split) once per study (``hetfl.pipeline.splits.study_splits``).

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
        for s in study_splits(study).values():
            label = model_label(s["model"])
            if (label, s["model"]["split"]) in seen:
                continue
            seen.add((label, s["model"]["split"]))
            total, personal = split_share(s["model"], s["sample_shape"], s["num_outputs"])
            out.append((name, label, s["model"]["split"], total, personal))
    return out


def markdown(rows: list[tuple[str, str, str, int, int]]) -> str:
    """The rows as a markdown table: study, model, split, parameters, personal, share (%)."""
    lines = ["| study | model | split | parameters | personal | share, % |", "|---|---|---|---|---|---|"]
    for study, model, split, total, personal in rows:
        lines.append(
            f"| `{study}` | {model} | {split} | {total:,} | {personal:,} | {format_share(100 * personal / total)} |"
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
