"""Synthetic least-squares regression with clustered clients (All-for-one, Figure 2).

Philippenko, Le Bars, Scaman, Massoulié, "Adaptive collaboration for online personalized distributed
learning with heterogeneous clients", arXiv:2507.06844, 2025, Appendix A (docs/papers/all_for_one.md
§3.3): N clients in K clusters, client i in cluster i mod K; every client of a cluster shares the same
optimum θ^{⋆,c}. Features x ~ N(0, H_i) with H_i = P_iᵀ I P_i = I (P_i a random rotation, so H_i is the
identity), labels y = ⟨x, θ^{⋆,c(i)}⟩ with no noise: "noise comes only from the sampling of the
features". Cluster optima θ^{⋆,c} ~ U(−r, r)^d (the official code's older version, r = 5; the paper does
not say).

The paper's clients draw a fresh sample every step (an online stream). Here each client gets
``samples_per_user`` samples up front; with at least rounds × local steps × batch size training samples
per client, the epoch sampler never revisits one, which is the stream in distribution. Samples are
float64 (the experiment is exact math); the test loss equals the excess loss ‖θ − θ^{⋆,c}‖² in
expectation (H = I, R_i(θ^⋆) = 0).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from hetfl.config_options import ConfigOptions, option
from hetfl.data.checks import MAX_SEED
from hetfl.data.dataset import Dataset, DatasetInfo
from hetfl.data.source import DatasetSource

NAME = "synthetic_lsr"


def info(spec: dict) -> DatasetInfo:
    """Sizes and shapes without generating (``spec`` normalized)."""
    n, users = spec["samples_per_user"], spec["num_users"]
    return DatasetInfo(
        name=NAME,
        num_samples=n * users,
        num_classes=1,
        class_counts=np.array([n * users], dtype=np.int64),
        sample_shape=(spec["dimension"],),
        num_users=users,
        user_counts=np.full(users, n, dtype=np.int64),
        task="regression",
        num_outputs=1,
        user_clusters=np.arange(users) % spec["num_clusters"],
    )


def generate(spec: dict) -> Dataset:
    """The dataset of a normalized spec: x ``[N·n, d]`` float64, targets ``[N·n, 1]``, users, user_clusters.

    Deterministic in ``spec["seed"]`` (NumPy ``default_rng``).
    """
    rng = np.random.default_rng(spec["seed"])
    d, users, n, k = spec["dimension"], spec["num_users"], spec["samples_per_user"], spec["num_clusters"]
    r = spec["center_range"]
    optima = rng.uniform(-r, r, size=(k, d))  # θ^{⋆,c}
    clusters = np.arange(users) % k  # client i in cluster i mod K
    x = rng.standard_normal((users, n, d))  # N(0, I)
    y = np.einsum("und,ud->un", x, optima[clusters])  # ⟨x, θ^{⋆,c(i)}⟩, noise-free
    return Dataset(
        NAME,
        x.reshape(users * n, d),
        np.zeros(users * n, dtype=np.int64),
        1,
        users=np.repeat(np.arange(users), n),
        targets=y.reshape(users * n, 1),
        user_clusters=clusters,
        float64=True,
    )


def optima(spec: dict) -> np.ndarray:
    """The cluster optima θ^{⋆,c} ``[K, d]`` of a normalized spec (the first draw of :func:`generate`)."""
    rng = np.random.default_rng(spec["seed"])
    return rng.uniform(
        -spec["center_range"], spec["center_range"], size=(spec["num_clusters"], spec["dimension"])
    )


class SyntheticLSR(DatasetSource):
    """``synthetic_lsr``: clustered noise-free least squares (All-for-one, Figure 2)."""

    name = NAME

    @dataclasses.dataclass(frozen=True)
    class Options(ConfigOptions):
        """The generator's sizes, range and seed (module docstring)."""

        num_users: int = option(20, lo=1)
        dimension: int = option(2, lo=1)
        num_clusters: int = option(2, lo=1)
        samples_per_user: int = option(1000, lo=2)
        center_range: float = option(5.0, lo=0.0, lo_open=True)
        seed: int = option(0, lo=0, hi=MAX_SEED)

    @classmethod
    def info(cls, spec, key="dataset") -> DatasetInfo:
        return info(spec)

    @classmethod
    def load(cls, spec, root) -> Dataset:
        return generate(spec)


DATASETS = [SyntheticLSR]
