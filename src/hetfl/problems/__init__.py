"""Generated problems: studies with no dataset, partition or model (quadratics, minimax games, ...).

A study declares ``problem: {name: <problem>, <option>: <value>, ...}`` instead of ``dataset``,
``partition`` and ``model``; its runs use algorithms whose ``inputs`` is that problem's name. The
problem is built inside each training job (deterministically from its options and the run seed), so
there is no data or partition stage.

Problems are discovered from the modules of this package: each declares
``PROBLEMS = {"<config name>": <class>}`` (``hetfl.discovery``).
"""

from __future__ import annotations

from functools import cache
from typing import Any

import torch

from hetfl.discovery import discover
from hetfl.errors import ConfigError
from hetfl.problems.base import Problem


@cache
def registry() -> dict[str, type[Problem]]:
    """Config name -> problem class, for every problem of the package."""
    return discover("hetfl.problems", "PROBLEMS")


def get_problem(name: str, key: str = "problem.name") -> type[Problem]:
    """The ``Problem`` subclass registered as ``name``.

    Raises:
        ConfigError: unknown name (lists the registered ones), reported under ``key``.
    """
    problems = registry()
    if name not in problems:
        raise ConfigError(key, f"unknown problem '{name}'", allowed=problems)
    return problems[name]


def normalize_problem_spec(spec: dict[str, Any], key: str) -> dict[str, Any]:
    """Validate a ``problem`` section and fill its defaults: ``{"name": ..., <every option>: value}``.

    Raises:
        ConfigError: unknown problem or option, wrong type or range, naming the key.
    """
    if not isinstance(spec, dict) or "name" not in spec:
        raise ConfigError(f"{key}.name", "a problem needs a name", allowed=registry())
    cls = get_problem(spec["name"], f"{key}.name")
    options = cls.Options.from_dict({k: v for k, v in spec.items() if k != "name"}, key)
    return {"name": spec["name"], **options.as_dict()}


def problem_clients(spec: dict[str, Any]) -> int:
    """N of a normalized problem spec."""
    cls = get_problem(spec["name"])
    return cls.clients(cls.Options.from_dict({k: v for k, v in spec.items() if k != "name"}, "problem"))


def build_problem(spec: dict[str, Any], seed: int, device: torch.device, dtype: torch.dtype) -> Problem:
    """Instantiate the problem of a normalized spec for run ``seed``."""
    cls = get_problem(spec["name"])
    options = cls.Options.from_dict({k: v for k, v in spec.items() if k != "name"}, "problem")
    return cls(options, seed, device, dtype)


def problem_module(name: str) -> str:
    """The module implementing problem ``name``."""
    return get_problem(name).__module__
