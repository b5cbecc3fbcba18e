"""One parser of metric names (``hetfl.metrics.parse_metric``), asked by the aggregate stage, the figures, the
claims' statistics, tuning and the config."""

from __future__ import annotations

import pytest
import torch

from hetfl.algorithms import get_algorithm, registry
from hetfl.metrics import parse_metric, validation_names
from hetfl.pipeline.config import build_suite


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


def test_an_algorithm_declares_exactly_what_a_run_of_its_hyperparameters_reports():
    """``metric_names(hp)`` is what ``evaluate`` reports after a round, for every resume case (every algorithm
    and its stateful options; the minimax runs on each objective), but the metrics of a reference
    (``reference_metrics``: reported by a run with ``reference_from`` only)."""
    from tests.test_checkpoint import CASES

    for case, (name, environment, hp, sampling, make) in CASES.items():
        cls = get_algorithm(name, environment=environment)
        parsed = cls.Hyperparameters.from_dict(hp, "t")
        algorithm = cls(make(), parsed, 3, sampling)
        algorithm.rounds = 3
        algorithm.round(1, torch.arange(algorithm.env.num_clients)[: algorithm.clients_per_round])
        reported = {metric for metric, _ in algorithm.evaluate()[0]}
        declared = set(cls.metric_names(parsed)) - set(getattr(cls, "reference_metrics", ()))
        assert reported == declared, case


def test_a_fair_minimax_study_without_figures_summarizes_only_what_its_runs_report():
    """The default summary columns of a study that names no figures come from its runs' declared metrics: a
    fair-objective minimax run declares no robust-objective metric (it used to declare
    ``test_acc_at_y_global``, which the aggregate step then refused as unknown)."""
    study = {
        "dataset": {"name": "digits"},
        "partition": {"scheme": "pathological", "clients": 6, "labels_per_client": 2},
        "model": {"name": "mlr"},
        "rounds": 2,
        "seeds": [0],
        "defaults": {"objective": "fair", "batch_size": 8, "tau_max": 2},
        "runs": {"local_sgda": {"algorithm": "local_sgda"}, "fed_norm": {"algorithm": "fed_norm_sgda"}},
    }
    spec = build_suite({"studies": {"s": study}}).studies["s"]
    assert spec.table_metrics == ["test_acc_global", "train_loss_global", "train_loss_minimax_global"]
    assert not {"test_acc_at_y_global", "robust_acc_global", "dist_saddle_global"} & spec.metrics
    robust = build_suite({"studies": {"s": {**study, "defaults": {"batch_size": 8, "tau_max": 2}}}})
    assert "test_acc_at_y_global" in robust.studies["s"].table_metrics
