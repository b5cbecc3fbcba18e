"""Batched models by config name, and validation of the ``model`` config section.

| name | architecture | options |
|---|---|---|
| ``mlr`` | Linear(d, K) | — |
| ``linear`` | Linear(d, K), for regression or logistic regression | ``bias`` (true) |
| ``dnn`` | Linear(d, hidden) → ReLU → Linear(hidden, K) | ``hidden`` (100) |
| ``cnn`` | 2 × (conv → ReLU → maxpool) → Linear(hidden) → ReLU → Linear(K) | ``channels`` ([16, 32]), ``kernel`` (3), ``hidden`` (64) |
| ``vgg11`` | VGG-11 (configuration A, no batch norm), classifier 512-512-K, for 32×32 images (CIFAR-10) | ``width`` (64) |
| ``torch`` | any importable ``nn.Module`` class or factory, batched by ``torch.func`` (``hetfl.models.generic``) | ``module`` (required), ``kwargs`` ({}), ``init`` (``module``) |
| ``resnet18`` | ResNet-18 with GroupNorm, CIFAR stem, through ``torch.func`` | ``width`` (64), ``norm_groups`` (2), ``init`` |
| ``char_lstm`` | embedding → stacked LSTM → Linear, next-character prediction (LEAF Shakespeare), through ``torch.func`` | ``vocab`` (80), ``embed`` (8), ``hidden`` (256), ``layers`` (2), ``init`` |

Every model also takes ``split`` (``none``, ``input``, ``output``, ``adapter``: which parameters are
personal, ``hetfl.models.adapters``) and ``adapter_rank`` (4); the ``torch.func`` models refuse ``adapter``
but ``resnet18``, whose ``adapter`` split is Pillutla et al.'s residual adapters (``hetfl.models.resnet``).
"""

from __future__ import annotations

from functools import cache

from hetfl.discovery import discover
from hetfl.errors import ConfigError
from hetfl.models.base import TASKS, BatchedModel, Params

__all__ = [
    "BatchedModel",
    "Params",
    "build_model",
    "model_class",
    "model_module",
    "model_modules",
    "model_names",
    "normalize_model_spec",
    "registry",
]


@cache
def registry() -> dict[str, type[BatchedModel]]:
    """Config name -> batched model class, for every model declared (``MODELS = [cls]``) under ``hetfl.models``.

    Discovered, not listed here: adding a model module changes no other run's code fingerprint.
    """
    return discover("hetfl.models", "MODELS")


def model_names() -> list[str]:
    """The config names of every model, sorted."""
    return sorted(registry())


def model_class(name: str) -> type[BatchedModel]:
    """The batched model class of config name ``name``."""
    return registry()[name]


def model_module(name: str) -> str:
    """The module of model ``name`` (what the runs that use it fingerprint)."""
    return registry()[name].__module__


def model_modules(model: str | dict) -> list[str]:
    """The modules a run of ``model`` (a config name or a normalized spec) fingerprints: the model's module,
    and those its class adds for the spec (``code_modules``: for ``torch``, the user's module that defines
    the ``nn.Module``, ``hetfl.models.generic.TorchModel.code_modules``).

    The class is reached through the registry, not imported here: the modules a run fingerprints never
    include another model's."""
    name = model if isinstance(model, str) else model["name"]
    extra = getattr(registry()[name], "code_modules", None)
    return [model_module(name), *(extra(model) if extra is not None and isinstance(model, dict) else [])]


def normalize_model_spec(spec: dict, key: str) -> dict:
    """Validate a ``model`` config section and fill in defaults.

    Args:
        spec: e.g. ``{"name": "dnn", "hidden": 20}``.
        key: dotted config path of the section, for error messages.

    Returns:
        The spec with every option present.

    Options of ``config_options`` (strings and mappings of the ``torch.func`` models: ``module``,
    ``kwargs``, ``init``) are checked by the class's ``normalize_config_options``, after the others.

    Raises:
        ConfigError: unknown model name or option, or an option of the wrong type.
    """
    models = registry()
    if not isinstance(spec, dict) or "name" not in spec:
        raise ConfigError(f"{key}.name", "a model needs a name", allowed=models)
    name = spec["name"]
    if name not in models:
        raise ConfigError(f"{key}.name", f"unknown model '{name}'", allowed=models)
    cls = models[name]
    special = getattr(cls, "config_options", {})
    typed = {k: v for k, v in spec.items() if k not in special}
    out = cls.Options.parse(typed, key, f"model '{name}'", fixed=("name", *special))
    if special:
        out.update(cls.normalize_config_options({k: v for k, v in spec.items() if k in special}, key))
    return out


def build_model(
    spec: dict, sample_shape: tuple[int, ...], num_outputs: int, task: str = "classification"
) -> BatchedModel:
    """Instantiate the batched model of a normalized ``model`` spec for data of ``sample_shape``.

    Args:
        num_outputs: classes (classification) or target dimension (regression).
        task: ``classification`` (cross-entropy) or ``regression`` (squared error).

    Raises:
        ValueError: the model cannot take this input (e.g. ``cnn`` on non-image data), or an unknown task;
            a ``hetfl.models.errors.ModelOptionError`` (a ValueError) names the option at fault in
            ``option``.
    """
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; allowed: {', '.join(TASKS)}")
    options = {k: v for k, v in spec.items() if k != "name"}
    model = registry()[spec["name"]](sample_shape, num_outputs, **options)
    model.task = task
    return model
