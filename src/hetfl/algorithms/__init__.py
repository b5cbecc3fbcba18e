"""Algorithms by config name.

The registry maps names to modules and imports them lazily, so that each algorithm's code
fingerprint (``hetfl.fingerprint``) covers its own module and what it imports, and editing one
algorithm reruns only the runs that use it.
"""

from __future__ import annotations

import importlib

from hetfl.errors import ConfigError

# config name -> (module, class)
REGISTRY: dict[str, tuple[str, str]] = {
    "fedavg": ("hetfl.algorithms.baselines.fedavg", "FedAvg"),
    "local": ("hetfl.algorithms.baselines.local", "Local"),
    "pfedme": ("hetfl.algorithms.personalized.pfedme", "PFedMe"),
}


def get_algorithm(name: str, key: str = "algorithm"):
    """The ``Algorithm`` subclass registered as ``name``.

    Raises:
        ConfigError: unknown name (lists the registered ones), reported under ``key``.
    """
    if name not in REGISTRY:
        raise ConfigError(key, f"unknown algorithm '{name}'", allowed=REGISTRY)
    module, cls = REGISTRY[name]
    return getattr(importlib.import_module(module), cls)


def algorithm_module(name: str) -> str:
    """The module implementing algorithm ``name``."""
    return REGISTRY[name][0]
