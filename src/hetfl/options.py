"""Typed options (an algorithm's hyper-parameters, a problem's parameters), parsed from the config.

Each algorithm or problem declares a frozen dataclass of its options; ``from_dict`` rejects unknown
keys (listing the allowed ones), wrong types, non-finite numbers (NaN, ±inf) and out-of-range values
before any job runs. A number that YAML 1.1 reads as a string (``5e-2``, without a dot) is taken as
the number it spells (:func:`number_from_text`).
"""

from __future__ import annotations

import dataclasses
import math
import re
import typing
from typing import Any, Literal

from hetfl.errors import ConfigError

_FLOAT_TEXT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def number_from_text(value: Any) -> Any:
    """``value`` as a float when it is a string spelling a decimal number, else ``value`` unchanged.

    PyYAML follows YAML 1.1, whose float pattern needs a dot: ``lr: 5e-2`` arrives as the string
    ``"5e-2"``. Only plain decimal literals are converted (``5e-2``, ``1E3``, ``.5``); ``"nan"``,
    ``"inf"`` and anything else stay strings, so they fail the type check with the key named.
    """
    if isinstance(value, str) and _FLOAT_TEXT.fullmatch(value.strip()):
        return float(value)
    return value


def _accepts_float(tp: Any) -> bool:
    """True if the annotation ``tp`` admits a float (``float``, ``float | None``, ...)."""
    if tp is float:
        return True
    return typing.get_origin(tp) in (typing.Union, getattr(__import__("types"), "UnionType", None)) and any(
        _accepts_float(t) for t in typing.get_args(tp)
    )


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
            ConfigError: unknown key (lists the allowed ones), wrong type, a number that is not finite
                (NaN, ±inf: checked for every numeric option, before the range checks of ``check``),
                or a value out of range.
        """
        hints = typing.get_type_hints(cls)
        names = cls.names()
        values = {
            n: number_from_text(v) if n in hints and _accepts_float(hints[n]) else v
            for n, v in values.items()
        }
        for name, value in values.items():
            if name not in names:
                raise ConfigError(f"{key}.{name}", "unknown option", allowed=names)
            if not _type_ok(value, hints[name]):
                raise ConfigError(f"{key}.{name}", f"expected {_describe(hints[name])}, got {value!r}")
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(f"{key}.{name}", f"must be a finite number, got {value!r}")
        coerced = {n: float(v) if hints[n] is float else v for n, v in values.items()}
        hp = cls(**coerced)
        hp.check(key)
        return hp

    def check(self, key: str) -> None:
        """Range checks; raise ``ConfigError(f"{key}.<field>", ...)``."""

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def _positive(self, key: str, *names: str, allow_zero: bool = False) -> None:
        """Each named option (unless None) is > 0 (``allow_zero``: ≥ 0); NaN fails too.

        Raises:
            ConfigError: naming ``{key}.<option>``.
        """
        for name in names:
            value = getattr(self, name)
            if value is not None and not (value >= 0 if allow_zero else value > 0):
                raise ConfigError(f"{key}.{name}", f"must be {'≥' if allow_zero else '>'} 0, got {value}")
