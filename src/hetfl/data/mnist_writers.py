"""``mnist_writers``: a FEMNIST-like population of writers built offline from the full MNIST (or Fashion-MNIST).

FEMNIST (LEAF, Caldas et al. 2018; the EMNIST column of FFGG's Table 2, Mishchenko et al., TMLR 2025) has
thousands of writers with a few tens to a few hundred characters each: a label means the same character for
every writer, writers differ in style and in which characters they wrote, and each writer's train and test
samples come from the same hand. None of it has an offline copy; this dataset keeps that mechanism on real
digits, deterministically from ``seed``:

1. **Sizes.** Writer w holds n_w = clip(round(``size_median`` · exp(``size_sigma`` · z_w)), ``size_min``,
   ``size_max``) images, z_w ~ N(0, 1): log-normal, heavy-tailed.
2. **Label skew.** Its label proportions are drawn from Dir(``label_alpha`` · 1_K) and its n_w images of
   each label counted by a multinomial draw.
3. **A real style stratum.** Each digit image is measured for its slant (the image moments' μ11/μ02, the
   shear that would deskew it) and its ink (the sum of its pixels), each cut into ``strata`` quantile bins
   within its class. A writer draws one slant bin and one ink bin and takes its images from that stratum
   (from the class's other strata, in turn, where the stratum runs out), so its digits share a real
   slant and stroke weight. ``strata: 1``: no stratification.
4. **A synthetic style.** One fixed style per writer (``hetfl.data.writer_style``): rotation, shear,
   scale, aspect, stroke thickness and an elastic field, applied to every image the writer holds.
5. **Train and test within each writer:** its images shuffled, the first int((1 − ``test_fraction``) n_w)
   for training (the data's own division: ``partition: {scheme: natural}`` makes each writer a client).

Streams: ``numpy`` ``SeedSequence(seed)`` spawned by purpose (0: sizes, labels and strata; 1: which
images; 2: the train/test order; (3, w): writer w's style), so a writer's style does not depend on the
number of writers. The data job writes ``writers.json`` beside the data: each writer's size, stratum and
style numbers. The images themselves come from ``hetfl.data.mnist`` (verified by their content's hash).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Literal

import numpy as np

from hetfl.config_options import ConfigOptions, option
from hetfl.data.checks import MAX_SEED
from hetfl.data.dataset import NORMALIZATIONS, Dataset, DatasetInfo, normalize_pixels
from hetfl.data.idx_sources import load_idx_images
from hetfl.data.mnist import FASHION_CLASS_COUNTS, MNIST_CLASS_COUNTS, SAMPLE_SHAPE
from hetfl.data.partitioners.common import min_client_size, num_train
from hetfl.data.source import DatasetSource
from hetfl.data.writer_style import StyleRanges, draw_style, render
from hetfl.errors import ConfigError

SOURCES = ("mnist", "fashion_mnist")
CLASS_COUNTS = {"mnist": MNIST_CLASS_COUNTS, "fashion_mnist": FASHION_CLASS_COUNTS}


def _streams(seed: int, purpose: int | tuple[int, int]) -> np.random.Generator:
    key = purpose if isinstance(purpose, tuple) else (purpose,)
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))


@dataclasses.dataclass(frozen=True)
class Plan:
    """What the options decide before any image is read.

    Attributes:
        counts: int64 ``[writers, K]``, each writer's images of each label.
        strata: int64 ``[writers, 2]``, each writer's slant bin and ink bin (0 .. strata − 1).
    """

    counts: np.ndarray
    strata: np.ndarray

    @property
    def sizes(self) -> np.ndarray:
        """int64 ``[writers]``: n_w."""
        return self.counts.sum(1)


def plan(spec: dict, key: str = "dataset") -> Plan:
    """Sizes, label counts and strata of a normalized spec (steps 1–3 of the module docstring).

    Raises:
        ConfigError: ``size_min`` > ``size_max``; ``size_min`` too small for one train and one test image
            at ``test_fraction``; more images of a label demanded than the source has (naming ``writers``).
    """
    if spec["size_min"] > spec["size_max"]:
        raise ConfigError(f"{key}.size_min", f"{spec['size_min']} > size_max {spec['size_max']}")
    need = min_client_size(spec["test_fraction"])
    if spec["size_min"] < need:
        raise ConfigError(
            f"{key}.size_min",
            f"{spec['size_min']} images leave a writer without a train or a test image at test_fraction "
            f"{spec['test_fraction']}; needs >= {need}",
        )
    available = np.asarray(CLASS_COUNTS[spec["source"]], dtype=np.int64)
    rng = _streams(spec["seed"], 0)
    writers = spec["writers"]
    z = rng.standard_normal(writers)
    sizes = np.clip(
        np.rint(spec["size_median"] * np.exp(spec["size_sigma"] * z)), spec["size_min"], spec["size_max"]
    )
    proportions = rng.dirichlet(np.full(available.size, spec["label_alpha"]), size=writers)
    counts = np.stack([rng.multinomial(int(n), p) for n, p in zip(sizes, proportions, strict=True)])
    strata = rng.integers(0, spec["strata"], size=(writers, 2))
    demand = counts.sum(0)
    over = np.flatnonzero(demand > available)
    if over.size:
        c = int(over[0])
        raise ConfigError(
            f"{key}.writers",
            f"{writers} writers of median size {spec['size_median']} need {int(demand[c])} images of label {c}; "
            f"{spec['source']} has {int(available[c])}: lower writers or size_median",
        )
    return Plan(counts.astype(np.int64), strata.astype(np.int64))


def measure(images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each image's slant μ11/μ02 (moments about its centroid, y down) and ink (its pixel sum).

    Args:
        images: ``[n, 1, H, W]`` non-negative pixels.

    Returns:
        float64 ``(slant [n], ink [n])``; a blank image has slant 0 and ink 0.
    """
    x = np.asarray(images, dtype=np.float64).reshape(len(images), *images.shape[-2:])
    h, w = x.shape[1:]
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float64)
    ink = x.sum((1, 2))
    mass = np.where(ink > 0, ink, 1.0)
    cx = (x * xs).sum((1, 2)) / mass
    cy = (x * ys).sum((1, 2)) / mass
    dx = xs[None] - cx[:, None, None]
    dy = ys[None] - cy[:, None, None]
    mu11 = (x * dx * dy).sum((1, 2))
    mu02 = (x * dy * dy).sum((1, 2))
    slant = np.where(mu02 > 0, mu11 / np.where(mu02 > 0, mu02, 1.0), 0.0)
    return slant, ink


