"""The error of a model that cannot be built as configured, apart from the models so that a hand-written model
raising it does not take the generic path's code into its runs' fingerprint (``hetfl.fingerprint``)."""

from __future__ import annotations


class ModelOptionError(ValueError):
    """A model cannot be built as configured.

    Attributes:
        option: the model's config option at fault (``module``, ``kwargs``, ``split``, ``init``, ``logits``,
            ...): the config check reports ``ConfigError`` at ``<model key>.<option>``.
    """

    def __init__(self, option: str, message: str):
        super().__init__(message)
        self.option = option


__all__ = ["ModelOptionError"]
