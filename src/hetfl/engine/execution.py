"""How a run computes its clients' forward and backward passes: ``execution: batched | loop | auto``.

- ``batched`` (the engine's own path): one grouped call computes every client's rows at once
  (``hetfl.models.base.BatchedModel``: grouped convolutions, batched matrix products, ``torch.func.vmap``).
  Measured the faster path for small models on a CPU, and for every model tried on a GPU (:data:`LOOP_FLOPS`).
- ``loop``: :class:`LoopModel`, the same calls computed one client at a time through the model's ordinary
  single-client ``nn.Module`` (``BatchedModel.reference_module``, called with the client's parameters by
  ``torch.func.functional_call``): the layers the papers' codes and PFLlib run, with cuDNN's plain
  convolutions and cuBLAS's ``addmm`` on a GPU. Only the model's calls loop;
  the algorithm draws the same minibatches and participation from the same streams and updates its stacked
  ``[C, ...]`` state with the same vector arithmetic, so a run's random numbers are the batched run's.
- ``auto``: :func:`resolve_execution`, by model and device, from ``benchmarks/execution.py``'s measurements
  (docs/speed.md, "Execution paths").

The default is ``batched``: a float32 convolutional run's numbers change in the last bits with the path (and
training amplifies that), so the studies that do not choose keep the results they had before the loop
existed. ``auto`` (or ``loop``) is the faster choice for a convolutional model on a CPU.

The two paths compute each client's numbers with different kernels (a batched model's column-major
``W @ x`` and grouped convolutions against the module's row-major ``x @ Wᵀ`` and plain convolutions; an
``MLP``'s hand-written backward against autograd), so they agree to the rounding of their sums, not to the
byte: in float64 every algorithm on client data ends within 1e-9 (relative) of its batched run
(``tests/test_execution.py``). A setting other than the default is part of its run's spec (``hetfl.pipeline.config``),
and the run record says the path the run took (``run.json``: ``execution``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn
from torch.func import functional_call

from hetfl.models.base import BatchedModel, Params, sample_losses

EXECUTIONS = ("auto", "batched", "loop")
PRECISIONS = ("float32", "tf32")
"""A run's ``precision``: float32 products in float32, or in TensorFloat-32 on a GPU (``hetfl.pipeline.train.pick_device``)."""
PATHS = ("batched", "loop")
LOOP_FLOPS: dict[str, int | None] = {"cpu": 1_000_000, "cuda": None}
"""``auto``'s rule: on a device, a model of at least this many forward FLOPs per sample (multiply-adds count
2: :func:`forward_flops`) runs ``loop``, a smaller one ``batched``; None: ``batched`` always. Measured by
``benchmarks/execution.py`` (batch 32, FedAvg, every client trained; docs/speed.md, "Execution paths"):

- on this project's 2-core CPU, one thread: the loop took 0.30-0.56× the batched path's client steps per second
  for MLR and the DNN (16 k and 160 k FLOPs a sample; 0.98× for the DNN at 100 clients) and 1.2-2.5× for
  the CNN (2.2 MFLOPs), VGG-11 (0.31 GFLOPs) and ResNet-18 (1.1 GFLOPs) at 15 and 100 clients;
- on an NVIDIA H200 the batched path was faster for all three at 15 and 100 clients, TF32 off and on: the
  loop 0.04-0.11× for the CNN, 0.24-0.63× for VGG-11, 0.29-0.87× for ResNet-18 (a client's forward and
  backward at batch 32 is too small to fill the GPU: its time is the kernels' launches, which the batched
  path pays once for every client)."""


