"""Typed options (an algorithm's hyper-parameters, a problem's parameters), parsed from the config.

Each algorithm or problem declares a frozen dataclass of its options; ``from_dict`` rejects unknown
keys (listing the allowed ones), wrong types and out-of-range values before any job runs.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Literal

from hetfl.errors import ConfigError


def _type_ok(value: Any, tp: Any) -> bool:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return value in typing.get_args(tp)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return any(_type_ok(value, t) for t in typing.get_args(tp))
    if tp is type(None):
        return value is None
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is str:
        return isinstance(value, str)
    return isinstance(value, tp)


def _describe(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(map(str, typing.get_args(tp)))
    if origin is not None:
        return " or ".join(_describe(t) for t in typing.get_args(tp))
    return "null" if tp is type(None) else tp.__name__


@dataclasses.dataclass(frozen=True)
class Options:
    """Base class. Subclasses add fields with types and defaults, and override ``check``."""

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_dict(cls, values: dict[str, Any], key: str):
        """Parse and validate.

        Args:
            values: config values (unknown keys are errors).
            key: dotted config path of the run, for error messages.

        Raises:
            ConfigError: unknown key (lists the allowed ones), wrong type, or a value out of range.
        """
        hints = typing.get_type_hints(cls)
        names = cls.names()
        for name, value in values.items():
            if name not in names:
                raise ConfigError(
                    f"{key}.{name}", "unknown hyper-parameter for this algorithm", allowed=names
                )
            if not _type_ok(value, hints[name]):
                raise ConfigError(f"{key}.{name}", f"expected {_describe(hints[name])}, got {value!r}")
        coerced = {n: float(v) if hints[n] is float else v for n, v in values.items()}
        hp = cls(**coerced)
        hp.check(key)
        return hp

    def check(self, key: str) -> None:
        """Range checks; raise ``ConfigError(f"{key}.<field>", ...)``."""

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def _positive(self, key: str, *names: str, allow_zero: bool = False) -> None:
        for name in names:
            value = getattr(self, name)
            if value is not None and (value < 0 if allow_zero else value <= 0):
                raise ConfigError(f"{key}.{name}", f"must be {'≥' if allow_zero else '>'} 0, got {value}")
