"""The dataset registry: config names, their options, cheap summaries and loaders.

A dataset spec is the ``dataset:`` mapping of a study, e.g. ``{name: mnist5k}`` or
``{name: synthetic, alpha: 1.0, beta: 1.0}``. :func:`normalize_dataset_spec` checks it and fills the
defaults; :func:`dataset_id` names its folder; :func:`dataset_info` answers what partition validation
needs without loading anything; :func:`load_dataset` builds the :class:`~hetfl.data.dataset.Dataset`.

The small option checkers at the top are shared with ``hetfl.data.partition``.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hetfl.data import cifar10, digits, mnist5k, synthetic, synthetic_heart, synthetic_lsr
from hetfl.data.dataset import NORMALIZATIONS, Dataset, DatasetInfo, normalize_pixels
from hetfl.errors import ConfigError
from hetfl.ids import spec_id
from hetfl.options import number_from_text

# ----------------------------------------------------------------------------------------------------
# option checking (shared with partition.py)

REQUIRED = object()
"""Default marking an option that must be given."""

MAX_SEED = 2**32 - 1  # numpy's legacy RandomState accepts 0 .. 2**32 - 1


@dataclass(frozen=True)
class Option:
    """One config option: its default (or :data:`REQUIRED`) and a checker ``(value, key) -> value``."""

    default: Any
    check: Callable[[Any, str], Any]


def int_check(lo: int | None = None, hi: int | None = None) -> Callable[[Any, str], int]:
    """Checker for an integer in ``[lo, hi]`` (booleans are rejected)."""

    def check(value: Any, key: str) -> int:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ConfigError(key, f"must be an integer, got {value!r}")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise ConfigError(
                key, f"must be an integer in [{lo}, {'inf' if hi is None else hi}], got {value}"
            )
        return int(value)

    return check


def float_check(
    lo: float | None = None, hi: float | None = None, lo_open: bool = False, hi_open: bool = False
) -> Callable[[Any, str], float]:
    """Checker for a finite real number in the interval ``lo..hi`` (open or closed ends); returns a float.

    A string spelling a decimal number (YAML 1.1 reads ``5e-2`` as a string) is taken as that number.
    """

    def check(value: Any, key: str) -> float:
        value = number_from_text(value)
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
            raise ConfigError(key, f"must be a finite number, got {value!r}")
        value = float(value)
        bad_lo = lo is not None and (value <= lo if lo_open else value < lo)
        bad_hi = hi is not None and (value >= hi if hi_open else value > hi)
        if bad_lo or bad_hi:
            interval = (
                f"{'(' if lo_open else '['}{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}"
            )
            raise ConfigError(key, f"must lie in {interval}{')' if hi_open else ']'}, got {value}")
        return value

    return check


def choice_check(*allowed: str) -> Callable[[Any, str], str]:
    """Checker for one of the given strings."""

    def check(value: Any, key: str) -> str:
        if value not in allowed:
            raise ConfigError(key, f"unknown value {value!r}", allowed=allowed)
        return value

    return check


def bool_check(value: Any, key: str) -> bool:
    """Checker for a boolean (YAML ``true``/``false``)."""
    if not isinstance(value, (bool, np.bool_)):
        raise ConfigError(key, f"must be true or false, got {value!r}", allowed=("false", "true"))
    return bool(value)


def check_options(
    spec: Any, key: str, options: Mapping[str, Option], what: str, fixed: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Check a spec mapping against ``options`` and fill the defaults.

    Args:
        spec: the user's mapping.
        key: dotted config key of the mapping, used in error messages.
        options: allowed option -> :class:`Option`.
        what: the thing being configured, for messages (e.g. ``"dataset 'synthetic'"``).
        fixed: keys already checked by the caller, copied unchanged (e.g. ``name``).

    Returns:
        a new dict with every option of ``options`` (defaults filled; options whose default is
        ``None`` and which are absent stay absent) plus the ``fixed`` keys.

    Raises:
        ConfigError: not a mapping, an unknown option (listing the allowed ones), a missing required
            option, or a bad value.
    """
    if not isinstance(spec, Mapping):
        raise ConfigError(key, f"must be a mapping, got {type(spec).__name__}")
    allowed = (*fixed, *options)
    for k in spec:
        if k not in allowed:
            raise ConfigError(f"{key}.{k}", f"unknown option for {what}", allowed=allowed)
    # the given values first, so that a bad value is named before a missing required option
    given = {k: opt.check(spec[k], f"{key}.{k}") for k, opt in options.items() if spec.get(k) is not None}
    out: dict[str, Any] = {k: spec[k] for k in fixed if k in spec}
    for k, opt in options.items():
        if k in given:
            out[k] = given[k]
        elif opt.default is REQUIRED:
            raise ConfigError(f"{key}.{k}", f"required for {what}")
        elif opt.default is not None:
            out[k] = opt.default
    return out


# ----------------------------------------------------------------------------------------------------
# datasets

# Datasets provided by a module with ``NAME``, ``_options()``, ``info(spec)`` and ``generate(spec)``
# (or ``load(spec, root)``): adding one is one module and one line here.
_MODULES = {m.NAME: m for m in (synthetic_lsr, synthetic_heart, cifar10)}
DATASETS: tuple[str, ...] = tuple(
    sorted(("digits", "fashion_mnist", "mnist", "mnist5k", "synthetic", *_MODULES))
)

