"""Logging helpers for the workflow's stage scripts."""

from __future__ import annotations

import sys
from typing import IO


def redirect(log_path: str) -> IO[str]:
    """Open ``log_path`` (line-buffered) and make it this process's stdout and stderr; return the stream."""
    stream = open(log_path, "w", buffering=1)  # noqa: SIM115 - lives as long as the process
    sys.stdout = sys.stderr = stream
    return stream
