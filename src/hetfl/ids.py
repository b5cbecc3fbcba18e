"""Canonical, content-derived identifiers for dataset and partition specs.

Two studies that declare the same dataset (or partition) share its files, because the directory name
is derived from the spec's content: ``name`` when the spec has no options, else
``name-<8 hex digits of the SHA-256 of the canonical JSON>``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace: equal specs give equal strings."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def short_hash(obj: Any, n: int = 8) -> str:
    """First ``n`` hex digits of the SHA-256 of ``canonical_json(obj)``."""
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()[:n]


def spec_id(name: str, options: dict[str, Any]) -> str:
    """Directory name for a spec: ``name`` without options, ``name-<hash>`` with them."""
    return name if not options else f"{name}-{short_hash(options)}"
