"""Batched models: parameters with a leading client dimension, one forward for all clients.

Every model here stores its parameters as ``dict[str, Tensor[C, ...]]`` (C clients; C = 1 for a
shared global model) and computes logits for all clients in one call. Layers are column-major:
a linear layer keeps ``weight: Tensor[C, out, in]`` (``nn.Linear``'s layout) and maps activations
``Tensor[C, in, B]`` to ``Tensor[C, out, B]`` with one ``baddbmm``; measured on this project's 2-core
CPU this is about 2x faster than the row-major ``x @ W^T`` for 784-wide inputs (with torch's MKL there,
``[400, 784] @ [784, 10]`` took 430 µs and the same product as ``[10, 784] @ [784, 400]`` 100-155 µs).

Each model also builds the equivalent plain ``nn.Module`` for one client (``reference_module``), whose
``state_dict`` keys are the parameter names: the sequential reference loops and the tests use it.
"""

from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hetfl.config_options import ConfigOptions, option
from hetfl.engine.params import Params
from hetfl.errors import ConfigError
from hetfl.models.adapters import SPLITS


def uniform_init(
    shape: tuple[int, ...], fan_in: int, generator: torch.Generator, dtype: torch.dtype
) -> Tensor:
    """PyTorch's default ``nn.Linear``/``nn.Conv2d`` initialization, drawn from ``generator``.

    ``kaiming_uniform_(a=sqrt(5))`` for weights and the bias rule both reduce to
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)). ``fan_in = 0`` means zeros (an adapter's ``up`` factor), and
    then nothing is drawn from ``generator``.

    Returns:
        Tensor of ``shape`` on the CPU.
    """
    if fan_in == 0:
        return torch.zeros(shape, dtype=dtype)
    bound = 1.0 / math.sqrt(fan_in)
    return (torch.rand(shape, generator=generator, dtype=torch.float64) * 2.0 - 1.0).mul_(bound).to(dtype)


def positive(default: int) -> Any:
    """A model option that is a positive integer (``hetfl.config_options.option``)."""
    return option(default, lo=1, expected="a positive integer")


def flag(default: bool) -> Any:
    """A model option that is true or false."""
    return option(default, expected="true or false")


def _pair(value: Any, key: str) -> list[int]:
    if not (isinstance(value, list) and len(value) == 2 and all(type(v) is int and v > 0 for v in value)):
        raise ConfigError(key, "out of range")
    return value


def pair(default: list[int]) -> Any:
    """A model option that is two positive integers (``[16, 32]``)."""
    return option(default, check=_pair, expected="two positive integers")


@dataclasses.dataclass(frozen=True)
class ModelOptions(ConfigOptions):
    """The config options every model takes: ``split`` (which parameters are personal,
    ``hetfl.models.adapters.SPLITS``) and ``adapter_rank`` (r of the ``adapter`` split); a model's
    ``Options`` derives from it and adds its own (:func:`positive`, :func:`flag`, :func:`pair`)."""

    split: Literal[SPLITS] = "none"
    adapter_rank: int = positive(4)


def linear_cm(weight: Tensor, bias: Tensor, h: Tensor) -> Tensor:
    """Batched column-major linear layer.

    Args:
        weight: ``Tensor[C, out, in]``.
        bias: ``Tensor[C, out]``.
        h: ``Tensor[C, in, B]`` (any strides; a transposed view is fine).

    Returns:
        ``Tensor[C, out, B]`` = ``weight @ h + bias``.
    """
    return torch.baddbmm(bias.unsqueeze(2), weight, h)


TASKS = ("classification", "regression")


def sample_losses(out: Tensor, y: Tensor, task: str) -> Tensor:
    """Per-sample loss ``[C, B]`` of outputs ``out [C, K, B]``.

    classification: cross-entropy with labels ``y [C, B]`` (long); regression: squared error averaged
    over the K outputs (``nn.MSELoss``) with targets ``y [C, B, K]``.
    """
    if task == "classification":
        return F.cross_entropy(out, y, reduction="none")
    return (out - y.transpose(1, 2)).pow(2).mean(1)


