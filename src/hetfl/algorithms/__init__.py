"""Algorithms by config name, discovered from the modules of this package.

Each algorithm module declares ``ALGORITHMS = {"<config name>": <class>}`` (``hetfl.discovery``):
``baselines/`` (FedAvg, Local), ``personalized/`` (pFedMe, ...), and the other families' folders.
"""

from __future__ import annotations

from hetfl.discovery import discover
from hetfl.errors import ConfigError


def registry() -> dict[str, type]:
    """Config name -> algorithm class, for every algorithm of the package."""
    return discover("hetfl.algorithms", "ALGORITHMS")


def get_algorithm(name: str, key: str = "algorithm"):
    """The ``Algorithm`` subclass registered as ``name``.

    Raises:
        ConfigError: unknown name (lists the registered ones), reported under ``key``.
    """
    algorithms = registry()
    if name not in algorithms:
        raise ConfigError(key, f"unknown algorithm '{name}'", allowed=algorithms)
    return algorithms[name]


def algorithm_module(name: str) -> str:
    """The module implementing algorithm ``name``."""
    return get_algorithm(name).__module__
