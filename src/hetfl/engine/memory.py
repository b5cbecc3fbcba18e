"""A training job's memory budget: how many clients' rows one batched model call may take.

The engine stacks every client's state in ``[C, ...]`` tensors and computes all of a round's clients in
one batched call (``BatchedModel.loss_grads``, ``forward``, ``loss_grads_preact``). A call's working
memory (activations, their gradients, the per-client gradients) grows with the rows it takes; with many
clients or a large model it is what breaks first. Under a ``memory_budget`` (MiB; a study key or a run's,
``config/README.md``) the engine splits such calls into row chunks of at most ``rows`` clients
(:func:`limit_rows`) and concatenates the results. Every client's rows are computed by the same kernels
either way, so chunking changes no number: the results are byte-identical to the unchunked engine
wherever the batched kernels compute each client's rows independently of the others, which holds on the
CPU for every model in float64 and for the models without convolutions in float32 (``tests/test_memory.py``
runs every algorithm both ways). oneDNN's float32 convolutions choose their blocking from the whole
grouped problem, so a convolutional (or ``torch.func``) model's float32 results change in the last bit with
the rows per call, and training amplifies that (on the default suite's CNN study, final accuracies moved
by up to 1.4 points): such a model (``BatchedModel.rows_exact_in_float32`` False) is never split under
``memory_budget: auto``, and a numeric budget is part of its run's spec (``hetfl.config``), so that a
result always says the budget it was computed under.

The rule (:func:`plan_memory`): the budget pays first for what stays resident (the federation's data,
the algorithm's state, a round's stacked local models and updates: ``S`` rows of ``TRANSIENT_COPIES``
model copies), then for the row chunks of one call, each row costing
``row_bytes``: ``ACTIVATION_COPIES`` copies of the model's activations for its ``B`` samples plus
``GRADIENT_COPIES`` copies of its parameters. ``rows`` = what is left / ``row_bytes`` (None: no chunking,
every client in one call). When the resident state alone exceeds the budget the run still goes on, one
row per call, and says so (``fits`` false in ``run.json``; ``python -m hetfl.plan`` says it before).
An evaluation call needs ``EVAL_COPIES`` copies of the activations of the most samples it takes
(:func:`evaluation_bytes`) on top of the resident state; its blocks are never split (they set its
per-client sums: ``hetfl.engine.evaluate.ACTIVATION_BUDGET``), so a budget below that is only reported
(``eval_fits`` false in ``run.json``, and the log says so). The models an evaluation adapts for every client
(Per-FedAvg, FedAvg+FT, FFGG, FedAlt, FedSim) are adapted, scored and dropped a row chunk of clients at a
time (``hetfl.engine.adapt``), so they count per row.
"""

from __future__ import annotations

import math
import os
import resource
from dataclasses import dataclass
from functools import cache
from typing import Any

import torch
from torch import Tensor, nn

from hetfl.engine.evaluate import Evaluator

MIB = 1 << 20
CPU_SHARE = 0.5  # the default budget on the CPU: this share of the machine's RAM
CUDA_SHARE = 0.9  # the default budget on a GPU: this share of its free memory
ACTIVATION_COPIES = 4  # per sample: the layers' outputs kept for backward, their gradients, the functional
# activations (ReLU, pooling) that are no modules, temporaries
GRADIENT_COPIES = 3  # per row of a call: the leaves, their gradients, the stitched output
EVAL_COPIES = 2  # per sample of an evaluation call: its activations and the batched forward's working copies
# (grouped convolutions' reshaped inputs, the losses); a CNN's evaluation measured 1.2x the activations
TRANSIENT_COPIES = 2  # per trained client and round: its local model and its update (or optimizer buffer);
# its minibatch and gradient are a call's, per row (``row_bytes``)