class BatchedModel(ABC):
    """A model evaluated for C clients at once.

    Attributes:
        sample_shape: shape of one input sample, e.g. ``(1, 28, 28)`` or ``(60,)``.
        num_classes: K, the number of outputs (logits, or regression targets).
        task: ``classification`` (cross-entropy) or ``regression`` (squared error); set by ``build_model``.
        split: which parameters are personal (``hetfl.models.adapters.SPLITS``); ``adapter_rank``: r.

    Raises:
        ValueError: unknown split.
    """

    name: str = ""
    Options: ClassVar[type[ConfigOptions]] = ModelOptions  # config options (ModelOptions and its own)
    task: str = "classification"
    rows_exact_in_float32: ClassVar[bool] = True
    """Whether a client's rows come out bit for bit the same however many clients one call takes, in
    float32 on the CPU (in float64 every model's do): False where oneDNN's convolutions choose their
    blocking from the whole grouped problem (``hetfl.engine.memory``)."""

    def __init__(
        self, sample_shape: tuple[int, ...], num_classes: int, split: str = "none", adapter_rank: int = 4
    ):
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; allowed: {', '.join(SPLITS)}")
        self.sample_shape = tuple(sample_shape)
        self.num_classes = int(num_classes)
        self.in_features = int(math.prod(self.sample_shape))
        self.split = split
        self.adapter_rank = int(adapter_rank)

    @abstractmethod
    def layer_shapes(self) -> dict[str, tuple[tuple[int, ...], int]]:
        """Base parameters (no adapters): name -> (shape without the client dimension, fan_in).

        Names are ``<layer>.weight`` / ``<layer>.bias``, layers in order from input to output.
        """

    def layers(self) -> list[str]:
        """Layer names, input to output."""
        return list(dict.fromkeys(name.rsplit(".", 1)[0] for name in self.layer_shapes()))

    def shapes(self) -> dict[str, tuple[tuple[int, ...], int]]:
        """Every parameter: the base ones, then (``split: adapter``) each layer's ``lora_down [r, fan_in]``
        and ``lora_up [out, r]`` (zeros). Adapters come last, so the base initialization does not depend
        on the split."""
        out = dict(self.layer_shapes())
        if self.split == "adapter":
            for layer in self.layers():
                shape, fan_in = out[f"{layer}.weight"]
                flat = int(math.prod(shape[1:]))
                out[f"{layer}.lora_down"] = ((self.adapter_rank, flat), flat)
                out[f"{layer}.lora_up"] = ((shape[0], self.adapter_rank), 0)
        return out

    def personal_keys(self) -> list[str]:
        """The parameters the split makes personal (``hetfl.models.adapters``); the rest are global."""
        layers = self.layers()
        if self.split == "input":
            return [k for k in self.shapes() if k.rsplit(".", 1)[0] == layers[0]]
        if self.split == "output":
            return [k for k in self.shapes() if k.rsplit(".", 1)[0] == layers[-1]]
        if self.split == "adapter":
            return [k for k in self.shapes() if ".lora_" in k]
        return []

    def weight(self, params: Params, layer: str) -> Tensor:
        """The effective weight ``[C, out, ...]`` of ``layer``: ``W`` (+ ``up · down`` with adapters)."""
        w = params[f"{layer}.weight"]
        if self.split != "adapter":
            return w
        delta = torch.matmul(params[f"{layer}.lora_up"], params[f"{layer}.lora_down"])  # [C, out, fan_in]
        return w + delta.view(w.shape)

    def init(
        self,
        generator: torch.Generator,
        dtype: torch.dtype = torch.float32,
        count: int = 1,
        keys: list[str] | None = None,
    ) -> Params:
        """Initial parameters ``dict[str, Tensor[count, ...]]`` (CPU), PyTorch's default init.

        Parameters are drawn in the order of ``shapes()``, all from ``generator``; ``count`` independent
        draws per parameter (e.g. a fresh personal part for each sampled client); only ``keys`` if given.
        """
        return {
            name: uniform_init((count, *shape), fan_in, generator, dtype)
            for name, (shape, fan_in) in self.shapes().items()
            if keys is None or name in keys
        }

    @abstractmethod
    def forward(self, params: Params, x: Tensor) -> Tensor:
        """Logits for every client's batch.

        Args:
            params: ``dict[str, Tensor[C, ...]]``.
            x: ``Tensor[C, B, *sample_shape]``.

        Returns:
            ``Tensor[C, K, B]`` (class-major, the layout ``F.cross_entropy`` takes with targets ``[C, B]``).
        """

    def loss_grads(self, params: Params, x: Tensor, y: Tensor, mask: Tensor | None) -> tuple[Tensor, Params]:
        """Each client's mean loss over its valid samples, and its gradient at its own parameters.

        The clients' losses are independent, so one ``autograd.grad`` of their sum gives every client's own
        gradient, stacked. Models with a hand-written backward (``MLP``) override this.

        Args:
            params: ``[C, ...]`` (not modified); x: ``[C, B, *sample_shape]``; y: ``[C, B]`` labels or
            ``[C, B, K]`` regression targets;
            mask: ``[C, B]`` bool, or None when every entry is valid.

        Returns:
            ``(loss [C] detached, grads dict[str, Tensor[C, ...]])``.
        """
        leaves = {k: v.detach().requires_grad_(True) for k, v in params.items()}
        with torch.enable_grad():
            losses = sample_losses(self.forward(leaves, x), y, self.task)  # [C, B]
            if mask is None:
                loss = losses.mean(1)
            else:
                m = mask.to(losses.dtype)
                loss = (losses * m).sum(1) / m.sum(1)
            grads = torch.autograd.grad(loss.sum(), list(leaves.values()))
        return loss.detach(), dict(zip(leaves, grads, strict=True))

    def linear_input_layer(self) -> str | None:
        """The layer whose weight ``W [C, out, in]`` reaches the logits only through ``W @ x`` (the
        flattened input, column-major ``[C, in, B]``), when the model has one and supports
        :meth:`loss_grads_preact`; else None (the default).

        Lets an algorithm that takes several steps on one minibatch carry ``W @ x`` along instead of
        recomputing it (pFedMe's inner solver, ``hetfl.algorithms.personalized.pfedme``).
        """
        return None

    def loss_grads_preact(
        self, params: Params, z1: Tensor, y: Tensor, mask: Tensor | None, need_loss: bool = True
    ) -> tuple[Tensor | None, Params, Tensor]:
        """Like :meth:`loss_grads`, given ``z1 = W @ x [C, out, B]`` of :meth:`linear_input_layer`.

        Returns:
            ``(loss [C] (None unless need_loss), grads of every parameter but W, delta [C, out, B])``,
            ``delta`` = dL/dz1.

        Raises:
            NotImplementedError: the model has no linear input layer.
        """
        raise NotImplementedError(f"{type(self).__name__} has no linear input layer")

    @abstractmethod
    def reference_module(self) -> nn.Module:
        """The same architecture as a plain single-client ``nn.Module``; ``state_dict`` keys = param names."""

    def probe(self, hook, select=None) -> None:
        """Run :meth:`reference_module` once, without gradients, on one zero sample ``[1, *sample_shape]``
        with ``hook(module, inputs, output)`` registered on each of its modules that ``select(module)``
        accepts (default: the leaf modules): what the memory budget and the cost planner count per sample."""
        reference = self.reference_module()
        select = select or (lambda m: not list(m.children()))
        handles = [m.register_forward_hook(hook) for m in reference.modules() if select(m)]
        try:
            with torch.no_grad():
                reference(torch.zeros(1, *self.sample_shape))
        finally:
            for h in handles:
                h.remove()

    def flat_input(self, x: Tensor) -> Tensor:
        """``Tensor[C, B, *sample_shape]`` -> column-major ``Tensor[C, in_features, B]`` (a view when possible)."""
        return x.reshape(x.shape[0], x.shape[1], self.in_features).transpose(1, 2)

    def sample_cost(self) -> int:
        """Elements of the largest activation per sample (sizes evaluation chunks); default: input size."""
        return self.in_features

    def num_parameters(self, keys: list[str] | None = None) -> int:
        """Number of scalar parameters of one client's model (only those named in ``keys``, when given: e.g.
        ``personal_keys()``)."""
        shapes = self.shapes()
        return sum(math.prod(shapes[k][0]) for k in (shapes if keys is None else keys))
