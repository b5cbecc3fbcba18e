"""Checkers of the options of datasets and partitions: each takes ``(value, key)`` and returns the value or
raises :class:`~hetfl.errors.ConfigError` naming ``key``. Numbers must be finite (NaN and ±inf are refused);
a number YAML 1.1 reads as a string (``5e-2``) is taken as the number it spells.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from hetfl.errors import ConfigError
from hetfl.options import number_from_text

REQUIRED = object()
"""Default marking an option that must be given."""

MAX_SEED = 2**32 - 1  # numpy's legacy RandomState accepts 0 .. 2**32 - 1


@dataclass(frozen=True)
class Option:
    """One config option: its default (or :data:`REQUIRED`) and a checker ``(value, key) -> value``."""

    default: Any
    check: Callable[[Any, str], Any]


def int_check(lo: int | None = None, hi: int | None = None) -> Callable[[Any, str], int]:
    """Checker for an integer in ``[lo, hi]`` (booleans are rejected)."""

    def check(value: Any, key: str) -> int:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ConfigError(key, f"must be an integer, got {value!r}")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise ConfigError(
                key, f"must be an integer in [{lo}, {'inf' if hi is None else hi}], got {value}"
            )
        return int(value)

    return check


def float_check(
    lo: float | None = None, hi: float | None = None, lo_open: bool = False, hi_open: bool = False
) -> Callable[[Any, str], float]:
    """Checker for a finite real number in the interval ``lo..hi`` (open or closed ends); returns a float.

    A string spelling a decimal number (YAML 1.1 reads ``5e-2`` as a string) is taken as that number.
    """

    def check(value: Any, key: str) -> float:
        value = number_from_text(value)
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
            raise ConfigError(key, f"must be a finite number, got {value!r}")
        value = float(value)
        bad_lo = lo is not None and (value <= lo if lo_open else value < lo)
        bad_hi = hi is not None and (value >= hi if hi_open else value > hi)
        if bad_lo or bad_hi:
            interval = (
                f"{'(' if lo_open else '['}{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}"
            )
            raise ConfigError(key, f"must lie in {interval}{')' if hi_open else ']'}, got {value}")
        return value

    return check


def choice_check(*allowed: str) -> Callable[[Any, str], str]:
    """Checker for one of the given strings."""

    def check(value: Any, key: str) -> str:
        if value not in allowed:
            raise ConfigError(key, f"unknown value {value!r}", allowed=allowed)
        return value

    return check


def bool_check(value: Any, key: str) -> bool:
    """Checker for a boolean (YAML ``true``/``false``)."""
    if not isinstance(value, (bool, np.bool_)):
        raise ConfigError(key, f"must be true or false, got {value!r}", allowed=("false", "true"))
    return bool(value)


def check_options(
    spec: Any, key: str, options: Mapping[str, Option], what: str, fixed: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Check a spec mapping against ``options`` and fill the defaults.

    Args:
        spec: the user's mapping.
        key: dotted config key of the mapping, used in error messages.
        options: allowed option -> :class:`Option`.
        what: the thing being configured, for messages (e.g. ``"dataset 'synthetic'"``).
        fixed: keys already checked by the caller, copied unchanged (e.g. ``name``).

    Returns:
        a new dict with every option of ``options`` (defaults filled; options whose default is
        ``None`` and which are absent stay absent) plus the ``fixed`` keys.

    Raises:
        ConfigError: not a mapping, an unknown option (listing the allowed ones), a missing required
            option, or a bad value.
    """
    if not isinstance(spec, Mapping):
        raise ConfigError(key, f"must be a mapping, got {type(spec).__name__}")
    allowed = (*fixed, *options)
    for k in spec:
        if k not in allowed:
            raise ConfigError(f"{key}.{k}", f"unknown option for {what}", allowed=allowed)
    # the given values first, so that a bad value is named before a missing required option
    given = {k: opt.check(spec[k], f"{key}.{k}") for k, opt in options.items() if spec.get(k) is not None}
    out: dict[str, Any] = {k: spec[k] for k in fixed if k in spec}
    for k, opt in options.items():
        if k in given:
            out[k] = given[k]
        elif opt.default is REQUIRED:
            raise ConfigError(f"{key}.{k}", f"required for {what}")
        elif opt.default is not None:
            out[k] = opt.default
    return out


def path_check(value: Any, key: str) -> str:
    """Checker for a file path: a non-empty string (relative paths are relative to the working
    directory, the repository root for a Snakemake run). Whether the file exists is checked by the
    dataset that reads it."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(key, f"must be a file path (a non-empty string), got {value!r}")
    return value
