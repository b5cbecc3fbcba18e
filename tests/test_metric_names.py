"""One parser of metric names (``hetfl.metrics.parse_metric``), asked by the aggregate stage, the figures, the
claims' statistics, tuning and the config."""

from __future__ import annotations

import pytest

from hetfl.algorithms import get_algorithm, registry
from hetfl.metrics import parse_metric, validation_names


@pytest.mark.parametrize(
    "name,split,statistic,model",
    [
        ("test_acc_personal", "test", "acc", "personal"),
        ("train_loss_global", "train", "loss", "global"),
        ("val_acc_local", "val", "acc", "local"),
        ("train_loss_minimax_global", "train", "loss", "minimax_global"),
        ("test_acc_at_y_global", "test", "acc", "at_y_global"),
        ("dist_saddle", None, None, None),
        ("robust_acc_global", None, None, None),
        ("test_log10_loss", None, None, None),
        ("loss", None, None, None),
    ],
)
def test_the_engine_evaluations_are_read_by_their_grammar(name, split, statistic, model):
    parsed = parse_metric(name)
    assert (parsed.split, parsed.statistic, parsed.model) == (split, statistic, model)
    assert parsed.words == tuple(name.split("_"))


@pytest.mark.parametrize(
    "name,direction,accuracy,loss",
    [
        ("test_acc_personal", "max", True, False),
        ("worst_class_acc_global", "max", True, False),
        ("train_loss_global", "min", False, True),
        ("test_log10_loss", "min", False, False),  # a logarithm already: no log axis
        ("dist_saddle", "min", False, False),
        ("y_norm", "min", False, False),
        ("F_norm_sq", "min", False, False),
        ("collab_fraction", "max", False, False),
        ("normalized_gain", "max", False, False),  # "norm" only as a whole word
        ("accuracy_gap", "min", False, False),  # "acc" only as a whole word
    ],
)
def test_direction_accuracy_and_loss_are_whole_words(name, direction, accuracy, loss):
    parsed = parse_metric(name)
    assert (parsed.direction, parsed.is_accuracy, parsed.is_loss) == (direction, accuracy, loss)
    assert parsed.sign == (1.0 if direction == "max" else -1.0)


def test_every_metric_an_algorithm_writes_parses_and_has_a_validation_twin_when_it_is_an_evaluation():
    names = set()
    for name, environments in registry().items():
        for environment in environments:
            names |= set(get_algorithm(name, environment=environment).metric_names())
    for name in names:
        parsed = parse_metric(name)
        assert parsed.is_accuracy == ("acc" in name.split("_"))
        if parsed.split == "test":
            assert validation_names([name]) == [f"val_{parsed.statistic}_{parsed.model}"]
        else:
            assert validation_names([name]) == []
