"""Client participation: which clients the server samples each round.

The whole stream is drawn once, up front, from the run seed alone (the idea of FL-bench's
``client_sample_stream``): every algorithm of a study sees the same clients in the same rounds.
Each round draws a full permutation of the N clients and keeps its first S, so runs with different
S share a prefix of their sampled sets.
"""

from __future__ import annotations

import torch
from torch import Tensor

from hetfl.engine.rng import generator


def participation_schedule(num_clients: int, per_round: int, rounds: int, seed: int) -> Tensor:
    """Clients sampled uniformly without replacement in each round.

    Args:
        num_clients: N.
        per_round: S, 1 ≤ S ≤ N.
        rounds: T.
        seed: the run seed (stream ``participation``).

    Returns:
        ``LongTensor[T, S]``; row t (0-based) holds the clients of round t + 1, in increasing order.

    Raises:
        ValueError: if S is not in [1, N].
    """
    if not 1 <= per_round <= num_clients:
        raise ValueError(f"clients_per_round must be in [1, {num_clients}], got {per_round}")
    g = generator(seed, "participation")
    rows = [torch.randperm(num_clients, generator=g)[:per_round].sort().values for _ in range(rounds)]
    return torch.stack(rows) if rows else torch.empty(0, per_round, dtype=torch.long)
