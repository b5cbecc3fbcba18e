"""Typed options (an algorithm's hyper-parameters, a problem's parameters), parsed from the config.

Each algorithm or problem declares a frozen dataclass of its options; ``from_dict`` rejects unknown
keys (listing the allowed ones), wrong types, non-finite numbers (NaN, ±inf) and out-of-range values
before any job runs. A number that YAML 1.1 reads as a string (``5e-2``, without a dot) is taken as
the number it spells (:func:`number_from_text`).

A field's range is declared with the field, as every option of the config declares it: ``lr: float =
option(0.005, lo=0, lo_open=True)`` (:func:`option`; ``hetfl.config_options`` uses the same declaration for
the workflow's settings, datasets, partitions and models). ``check`` is left for what involves several
fields (``lr_min`` below every scheduled step size, an option that needs another).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import math
import re
import typing
from collections.abc import Callable
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


def option(
    default: Any = None,
    *,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    hi_open: bool = False,
    check: Callable[[Any, str], Any] | None = None,
    expected: str | None = None,
) -> Any:
    """A field of an :class:`Options` dataclass with its default and what a valid value is.

    Args:
        default: the value when the option is not given (None: absent from a parsed spec of
            ``hetfl.config_options``); ``hetfl.config_options.REQUIRED``: it must be given.
        lo, hi, lo_open, hi_open: the range of a number (an ``int`` or ``float`` value): ``lo..hi``, ends
            closed unless ``*_open``; None: unbounded. Values of another type (None, a choice's text) are
            not ranged.
        check: ``(value, key) -> value``, a checker of the field's own instead of its type and range
            (``hetfl.config_options.ConfigOptions`` only; raises ``ConfigError(key, ...)``).
        expected: what a valid value is (``"a positive integer"``): every error about the field then reads
            ``expected <expected>, got <value>`` (``hetfl.config_options.ConfigOptions`` only).
    """
    meta = {"lo": lo, "hi": hi, "lo_open": lo_open, "hi_open": hi_open, "check": check, "expected": expected}
    if isinstance(default, list | dict | set):  # a fresh copy for each instance
        return dataclasses.field(default_factory=functools.partial(copy.deepcopy, default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def out_of_range(value: Any, meta: Any) -> str | None:
    """What is wrong with the number ``value`` against the range of a field's metadata ``meta``
    (:func:`option`): ``"must be > 0"``, ``"must lie in [0, 1)"``; None when it lies in the range or is no
    number (None, text, a boolean)."""
    lo, hi = meta.get("lo"), meta.get("hi")
    lo_open, hi_open = meta.get("lo_open", False), meta.get("hi_open", False)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (lo is None and hi is None):
        return None
    below = lo is not None and (value <= lo if lo_open else value < lo)
    above = hi is not None and (value >= hi if hi_open else value > hi)
    if not (below or above):
        return None
    if hi is None:
        return f"must be {'>' if lo_open else '≥'} {lo:g}"
    if lo is None:
        return f"must be {'<' if hi_open else '≤'} {hi:g}"
    return f"must lie in {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"


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
        for field in dataclasses.fields(cls):  # the declared ranges (option(lo=, hi=)), in field order
            value = getattr(hp, field.name)
            problem = out_of_range(value, cls.declared_range(field.name))
            if problem is not None:
                raise ConfigError(f"{key}.{field.name}", f"{problem}, got {value}")
        hp.check(key)
        return hp

    @classmethod
    def declared_range(cls, name: str) -> Any:
        """The metadata of option ``name``'s range: from the nearest class of the MRO that declares one with
        :func:`option`, so that a subclass that only changes an option's default (``lr: float = 0.05``) keeps
        its base's range; empty when none does."""
        for klass in cls.__mro__:
            field = getattr(klass, "__dataclass_fields__", {}).get(name)
            if field is not None and name in inspect.get_annotations(klass):  # declared by klass itself
                if field.metadata.get("lo") is not None or field.metadata.get("hi") is not None:
                    return field.metadata
        return {}

    def check(self, key: str) -> None:
        """Checks across fields (the ranges of single fields are declared with :func:`option`); raise
        ``ConfigError(f"{key}.<field>", ...)``."""

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
