"""A training job's memory budget: how many clients' rows one batched model call may take.

The engine stacks every client's state in ``[C, ...]`` tensors and computes all of a round's clients in
one batched call (``BatchedModel.loss_grads``, ``forward``, ``loss_grads_preact``). A call's working
memory (activations, their gradients, the per-client gradients) grows with the rows it takes; with many
clients or a large model it is what breaks first. Under a ``memory_budget`` (MiB; a study key or a run's,
``config/README.md``) the engine splits such calls into row chunks of at most ``rows`` clients
(``hetfl.engine.chunks.ChunkedModel``, the federation's model) and concatenates the results. Every client's
rows are computed by the same kernels either way, so chunking changes no number: the results are byte-identical to the unchunked engine
wherever the batched kernels compute each client's rows independently of the others, which holds on the
CPU for every model in float64 and for the models without convolutions in float32 (``tests/test_memory.py``
runs every algorithm both ways). oneDNN's float32 convolutions choose their blocking from the whole
grouped problem, so a convolutional (or ``torch.func``) model's float32 results change in the last bit with
the rows per call, and training amplifies that (on the default suite's CNN study, final accuracies moved
by up to 1.4 points): such a model (``BatchedModel.rows_exact_in_float32`` False) is never split under
``memory_budget: auto``, and a numeric budget is part of its run's spec (``hetfl.pipeline.config``), so that a
result always says the budget it was computed under.

The rule (:func:`plan_memory`): the budget pays first for what stays resident (the federation's data,
the algorithm's state, a round's stacked local models and updates: ``S`` rows of ``TRANSIENT_COPIES``
model copies), then for the row chunks of one call, each row costing
``row_bytes``: ``ACTIVATION_COPIES`` copies of the model's activations for its ``B`` samples plus
``GRADIENT_COPIES`` copies of its parameters. ``rows`` = what is left / ``row_bytes`` (None: no chunking,
every client in one call). When the resident state alone exceeds the budget the run still goes on, one
row per call, and says so (``fits`` false in ``run.json``; ``python -m hetfl.tools.plan`` says it before).
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
        call_rows: the most rows one of the algorithm's batched calls takes
            (:meth:`MemoryProfile.call_rows`); not recorded.
    """

    budget_bytes: int
    resident_bytes: int
    row_bytes: int
    rows: int | None
    fits: bool
    eval_bytes: int = 0
    eval_fits: bool = True
    call_rows: int = 0

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