def forward_flops(model: BatchedModel) -> int:
    """Forward FLOPs of one sample through ``model``'s single-client module (multiply-adds count 2): the
    ``Linear`` and ``Conv2d`` layers and any layer with a ``forward_flops(input, output)`` method
    (``char_lstm``'s LSTM layers), counted on one zero sample (``BatchedModel.probe``)."""
    flops = [0]

    def count(module, inputs, output):
        if isinstance(module, nn.Linear):
            flops[0] += 2 * module.in_features * module.out_features
        elif isinstance(module, nn.Conv2d):
            kh, kw = module.kernel_size
            per_output = 2 * (module.in_channels // module.groups) * kh * kw
            flops[0] += per_output * output[0].numel()  # output [1, C_out, H, W] -> C_out·H·W values
        elif hasattr(module, "forward_flops"):
            flops[0] += int(module.forward_flops(inputs[0], output))

    model.probe(count, lambda m: isinstance(m, nn.Linear | nn.Conv2d) or hasattr(m, "forward_flops"))
    return int(flops[0])


def resolve_execution(setting: str, model: BatchedModel, device: torch.device) -> str:
    """The path a run takes: ``batched`` or ``loop`` as set, or for ``auto`` ``loop`` for a model of at least
    :data:`LOOP_FLOPS` of ``device``'s type forward FLOPs per sample, else ``batched``.

    Raises:
        ValueError: ``setting`` not in :data:`EXECUTIONS` (the config refuses it before any job runs).
    """
    if setting not in EXECUTIONS:
        raise ValueError(f"execution: unknown value {setting!r}; allowed: {', '.join(EXECUTIONS)}")
    return execution_path(setting, forward_flops(model) if setting == "auto" else 0, device.type)


def execution_path(setting: str, flops: int, device_type: str) -> str:
    """:func:`resolve_execution` given the model's forward FLOPs per sample and the device's type (``cpu``,
    ``cuda``): what ``hetfl.tools.plan`` asks of a planned job."""
    if setting != "auto":
        return setting
    threshold = LOOP_FLOPS.get(device_type)
    return "loop" if threshold is not None and flops >= threshold else "batched"


class LoopModel:
    """A ``BatchedModel``'s calls computed one client at a time through its ordinary ``nn.Module``.

    Takes and returns what the batched model does (``[C, ...]`` parameters, ``[C, B, ...]`` inputs,
    ``[C, K, B]`` outputs, ``(loss [C], grads [C, ...])``); every other attribute (shapes, ``init``,
    ``personal_keys``, ``task``, ``probe``, ...) is the batched model's. A parameter stack or an input of one
    row serves every client (a shared server row, a stride-0 view). ``linear_input_layer`` is None: pFedMe's
    carried ``W @ x`` is a batched-path saving (``hetfl.algorithms.personalized.pfedme``).

    Args:
        model: the batched model (``batched``; its ``reference_module`` is built once per device and dtype).
    """

    rows_exact_in_float32 = True  # one client per call: rows never share a kernel call

    def __init__(self, model: BatchedModel):
        self.batched = model
        self._modules: dict[tuple[torch.device, torch.dtype], nn.Module] = {}

    def __getattr__(self, name: str) -> Any:
        if name == "batched":  # not set yet (unpickling, copy): no recursion
            raise AttributeError(name)
        return getattr(self.batched, name)

    def module(self, like: Tensor) -> nn.Module:
        """The single-client module on the device and in the dtype of ``like`` (its own parameters are never
        used: every call passes the client's)."""
        slot = (like.device, like.dtype)
        if slot not in self._modules:
            self._modules[slot] = self.batched.reference_module().to(like.device, like.dtype).train()
        return self._modules[slot]

    @staticmethod
    def _rows(params: Params, *tensors: Tensor | None) -> int:
        return max([next(iter(params.values())).shape[0], *(t.shape[0] for t in tensors if t is not None)])

    @staticmethod
    def _client(params: Params, c: int) -> Params:
        return {k: v[c if v.shape[0] > 1 else 0] for k, v in params.items()}

    @staticmethod
    def _row(t: Tensor, c: int) -> Tensor:
        return t[c if t.shape[0] > 1 else 0]

    def forward(self, params: Params, x: Tensor) -> Tensor:
        """Outputs ``[C, K, B]`` of ``params [C, ...]`` on ``x [C, B, *sample_shape]``, differentiable in both
        (as ``BatchedModel.forward``)."""
        module = self.module(x)
        rows = self._rows(params, x)
        outs = [
            functional_call(module, self._client(params, c), (self._row(x, c),)) for c in range(rows)
        ]  # each [B, K]
        return torch.stack(outs).transpose(1, 2)

    def loss_grads(self, params: Params, x: Tensor, y: Tensor, mask: Tensor | None) -> tuple[Tensor, Params]:
        """Each client's mean loss over its valid samples and its gradient at its own parameters, one client's
        forward and backward at a time (``BatchedModel.loss_grads``'s contract).

        Returns:
            ``(loss [C] detached, grads dict[str, Tensor[C, ...]])``.
        """
        module = self.module(x)
        rows = self._rows(params, x)
        loss = x.new_empty(rows)
        grads = {k: v.new_empty((rows, *v.shape[1:])) for k, v in params.items()}
        for c in range(rows):
            leaves = {k: v.detach().requires_grad_(True) for k, v in self._client(params, c).items()}
            with torch.enable_grad():
                out = functional_call(module, leaves, (self._row(x, c),))  # [B, K]
                losses = sample_losses(out.T[None], self._row(y, c)[None], self.batched.task)[0]  # [B]
                if mask is None:
                    value = losses.mean()
                else:
                    m = self._row(mask, c).to(losses.dtype)
                    value = (losses * m).sum() / m.sum()
                g = torch.autograd.grad(value, list(leaves.values()))
            loss[c] = value.detach()
            for k, gk in zip(leaves, g, strict=True):
                grads[k][c] = gk
        return loss, grads

    def linear_input_layer(self) -> None:
        """None: the loop has no carried ``W @ x`` (class docstring)."""
        return None


def with_execution(model: BatchedModel, path: str) -> BatchedModel | LoopModel:
    """``model`` for the resolved ``path``: itself (``batched``) or a :class:`LoopModel` around it (``loop``).

    Raises:
        ValueError: ``path`` not in :data:`PATHS` (resolve ``auto`` first: :func:`resolve_execution`).
    """
    if path not in PATHS:
        raise ValueError(f"execution path must be one of {', '.join(PATHS)}, got {path!r}")
    return LoopModel(model) if path == "loop" else model
