"""Files a training job writes: tidy ``metrics.csv`` (incrementally) and ``run.json``.

``metrics.csv`` has the header ``round,metric,value``; the per-client file ``round,client,metric,value``.
Rows are flushed after each evaluation, so a killed job leaves a readable prefix. Floats are written
with ``repr`` (shortest round-trip form): the same run on the same device writes the same bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _fmt(value: float) -> str:
    return repr(float(value))


class MetricsWriter:
    """Appends evaluation rows to ``metrics.csv`` and the per-client file.

    Args:
        path: the pooled metrics file (truncated when opened).
        client_path: the per-client metrics file (truncated when opened).
        resume: the two files' bytes from a checkpoint (``snapshot``), written first in place of the
            headers; None for a fresh run.
    """

    def __init__(self, path: Path | str, client_path: Path | str, resume: tuple[bytes, bytes] | None = None):
        self.paths = (Path(path), Path(client_path))
        self._pooled = open(path, "w", newline="")  # noqa: SIM115 - closed in close()
        self._clients = open(client_path, "w", newline="")  # noqa: SIM115
        if resume is None:
            self._pooled.write("round,metric,value\n")
            self._clients.write("round,client,metric,value\n")
        else:
            self._pooled.write(resume[0].decode())
            self._clients.write(resume[1].decode())
        self._pooled.flush()
        self._clients.flush()

    def snapshot(self) -> tuple[bytes, bytes]:
        """The bytes written so far to the pooled and the per-client file (for a checkpoint)."""
        return self.paths[0].read_bytes(), self.paths[1].read_bytes()

    def write(self, t: int, rows: list[tuple[str, float]], client_rows: list[tuple[int, str, float]]) -> None:
        """Write round ``t``'s rows and flush."""
        self._pooled.write("".join(f"{t},{m},{_fmt(v)}\n" for m, v in rows))
        self._clients.write("".join(f"{t},{c},{m},{_fmt(v)}\n" for c, m, v in client_rows))
        self._pooled.flush()
        self._clients.flush()

    def close(self) -> None:
        self._pooled.close()
        self._clients.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def write_json(path: Path | str, obj: dict[str, Any]) -> None:
    """Write ``obj`` as indented JSON with sorted keys."""
    Path(path).write_text(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")
