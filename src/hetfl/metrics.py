"""Metric names and the evaluation of an algorithm's models into tidy rows.

Names are ``{split}_{stat}_{model}``: split ∈ {train, test} (and ``val`` with validation data), stat ∈ {loss, acc}, model ∈ the
algorithm's ``models`` (``global``, ``personal``, ``local``, ...). Values over clients are
sample-weighted (Σ_i correct_i / Σ_i n_i, as pFedMe's official evaluation, docs/papers/pfedme.md §2.7): the
test accuracy of ``personal`` is each client's own model on its own test data, pooled.
Per-client values go to a separate table: ``test_acc``, ``test_loss``, ``train_loss`` of every model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the names are used by the config (no torch needed there)
    from hetfl.engine.adapt import ClientModels
    from hetfl.engine.evaluate import Evaluator
    from hetfl.engine.params import Params

SPLITS = ("train", "test")
STATS = ("loss", "acc")
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
    return [f"val_{n[len('test_') :]}" for n in names if n.startswith(("test_loss_", "test_acc_"))]


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
