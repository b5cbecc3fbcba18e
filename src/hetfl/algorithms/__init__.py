"""Algorithms by config name, discovered from the modules of this package.

Each algorithm module declares ``ALGORITHMS = {"<config name>": <class>}`` (``hetfl.discovery``):
``baselines/`` (FedAvg, Local), ``personalized/`` (pFedMe, Per-FedAvg, FFGG, FedAlt, FedSim, ...), and
the other families' folders. One name may have one implementation per environment (the class's
``inputs``: ``federation`` for client data, or a problem's name): ``ffgg`` trains neural networks on
client data and solves the quadratic problem of the FFGG paper; a study's environment picks one.
"""

from __future__ import annotations

from functools import cache

from hetfl.discovery import discover
from hetfl.errors import ConfigError

FEDERATION = "federation"


@cache
def registry() -> dict[str, dict[str, type]]:
    """Config name -> {environment -> algorithm class}, for every algorithm of the package."""
    return discover("hetfl.algorithms", "ALGORITHMS", variant=lambda cls: cls.inputs)


def names(environment: str = FEDERATION) -> list[str]:
    """The algorithms that run on ``environment``."""
    return sorted(name for name, impls in registry().items() if environment in impls)


def get_algorithm(name: str, key: str = "algorithm", environment: str | None = None):
    """The ``Algorithm`` subclass registered as ``name`` for ``environment``.

    ``environment`` None: the name's only implementation, or its client-data one when it has several.

    Raises:
        ConfigError: unknown name, or no implementation for this environment (lists those that run
            there), reported under ``key``.
    """
    impls = registry().get(name)
    if environment is None:
        environment = next(iter(impls)) if impls and len(impls) == 1 else FEDERATION
    if impls is None:
        raise ConfigError(key, f"unknown algorithm '{name}'", allowed=names(environment))
    if environment not in impls:
        where = (
            "client data (dataset, partition, model)"
            if environment == FEDERATION
            else f"problem '{environment}'"
        )
        raise ConfigError(key, f"algorithm '{name}' does not run on {where}", allowed=names(environment))
    return impls[environment]


def algorithm_module(name: str, environment: str | None = None) -> str:
    """The module implementing algorithm ``name`` on ``environment``."""
    return get_algorithm(name, environment=environment).__module__
