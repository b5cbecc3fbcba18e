"""Any ``torch.nn.Module`` as a batched model, through ``torch.func``: no hand-written batched code.

A :class:`ModuleModel` holds one single-client module as a template (built on the ``meta`` device: shapes
only, no memory, no initialization; on the CPU for a module that cannot be built or run there) and
evaluates all C clients at once, on whatever device their parameters are (CUDA when the run picks it;
the module's buffers, as constants, are copied there)::

    vmap(lambda p, x: functional_call(module, p, (x,)))(params, x)      # params [C, ...], x [C, B, ...]

torch.func turns each layer into its batched form (a linear layer into a batched product, a convolution
into a grouped one), the same arithmetic as the hand-written models (``mlp.py``, ``cnn.py``; equal to 1e-6
in float32, ``tests/test_generic_models.py``). Gradients: one reverse-mode pass through that vmapped
forward (each client's loss depends only on its own rows), or ``vmap(grad_and_value(loss))`` per client
(``ModuleModel.per_client_grad``); the same numbers, the first mostly faster here. The forward stays
differentiable by plain autograd (algorithms that differentiate in the inputs, e.g. minimax robust training).

Two ways in:

- ``model: {name: torch, module: "mypackage.models:Net", kwargs: {...}}`` (:class:`TorchModel`): any
  importable ``nn.Module`` class or factory. It is called with ``kwargs``, plus ``num_classes`` and
  ``sample_shape`` (a tuple, e.g. ``(3, 32, 32)``) when its signature names them and ``kwargs`` does not.
- a registered name (``resnet18``, ``char_lstm``): a subclass that implements :meth:`ModuleModel.build_module`
  and is declared with ``MODELS = [cls]`` like every model.

What a module must be, checked when the model is built (at config time, before any job; a violation is a
:class:`ModelOptionError` that the config check reports as ``ConfigError`` naming the option):

- its forward maps ``x [B, *sample_shape]`` to outputs ``[B, K]`` (K = the dataset's classes or targets);
- it holds its state in parameters (and constant buffers): **no BatchNorm** (running statistics would be
  per-client state the engine does not carry, and batch statistics would depend on padding and on how
  evaluation is chunked): use ``nn.GroupNorm`` (``resnet18`` does) or ``nn.LayerNorm``; no
  ``InstanceNorm`` that tracks running statistics;
- **no train-time randomness**: ``Dropout`` with ``p > 0`` is refused, and any random operation in the
  forward pass (``F.dropout``, ``torch.rand``, ...) is refused by ``vmap`` when the forward is checked. A
  seeded per-client, per-step dropout would need the step and client ids in the model interface;
- no ``nn.LSTM``/``nn.GRU``/``nn.RNN`` (torch.func has no batching rule for their fused kernels): write
  the recurrence with tensor operations (``hetfl.models.char_lstm``); no lazy modules.

The module runs in training mode (there is no train/eval difference left among the allowed layers).

Initialization (option ``init``):

- ``module`` (default): the module's own initialization. For each of the ``count`` copies one 63-bit seed
  is drawn from the given ``torch.Generator``, and the module is built on the CPU under
  ``torch.random.fork_rng`` seeded with it, so the global RNG is untouched and the result depends only on
  the generator;
- ``uniform``: hetfl's rule for the hand-written models (``hetfl.models.base.uniform_init``): every
  parameter from U(±1/√fan_in) in ``named_parameters()`` order, fan_in = the product of a weight's
  dimensions after the first, and for a 1-d parameter (a bias) the fan_in of the weight beside it. A
  module whose layers are those of a hand-written model then starts from the same numbers. A parameter
  without such a fan-in (a norm's scale) is refused.

Splits: ``none``, ``input`` (the parameters of the first submodule that has any, in ``named_parameters()``
order, are personal), ``output`` (the last one's). ``adapter`` (LoRA) is refused: a generic module's layers
are not known to be linear maps that take a low-rank correction; a subclass whose module builds adapters of
its own takes it (``ModuleModel.module_adapters``: ``resnet18``'s residual adapters).
"""

