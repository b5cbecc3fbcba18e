"""What the options of datasets and partitions share besides their typed options
(``hetfl.config_options``): the range of a seed and the checker of a file path."""

from __future__ import annotations

from typing import Any

from hetfl.config_options import check_number
from hetfl.errors import ConfigError

MAX_SEED = 2**32 - 1  # numpy's legacy RandomState accepts 0 .. 2**32 - 1


def check_seed(value: Any, key: str) -> int:
    """``value`` as a seed, an integer in ``[0, MAX_SEED]``.

    Raises:
        ConfigError: naming ``key``: not an integer, or out of range.
    """
    return check_number(value, key, int, lo=0, hi=MAX_SEED)


def path_check(value: Any, key: str) -> str:
    """Checker for a file path: a non-empty string (relative paths are relative to the working
    directory, the repository root for a Snakemake run). Whether the file exists is checked by the
    dataset that reads it.

    Raises:
        ConfigError: naming ``key``.
    """
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(key, f"must be a file path (a non-empty string), got {value!r}")
    return value