def _bins(values: np.ndarray, labels: np.ndarray, strata: int) -> np.ndarray:
    """Quantile bin (0 .. strata − 1) of each value within its label."""
    out = np.zeros(values.size, dtype=np.int64)
    for c in np.unique(labels):
        rows = np.flatnonzero(labels == c)
        ranks = np.argsort(np.argsort(values[rows], kind="stable"), kind="stable")
        out[rows] = ranks * strata // rows.size
    return out


def choose_images(p: Plan, y: np.ndarray, stratum: np.ndarray, strata: int, seed: int) -> list[np.ndarray]:
    """Each writer's image indices (step 3): label by label, from its stratum first, then the label's
    other strata in order; without replacement across writers.

    Args:
        p: the plan; y: int64 ``[n]`` source labels; stratum: int64 ``[n]``, each image's stratum
            (slant bin · strata + ink bin); strata: bins per measure; seed: the dataset seed.

    Returns:
        per writer, int64 indices into the source, label by label.
    """
    rng = _streams(seed, 1)
    num_classes = p.counts.shape[1]
    cells = strata * strata
    queues, taken = {}, {}  # per (stratum, label): its images in a drawn order, and how many are given out
    for c in range(num_classes):
        order = rng.permutation(np.flatnonzero(y == c))
        for q in range(cells):
            queues[q, c], taken[q, c] = order[stratum[order] == q], 0
    out = []
    for w, (slant_bin, ink_bin) in enumerate(p.strata):
        own = int(slant_bin) * strata + int(ink_bin)
        picked = []
        for c in range(num_classes):
            k = int(p.counts[w, c])
            for step in range(cells):
                cell = ((own + step) % cells, c)
                start = taken[cell]
                take = queues[cell][start : start + k]
                taken[cell] = start + take.size
                picked.append(take)
                k -= take.size
                if k == 0:
                    break
        out.append(np.concatenate(picked).astype(np.int64))
    return out


