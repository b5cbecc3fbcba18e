"""Metric names, their one parser, and the evaluation of an algorithm's models into tidy rows.

Names are ``{split}_{stat}_{model}``: split ∈ {train, test} (and ``val`` with validation data), stat ∈ {loss, acc}, model ∈ the
algorithm's ``models`` (``global``, ``personal``, ``local``, ...); an algorithm's own metrics have names of
their own (``dist_saddle``, ``y_norm``, ``robust_acc_global``). :func:`parse_metric` reads any name: every
consumer (the aggregate stage, figures, claims, the config, tuning) asks it whether a metric is an accuracy
and which direction is better. Values over clients are
sample-weighted (Σ_i correct_i / Σ_i n_i, as pFedMe's official evaluation, docs/papers/pfedme.md §2.7): the
test accuracy of ``personal`` is each client's own model on its own test data, pooled.
Per-client values go to a separate table: ``test_acc``, ``test_loss``, ``train_loss`` of every model.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the names are used by the config (no torch needed there)
    from hetfl.engine.adapt import ClientModels
    from hetfl.engine.evaluate import Evaluator
    from hetfl.engine.params import Params

SPLITS = ("train", "test")
STATS = ("loss", "acc")
EVALUATED_SPLITS = ("train", "val", "test")
LOWER_BETTER = ("loss", "error", "dist", "gap", "norm")
"""A metric one of whose ``_``-separated words is one of these is lower-better; every other higher-better."""


@dataclass(frozen=True)
class MetricName:
    """A metric name read by its grammar (:func:`parse_metric`).

    Attributes:
        name: the name. words: its ``_``-separated words.
        split, statistic, model: for the engine's evaluations ``{split}_{stat}_{model}`` (split ∈ train,
            val, test; stat ∈ loss, acc; the model the rest: ``test_acc_personal`` → test, acc, personal);
            None for an algorithm's own metric (``dist_saddle``).
    """

    name: str
    words: tuple[str, ...]
    split: str | None = None
    statistic: str | None = None
    model: str | None = None

    @property
    def direction(self) -> str:
        """``min`` (lower is better) when a word is one of :data:`LOWER_BETTER` (``train_loss_global``,
        ``dist_saddle``, ``y_norm``), else ``max``."""
        return "min" if any(w in LOWER_BETTER for w in self.words) else "max"

    @property
    def sign(self) -> float:
        """1.0 when higher is better, -1.0 when lower is: ``sign · value`` is larger the better."""
        return 1.0 if self.direction == "max" else -1.0

    @property
    def is_accuracy(self) -> bool:
        """Whether it is an accuracy, a fraction in the records (a word ``acc``: ``test_acc_personal``,
        ``robust_acc_global``, ``worst_class_acc_global``)."""
        return "acc" in self.words

    @property
    def is_loss(self) -> bool:
        """Whether it is a loss that may be drawn on a log axis: a word ``loss`` and none ``log10``
        (``test_log10_loss`` is a logarithm already)."""
        return "loss" in self.words and "log10" not in self.words


@cache
def parse_metric(name: str) -> MetricName:
    """The :class:`MetricName` of ``name`` (any string; an algorithm's own metric has no split)."""
    words = tuple(name.split("_"))
    if len(words) >= 3 and words[0] in EVALUATED_SPLITS and words[1] in STATS:
        return MetricName(name, words, words[0], words[1], "_".join(words[2:]))
    return MetricName(name, words)


CLIENT_METRICS = (("test", "acc"), ("test", "loss"), ("train", "loss"), ("val", "acc"), ("val", "loss"))


def metric_names(models: tuple[str, ...], task: str = "classification") -> list[str]:
    """All metric names an algorithm with these ``models`` writes, e.g. ``test_acc_personal``.

    Regression (squared error) has no accuracy: only ``{split}_loss_{model}``. With validation data the
    same names with split ``val`` come too (:func:`validation_names`).
    """
    stats = STATS if task == "classification" else ("loss",)
    return [f"{split}_{stat}_{model}" for model in models for split in SPLITS for stat in stats]


def validation_names(names: list[str] | tuple[str, ...]) -> list[str]:
    """The ``val_*`` metrics that come with validation data: one per ``test_{loss,acc}_<model>`` name."""
    return [f"val_{n[len('test_') :]}" for n in names if parse_metric(n).split == "test"]


def evaluate_models(
    evaluator: Evaluator, models: dict[str, Params | ClientModels]
) -> tuple[list[tuple[str, float]], list[tuple[int, str, float]]]:
    """Evaluate each model on both splits of every client.

    Args:
        models: name -> params ``[1, ...]`` or ``[N, ...]``, or ``ClientModels`` (``hetfl.engine.adapt``: per-client
            models computed a chunk of clients at a time, each chunk scored on every split, then dropped). Names mapping to the same dict object
            (aliases, e.g. FedAvg's personal = global) are evaluated once. With validation data
            (``Federation.val``) every model is scored on it too (``val_loss_<model>``, ``val_acc_<model>``).

    Returns:
        ``(rows, client_rows)``: ``[(metric, value)]`` pooled over clients, and
        ``[(client, metric, value)]`` per client.
    """
    rows: list[tuple[str, float]] = []
    client_rows: list[tuple[int, str, float]] = []
    done: dict[int, dict] = {}
    splits = evaluator.fed.splits
    for model, params in models.items():
        scores = done.get(id(params))
        if scores is None:
            scores = done[id(params)] = _scores(evaluator, params)
        for split in splits:
            loss, acc = scores[split].weighted()
            rows.append((f"{split}_loss_{model}", loss))
            if scores[split].has_acc:
                rows.append((f"{split}_acc_{model}", acc))
        for split, stat in CLIENT_METRICS:
            if split not in scores or (stat == "acc" and not scores[split].has_acc):
                continue
            values = getattr(scores[split], stat).tolist()
            client_rows += [(i, f"{split}_{stat}_{model}", v) for i, v in enumerate(values)]
    return rows, client_rows


def _scores(evaluator: Evaluator, params: Params | ClientModels) -> dict:
    """Split -> ``SplitScores`` of one model (``Params``, or ``ClientModels`` scored chunk by chunk)."""
    from hetfl.engine.adapt import ClientModels  # noqa: F811 (torch: not imported where only names are)

    if not isinstance(params, ClientModels):
        return {split: evaluator.scores(params, split) for split in evaluator.fed.splits}
    out = {}
    for s, chunk in params:
        for split in evaluator.fed.splits:
            out[split] = evaluator.scores(chunk, split, clients=s, out=out.get(split))
    return out
