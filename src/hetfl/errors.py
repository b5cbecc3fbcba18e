"""Errors raised on bad input, with the config key at fault and what is allowed."""

from __future__ import annotations

from collections.abc import Iterable


class ConfigError(ValueError):
    """A configuration value is invalid.

    The message names the dotted config key (e.g. ``studies.pfedme_mnist.runs.pfedme.lam``), what is
    wrong with it and, when the set is finite, the allowed values.

    Args:
        key: dotted path of the offending key in the configuration.
        message: what is wrong.
        allowed: the allowed values, listed sorted in the message.
    """

    def __init__(self, key: str, message: str, allowed: Iterable[object] | None = None):
        self.key = key
        self.message = message
        self.allowed = sorted(map(str, allowed)) if allowed is not None else None
        text = f"config key '{key}': {message}"
        if self.allowed is not None:
            text += f"; allowed: {', '.join(self.allowed)}"
        super().__init__(text)


class DataUnavailableError(RuntimeError):
    """A dataset file is missing and cannot be downloaded (offline, or a checksum mismatch)."""