_IMAGE_OPTIONS = {"normalize": Option("zscore", choice_check(*NORMALIZATIONS))}
_OPTIONS: dict[str, dict[str, Option]] = {
    "digits": _IMAGE_OPTIONS,
    "fashion_mnist": _IMAGE_OPTIONS,
    "mnist": _IMAGE_OPTIONS,
    "mnist5k": _IMAGE_OPTIONS,
    "synthetic": {
        "alpha": Option(0.5, float_check(lo=0.0)),
        "beta": Option(0.5, float_check(lo=0.0)),
        "num_users": Option(100, int_check(lo=1)),
        "dimension": Option(60, int_check(lo=1)),
        "num_classes": Option(10, int_check(lo=2)),
        "seed": Option(0, int_check(lo=0, hi=MAX_SEED)),
        "iid": Option(False, bool_check),
    },
}

# per-digit counts of the 70,000 images (60k train + 10k test), as in docs/papers/pfedme.md §4.2
_MNIST_CLASS_COUNTS = (6903, 7877, 6990, 7141, 6824, 6313, 6876, 7293, 6825, 6958)
_FASHION_CLASS_COUNTS = (7000,) * 10


def normalize_dataset_spec(spec: dict, key: str) -> dict:
    """Validate a dataset spec and fill its defaults.

    Args:
        spec: e.g. ``{"name": "synthetic", "alpha": 1}``.
        key: dotted config key of the spec, e.g. ``studies.pfedme_mnist.dataset``.

    Returns:
        a new dict with ``name`` and every option of that dataset (numbers canonicalized: floats as
        float), so equal datasets give equal dicts.

    Raises:
        ConfigError: naming ``key.name`` (unknown dataset, allowed: :data:`DATASETS`) or
            ``key.<option>`` (unknown option or bad value, with the allowed ones).
    """
    if not isinstance(spec, Mapping):
        raise ConfigError(key, f"must be a mapping with a 'name', got {type(spec).__name__}")
    name = spec.get("name")
    if name not in DATASETS:
        raise ConfigError(f"{key}.name", f"unknown dataset {name!r}", allowed=DATASETS)
    options = _MODULES[name]._options() if name in _MODULES else _OPTIONS[name]
    return check_options(spec, key, options, f"dataset {name!r}", fixed=("name",))


def dataset_id(spec: dict) -> str:
    """Folder name of a dataset: its name when every option has its default, else ``name-<hash of options>``.

    Raises:
        ConfigError: see :func:`normalize_dataset_spec` (key ``dataset``).
    """
    spec = normalize_dataset_spec(spec, "dataset")
    if spec == normalize_dataset_spec({"name": spec["name"]}, "dataset"):
        return spec["name"]
    return spec_id(spec["name"], {k: v for k, v in spec.items() if k != "name"})


def dataset_info(spec: dict) -> DatasetInfo:
    """What is known about a dataset without loading it (milliseconds).

    For Synthetic, the sizes come from the generator's first RNG call alone (``num_samples`` and
    ``user_counts`` exact) and ``class_counts`` is ``None``.

    Raises:
        ConfigError: see :func:`normalize_dataset_spec` (key ``dataset``).
    """
    spec = normalize_dataset_spec(spec, "dataset")
    name = spec["name"]
    if name in _MODULES:
        return _MODULES[name].info(spec)
    if name == "synthetic":
        sizes = synthetic.synthetic_sizes(spec["num_users"], spec["seed"])
        return DatasetInfo(
            name=name,
            num_samples=int(sizes.sum()),
            num_classes=spec["num_classes"],
            class_counts=None,
            sample_shape=(spec["dimension"],),
            num_users=spec["num_users"],
            user_counts=sizes,
        )
    counts = {
        "digits": digits.CLASS_COUNTS,
        "mnist5k": mnist5k.CLASS_COUNTS,
        "mnist": _MNIST_CLASS_COUNTS,
        "fashion_mnist": _FASHION_CLASS_COUNTS,
    }[name]
    shape = digits.SAMPLE_SHAPE if name == "digits" else mnist5k.SAMPLE_SHAPE
    return DatasetInfo(
        name=name,
        num_samples=int(sum(counts)),
        num_classes=len(counts),
        class_counts=np.asarray(counts, dtype=np.int64),
        sample_shape=shape,
    )


def load_dataset(spec: dict, root: str | os.PathLike) -> Dataset:
    """Build a dataset.

    Args:
        spec: a dataset spec (normalized here).
        root: this dataset's folder; downloads go to ``root/"raw"`` (MNIST, Fashion-MNIST). Unused
            by the shipped (mnist5k, digits) and generated (synthetic) datasets.

    Returns:
        the dataset; images are ``[n, 1, H, W]`` float32, normalized by the ``normalize`` option.

    Raises:
        ConfigError: a bad spec (key ``dataset``).
        DataUnavailableError: a download is needed and impossible (see ``hetfl.data.download``).
    """
    spec = normalize_dataset_spec(spec, "dataset")
    name = spec["name"]
    if name in _MODULES:
        module = _MODULES[name]
        return module.load(spec, Path(root)) if hasattr(module, "load") else module.generate(spec)
    if name == "synthetic":
        x, y, users = synthetic.generate_synthetic(
            alpha=spec["alpha"],
            beta=spec["beta"],
            num_users=spec["num_users"],
            dimension=spec["dimension"],
            num_classes=spec["num_classes"],
            seed=spec["seed"],
            iid=spec["iid"],
        )
        return Dataset(name, x, y, spec["num_classes"], users)
    if name == "mnist5k":
        raw, y = mnist5k.load_mnist5k_raw()
        max_value = mnist5k.MAX_VALUE
    elif name == "digits":
        raw, y = digits.load_digits_raw()
        max_value = digits.MAX_VALUE
    else:
        from hetfl.data.download import load_remote_images

        raw, y = load_remote_images(name, Path(root))
        max_value = 255.0
    return Dataset(name, normalize_pixels(raw, spec["normalize"], max_value), y, 10)