from __future__ import annotations

import importlib
import inspect
import math
import sys
from abc import abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call, grad_and_value, vmap
from torch.overrides import TorchFunctionMode

from hetfl.errors import ConfigError
from hetfl.models.base import BatchedModel, Params, uniform_init
from hetfl.models.errors import ModelOptionError

INIT_RULES = ("module", "uniform")
_CHECKED: dict[tuple, int] = {}  # models whose module passed the checks -> largest activation per sample


_RANDOM_FILLS = frozenset(
    {
        torch.Tensor.normal_,
        torch.Tensor.uniform_,
        torch.Tensor.bernoulli_,
        torch.Tensor.exponential_,
        torch.Tensor.geometric_,
        torch.Tensor.log_normal_,
        torch.Tensor.cauchy_,
        torch.Tensor.random_,
    }
)


class _NoRandomFillsOnMeta(TorchFunctionMode):
    """Skips in-place random fills of ``meta`` tensors (a module's initialization, which has no values there).

    On ``meta``, ``normal_`` and ``uniform_`` run through Python decompositions whose first use imports
    ``torch._dynamo`` (2-3 s on this project's CPU, at every config check); skipping them builds ResNet-18 on
    ``meta`` in 0.02 s. Other tensors and operations are untouched.
    """

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in _RANDOM_FILLS and args and isinstance(args[0], Tensor) and args[0].is_meta:
            return args[0]
        return func(*args, **(kwargs or {}))


class _NotOnMeta(Exception):
    """The module's forward fails on the ``meta`` device: check it on the CPU."""


def fan_in_rule(shapes: dict[str, tuple[int, ...]]) -> dict[str, int | None]:
    """The fan-in of each parameter under the ``uniform`` rule (module docstring), None where it has none.

    Args:
        shapes: parameter name -> shape, in ``named_parameters()`` order.
    """
    out: dict[str, int | None] = {}
    for name, shape in shapes.items():
        if len(shape) >= 2:
            out[name] = int(math.prod(shape[1:]))
            continue
        sibling = shapes.get(f"{name.rsplit('.', 1)[0]}.weight" if "." in name else "weight")
        out[name] = int(math.prod(sibling[1:])) if sibling is not None and len(sibling) >= 2 else None
    return out


def _refusal(module: nn.Module) -> tuple[str, str] | None:
    """``(submodule name, reason)`` of the first layer the batched engine cannot run, or None."""
    for name, sub in module.named_modules():
        where = name or "the module itself"
        kind = type(sub).__name__
        if isinstance(sub, nn.modules.batchnorm._BatchNorm):
            return where, (
                f"is {kind}: batch normalization keeps running statistics, per-client state the batched "
                "engine does not carry, and its batch statistics would depend on padded batches and on how "
                "evaluation is chunked; use nn.GroupNorm instead (e.g. nn.GroupNorm(2, channels), as the "
                "resnet18 model does) or nn.LayerNorm"
            )
        if isinstance(sub, nn.modules.instancenorm._InstanceNorm) and sub.track_running_stats:
            return where, f"is {kind} with track_running_stats=True (running statistics): use nn.GroupNorm"
        if isinstance(sub, nn.modules.dropout._DropoutNd) and sub.p > 0:
            return where, (
                f"is {kind}(p={sub.p}): train-time randomness is not supported on the batched engine "
                "(the model interface has no per-client, per-step seed); remove it or set p=0"
            )
        if isinstance(sub, nn.RNNBase):
            return where, (
                f"is nn.{kind}: torch.func cannot batch its fused kernel over clients; write the recurrence "
                "with tensor operations (see hetfl.models.char_lstm)"
            )
        if isinstance(sub, nn.modules.lazy.LazyModuleMixin):
            return where, f"is the lazy module {kind}: give its sizes explicitly"
    return None


