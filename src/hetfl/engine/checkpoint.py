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
previous checkpoint intact. The file is ``torch.save``'s archive: the algorithm's object graph pickled
without its tensors, and every tensor's storage as a record of its own, written straight from where it lies.
Saving therefore copies no state into memory, and loading maps the file (``torch.load(mmap=True)``): the
per-client stacks a run keeps off the device (``hetfl.engine.state``: a memory-mapped file larger than the
job's memory) go from the checkpoint into their own files page by page, so a job checkpoints and resumes
within the same memory it trains in. The pickled graph is a pickle: load only checkpoints this workflow
wrote.
"""

from __future__ import annotations

import io
import math
import os
import pickle
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any

import torch

from hetfl.config_options import ConfigOptions, option
from hetfl.errors import ConfigError
from hetfl.options import number_from_text

FORMAT = 2  # bump when the layout changes: older checkpoints are then ignored


def _seconds(value: Any, key: str) -> float:
    """A number of seconds >= 0 (its text too), kept as given."""
    value = number_from_text(value)
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise ConfigError(key, "out of range")
    return value


@dataclass(frozen=True)
class CheckpointOptions(ConfigOptions):
    """The top-level ``checkpoint`` settings (:func:`resolve_checkpoint`)."""

    every_rounds: int | None = option(None, lo=1, expected="an integer >= 1 or null")
    every_seconds: float = option(300, check=_seconds, expected="a finite number of seconds >= 0")


CHECKPOINT_DEFAULTS = CheckpointOptions.defaults()
"""The top-level ``checkpoint`` settings of the config (a policy: changing them reruns no job)."""


@dataclass
class Resumed:
    """A loaded checkpoint: ``round`` (rounds done), the metrics files' bytes so far, and the
    wall seconds the run had spent before it was interrupted."""

    round: int
    metrics: bytes
    client_metrics: bytes
    elapsed_s: float


def resolve_checkpoint(value: Any) -> dict[str, Any]:
    """The top-level ``checkpoint`` settings, defaults filled in (``CHECKPOINT_DEFAULTS``).

    ``every_rounds``: save after every this many rounds (null: not by rounds); ``every_seconds``: save
    at the first round end at least this many wall seconds after the last save (0: not by time).
    Changing them never reruns a job (they are not part of a run's spec).

    Raises:
        ConfigError: unknown key or bad value, naming ``checkpoint.<key>``.
    """
    value = {} if value is None else value
    if not isinstance(value, dict):
        raise ConfigError("checkpoint", f"expected a mapping, got {type(value).__name__}")
    return CheckpointOptions.from_dict(value, "checkpoint").as_dict()


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
    """Pickles the environment's objects as references (their access paths) and every other tensor as its
    index in ``tensors`` (saved by ``torch.save`` beside the pickle), one index per tensor object."""

    def __init__(self, file, shared: dict[int, tuple[str, Any]]):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.shared = shared
        self.tensors: list[torch.Tensor] = []
        self._index: dict[int, int] = {}

    def persistent_id(self, obj):
        entry = self.shared.get(id(obj))
        if entry is not None:
            return entry[0]
        if isinstance(obj, torch.Tensor):
            if id(obj) not in self._index:
                self._index[id(obj)] = len(self.tensors)
                self.tensors.append(obj)
            return ("tensor", self._index[id(obj)])
        return None


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, objects: dict[str, Any], tensors: list[torch.Tensor]):
        super().__init__(file)
        self.objects = objects
        self.tensors = tensors

    def persistent_load(self, pid):
        if isinstance(pid, tuple) and len(pid) == 2 and pid[0] == "tensor":
            return self.tensors[pid[1]]
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
        key: identifies the run (``checkpoint_key``); a later ``load_checkpoint`` with another key ignores it.
        algorithm: an ``hetfl.algorithms.base.Algorithm``; ``algorithm.env`` is referenced, not saved.
        round_done: rounds completed (and evaluated, when due) at this point.
        metrics, client_metrics: the bytes of ``metrics.csv`` and the per-client file so far.
        elapsed_s: wall seconds the run has spent so far (seconds).

    Raises:
        pickle.PicklingError / TypeError: the algorithm holds an object that cannot be saved (a lambda).
    """
    state = io.BytesIO()
    pickler = _Pickler(state, _shared_objects(algorithm.env))
    pickler.dump(vars(algorithm))
    record = {
        "format": FORMAT,
        "key": key,
        "round": int(round_done),
        "state": state.getvalue(),  # the object graph without its tensors (small)
        "tensors": pickler.tensors,  # written by torch.save from their storages, no copy
        "metrics": metrics,
        "client_metrics": client_metrics,
        "elapsed_s": float(elapsed_s),
        "torch": torch.__version__,
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        torch.save(record, f)
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
    # the tensors mapped from the file, not read (a checkpoint may exceed the job's memory); a file that is
    # unreadable, truncated or of an older format: start afresh (it is overwritten at the next save)
    try:
        record = torch.load(path, mmap=True, weights_only=False)
    except Exception:
        return None
    if (
        not isinstance(record, dict)
        or record.get("format") != FORMAT
        or record.get("key") != key
        or record.get("torch") != torch.__version__
    ):
        return None
    objects = {p: obj for p, obj in _shared_objects(algorithm.env).values()}
    tensors = record["tensors"]
    try:
        state = _Unpickler(io.BytesIO(record["state"]), objects, tensors).load()
    except Exception:  # e.g. the rebuilt environment lacks an object it refers to: start afresh
        return None
    restored = _restore_in_place(vars(algorithm), state, getattr(algorithm.env, "states", None))
    _into_memory([t for t in tensors if id(t) not in restored])
    vars(algorithm).update(state)
    return Resumed(record["round"], record["metrics"], record["client_metrics"], record["elapsed_s"])


def _into_memory(tensors: list[torch.Tensor]) -> None:
    """Give every CPU tensor loaded from the checkpoint's mapping a storage of its own in memory (in place:
    same tensor objects, layouts and storage sharing), so that the state a run goes on with never depends on
    the checkpoint file (which the next save replaces and the run's end removes)."""
    copies: dict[int, torch.UntypedStorage] = {}
    with torch.no_grad():
        for t in tensors:
            if t.device.type != "cpu":
                continue
            storage = t.untyped_storage()
            if storage.data_ptr() not in copies:
                copies[storage.data_ptr()] = storage.clone()
            t.set_(copies[storage.data_ptr()], t.storage_offset(), t.size(), t.stride())


def _restore_in_place(
    current: dict[str, Any], loaded: dict[str, Any], states: Any, seen: set[int] | None = None
) -> set[int]:
    """Per-client stacks the fresh algorithm placed off the device (``hetfl.engine.state``: host memory, a
    memory-mapped file) take the checkpoint's values in place, so that a resumed run keeps their placement
    (the loaded tensors, mapped from the checkpoint, are copied page by page); ``loaded`` is changed to refer
    to them. Objects of the same class (an optimizer and its buffers) are restored attribute by attribute.
    Returns the ids of the loaded tensors so consumed."""
    consumed: set[int] = set()
    if states is None:
        return consumed
    seen = set() if seen is None else seen  # objects visited (cycles)
    for name, new in loaded.items():
        old = current.get(name)
        if old is new or id(new) in seen:  # the environment's own objects, referenced: nothing to restore
            continue
        if type(old) is type(new) and hasattr(old, "__dict__") and not isinstance(old, (type, torch.Tensor)):
            seen.add(id(new))
            consumed |= _restore_in_place(vars(old), vars(new), states, seen)  # e.g. an optimizer's buffers
            continue
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
                consumed.add(id(n))
            loaded[name] = old
    return consumed