def build(spec: dict, images: np.ndarray, labels: np.ndarray) -> tuple[Dataset, list[dict]]:
    """The population from the source's raw images (steps 1–5).

    Args:
        spec: the normalized spec; images: uint8 ``[n, 1, 28, 28]`` (0..255); labels: int64 ``[n]``.

    Returns:
        the dataset (writer by writer, each writer's training images then its test images) and, per
        writer, its record (``size``, ``train``, ``stratum``, the style's numbers).
    """
    p = plan(spec)
    strata = spec["strata"]
    slant, ink = measure(images)
    stratum = _bins(slant, labels, strata) * strata + _bins(ink, labels, strata)
    chosen = choose_images(p, labels, stratum, strata, spec["seed"])
    order_rng = _streams(spec["seed"], 2)
    ranges = StyleRanges(**{f.name: spec[f.name] for f in dataclasses.fields(StyleRanges)})
    xs, ys, users, split, records = [], [], [], [], []
    for w, idx in enumerate(chosen):
        idx = order_rng.permutation(idx)
        k = num_train(idx.size, spec["test_fraction"])
        style = draw_style(_streams(spec["seed"], (3, w)), ranges, SAMPLE_SHAPE[1:])
        xs.append(render(images[idx] / 255.0, style))
        ys.append(labels[idx])
        users.append(np.full(idx.size, w, dtype=np.int64))
        split.append(np.repeat(np.array([0, 1], np.int8), [k, idx.size - k]))
        records.append(
            {"writer": w, "size": int(idx.size), "train": k, "stratum": p.strata[w].tolist()}
            | style.summary()
        )
    x = normalize_pixels(np.concatenate(xs), spec["normalize"], 1.0)
    dataset = Dataset(
        "mnist_writers", x, np.concatenate(ys), 10, users=np.concatenate(users), split=np.concatenate(split)
    )
    return dataset, records


@dataclasses.dataclass(frozen=True)
class Options(ConfigOptions):
    """The population's options (module docstring; the style ranges in ``hetfl.data.writer_style``)."""

    source: Literal[SOURCES] = "mnist"
    writers: int = option(500, lo=2, hi=10000)
    size_median: float = option(48.0, lo=1.0, hi=7000.0)
    size_sigma: float = option(0.9, lo=0.0, hi=3.0)
    size_min: int = option(12, lo=2)
    size_max: int = option(1000, lo=2)
    label_alpha: float = option(1.0, lo=0.0, lo_open=True)
    strata: int = option(3, lo=1, hi=10)
    test_fraction: float = option(0.25, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    rotation: float = option(10.0, lo=0.0, hi=90.0)
    shear: float = option(20.0, lo=0.0, hi=60.0)
    scale: float = option(0.15, lo=0.0, hi=1.0)
    aspect: float = option(0.1, lo=0.0, hi=1.0)
    thickness: float = option(0.7, lo=0.0, hi=1.0)
    elastic: float = option(1.0, lo=0.0, hi=10.0)
    elastic_sigma: float = option(4.0, lo=0.5, hi=28.0)
    normalize: Literal[NORMALIZATIONS] = "unit"
    seed: int = option(0, lo=0, hi=MAX_SEED)


class MNISTWriters(DatasetSource):
    """``mnist_writers``: a FEMNIST-like population of writers of real digits (module docstring)."""

    name = "mnist_writers"
    Options = Options

    @classmethod
    def info(cls, spec, key="dataset") -> DatasetInfo:
        """Sizes and label counts from the options alone (:func:`plan`; no image is read)."""
        p = plan(spec, key)
        return DatasetInfo(
            name=cls.name,
            num_samples=int(p.sizes.sum()),
            num_classes=p.counts.shape[1],
            class_counts=p.counts.sum(0),
            sample_shape=SAMPLE_SHAPE,
            num_users=int(p.sizes.size),
            user_counts=p.sizes,
            predefined_split=True,
        )

    @classmethod
    def load(cls, spec, root) -> Dataset:
        """Build from the verified source images; writes ``root/writers.json`` (each writer's record).

        Raises:
            DataUnavailableError: the source images are not available (``hetfl.data.idx_sources``).
        """
        images, labels = load_idx_images(spec["source"], root)
        dataset, records = build(spec, images, labels)
        Path(root).mkdir(parents=True, exist_ok=True)
        (Path(root) / "writers.json").write_text(json.dumps(records, indent=1) + "\n")
        sizes = np.asarray([r["size"] for r in records])
        print(
            f"mnist_writers: {sizes.size} writers, {int(sizes.sum())} images of {spec['source']} "
            f"(sizes min {sizes.min()}, median {int(np.median(sizes))}, max {sizes.max()})"
        )
        return dataset


DATASETS = [MNISTWriters]
