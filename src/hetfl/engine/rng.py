"""Independent, reproducible random streams derived from one run seed.

One seed per run derives a generator per purpose, so that, e.g., changing an algorithm's use of
minibatches never shifts the client-participation stream. Every stream is a CPU ``torch.Generator``
(device-independent: a run on CUDA sees the same clients, batches and initial weights as on CPU).

| stream | used for |
|---|---|
| ``init`` | initial model parameters (the same for every run of a study with the same model) |
| ``participation`` | the clients sampled each round (shared by every run of a study, see ``participation.py``) |
| ``batches`` | minibatch order of every client |
| ``algorithm`` | randomness inside an algorithm (noise, random personal init, ...) |
| ``eval`` | randomness of evaluation (adaptation batches of personalized models), so that evaluating more or less often never changes training |
| ``local_steps`` | the clients' numbers of local steps when they differ (``hetfl.engine.local_steps``: the same for every run of a study) |
"""

from __future__ import annotations

import numpy as np
import torch

# append only: the indices seed the streams
STREAMS = ("init", "participation", "batches", "algorithm", "eval", "local_steps")


def stream_seed(seed: int, stream: str) -> int:
    """A 63-bit seed for ``stream``, derived from ``seed`` with NumPy's ``SeedSequence`` (independent streams).

    Raises:
        KeyError: unknown stream name.
    """
    index = STREAMS.index(stream) if stream in STREAMS else None
    if index is None:
        raise KeyError(f"unknown random stream '{stream}'; allowed: {', '.join(STREAMS)}")
    state = np.random.SeedSequence(int(seed), spawn_key=(index,)).generate_state(2, dtype=np.uint32)
    return int((int(state[0]) << 31) ^ int(state[1])) & ((1 << 63) - 1)


def generator(seed: int, stream: str) -> torch.Generator:
    """A fresh CPU ``torch.Generator`` for ``stream`` of run ``seed``."""
    return torch.Generator().manual_seed(stream_seed(seed, stream))