class ModuleModel(BatchedModel):
    """A batched model computed from a plain single-client ``nn.Module`` by ``torch.func``.

    Subclasses implement :meth:`build_module`. Parameters are the module's ``named_parameters()``
    (names and order), each stacked over clients: ``dict[str, Tensor[C, *shape]]``.

    Args:
        init: ``module`` or ``uniform`` (module docstring).
        split: ``none``, ``input`` or ``output`` (``adapter`` where the subclass builds its own adapters,
            :attr:`module_adapters`).

    Raises:
        ModelOptionError: ``adapter`` split of a module without adapters, an unknown ``init``, ``init: uniform`` on a parameter without
            a fan-in, a module the engine cannot run (BatchNorm, dropout, nn.LSTM, ...), a forward that
            fails or does not map ``[B, *sample_shape]`` to ``[B, K]``.
    """

    config_options: ClassVar[dict[str, Any]] = {"init": "module"}
    """Options besides ``options`` that :meth:`normalize_config_options` checks (strings, mappings)."""
    module_adapters: ClassVar[bool] = False
    """True where :meth:`build_module` adds the ``adapter`` split's adapters itself (it reads
    ``self.split``) and :meth:`personal_keys` names them; otherwise ``split: adapter`` is refused."""
    rows_exact_in_float32: ClassVar[bool] = False  # any module: vmap batches its convolutions (oneDNN)
    per_client_grad: bool = False
    """How :meth:`loss_grads` differentiates: False, autograd through the vmapped forward; True,
    ``vmap(grad_and_value)``."""

    def __init__(
        self,
        sample_shape: tuple[int, ...],
        num_classes: int,
        init: str = "module",
        split: str = "none",
        adapter_rank: int = 4,
    ):
        super().__init__(sample_shape, num_classes, split=split, adapter_rank=adapter_rank)
        if split == "adapter" and not self.module_adapters:
            raise ModelOptionError(
                "split",
                f"model {self.describe()}: split 'adapter' (LoRA) needs hand-written layers; a generic "
                "module takes split none, input or output",
            )
        if init not in INIT_RULES:
            raise ModelOptionError("init", f"unknown init rule {init!r}; allowed: {', '.join(INIT_RULES)}")
        self.init_rule = init
        self._template, self._cost = self._checked_template()
        self._param_shapes = {k: tuple(v.shape) for k, v in self._template.named_parameters()}
        self._fan_in = fan_in_rule(self._param_shapes)
        if init == "uniform":
            missing = [k for k, f in self._fan_in.items() if f is None]
            if missing:
                raise ModelOptionError(
                    "init",
                    f"model {self.describe()}: init 'uniform' needs a fan-in for every parameter, and "
                    f"{', '.join(missing)} has none (a 1-d parameter without a weight beside it); use init: module",
                )
        self._buffers_by: dict[tuple, dict[str, Tensor]] = {}

    # -- what a subclass provides -------------------------------------------------------------------------

    @abstractmethod
    def build_module(self) -> nn.Module:
        """A fresh single-client module for ``self.sample_shape`` and ``self.num_classes``, on the current
        default device, initialized by its own rule from torch's global RNG.

        Raises:
            ModelOptionError: the options do not give a module.
        """

    def describe(self) -> str:
        """The model as error messages name it."""
        return f"'{self.name}'"

    @classmethod
    def normalize_config_options(cls, values: dict[str, Any], key: str) -> dict[str, Any]:
        """Check the ``config_options`` given in a ``model`` config section and fill in their defaults.

        Args:
            values: the given ones (a subset of ``config_options``).
            key: dotted config path of the ``model`` section.

        Raises:
            ConfigError: naming ``{key}.<option>``.
        """
        init = values.get("init", "module")
        if init not in INIT_RULES:
            raise ConfigError(f"{key}.init", f"unknown init rule {init!r}", allowed=INIT_RULES)
        return {"init": init}

    # -- building and checking ----------------------------------------------------------------------------

    def _build(self, device: str) -> nn.Module:
        """:meth:`build_module` on ``device`` (``meta`` or ``cpu``), in training mode.

        Raises:
            _NotOnMeta: it fails on ``meta`` (for a reason other than the options).
            ModelOptionError: it fails on the CPU, or gives something else than an ``nn.Module``.
        """
        try:
            with torch.device(device), _NoRandomFillsOnMeta():
                module = self.build_module()
        except ModelOptionError:
            raise
        except Exception as err:  # noqa: BLE001  the user's constructor: report whatever it raises
            if device == "meta":
                raise _NotOnMeta from err
            raise ModelOptionError(
                "module", f"building model {self.describe()} fails: {type(err).__name__}: {err}"
            ) from err
        if not isinstance(module, nn.Module):
            raise ModelOptionError(
                "module", f"model {self.describe()} gave a {type(module).__name__}, not an nn.Module"
            )
        return module.train()

    def _real(self, seed: int) -> nn.Module:
        """The module built on the CPU with its own initialization, torch's global RNG seeded with ``seed``
        inside ``fork_rng`` (the caller's RNG state is untouched)."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return self._build("cpu")

    def _checked_template(self) -> tuple[nn.Module, int]:
        """The module on the ``meta`` device (on the CPU when it cannot be built or run there), after the
        checks of the class docstring; and the largest activation per sample (elements).

        A passed check is remembered for the process (keyed by the class and every public attribute but the
        split: the options, the data's shape and classes), so that the config check, which builds the model
        of every run, checks each distinct module once."""
        public = {
            k: v
            for k, v in vars(self).items()
            if not k.startswith("_") and (k not in ("split", "adapter_rank") or self.module_adapters)
        }
        key = (type(self), tuple(sorted((k, repr(v)) for k, v in public.items())))
        cached = _CHECKED.get(key)
        try:
            module = self._build("meta")
            cost = cached if cached is not None else self._check(module, "meta")
        except _NotOnMeta:  # a module that computes on tensor values, or an op without a meta kernel (or a
            module = self._real(0)  # forward that fails anyway: then it fails on the CPU too, and says why)
            cost = cached if cached is not None else self._check(module, "cpu")
        _CHECKED[key] = cost
        return module, cost

    def _check(self, module: nn.Module, device: str) -> int:
        refused = _refusal(module)
        if refused is not None:
            raise ModelOptionError("module", f"model {self.describe()}: layer '{refused[0]}' {refused[1]}")
        params = dict(module.named_parameters())
        if not params:
            raise ModelOptionError("module", f"model {self.describe()} has no parameters")
        cost = [self.in_features]

        def record(_module, _inputs, output):
            for t in output if isinstance(output, tuple | list) else (output,):
                if isinstance(t, Tensor) and t.dim() > 0:
                    cost[0] = max(cost[0], t.numel() // max(1, t.shape[0]))

        x = torch.zeros(2, 3, *self.sample_shape, device=device)
        handles = [m.register_forward_hook(record) for m in module.modules()]
        try:
            with torch.no_grad():
                plain = module(x[0])
        except Exception as err:  # noqa: BLE001  the user's forward: report whatever it raises
            if device == "meta":
                raise _NotOnMeta from err
            raise ModelOptionError(
                "module",
                f"model {self.describe()}: its forward fails on a batch of 3 samples of shape "
                f"{self.sample_shape}: {type(err).__name__}: {err}",
            ) from err
        finally:
            for h in handles:
                h.remove()
        expected = (3, self.num_classes)
        if not isinstance(plain, Tensor) or tuple(plain.shape) != expected:
            got = list(plain.shape) if isinstance(plain, Tensor) else type(plain).__name__
            raise ModelOptionError(
                "module",
                f"model {self.describe()}: its forward maps [3, {', '.join(map(str, self.sample_shape))}] "
                f"to {got}; expected [B, K] = {list(expected)} (K = {self.num_classes} outputs of the data)",
            )
        stacked = {k: v.detach().unsqueeze(0).expand(2, *v.shape) for k, v in params.items()}
        buffers = dict(module.named_buffers())
        try:
            with torch.no_grad():
                vmap(lambda p, xc: functional_call(module, (p, buffers), (xc,), strict=True))(stacked, x)
        except Exception as err:  # noqa: BLE001
            if device == "meta":
                raise _NotOnMeta from err
            hint = " (train-time randomness such as dropout is not supported)" if "random" in str(err) else ""
            raise ModelOptionError(
                "module",
                f"model {self.describe()}: its forward cannot be batched over clients with "
                f"torch.func.vmap{hint}: {type(err).__name__}: {err}",
            ) from err
        return int(cost[0])

    # -- BatchedModel -------------------------------------------------------------------------------------

    def layer_shapes(self) -> dict[str, tuple[tuple[int, ...], int]]:
        """The module's parameters in ``named_parameters()`` order: name -> (shape, fan_in of the
        ``uniform`` rule, 0 where it has none)."""
        return {k: (shape, self._fan_in[k] or 0) for k, shape in self._param_shapes.items()}

    def shapes(self) -> dict[str, tuple[tuple[int, ...], int]]:
        """Every parameter: the module's (:meth:`layer_shapes`; a module's own adapters are among them)."""
        return self.layer_shapes()

    def init(
        self,
        generator: torch.Generator,
        dtype: torch.dtype = torch.float32,
        count: int = 1,
        keys: list[str] | None = None,
    ) -> Params:
        """Initial parameters ``dict[str, Tensor[count, ...]]`` on the CPU, by the ``init`` rule.

        ``module``: one seed drawn from ``generator`` per copy, the module built under ``fork_rng``
        seeded with it (whatever ``keys``, so the draws do not depend on them); ``uniform``: as the
        hand-written models (:meth:`BatchedModel.init`).
        """
        if self.init_rule == "uniform":
            return {
                name: uniform_init((count, *shape), fan_in, generator, dtype)
                for name, (shape, fan_in) in self.shapes().items()
                if keys is None or name in keys
            }
        names = [k for k in self._param_shapes if keys is None or k in keys]
        copies: dict[str, list[Tensor]] = {k: [] for k in names}
        for _ in range(count):
            seed = int(torch.randint(0, 2**63 - 1, (), generator=generator))
            state = dict(self._real(seed).named_parameters())
            for k in names:
                copies[k].append(state[k].detach().to(dtype))
        return {k: torch.stack(v) for k, v in copies.items()}

    def _buffers(self, like: Tensor) -> dict[str, Tensor]:
        """The module's buffers (constants) on the device of ``like``, floating ones in its dtype; built
        once on the CPU when the template has any."""
        slot = (like.device, like.dtype)
        if slot not in self._buffers_by:
            real = self._real(0).named_buffers() if any(True for _ in self._template.buffers()) else ()
            self._buffers_by[slot] = {
                k: v.to(like.device, like.dtype if v.is_floating_point() else v.dtype) for k, v in real
            }
        return self._buffers_by[slot]

    def _client_forward(self, buffers: dict[str, Tensor]) -> Callable[[Params, Tensor], Tensor]:
        """One client's outputs ``[B, K]`` from its parameters and inputs ``[B, *sample_shape]``."""

        def forward(p: Params, x: Tensor) -> Tensor:
            return functional_call(self._template, (p, buffers), (x,), strict=True)

        return forward

    def forward(self, params: Params, x: Tensor) -> Tensor:
        """Outputs ``[C, K, B]`` of ``params [C, ...]`` on ``x [C, B, *sample_shape]`` (differentiable)."""
        out = vmap(self._client_forward(self._buffers(next(iter(params.values())))))(params, x)  # [C, B, K]
        return out.transpose(1, 2)

    def loss_grads(self, params: Params, x: Tensor, y: Tensor, mask: Tensor | None) -> tuple[Tensor, Params]:
        """Each client's mean loss over its valid samples and its gradient at its own parameters.

        ``per_client_grad`` False (the default): one reverse pass through the vmapped forward, the clients'
        losses summed (they are independent, so each client's gradient lands in its own row; the base
        class's :meth:`BatchedModel.loss_grads`). True: ``vmap(grad_and_value(loss))``, one gradient
        transform per client. The same numbers up to rounding (tested); the first took 0.77-1.17x the time
        of the second on this project's CPU, less in 5 of 6 cases (DNN, CNN, ResNet-18 at 5 and 20 clients).

        Args:
            params: ``[C, ...]`` (not modified); x: ``[C, B, *sample_shape]``; y: ``[C, B]`` labels or
            ``[C, B, K]`` regression targets; mask: ``[C, B]`` bool, or None when every entry is valid.

        Returns:
            ``(loss [C], grads dict[str, Tensor[C, ...]])``, detached.
        """
        if not self.per_client_grad:
            return super().loss_grads(params, x, y, mask)
        forward = self._client_forward(self._buffers(next(iter(params.values()))))
        classify = self.task == "classification"

        def client_loss(p: Params, xc: Tensor, yc: Tensor, mc: Tensor | None) -> Tensor:
            out = forward(p, xc)  # [B, K]
            losses = F.cross_entropy(out, yc, reduction="none") if classify else (out - yc).pow(2).mean(1)
            if mc is None:
                return losses.mean()
            m = mc.to(losses.dtype)
            return (losses * m).sum() / m.sum()

        detached = {k: v.detach() for k, v in params.items()}
        in_dims = (0, 0, 0, None if mask is None else 0)
        grads, loss = vmap(grad_and_value(client_loss), in_dims=in_dims)(detached, x, y, mask)
        return loss.detach(), {k: grads[k].detach() for k in params}

    def reference_module(self) -> nn.Module:
        """The module for one client, on the CPU (its own initialization under a fixed seed, the global RNG
        untouched); buffers are made non-persistent so that ``state_dict`` keys are the parameter names."""
        module = self._real(0)
        for sub in module.modules():
            for name, buf in list(sub.named_buffers(recurse=False)):
                sub.register_buffer(name, buf, persistent=False)
        return module

    def sample_cost(self) -> int:
        """The largest output of any submodule per sample (elements), measured when the model was built."""
        return self._cost