def plan_rows(budget: int, resident: int, per_row: int, clients: int) -> tuple[int | None, bool]:
    """``(rows, fits)``: the most rows a call may take within ``budget`` bytes after ``resident`` bytes
    (None: at least ``clients``, the most rows any call takes, :meth:`MemoryProfile.call_rows`: no chunking), at
    least 1; ``fits`` False when not even one row fits."""
    left = budget - resident
    fits = left >= per_row
    rows = max(1, left // max(1, per_row)) if fits else 1
    return (None if rows >= clients else int(rows)), fits


@dataclass(frozen=True)
class MemoryProfile:
    """What an algorithm holds beside the tensors it keeps, declared for the memory plan (:func:`plan_memory`
    measures the kept tensors itself: per-client stacks made by ``fed.states`` count where they are placed).
    The defaults are FedAvg's: a round trains the S sampled clients from one model and drops their local
    models once the server has summed them (``FederatedAlgorithm.memory_profile``; an algorithm returns
    ``dataclasses.replace(super().memory_profile(), ...)`` where it holds more).

    Attributes:
        sequential: the server sums the clients' terms a chunk of clients at a time (``aggregation:
            sequential``, ``hetfl.engine.aggregation``): a trained client's ``TRANSIENT_COPIES`` model copies
            count per row of a call and the round's drawn minibatches stay resident; otherwise the round holds
            ``TRANSIENT_COPIES`` copies per sampled client.
        drawn_steps: the most minibatches one client draws in a round, all drawn before the first chunk trains
            under ``sequential`` (``hetfl.engine.grad.step_chunks``): ``local_steps``; more where a step draws
            several (Per-FedAvg) or a round adds steps (FedAlt's θ-steps after the w-steps).
        started_elements: elements of each sampled client's start drawn before the first chunk trains under
            ``sequential`` (partial personalization's personal part); 0 by default.
        pairs: its batched calls take every ordered pair of clients, N² rows (All-for-one's similarity
            estimation, CoBo's weight update) rather than N: a row limit is set whenever fewer than N² fit.
        adapted_elements: elements of one client's model adapted for each evaluation
            (``hetfl.algorithms.adapting``: adapted, scored and dropped a row chunk at a time, so counted per
            row of a call); only the personal ones where the others are viewed, not copied; None: the
            evaluation scores models the algorithm holds.
        adapted_copies: copies of each adapted row held at once: the model, and its momentum buffers where the
            adaptation steps through a client optimizer with momentum.
    """

    sequential: bool = False
    drawn_steps: int = 1
    started_elements: int = 0
    pairs: bool = False
    adapted_elements: int | None = None
    adapted_copies: int = 1

    def call_rows(self, clients: int) -> int:
        """The most rows one batched call takes among ``clients`` clients: N, or N² (:attr:`pairs`)."""
        return clients * clients if self.pairs else clients

    def transient_bytes(self, element_size: int, parameters: int, sampled: int, batch: int) -> int:
        """Bytes of a round's stacks held beside the kept state, a model of ``parameters`` elements of
        ``element_size`` bytes, ``sampled`` clients a round (S), ``batch`` samples a minibatch: S models of
        ``TRANSIENT_COPIES`` copies; under :attr:`sequential` the round's drawn minibatches (int64 positions
        and a mask byte each) and the clients' starts (:attr:`started_elements`) instead."""
        if not self.sequential:
            return sampled * parameters * TRANSIENT_COPIES * element_size
        return self.drawn_steps * sampled * batch * 9 + sampled * self.started_elements * element_size

    def row_bytes(self, element_size: int, parameters: int) -> int:
        """Bytes held per row of a call besides the call's working set: a trained client's
        ``TRANSIENT_COPIES`` model copies under :attr:`sequential`, and an adapted client's
        :attr:`adapted_copies` copies of :attr:`adapted_elements` during an evaluation that adapts."""
        trained = parameters * TRANSIENT_COPIES * element_size if self.sequential else 0
        adapted = 0 if self.adapted_elements is None else self.adapted_elements * self.adapted_copies
        return trained + adapted * element_size


def plan_memory(fed, algorithm, budget: int, batch: int) -> MemoryPlan:
    """The memory plan of ``algorithm`` on the federation ``fed`` within ``budget`` bytes, ``batch``
    samples per client and call (the run's ``batch_size``).

    The resident bytes are measured (the federation's data, the tensors the algorithm holds and the models
    it scores that it holds: ``eval_models()``, or ``held_models()`` where the evaluation adapts the others,
    which are not computed to plan; on the device: its per-client stacks placed off it, ``fed.states``, do not
    count) plus a round's stacks, estimated from the algorithm's :class:`MemoryProfile`
    (``algorithm.memory_profile()``): ``S · P · TRANSIENT_COPIES`` elements, with ``S`` the clients sampled per
    round (pFedMe's N clients train a chunk of rows at a time, ``hetfl.engine.grad.chunks_through_steps``; so
    do the FedAvg-like algorithms' S under ``aggregation: sequential``, whose local models count per row of a
    call instead); their minibatches and gradients are counted per row of a call (every algorithm on client
    data gathers and differentiates them chunk by chunk: ``hetfl.engine.grad.row_batches``,
    ``drawn_chunks``), and so are the models an evaluation adapts for every client (Per-FedAvg, FedAvg+FT,
    FFGG, FedAlt, FedSim), since it adapts, scores and drops them a row chunk at a time
    (``hetfl.engine.adapt``). An evaluation's working set (:func:`evaluation_bytes`) comes on top of the
    resident bytes, not of a training call's rows.
    """
    model = fed.model
    profile = algorithm.memory_profile()
    size = torch.empty((), dtype=fed.dtype).element_size()
    data = fed.data_bytes()
    on_device = lambda t: t.device == fed.device and not fed.states.is_off(t)  # noqa: E731
    held = algorithm.eval_models() if profile.adapted_elements is None else algorithm.held_models()
    state = tensor_bytes(vars(algorithm), held, keep=on_device)
    parameters = model.num_parameters()
    transient = profile.transient_bytes(size, parameters, algorithm.clients_per_round, batch)
    resident = data + state + transient
    per_row = row_bytes(model, batch, size) + profile.row_bytes(size, parameters)
    call_rows = profile.call_rows(fed.num_clients)
    rows, fits = plan_rows(budget, resident, per_row, call_rows)
    evaluation = evaluation_bytes(fed, size)
    return MemoryPlan(
        budget, resident, per_row, rows, fits, evaluation, resident + evaluation <= budget, call_rows
    )


def evaluation_bytes(fed, element_size: int) -> int:
    """Working bytes of one evaluation call (``hetfl.engine.evaluate.Evaluator``): ``EVAL_COPIES`` copies of
    every activation of a sample (:func:`activation_elements`) for the most samples a call takes
    (``Evaluator.max_call_samples``)."""
    samples = Evaluator(fed).max_call_samples()
    return int(element_size * EVAL_COPIES * samples * activation_elements(fed.model))


def peak_rss_bytes() -> int:
    """The process's peak resident set size so far (``getrusage``; Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
