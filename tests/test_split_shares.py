"""``hetfl.tools.split_shares``: each split's share of the parameters, per study."""

from __future__ import annotations

from hetfl.models import normalize_model_spec
from hetfl.tools.split_shares import markdown, split_share, study_rows


def share(name, split, shape=(1, 28, 28), **options):
    spec = normalize_model_spec({"name": name, "split": split, **options}, "model")
    total, personal = split_share(spec, shape, 10)
    return personal / total


def test_a_cnns_input_and_output_are_small_a_perceptrons_input_is_almost_all():
    assert share("cnn", "input", channels=[8, 16], hidden=32) < 0.005
    assert share("cnn", "output", channels=[8, 16], hidden=32) < 0.02
    assert share("dnn", "input", hidden=64) > 0.98
    assert share("resnet18", "input", shape=(3, 32, 32)) < 0.001
    assert 0.1 < share("resnet18", "adapter", shape=(3, 32, 32)) < 0.13  # Pillutla et al.'s residual adapters
    assert 0.05 < share("cnn", "adapter", channels=[8, 16], hidden=32, adapter_rank=4) < 0.2


def test_study_rows_list_each_split_once_per_study():
    config = {
        "studies": {
            "s": {
                "dataset": {"name": "mnist5k"},
                "partition": {"scheme": "iid", "clients": 4},
                "model": {"name": "dnn", "hidden": 8},
                "rounds": 1,
                "seeds": [0],
                "runs": {
                    "fedavg": {"algorithm": "fedavg"},
                    "a": {"algorithm": "fedalt", "model": {"split": "output"}},
                    "b": {"algorithm": "fedsim", "model": {"split": "output"}},
                    "c": {"algorithm": "fedalt", "model": {"split": "input"}},
                },
            }
        }
    }
    rows = study_rows(config)
    assert [(r[0], r[2]) for r in rows] == [("s", "output"), ("s", "input")]
    assert rows[0][3] == 784 * 8 + 8 + 8 * 10 + 10 and rows[0][4] == 8 * 10 + 10
    table = markdown(rows)
    assert "| `s` | dnn (hidden 8) | output | 6,370 | 90 | 1.41 |" in table


def test_the_ffgg_notes_table_is_the_tools_output():
    """docs/papers/ffgg.md prints the tool's table under its command: it must be the current output."""
    import re
    from pathlib import Path

    from hetfl.pipeline.config import load_config

    root = Path(__file__).resolve().parents[1]
    page = (root / "docs/papers/ffgg.md").read_text()
    found = re.search(
        r"<!-- split shares: python -m hetfl.tools.split_shares --select (\S+) -->\n(.*?)\n\n", page, re.S
    )
    assert found, "docs/papers/ffgg.md lost its split-shares table"
    config = load_config([root / "config/config.yaml"], root)
    assert found.group(2) == markdown(study_rows(config, found.group(1).split(",")))


def test_a_studys_splits_are_its_personalized_runs_only():
    """The ``splits`` stage's rows (hetfl.pipeline.splits): one per run with a split, none for a study without."""
    from hetfl.pipeline.config import build_suite
    from hetfl.pipeline.splits import splits_table, study_splits

    runs = {
        "fedavg": {"algorithm": "fedavg"},
        "a": {"algorithm": "fedalt", "model": {"split": "output"}},
        "b": {"algorithm": "fedsim", "model": {"split": "output"}},
    }
    study = {
        "dataset": {"name": "mnist5k"},
        "partition": {"scheme": "iid", "clients": 4},
        "model": {"name": "dnn", "hidden": 8},
        "rounds": 1,
        "seeds": [0],
        "runs": runs,
    }
    suite = build_suite({"studies": {"s": study, "plain": {**study, "runs": {"fedavg": runs["fedavg"]}}}})
    splits = study_splits(suite.studies["s"])
    assert list(splits) == ["a", "b"] and splits["a"]["sample_shape"] == [1, 28, 28]
    table = splits_table(splits)
    assert table["personal"].tolist() == [90, 90] and table["parameters"].tolist() == [6370, 6370]
    assert study_splits(suite.studies["plain"]) == {}


def test_a_models_label_names_the_rank_of_lora_adapters_only():
    from hetfl.pipeline.splits import model_label

    def label(**spec):
        return model_label(normalize_model_spec({"split": "adapter", **spec}, "model"))

    assert "adapter_rank 4" in label(name="cnn", channels=[8, 16], hidden=32)  # LoRA, the CNN's default
    assert "adapter_rank" not in label(name="cnn", channels=[8, 16], hidden=32, adapter_kind="residual")
    assert "adapter_rank" not in label(name="resnet18")  # its own residual adapters (module_adapters)