def import_object(path: str) -> Any:
    """The object a dotted path names: ``package.module:Name`` (or ``package.module.Name``).

    A module that is not importable from ``sys.path`` but lies in the working directory (``mymodels.py``
    or ``mymodels/`` in the repository root) is imported from there: the working directory is put on
    ``sys.path`` (Snakemake's jobs do not have it there).

    Raises:
        ImportError: the module cannot be imported (with the reason) or has no such attribute.
        ValueError: ``path`` is not of that form.
    """
    if ":" in path:
        module_name, _, attr = path.partition(":")
    else:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise ValueError(f"{path!r} is not of the form 'package.module:Name'")
    top = module_name.split(".")[0]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        here = Path.cwd()
        if err.name != top or not ((here / f"{top}.py").is_file() or (here / top).is_dir()):
            raise
        sys.path.insert(0, str(here))
        module = importlib.import_module(module_name)
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ImportError(f"module '{module_name}' has no attribute '{attr}'")
        obj = getattr(obj, part)
    return obj


def _json_like(value: Any, key: str) -> None:
    """Refuse anything in ``kwargs`` but null, booleans, finite numbers, strings, lists and mappings of them."""
    if value is None or isinstance(value, bool | str):
        return
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ConfigError(key, f"expected a finite number, got {value!r}")
        return
    if isinstance(value, list | tuple):
        for i, v in enumerate(value):
            _json_like(v, f"{key}[{i}]")
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise ConfigError(key, f"mapping keys must be strings, got {k!r}")
            _json_like(v, f"{key}.{k}")
        return
    raise ConfigError(
        key, f"expected null, a boolean, a number, a string, a list or a mapping, got {value!r}"
    )


