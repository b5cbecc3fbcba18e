"""Generated problems: studies with no dataset, partition or model (quadratics, minimax games, ...).

A study declares ``problem: {name: <problem>, <option>: <value>, ...}`` instead of ``dataset``,
``partition`` and ``model``; its runs use algorithms whose ``inputs`` is that problem's name. The
problem is built inside each training job (deterministically from its options and the run seed), so
there is no data or partition stage.

The registry maps names to modules and classes, imported lazily (like the algorithms', so that code
fingerprints stay per module). The family issues register their problems here.
"""

from __future__ import annotations

import importlib
from typing import Any

import torch

from hetfl.errors import ConfigError
from hetfl.problems.base import Problem

# config name -> (module, class)
REGISTRY: dict[str, tuple[str, str]] = {}


def get_problem(name: str, key: str = "problem.name") -> type[Problem]:
    """The ``Problem`` subclass registered as ``name``.

    Raises:
        ConfigError: unknown name (lists the registered ones), reported under ``key``.
    """
    if name not in REGISTRY:
        raise ConfigError(key, f"unknown problem '{name}'", allowed=REGISTRY)
    module, cls = REGISTRY[name]
    return getattr(importlib.import_module(module), cls)


def normalize_problem_spec(spec: dict[str, Any], key: str) -> dict[str, Any]:
    """Validate a ``problem`` section and fill its defaults: ``{"name": ..., <every option>: value}``.

    Raises:
        ConfigError: unknown problem or option, wrong type or range, naming the key.
    """
    if not isinstance(spec, dict) or "name" not in spec:
        raise ConfigError(f"{key}.name", "a problem needs a name", allowed=REGISTRY)
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
    return REGISTRY[name][0]
