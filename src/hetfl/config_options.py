"""Typed options of everything a config names besides an algorithm or a problem: the workflow's own
settings (``hetfl.pipeline.settings``), a dataset's options (``DatasetSource.Options``) and a partition
scheme's (``hetfl.data.partitioners``).

Each is a frozen dataclass of :class:`ConfigOptions` (an ``hetfl.options.Options``): a field's type says
what it holds (``int``, ``float``, ``bool``, ``str``, ``list``, ``Literal[...]`` for a choice, ``| None``
for an optional value), and :func:`option` (``hetfl.options.option``, the hyper-parameters' too) adds its range, a checker of its own (a file path, a list of
label lists) or the description its errors give. Parsing refuses an unknown option (listing the allowed
ones), a missing required one (default :data:`REQUIRED`), a wrong type, a number that is not finite (NaN,
±inf) and a value out of range, naming the dotted key (and, for a choice, the allowed values). A number
YAML 1.1 reads as a string (``5e-2``) is taken as the number it spells (``hetfl.options.number_from_text``).

``hetfl.options`` keeps the parser of the hyper-parameters, which every training job imports: its code
is in every training job's fingerprint (``hetfl.fingerprint``), so this module extends it rather than
edits it.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np

from hetfl.errors import ConfigError
from hetfl.options import Options, number_from_text, option


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()
"""Default marking an option that must be given."""


def check_number(
    value: Any,
    key: str,
    kind: type = float,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    hi_open: bool = False,
) -> int | float:
    """``value`` as a number of ``kind`` (``int``: an integer, booleans refused; ``float``: a finite real, or
    the text of one) in the range ``lo..hi``.

    Returns:
        ``int(value)`` or ``float(value)``.

    Raises:
        ConfigError: naming ``key``: not such a number, or out of range (the range in the message).
    """
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ConfigError(key, f"must be an integer, got {value!r}")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise ConfigError(
                key, f"must be an integer in [{lo}, {'inf' if hi is None else hi}], got {value}"
            )
        return int(value)
    value = number_from_text(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ConfigError(key, f"must be a finite number, got {value!r}")
    value = float(value)
    if (lo is not None and (value <= lo if lo_open else value < lo)) or (
        hi is not None and (value >= hi if hi_open else value > hi)
    ):
        interval = f"{'(' if lo_open else '['}{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}"
        raise ConfigError(key, f"must lie in {interval}{')' if hi_open else ']'}, got {value}")
    return value


def _union_args(tp: Any) -> tuple[Any, ...]:
    """The members of a union annotation (``tp`` itself when it is none), Literals flattened to values."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return tuple(a for t in typing.get_args(tp) for a in _union_args(t))
    return (tp,)


def _check_typed(tp: Any, value: Any, key: str, meta: Mapping[str, Any]) -> Any:
    """``value`` checked against the annotation ``tp`` and the field's range (see :func:`option`)."""
    members = _union_args(tp)
    if value is None and type(None) in members:
        return None
    choices = tuple(c for m in members if typing.get_origin(m) is Literal for c in typing.get_args(m))
    kinds = [m for m in members if typing.get_origin(m) is not Literal and m is not type(None)]
    if value in choices and not isinstance(value, bool):
        return value
    if not kinds:
        raise ConfigError(key, f"unknown value {value!r}", allowed=choices)
    kind = kinds[0]
    bounds = {k: meta.get(k) for k in ("lo", "hi")} | {k: meta.get(k, False) for k in ("lo_open", "hi_open")}
    if kind in (int, float):
        return check_number(value, key, kind, **bounds)
    if kind is bool:
        if not isinstance(value, (bool, np.bool_)):
            raise ConfigError(key, f"must be true or false, got {value!r}", allowed=("false", "true"))
        return bool(value)
    if kind is not object and not isinstance(value, kind):
        raise ConfigError(key, f"expected {kind.__name__}, got {value!r}")
    return value


def _dotted(key: str, name: str) -> str:
    """``key.name``, or ``name`` at the top level (``key`` empty)."""
    return f"{key}.{name}" if key else name


