"""The round loop: participation, rounds, evaluation, divergence.

Round 0 is the initial model; after round t (1-based) the models are evaluated when
t % eval_every == 0 and at the last round. A run whose parameters or losses become NaN/inf stops
at that round and is reported ``diverged`` (its last evaluation, with the non-finite values, is
still emitted), so one exploding run never takes down a workflow.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from torch import Tensor

OnEval = Callable[[int, list[tuple[str, float]], list[tuple[int, str, float]]], None]


@dataclass
class RunOutcome:
    """``status``: ``ok`` or ``diverged``; ``diverged_round``: the round it was detected (or None)."""

    status: str
    diverged_round: int | None
    rounds_done: int


def run_rounds(
    algorithm,
    schedule: Tensor,
    eval_every: int,
    on_eval: OnEval,
    on_round: Callable[[int], None] | None = None,
    start_round: int = 0,
) -> RunOutcome:
    """Drive ``algorithm`` through ``len(schedule)`` rounds.

    Args:
        algorithm: an ``hetfl.algorithms.base.Algorithm``.
        schedule: ``LongTensor[T, S]``, the sampled clients of each round (``participation_schedule``).
        eval_every: evaluate every this many rounds (and at round 0 and the last round).
        on_eval: called with ``(round, rows, client_rows)`` at each evaluation.
        on_round: called after every round with its number (progress bars, checkpoints).
        start_round: rounds already done (resuming); round 0 is evaluated only when it is 0.

    Returns:
        The ``RunOutcome``.
    """
    rounds = len(schedule)

    def evaluate(t: int) -> bool:
        rows, client_rows = algorithm.evaluate()
        on_eval(t, rows, client_rows)
        return all(math.isfinite(v) for metric, v in rows if "loss" in metric)

    if start_round == 0 and not evaluate(0):
        return RunOutcome("diverged", 0, 0)
    for t in range(start_round + 1, rounds + 1):
        algorithm.round(t, schedule[t - 1])
        finite = algorithm.finite()
        if not finite or t % eval_every == 0 or t == rounds:
            if not evaluate(t) or not finite:
                return RunOutcome("diverged", t, t)
        if on_round is not None:
            on_round(t)
    return RunOutcome("ok", None, rounds)
