"""pFedMe's Synthetic(α, β) generator, RNG-exact (docs/papers/pfedme.md §4.1).

Source: ``data/Logistic_Synthetic/generate_synthetic_05_05.py`` in github.com/CharlieDinh/pFedMe
(descended from FedProx's generator). With the defaults (α = β = 0.5, 100 users, 60 features,
10 classes, seed 0) the per-user sizes are 250 .. 25,810, 205,795 in total, as in the paper.

The official script calls ``np.random.seed(0)`` and then the global legacy generator; we draw from
``np.random.RandomState(seed)``, which is the same stream, in the same order of calls:

1. ``samples_per_user = (lognormal(4, 2, U).astype(int) + 50) * 5``
2. ``mean_W = normal(0, α, U)``  (the bias prior mean ``mean_b`` is the same draw)
3. ``B = normal(0, β, U)``
4. per user: ``mean_x[i] = normal(B[i], 1, d)``  (iid: ``mean_x[i] = B[i]``, no draw)
5. iid only: ``W_global = normal(0, 1, (d, C))``, ``b_global = normal(0, 1, C)``
6. per user: ``W = normal(mean_W[i], 1, (d, C))``, ``b = normal(mean_b[i], 1, C)`` (drawn even in the
   iid case, then replaced by the global ones), ``X = multivariate_normal(mean_x[i], cov_x, n_i)``
   with ``cov_x = diag((j + 1) ** -1.2)``, and ``y = argmax(softmax(X W + b))``.

α and β are standard deviations (numpy's ``scale``). Note: u_k = mean_W[k] shifts every entry of W
and b by the same scalar, which adds the same amount to every class's logit, so with the same draws α
changes neither x nor y (only β, through the feature means, and the seed change the data); this holds
for the official generator too. The data are raw (not normalized), as in the
official code. The official per-user 90/10 shuffle is not done here: the partition makes the splits.
The multivariate-normal draws may differ in the last bits across numpy/LAPACK versions; the sizes and
all other draws are exact.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from hetfl.config_options import ConfigOptions, option
from hetfl.data.checks import MAX_SEED
from hetfl.data.dataset import Dataset, DatasetInfo
from hetfl.data.source import DatasetSource


def synthetic_sizes(num_users: int = 100, seed: int = 0) -> np.ndarray:
    """Samples per user, from the generator's first RNG call alone (cheap).

    Returns:
        int64 ``[num_users]``.
    """
    rs = np.random.RandomState(seed)
    return ((rs.lognormal(4, 2, num_users).astype(int) + 50) * 5).astype(np.int64)


def generate_synthetic(
    alpha: float = 0.5,
    beta: float = 0.5,
    num_users: int = 100,
    dimension: int = 60,
    num_classes: int = 10,
    seed: int = 0,
    iid: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Generate Synthetic(α, β) exactly as pFedMe's official script does.

    Args:
        alpha: std of the per-user model prior mean u_k ~ N(0, α) (model heterogeneity).
        beta: std of the per-user feature prior mean B_k ~ N(0, β) (feature heterogeneity).
        num_users: number of users U.
        dimension: number of features d.
        num_classes: number of classes C.
        seed: the legacy numpy seed (``np.random.seed``); 0 in the official code.
        iid: the official ``iid=1`` variant: one shared (W, b) and ``mean_x[i] = B[i]``.

    Returns:
        ``x`` float64 ``[n, d]``, ``y`` int64 ``[n]``, ``users`` int64 ``[n]``; users' samples are
        contiguous, user 0 first, in generation order.
    """
    rs = np.random.RandomState(seed)
    sizes = (rs.lognormal(4, 2, num_users).astype(int) + 50) * 5
    mean_w = rs.normal(0, alpha, num_users)
    mean_b = mean_w
    b_prior = rs.normal(0, beta, num_users)
    cov_x = np.diag(np.power(np.arange(1, dimension + 1, dtype=np.float64), -1.2))
    mean_x = np.zeros((num_users, dimension))
    for i in range(num_users):
        mean_x[i] = np.ones(dimension) * b_prior[i] if iid else rs.normal(b_prior[i], 1, dimension)
    if iid:
        w_global = rs.normal(0, 1, (dimension, num_classes))
        b_global = rs.normal(0, 1, num_classes)
    xs, ys = [], []
    for i in range(num_users):
        w = rs.normal(mean_w[i], 1, (dimension, num_classes))
        b = rs.normal(mean_b[i], 1, num_classes)
        if iid:
            w, b = w_global, b_global
        x = rs.multivariate_normal(mean_x[i], cov_x, sizes[i])
        logits = x @ w + b
        ex = np.exp(logits)
        ys.append(np.argmax(ex / ex.sum(axis=1, keepdims=True), axis=1).astype(np.int64))
        xs.append(x)
    users = np.repeat(np.arange(num_users, dtype=np.int64), sizes)
    return np.concatenate(xs), np.concatenate(ys), users


class Synthetic(DatasetSource):
    """``synthetic``: Synthetic(α, β) of Shamir et al./Li et al., pFedMe's generator (exact)."""

    name = "synthetic"

    @dataclasses.dataclass(frozen=True)
    class Options(ConfigOptions):
        """The generator's arguments (:func:`generate_synthetic`)."""

        alpha: float = option(0.5, lo=0.0)
        beta: float = option(0.5, lo=0.0)
        num_users: int = option(100, lo=1)
        dimension: int = option(60, lo=1)
        num_classes: int = option(10, lo=2)
        seed: int = option(0, lo=0, hi=MAX_SEED)
        iid: bool = False

    @classmethod
    def info(cls, spec, key="dataset") -> DatasetInfo:
        """Sizes from the generator's first RNG call alone (``user_counts`` exact, ``class_counts`` None)."""
        sizes = synthetic_sizes(spec["num_users"], spec["seed"])
        return DatasetInfo(
            name=cls.name,
            num_samples=int(sizes.sum()),
            num_classes=spec["num_classes"],
            class_counts=None,
            sample_shape=(spec["dimension"],),
            num_users=spec["num_users"],
            user_counts=sizes,
        )

    @classmethod
    def load(cls, spec, root) -> Dataset:
        x, y, users = generate_synthetic(
            alpha=spec["alpha"],
            beta=spec["beta"],
            num_users=spec["num_users"],
            dimension=spec["dimension"],
            num_classes=spec["num_classes"],
            seed=spec["seed"],
            iid=spec["iid"],
        )
        return Dataset(cls.name, x, y, spec["num_classes"], users)


DATASETS = [Synthetic]
