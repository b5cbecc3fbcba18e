"""Base class of the generated problems (``hetfl.problems``)."""

from __future__ import annotations

from abc import ABC
from typing import ClassVar

import torch

from hetfl.options import Options


class Problem(ABC):
    """Base of a generated problem.

    Class attributes:
        name: the config name.
        Options: the dataclass of its options (``hetfl.options.Options``), with defaults.

    Args:
        options: parsed options.
        seed: the run seed (a problem with a fixed ``seed`` option ignores it: the same instance for every seed).
        device, dtype: where and in what precision to build it.

    Attributes:
        num_clients: N.
    """

    name: ClassVar[str]
    Options: ClassVar[type[Options]]
    num_clients: int

    def __init__(self, options: Options, seed: int, device: torch.device, dtype: torch.dtype):
        self.options = options
        self.seed = seed
        self.device = device
        self.dtype = dtype

    @classmethod
    def clients(cls, options: Options) -> int:
        """N for these options, without building the problem (for config validation)."""
        return int(options.num_clients)
