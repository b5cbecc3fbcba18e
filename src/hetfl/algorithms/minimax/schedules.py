"""Client learning-rate schedules of the paper's experiments (docs/papers/fedminimax.md §4.4).

Table 3 (robust training): η^c_y = 0.02, η^c_x = 0.016 for rounds 1-100, ÷10 for rounds 101-200, ÷10
again after round 200 (γ^s_x = γ^s_y = 1). Table 4 (fair classification): the same rates, constant.
"""

from __future__ import annotations

TABLE3_MILESTONES = (100, 200)
"""Rounds after which Table 3 divides the client learning rates by 10."""


def step_lr(base: float, t: int, milestones: tuple[int, ...] | list[int], decay: float) -> float:
    """The learning rate of round ``t`` (1-based): ``base · decay^#{m ∈ milestones : t > m}``.

    With ``milestones = (100, 200)`` and ``decay = 0.1`` this is Table 3 (rounds 1-100: base,
    101-200: base/10, >200: base/100); with no milestones it is constant (Table 4).
    """
    return base * decay ** sum(1 for m in milestones if t > m)
