"""Checkpoints of a training run: save an algorithm's whole state every few rounds, resume after a kill.

A checkpoint holds everything that changes while a run trains (the algorithm object: its models,
optimizer buffers, random generators, minibatch cursors, recorded arrays) and the bytes of the
metrics files written so far. What does not change (the environment: client data, model functions,
generated problems) is not saved: it is rebuilt by the job and reattached by reference. A resumed
run therefore continues bit for bit: same random streams, same floating-point operations, and its
metrics files end up byte-identical to an uninterrupted run's (tested for every algorithm).

A checkpoint is only used by the run that wrote it: it stores a ``key`` (hash of the resolved run
spec, the seed and the code fingerprint); a checkpoint with another key is ignored and replaced.
Files are written atomically (temporary file, then rename), so a kill while saving leaves the
previous checkpoint intact. The file is a pickle: load only checkpoints this workflow wrote.
"""

from __future__ import annotations

import io
import os
import pickle
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any

import torch

FORMAT = 1  # bump when the layout changes: older checkpoints are then ignored


@dataclass
class Resumed:
    """A loaded checkpoint: ``round`` (rounds done), the metrics files' bytes so far, and the
    wall seconds the run had spent before it was interrupted."""

    round: int
    metrics: bytes
    client_metrics: bytes
    elapsed_s: float


def _shared_objects(root: Any, depth: int = 4) -> dict[int, tuple[str, Any]]:
    """Objects reachable from ``root`` (the environment) by attributes, dict values and list items,
    up to ``depth`` levels: ``id(obj) -> (access path, obj)``. They are referenced, not saved."""
    found: dict[int, tuple[str, Any]] = {}

    def visit(obj: Any, path: str, level: int) -> None:
        if id(obj) in found or obj is None or isinstance(obj, (bool, int, float, str, bytes)):
            return
        found[id(obj)] = (path, obj)
        if level == depth:
            return
        if isinstance(obj, dict):
            items = [(f"[{k!r}]", v) for k, v in obj.items() if isinstance(k, (str, int))]
        elif isinstance(obj, (list, tuple)):
            items = [(f"[{i}]", v) for i, v in enumerate(obj)]
        elif is_dataclass(obj) and not isinstance(obj, type):
            items = [(f".{f.name}", getattr(obj, f.name)) for f in fields(obj)]
        elif hasattr(obj, "__dict__") and not isinstance(obj, (type, torch.Tensor)):
            items = [(f".{k}", v) for k, v in vars(obj).items()]
        else:
            items = []
        for suffix, value in items:
            visit(value, path + suffix, level + 1)

    visit(root, "env", 0)
    return found


class _Pickler(pickle.Pickler):
    def __init__(self, file, shared: dict[int, tuple[str, Any]]):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.shared = shared

    def persistent_id(self, obj):
        entry = self.shared.get(id(obj))
        return None if entry is None else entry[0]


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, objects: dict[str, Any]):
        super().__init__(file)
        self.objects = objects

    def persistent_load(self, pid):
        if pid not in self.objects:
            raise pickle.UnpicklingError(f"checkpoint refers to '{pid}', which the rebuilt environment lacks")
        return self.objects[pid]


def save_checkpoint(
    path: Path | str,
    key: str,
    algorithm: Any,
    round_done: int,
    metrics: bytes,
    client_metrics: bytes,
    elapsed_s: float,
) -> None:
    """Write ``algorithm``'s state after ``round_done`` rounds to ``path``, atomically.

    Args:
        path: the checkpoint file (its folder is created).
        key: identifies the run (``run_key``); a later ``load_checkpoint`` with another key ignores it.
        algorithm: an ``hetfl.algorithms.base.Algorithm``; ``algorithm.env`` is referenced, not saved.
        round_done: rounds completed (and evaluated, when due) at this point.
        metrics, client_metrics: the bytes of ``metrics.csv`` and the per-client file so far.
        elapsed_s: wall seconds the run has spent so far (seconds).

    Raises:
        pickle.PicklingError / TypeError: the algorithm holds an object that cannot be saved (a lambda).
    """
    shared = _shared_objects(algorithm.env)
    state = io.BytesIO()
    _Pickler(state, shared).dump(vars(algorithm))
    record = {
        "format": FORMAT,
        "key": key,
        "round": int(round_done),
        "state": state.getvalue(),
        "metrics": metrics,
        "client_metrics": client_metrics,
        "elapsed_s": float(elapsed_s),
        "torch": torch.__version__,
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        pickle.dump(record, f, protocol=pickle.HIGHEST_PROTOCOL)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_checkpoint(path: Path | str, key: str, algorithm: Any) -> Resumed | None:
    """Restore ``algorithm`` (freshly built for the same run) from ``path``.

    Returns:
        The ``Resumed`` record, or None (the algorithm untouched) when there is no checkpoint, it is
        unreadable or cannot be restored, or it belongs to another run (key, format or torch
        version differ). Never raises for a bad checkpoint file.
    """
    path = Path(path)
    if not path.is_file():
        return None
    try:
        with open(path, "rb") as f:
            record = pickle.load(f)
    except Exception:  # unreadable or truncated: start afresh (it is overwritten at the next save)
        return None
    if (
        not isinstance(record, dict)
        or record.get("format") != FORMAT
        or record.get("key") != key
        or record.get("torch") != torch.__version__
    ):
        return None
    objects = {p: obj for p, obj in _shared_objects(algorithm.env).values()}
    try:
        state = _Unpickler(io.BytesIO(record["state"]), objects).load()
    except Exception:  # e.g. the rebuilt environment lacks an object it refers to: start afresh
        return None
    _restore_in_place(vars(algorithm), state, getattr(algorithm.env, "states", None))
    vars(algorithm).update(state)
    return Resumed(record["round"], record["metrics"], record["client_metrics"], record["elapsed_s"])


def _restore_in_place(current: dict[str, Any], loaded: dict[str, Any], states: Any) -> None:
    """Per-client stacks the fresh algorithm placed off the device (``hetfl.engine.state``: host memory, a
    memory-mapped file) take the checkpoint's values in place, so that a resumed run keeps their placement
    (the loaded copies are in RAM); ``loaded`` is changed to refer to them."""
    if states is None:
        return
    for name, new in loaded.items():
        old = current.get(name)
        if not (isinstance(old, dict) and isinstance(new, dict) and old and old.keys() == new.keys()):
            continue
        pairs = [(old[k], new[k]) for k in old]
        if all(
            isinstance(o, torch.Tensor)
            and isinstance(n, torch.Tensor)
            and states.is_off(o)
            and o.shape == n.shape
            for o, n in pairs
        ):
            for o, n in pairs:
                o.copy_(n)
            loaded[name] = old