@dataclasses.dataclass(frozen=True)
class ConfigOptions(Options):
    """Base class of the typed options of a config's settings, datasets and partition schemes (module
    docstring). Subclasses declare fields (with :func:`option`) and may override ``check`` (checks across
    fields)."""

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Option -> its default (:data:`REQUIRED` for a required one, None for one absent by default)."""
        return {
            f.name: f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
            for f in dataclasses.fields(cls)
        }

    @classmethod
    def check_value(cls, name: str, value: Any, key: str) -> Any:
        """Option ``name``'s ``value``, checked and canonical (``int``/``float``/``bool`` as such).

        Args:
            key: the option's dotted config key, which an error names.

        Raises:
            ConfigError: a wrong type, a number that is not finite, a value out of range or outside the
                choices (with the allowed ones); with the field's ``expected`` text when it has one.
        """
        field = next(f for f in dataclasses.fields(cls) if f.name == name)
        meta = field.metadata
        try:
            if meta.get("check") is not None:
                return meta["check"](value, key)
            return _check_typed(typing.get_type_hints(cls)[name], value, key, meta)
        except ConfigError as err:
            if not meta.get("expected"):
                raise
            raise ConfigError(key, f"expected {meta['expected']}, got {value!r}", err.allowed) from None

    @classmethod
    def from_dict(cls, values: dict[str, Any], key: str):
        """The options ``values`` (unknown names are errors), every other one at its default, checked.

        Args:
            key: the dotted config key they sit under; an error names ``{key}.<name>`` (``<name>`` when
                ``key`` is empty: the top level).

        Raises:
            ConfigError: an unknown option (listing the allowed ones), a missing required one, a bad
                value (:meth:`check_value`) or a failed ``check`` (a field's ``expected`` text replaces
                the message of an error about it).
        """
        names = cls.names()
        for name in values:
            if name not in names:
                raise ConfigError(_dotted(key, name), "unknown option", allowed=names)
        checked = {n: cls.check_value(n, v, _dotted(key, n)) for n, v in values.items()}
        for name, default in cls.defaults().items():
            if name not in checked and default is REQUIRED:
                raise ConfigError(_dotted(key, name), "required")
        out = cls(**checked)
        try:
            out.check(key)
        except ConfigError as err:
            name = err.key[len(key) + 1 :] if key else err.key
            field = next((f for f in dataclasses.fields(cls) if f.name == name), None)
            expected = field.metadata.get("expected") if field is not None else None
            if not expected:
                raise
            value = values.get(name, getattr(out, name))
            raise ConfigError(err.key, f"expected {expected}, got {value!r}", err.allowed) from None
        return out

    @classmethod
    def parse(cls, spec: Any, key: str, what: str, fixed: tuple[str, ...] = ()) -> dict[str, Any]:
        """A spec mapping (a dataset's, a partition's) checked, with its defaults filled.

        Args:
            spec: the user's mapping.
            key: its dotted config key, which errors name (``{key}.<option>``).
            what: the thing configured, for messages (``"dataset 'synthetic'"``).
            fixed: keys the caller checked, copied unchanged and first (``name``, ``scheme``).

        Returns:
            a new dict: the ``fixed`` keys given, then every option in declaration order (the given value,
            checked, else its default); an option absent or null whose default is None stays absent, so
            that adding an optional option changes no existing spec.

        Raises:
            ConfigError: ``spec`` not a mapping; an unknown option (listing the allowed ones, ``fixed``
                included); a bad value (:meth:`check_value`; the given values are checked before a
                missing required option is reported).
        """
        if not isinstance(spec, Mapping):
            raise ConfigError(key, f"must be a mapping, got {type(spec).__name__}")
        defaults = cls.defaults()
        allowed = (*fixed, *defaults)
        for k in spec:
            if k not in allowed:
                raise ConfigError(f"{key}.{k}", f"unknown option for {what}", allowed=allowed)
        given = {k: cls.check_value(k, spec[k], f"{key}.{k}") for k in defaults if spec.get(k) is not None}
        out: dict[str, Any] = {k: spec[k] for k in fixed if k in spec}
        for k, default in defaults.items():
            if k in given:
                out[k] = given[k]
            elif default is REQUIRED:
                raise ConfigError(f"{key}.{k}", f"required for {what}")
            elif default is not None:
                out[k] = default
        return out


__all__ = ["REQUIRED", "ConfigOptions", "check_number", "option"]