def default_budget_bytes(device: torch.device) -> int:
    """The budget when the run sets none (``memory_budget: auto``): ``CUDA_SHARE`` of the GPU's free memory
    (``torch.cuda.mem_get_info``), or on the CPU ``CPU_SHARE`` of the machine's physical RAM or of the job's
    memory limit, whichever is smaller (a SLURM job's cgroup: :func:`cgroup_limit`)."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free * CUDA_SHARE)
    ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return int(min(ram, cgroup_limit() or ram) * CPU_SHARE)


def cgroup_limit(proc: str = "/proc/self/cgroup", root: str = "/sys/fs/cgroup") -> int | None:
    """The memory limit of this process's cgroup, in bytes, or None: the smallest ``memory.max`` (cgroup v2,
    under ``root`` or ``root/unified``) or ``memory.limit_in_bytes`` (v1, under ``root/memory``) of the
    process's own cgroup (``proc``: a SLURM job's step, e.g. ``/slurm/uid_0/job_12/step_0``) and every cgroup
    above it, then of ``root`` itself (where a container's cgroup is mounted)."""
    places: list[str] = []
    try:
        lines = open(proc).read().splitlines()
    except OSError:
        lines = []
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "":
            tops = [(f"{root}{sub}", "memory.max") for sub in ("", "/unified")]
        elif "memory" in controllers.split(","):
            tops = [(f"{root}/memory", "memory.limit_in_bytes")]
        else:
            continue
        parts = [p for p in path.split("/") if p]
        for top, name in tops:
            places += [os.path.join(top, *parts[:i], name) for i in range(len(parts), 0, -1)]
    places += [f"{root}/memory.max", f"{root}/memory/memory.limit_in_bytes"]
    limits = []
    for place in places:
        try:
            text = open(place).read().strip()
        except OSError:
            continue
        if text.isdigit():
            limits.append(int(text))
    return min(limits) if limits else None


def is_budget(value: Any) -> bool:
    """Whether ``value`` is a valid ``memory_budget``: ``auto`` or a finite number of MiB > 0."""
    if value == "auto":
        return True
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return number and math.isfinite(value) and value > 0


def budget_bytes(value: Any, device: torch.device) -> int:
    """Bytes of a ``memory_budget`` setting: ``auto`` (or None) -> :func:`default_budget_bytes`; a positive
    number of MiB (or its text, from ``--set-resources train:memory_budget=512``) -> that many bytes.

    Raises:
        ValueError: anything else (the config validates ``memory_budget`` before any job runs).
    """
    if value is None or value == "auto":
        return default_budget_bytes(device)
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            pass
    if not is_budget(value):
        raise ValueError(f"memory_budget: expected 'auto' or a positive number of MiB, got {value!r}")
    return int(value * MIB)


def activation_elements(model) -> int:
    """Elements of every activation one sample creates in a forward pass of ``model``: its input, the
    output of each leaf module of ``model.reference_module()`` and, for a convolution, its unfolded input
    (input × kernel area: the im2col buffer of its weight gradient); counted on one zero sample
    (``BatchedModel.probe``)."""
    count = [math.prod(model.sample_shape)]

    def hook(module, inputs, output):
        outputs = output if isinstance(output, tuple | list) else (output,)
        count[0] += sum(o.numel() for o in outputs if isinstance(o, Tensor))
        if isinstance(module, nn.Conv2d):
            count[0] += inputs[0].numel() * math.prod(module.kernel_size)

    model.probe(hook)
    return int(count[0])


def row_bytes(model, batch: int, element_size: int) -> int:
    """Working bytes of one client row in a batched gradient call on ``batch`` samples:
    ``element_size · (ACTIVATION_COPIES · batch · activations + GRADIENT_COPIES · parameters)``."""
    acts = activation_elements(model)
    return int(element_size * (ACTIVATION_COPIES * batch * acts + GRADIENT_COPIES * model.num_parameters()))


def tensor_bytes(*objects: Any, keep=None) -> int:
    """Bytes of the distinct storages of every tensor in ``objects`` (nested dicts, lists, tuples; objects'
    attributes are not followed): views of one storage count once. ``keep``: a test a tensor must pass to
    count (None: all count)."""
    seen: dict[int, int] = {}

    def walk(obj: Any) -> None:
        if isinstance(obj, Tensor):
            if keep is not None and not keep(obj):
                return
            storage = obj.untyped_storage()
            seen[storage.data_ptr()] = storage.nbytes()
        elif isinstance(obj, dict):
            for v in obj.values():
                walk(v)
        elif isinstance(obj, list | tuple):
            for v in obj:
                walk(v)

    for obj in objects:
        walk(obj)
    return sum(seen.values())


@dataclass(frozen=True)
class MemoryPlan:
    """How a run uses its memory budget (recorded in ``run.json`` under ``memory``).

    Attributes:
        budget_bytes: the budget. resident_bytes: data, state and a round's stacks (see the module docstring).
        row_bytes: working bytes of one client row in a call (and of its model, where an evaluation adapts
            every client's). rows: clients per batched call (None: all).
        fits: whether the resident bytes plus one row fit the budget.
        eval_bytes: working bytes of one evaluation call (:func:`evaluation_bytes`); eval_fits: whether the
            resident bytes plus those fit the budget (evaluation's calls are never split: see
            ``hetfl.engine.evaluate.ACTIVATION_BUDGET``).
    """

    budget_bytes: int
    resident_bytes: int
    row_bytes: int
    rows: int | None
    fits: bool
    eval_bytes: int = 0
    eval_fits: bool = True

    def record(self) -> dict[str, Any]:
        """The plan, for ``run.json``."""
        return {
            "budget_bytes": self.budget_bytes,
            "resident_bytes": self.resident_bytes,
            "row_bytes": self.row_bytes,
            "rows_per_call": self.rows,
            "fits": self.fits,
            "eval_bytes": self.eval_bytes,
            "eval_fits": self.eval_fits,
        }


def data_bytes(fed) -> int:
    """Bytes of the federation's client data (every split's samples and targets)."""
    return tensor_bytes([[getattr(fed, s).x, getattr(fed, s).y] for s in fed.splits])


def plan_rows(budget: int, resident: int, per_row: int, clients: int) -> tuple[int | None, bool]:
    """``(rows, fits)``: the most rows a call may take within ``budget`` bytes after ``resident`` bytes
    (None: at least ``clients``, the most rows any call takes, ``algorithm.call_rows``: no chunking), at
    least 1; ``fits`` False when not even one row fits."""
    left = budget - resident
    fits = left >= per_row
    rows = max(1, left // max(1, per_row)) if fits else 1
    return (None if rows >= clients else int(rows)), fits


def plan_memory(fed, algorithm, budget: int, batch: int) -> MemoryPlan:
    """The memory plan of ``algorithm`` on the federation ``fed`` within ``budget`` bytes, ``batch``
    samples per client and call (the run's ``batch_size``).

    The resident bytes are measured (the federation's data, the tensors the algorithm holds and the models
    it scores that it holds, ``held_models``: the models an evaluation adapts are not computed to plan; on the
    device: its per-client stacks placed off it, ``fed.states``, do not count) plus a round's stacks,
    estimated (``algorithm.transient_bytes``): ``S · P · TRANSIENT_COPIES`` elements, with ``S`` the clients
    sampled per round (pFedMe's N clients train a chunk of rows at a time,
    ``hetfl.engine.grad.chunks_through_steps``; so do the FedAvg-like algorithms' S under ``aggregation:
    sequential``, whose local models count per row of a call instead, ``algorithm.trained_row_bytes``); their
    minibatches and gradients are counted per row of a call
    (every algorithm on client data gathers and differentiates them chunk by chunk:
    ``hetfl.engine.grad.row_batches``, ``drawn_chunks``), and so are the models an evaluation adapts for every
    client (Per-FedAvg, FedAvg+FT, FFGG, FedAlt, FedSim: ``algorithm.adapted_row_bytes``, the adapted
    parameters, once or with their momentum buffers), since it adapts, scores and drops them a row chunk at a
    time (``hetfl.engine.adapt``). An evaluation's working set (:func:`evaluation_bytes`) comes on top of the
    resident bytes, not of a training call's rows.
    """
    model = fed.model
    size = torch.empty((), dtype=fed.dtype).element_size()
    data = data_bytes(fed)
    on_device = lambda t: t.device == fed.device and not fed.states.is_off(t)  # noqa: E731
    state = tensor_bytes(vars(algorithm), algorithm.held_models(), keep=on_device)
    parameters = model.num_parameters()
    transient = algorithm.transient_bytes(size, parameters)
    resident = data + state + transient
    per_row = row_bytes(model, batch, size) + algorithm.adapted_row_bytes(size, parameters)
    per_row += algorithm.trained_row_bytes(size, parameters)
    rows, fits = plan_rows(budget, resident, per_row, algorithm.call_rows)
    evaluation = evaluation_bytes(fed, size)
    return MemoryPlan(budget, resident, per_row, rows, fits, evaluation, resident + evaluation <= budget)


def evaluation_bytes(fed, element_size: int) -> int:
    """Working bytes of one evaluation call (``hetfl.engine.evaluate.Evaluator``): ``EVAL_COPIES`` copies of
    every activation of a sample (:func:`activation_elements`) for the most samples a call takes
    (``Evaluator.max_call_samples``)."""
    samples = Evaluator(fed).max_call_samples()
    return int(element_size * EVAL_COPIES * samples * activation_elements(fed.model))


def peak_rss_bytes() -> int:
    """The process's peak resident set size so far (``getrusage``; Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# --- row chunks ----------------------------------------------------------------------------------------


def _rows_of(tensors) -> int:
    return next(iter(tensors.values())).shape[0]


def _rows(tensors: dict[str, Tensor], s: slice) -> dict[str, Tensor]:
    return {k: v[s] for k, v in tensors.items()}


def row_chunks(model, rows: int, group: int = 1) -> list[slice] | None:
    """The row slices of a call on ``rows`` rows under ``model.max_rows`` (None: one call): the fewest
    chunks of at most ``max_rows`` rows, of sizes as equal as they can be (10 rows under 8: 5 and 5).

    With ``group`` > 1 the rows come in groups of ``group`` consecutive rows that a chunk never splits (the
    N pairs (i, 0..N−1) of one model in the collaborative family): chunks of whole groups, at most
    ``max_rows // group`` groups each and never fewer than one group (which may exceed ``max_rows``).

    Raises:
        ValueError: ``group`` below 1 or not dividing ``rows``.
    """
    if group < 1 or rows % group:
        raise ValueError(f"row_chunks: group must be >= 1 and divide the {rows} rows, got {group}")
    limit = getattr(model, "max_rows", None)  # a model never limited (limit_rows) has none
    if limit is None or rows <= limit:
        return None
    groups = rows // group
    count = -(-groups // max(1, limit // group))
    edges = [group * (groups * i // count) for i in range(count + 1)]
    return [slice(a, b) for a, b in zip(edges, edges[1:], strict=False)]


def _stitch(chunks: list[slice], rows: int, call):
    """``call(s)`` for every chunk ``s``, its results (a tuple of tensors ``[len(s), ...]``, dicts of them or
    None) copied into ``[rows, ...]`` outputs as each chunk ends: one chunk's results and the outputs are
    resident at once, never every chunk's."""
    return stitch(((s, call(s)) for s in chunks), rows)


def stitch(parts, rows: int):
    """The chunks' results ``parts`` (an iterable of ``(s, results)``: ``s`` a slice of the ``rows`` rows,
    ``results`` a tuple of tensors ``[len(s), ...]``, dicts of them or None) copied into ``[rows, ...]``
    outputs as each chunk comes, so that one chunk's results and the outputs are resident at once; a single
    chunk of every row is returned as it is (no copy)."""
    out = None
    for s, part in parts:
        if out is None and s.start == 0 and s.stop == rows:
            return part
        if out is None:
            out = tuple(_empty(p, rows) for p in part)
        for o, p in zip(out, part, strict=True):
            if isinstance(p, dict):
                for k, v in p.items():
                    o[k][s] = v
            elif p is not None:
                o[s] = p
        del part
    return out


def _empty(part, rows: int):
    if part is None:
        return None
    if isinstance(part, dict):
        return {k: v.new_empty((rows, *v.shape[1:])) for k, v in part.items()}
    return part.new_empty((rows, *part.shape[1:]))


SPLIT_CALLS = {"forward": 1, "loss_grads": 3, "loss_grads_preact": 3}
"""The batched calls that run in row chunks: name -> how many of the arguments after ``params`` have a row
per client (``[C, ...]`` or None: ``x``; ``x, y, mask``; ``z1, y, mask``); the others pass unchanged."""


def _split(method, per_row: int):
    """``method(self, params, *args)`` run in row chunks of ``params`` and its first ``per_row`` arguments
    (:func:`row_chunks`), the results stitched (:func:`_stitch`)."""

    def split(self, params, *args, **kwargs):
        rows = _rows_of(params)
        chunks = row_chunks(self, rows)
        if chunks is None:
            return method(self, params, *args, **kwargs)
        single = []  # whether the method returns one tensor (forward) rather than a tuple

        def part(s: slice):
            cut = [None if a is None else a[s] for a in args[:per_row]]
            out = method(self, _rows(params, s), *cut, *args[per_row:], **kwargs)
            single[:] = [isinstance(out, Tensor)]
            return (out,) if single[0] else out

        out = _stitch(chunks, rows, part)
        return out[0] if single[0] else out

    return split


@cache
def _chunked_class(cls: type) -> type:
    """``cls`` whose batched calls (``forward``, ``loss_grads``, ``loss_grads_preact`` over ``[C, ...]``
    parameters and ``[C, ...]`` data) run in chunks of at most ``max_rows`` client rows, concatenated; a
    call on one row of parameters (a shared model) is never split. A subclass: ``isinstance`` still holds."""
    methods = {name: _split(getattr(cls, name), per_row) for name, per_row in SPLIT_CALLS.items()}
    return type(cls.__name__, (cls,), {"__doc__": cls.__doc__, "_unchunked": cls, **methods})


def limit_rows(model, rows: int | None):
    """Make ``model`` (a ``BatchedModel``, changed in place: every holder of it sees the change) run its
    batched calls in chunks of at most ``rows`` client rows (None: no limit). Returns ``model``.

    Raises:
        ValueError: ``rows`` below 1.
    """
    if rows is not None and rows < 1:
        raise ValueError(f"rows per call must be >= 1 or None, got {rows}")
    if "_unchunked" not in type(model).__dict__:
        model.__class__ = _chunked_class(type(model))
    model.max_rows = rows
    return model