class TorchModel(ModuleModel):
    """``model: {name: torch, module: "package.module:Name", kwargs: {...}}``: any importable ``nn.Module``.

    Args:
        module: the dotted path of an ``nn.Module`` subclass or of a factory returning one (config), or the
            class or factory itself (Python).
        kwargs: keyword arguments of the call; ``num_classes`` and ``sample_shape`` are added when the
            signature names them and ``kwargs`` does not.
        init, split, adapter_rank: as :class:`ModuleModel`.

    Raises:
        ModelOptionError: the path cannot be imported or the call fails (``module``, ``kwargs``), and the
            checks of :class:`ModuleModel`.
    """

    name = "torch"
    config_options: ClassVar[dict[str, Any]] = {"module": None, "kwargs": {}, "init": "module"}

    def __init__(
        self,
        sample_shape,
        num_classes,
        module: str | Callable[..., nn.Module],
        kwargs: dict[str, Any] | None = None,
        **rest,
    ):
        self.module_path = (
            module if isinstance(module, str) else getattr(module, "__qualname__", repr(module))
        )
        try:
            self.factory = import_object(module) if isinstance(module, str) else module
        except (ImportError, ValueError) as err:
            raise ModelOptionError("module", f"cannot import {module!r}: {err}") from err
        self.kwargs = dict(kwargs or {})
        super().__init__(sample_shape, num_classes, **rest)

    def describe(self) -> str:
        return f"'torch' ({self.module_path})"

    @classmethod
    def code_modules(cls, spec: dict[str, Any]) -> list[str]:
        """The Python modules behind the spec's ``module`` path, for the code fingerprint of its runs
        (``hetfl.models.model_modules``): the module the path names and the one that defines the object
        (when it is re-exported from elsewhere), sorted.

        Raises:
            ImportError, ValueError: as :func:`import_object`.
        """
        path = spec["module"]
        obj = import_object(path)
        named = path.partition(":")[0] if ":" in path else path.rpartition(".")[0]
        defined = getattr(obj, "__module__", None) or named
        return sorted({named, defined})

    def build_module(self) -> nn.Module:
        """``factory(**kwargs)``, with ``num_classes``/``sample_shape`` when the signature takes them."""
        kwargs = dict(self.kwargs)
        try:
            names = inspect.signature(self.factory).parameters
        except (TypeError, ValueError):
            names = {}
        for name, value in (("num_classes", self.num_classes), ("sample_shape", self.sample_shape)):
            if name in names and name not in kwargs:
                kwargs[name] = value
        try:
            return self.factory(**kwargs)
        except TypeError as err:
            raise ModelOptionError("kwargs", f"calling {self.module_path}(**kwargs) fails: {err}") from err

    @classmethod
    def normalize_config_options(cls, values: dict[str, Any], key: str) -> dict[str, Any]:
        """Check ``module`` (importable, an ``nn.Module`` subclass or a callable), ``kwargs`` (a mapping of
        null, booleans, finite numbers, strings, lists and mappings) and ``init``.

        Raises:
            ConfigError: naming ``{key}.module``, ``{key}.kwargs[.<name>]`` or ``{key}.init``.
        """
        kwargs = values.get("kwargs", {})
        if kwargs is None:
            kwargs = {}
        if not isinstance(kwargs, dict):
            raise ConfigError(f"{key}.kwargs", f"expected a mapping of keyword arguments, got {kwargs!r}")
        _json_like(kwargs, f"{key}.kwargs")
        out = {"kwargs": kwargs, **super().normalize_config_options(values, key)}
        path = values.get("module")
        if path is None:
            raise ConfigError(f"{key}.module", "model 'torch' needs module: 'package.module:ClassOrFactory'")
        if not isinstance(path, str):
            raise ConfigError(f"{key}.module", f"expected a string 'package.module:Name', got {path!r}")
        try:
            obj = import_object(path)
        except (ImportError, ValueError) as err:
            raise ConfigError(
                f"{key}.module", f"cannot import {path!r}: {type(err).__name__}: {err}"
            ) from None
        if inspect.isclass(obj) and not issubclass(obj, nn.Module):
            raise ConfigError(f"{key}.module", f"{path!r} is the class {obj.__name__}, not a torch.nn.Module")
        if not callable(obj):
            raise ConfigError(
                f"{key}.module", f"{path!r} is a {type(obj).__name__}, not an nn.Module class or factory"
            )
        return {"module": path, **out}


MODELS = [TorchModel]
