"""Files a training job writes: tidy ``metrics.csv`` (incrementally) and ``run.json`` (:class:`RunRecord`,
the one type that writes and reads it).

``metrics.csv`` has the header ``round,metric,value``; the per-client file ``round,client,metric,value``.
Rows are flushed after each evaluation, so a killed job leaves a readable prefix. Floats are written
with ``repr`` (shortest round-trip form): the same run on the same device writes the same bytes.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

STATUSES = ("ok", "diverged")
REQUIRED = ("study", "run", "algorithm", "seed", "status")
"""The fields a ``run.json`` must have (:meth:`RunRecord.read`); the others have defaults, for records written
before they existed."""


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


@dataclass(frozen=True)
class RunRecord:
    """A training job's record, ``run.json``: what ran, how it ended, where and how fast (``hetfl.pipeline.train``
    writes it; the aggregate stage, ``hetfl.tools.plan`` and the benchmarks read it).

    Attributes:
        study, run, algorithm, seed: what ran. status: ``ok`` or ``diverged`` (a non-finite loss or model:
            ``hetfl.engine.runner``); diverged_round: the round it was seen in (None when ``ok``);
            rounds_done: rounds trained (None: not recorded).
        wall_time_s: seconds of the training itself (building the federation, training, evaluating; a
            resumed run's earlier time included; None: not recorded); resumed_from_round: the checkpoint's round, or None.
        device: ``cpu`` or ``cuda:<i>``; device_name: the GPU's name, or the CPU's; cuda_peak_memory_bytes:
            ``torch.cuda.max_memory_allocated`` (None on a CPU).
        execution: the path the model's calls took (``batched`` or ``loop``: ``hetfl.engine.execution``; None
            on a generated problem, or in a record written before it existed); tf32: whether float32
            products ran in TensorFloat-32.
        memory: the memory plan and peak RSS (``hetfl.engine.memory.MemoryPlan.record``, ``client_state``,
            ``rss_before_bytes``, ``peak_rss_bytes``). threads: torch's intra-op threads.
        num_clients: N; clients_per_round: S; participation_sha256: the first 16 hex digits of the SHA-256 of
            the participation schedule (the same for the runs of a study with the same seed and S).
        versions: Python, platform and package versions. spec: the resolved run spec it trained.
    """

    study: str
    run: str
    algorithm: str
    seed: int
    status: str
    diverged_round: int | None = None
    rounds_done: int | None = None
    wall_time_s: float | None = None
    resumed_from_round: int | None = None
    device: str = "cpu"
    device_name: str = ""
    cuda_peak_memory_bytes: int | None = None
    execution: str | None = None
    tf32: bool = False
    memory: dict[str, Any] = field(default_factory=dict)
    threads: int = 1
    num_clients: int = 0
    clients_per_round: int = 0
    participation_sha256: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    spec: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"run.json: status {self.status!r} is not one of {', '.join(STATUSES)}")

    def as_dict(self) -> dict[str, Any]:
        """The record as ``run.json`` holds it."""
        return asdict(self)

    def write(self, path: Path | str) -> None:
        """Write ``run.json`` (indented, keys sorted: :func:`write_json`)."""
        write_json(path, self.as_dict())

    @classmethod
    def read(cls, path: Path | str) -> RunRecord:
        """Read a ``run.json``; fields it lacks beyond :data:`REQUIRED` take their defaults, and keys this
        version does not know are ignored.

        Raises:
            ValueError: a field of :data:`REQUIRED` is missing, or the status is not one of :data:`STATUSES`
                (the message names the file).
        """
        data = json.loads(Path(path).read_text())
        missing = [k for k in REQUIRED if k not in data]
        if missing:
            raise ValueError(f"{path}: run.json lacks {', '.join(missing)}")
        known = {f.name for f in fields(cls)}
        try:
            return cls(**{k: v for k, v in data.items() if k in known})
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None

    @property
    def device_type(self) -> str:
        """``cpu`` or ``cuda``: :attr:`device` without its index."""
        return str(self.device or "cpu").split(":", 1)[0]
