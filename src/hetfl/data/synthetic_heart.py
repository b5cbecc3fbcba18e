"""A synthetic stand-in for Fed-Heart-Disease: 4 clients, 13 features, binary labels, the real client sizes.

All-for-one (Philippenko et al., arXiv:2507.06844, 2025) uses FLamby's Fed-Heart-Disease (UCI; Cleveland,
Hungary, Switzerland, Long Beach VA) with per-centre train/test sizes 199/104, 172/89, 30/16, 85/45 and a
logistic regression (docs/papers/all_for_one.md §3.5). The data cannot be downloaded offline, so this
generator stands in for it, with client-specific θ_i⋆ and feature shifts of this project's choosing
(docs/papers/all_for_one.md §6). **It is not the Heart Disease data**; it reproduces the shape of the
problem: 4 natural clients of those sizes (303, 261, 46, 130 samples; the ``natural`` split with
``test_fraction: 0.34`` gives exactly the FLamby train sizes), 13 standardized features, and
heterogeneous logistic models:

    θ_0 ~ N(0, s² I_13), θ_i = θ_0 + δ_i, δ_i ~ N(0, h² I), b_i ~ N(0, β_b²)      (client models)
    x ~ N(m_i, I_13), m_i ~ N(0, f² I)                                              (client feature shift)
    y ~ Bernoulli(σ(⟨x, θ_i⟩ + b_i))

with s = ``signal`` (0.7: logits of standard deviation ≈ 2.5, a Bayes accuracy near the paper's 80-90 %),
h = ``client_shift`` (0.5), β_b = ``intercept_shift`` (0.5), f = ``feature_shift`` (0.5). NumPy
``default_rng(seed)``: θ_0, then per client δ_i, b_i, m_i, x, y.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from hetfl.config_options import ConfigOptions, option
from hetfl.data.checks import MAX_SEED
from hetfl.data.dataset import Dataset, DatasetInfo
from hetfl.data.source import DatasetSource

NAME = "synthetic_heart"
SIZES = (303, 261, 46, 130)  # FLamby Fed-Heart-Disease centres: train + test (199+104, 172+89, 30+16, 85+45)
FEATURES = 13


def info(spec: dict) -> DatasetInfo:
    """Sizes and shapes without generating (labels counts unknown: ``class_counts`` None)."""
    return DatasetInfo(
        name=NAME,
        num_samples=int(sum(SIZES)),
        num_classes=2,
        class_counts=None,
        sample_shape=(FEATURES,),
        num_users=len(SIZES),
        user_counts=np.asarray(SIZES, dtype=np.int64),
    )


def generate(spec: dict) -> Dataset:
    """The dataset of a normalized spec: x ``[740, 13]`` float32, y ``[740]`` in {0, 1}, users ``[740]``."""
    rng = np.random.default_rng(spec["seed"])
    theta0 = rng.normal(0.0, spec["signal"], size=FEATURES)
    xs, ys, users = [], [], []
    for user, n in enumerate(SIZES):
        theta = theta0 + rng.normal(0.0, spec["client_shift"], size=FEATURES)
        bias = rng.normal(0.0, spec["intercept_shift"])
        mean = rng.normal(0.0, spec["feature_shift"], size=FEATURES)
        x = mean + rng.standard_normal((n, FEATURES))
        p = 1.0 / (1.0 + np.exp(-(x @ theta + bias)))
        xs.append(x)
        ys.append((rng.random(n) < p).astype(np.int64))
        users.append(np.full(n, user, dtype=np.int64))
    return Dataset(NAME, np.concatenate(xs), np.concatenate(ys), 2, users=np.concatenate(users))


class SyntheticHeart(DatasetSource):
    """``synthetic_heart``: a synthetic 4-client stand-in for Fed-Heart-Disease."""

    name = NAME

    @dataclasses.dataclass(frozen=True)
    class Options(ConfigOptions):
        """The generator's scales and seed (module docstring)."""

        signal: float = option(0.7, lo=0.0)
        client_shift: float = option(0.5, lo=0.0)
        intercept_shift: float = option(0.5, lo=0.0)
        feature_shift: float = option(0.5, lo=0.0)
        seed: int = option(0, lo=0, hi=MAX_SEED)

    @classmethod
    def info(cls, spec, key="dataset") -> DatasetInfo:
        return info(spec)

    @classmethod
    def load(cls, spec, root) -> Dataset:
        return generate(spec)


DATASETS = [SyntheticHeart]
