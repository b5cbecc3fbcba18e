"""``mnist_landmarks``: a GLDv2-like overpersonalized population built offline from the full MNIST (or
Fashion-MNIST), with a disjoint public part to pretrain on.

GLDv2 (the federated Landmarks-User-160k of Hsu et al., ECCV 2020; the GLDv2 column of FFGG's Table 2,
Mishchenko et al., TMLR 2025, App. E.6) has 2,028 landmarks photographed by Wikipedia users: each user holds
a few tens of photos of a few landmarks, a landmark is photographed by several users, half of each user's
photos are held out for testing (the 823 users with at least 50), and the model starts from ResNet-18
pretrained on ImageNet, public images of other classes. A personal part can then fit every user's training
photos (FFGG's adapter reaches 100 % train accuracy there) while training alone from so few photos stays
poor (Local 18.73 % against FedAvg's 51.43). None of it has an offline copy; this dataset keeps that
mechanism on real digits, deterministically from ``seed``:

1. **Landmarks.** ``landmarks_per_class`` landmarks per source class, L = 10 · ``landmarks_per_class``
   classes in all: landmark ℓ is class ℓ mod 10 seen in a fixed view of its own (a ``hetfl.data.writer_style``
   style drawn once, wider than a writer's: rotation, shear, scale, aspect, stroke width and an elastic
   field), so telling landmarks apart is fine-grained, as telling two churches apart is.
2. **Users' sizes.** User u holds n_u = clip(round(``size_median`` · exp(``size_sigma`` · z_u)),
   ``size_min``, ``size_max``) photos, z_u ~ N(0, 1).
3. **Users' landmarks.** Landmarks have Zipf popularity p_ℓ ∝ r_ℓ^(−``popularity``) (r_ℓ a random rank of
   landmark ℓ: some landmarks are photographed by many users). The landmarks of one source class stand in
   one "city"; user u lives in ``user_classes`` cities, drawn without replacement by their landmarks' total
   popularity, and photographs k_u = 1 + Poisson(``user_landmarks`` − 1) distinct landmarks of them (at
   most all of them), drawn without replacement by popularity; its photos are dealt among them by a
   multinomial draw of Dir(1) proportions. So a user's own task is fine-grained (views of one digit, with
   ``user_classes: 1``) and a few photos cannot teach it, while the federation's photos can.
4. **Photos.** Each photo is a distinct source image of its landmark's class rendered in the landmark's
   view; a source image is used at most once in the whole dataset.
5. **Users** are the natural users 0 .. U − 1, with no train/test division of their own: the partition
   draws it within each user, e.g. ``partition: {scheme: natural_range, first: 0, clients: U,
   test_fraction: 0.5}`` (half of each user's photos held out, as in GLDv2).
6. **The public part** stands for ImageNet: ``public_per_class`` plain source images of every class (no
   landmark's view, none a user's) with classes of their own, L .. L + 9, as ImageNet's classes are not
   landmarks; so the model has L + 10 outputs. It is dealt round-robin into ``public_users`` further users
   U .. U + ``public_users`` − 1: ``{scheme: natural_range, first: U, clients: public_users}`` in a
   pretraining run's own ``partition``.

Streams: ``numpy`` ``SeedSequence(seed)`` spawned by purpose (0: the landmarks' popularity, then the users'
sizes and landmarks; 1: which images; 2: each user's order; (3, ℓ): landmark ℓ's view), so a landmark's
popularity and view do not depend on the number of users. The data job writes ``landmarks.json`` beside the
data: each landmark's class, popularity and view, each user's size and landmarks. The images come from
``hetfl.data.mnist`` (verified by their content's hash).
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
from hetfl.data.mnist import SAMPLE_SHAPE
from hetfl.data.mnist_writers import CLASS_COUNTS, SOURCES
from hetfl.data.source import DatasetSource
from hetfl.data.writer_style import StyleRanges, draw_style, render
from hetfl.errors import ConfigError

SOURCE_CLASSES = 10


def _streams(seed: int, purpose: int | tuple[int, int]) -> np.random.Generator:
    key = purpose if isinstance(purpose, tuple) else (purpose,)
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))


@dataclasses.dataclass(frozen=True)
class Plan:
    """What the options decide before any image is read.

    Attributes:
        counts: int64 ``[users, L]``, each user's photos of each landmark (zero outside its landmarks).
        popularity: float64 ``[L]``, each landmark's probability of being chosen first (step 3).
        public: int64 ``[public_users, 10]``, each public user's images of each source class.
    """

    counts: np.ndarray
    popularity: np.ndarray
    public: np.ndarray

    @property
    def landmarks(self) -> int:
        """L, the number of landmark classes."""
        return self.counts.shape[1]

    @property
    def user_sizes(self) -> np.ndarray:
        """int64 ``[users + public_users]``: the users' n_u, then the public users' sizes."""
        return np.concatenate([self.counts.sum(1), self.public.sum(1)])

    def class_demand(self) -> np.ndarray:
        """int64 ``[10]``: source images of each class the users and the public part take together."""
        per_landmark = self.counts.sum(0)
        return per_landmark.reshape(-1, SOURCE_CLASSES).sum(0) + self.public.sum(0)


def plan(spec: dict, key: str = "dataset") -> Plan:
    """Sizes, landmarks and the public part of a normalized spec (steps 2, 3 and 6 of the module docstring).

    Raises:
        ConfigError: ``size_min`` > ``size_max``; ``public_per_class`` too small to give every public user
            two images (one to train on, one to test); more images of a class demanded than the source has
            (naming ``users``).
    """
    if spec["size_min"] > spec["size_max"]:
        raise ConfigError(f"{key}.size_min", f"{spec['size_min']} > size_max {spec['size_max']}")
    public_total = SOURCE_CLASSES * spec["public_per_class"]
    if public_total < 2 * spec["public_users"]:
        raise ConfigError(
            f"{key}.public_per_class",
            f"{public_total} public images dealt to {spec['public_users']} public users leave one with fewer "
            f"than 2 (one to train on, one to test); needs >= {-(-2 * spec['public_users'] // SOURCE_CLASSES)}",
        )
    rng = _streams(spec["seed"], 0)
    users, landmarks = spec["users"], SOURCE_CLASSES * spec["landmarks_per_class"]
    rank = rng.permutation(landmarks) + 1  # first: the landmarks do not depend on the users
    sizes = np.clip(
        np.rint(spec["size_median"] * np.exp(spec["size_sigma"] * rng.standard_normal(users))),
        spec["size_min"],
        spec["size_max"],
    ).astype(np.int64)
    popularity = rank.astype(np.float64) ** -spec["popularity"]
    popularity /= popularity.sum()
    counts = np.zeros((users, landmarks), dtype=np.int64)
    city = np.arange(landmarks) % SOURCE_CLASSES  # a landmark's class: the "city" it stands in
    city_popularity = np.bincount(city, weights=popularity, minlength=SOURCE_CLASSES)
    for u in range(users):
        cities = rng.choice(SOURCE_CLASSES, size=spec["user_classes"], replace=False, p=city_popularity)
        near = np.flatnonzero(np.isin(city, cities))
        k = min(near.size, 1 + int(rng.poisson(spec["user_landmarks"] - 1.0)))
        chosen = rng.choice(near, size=k, replace=False, p=popularity[near] / popularity[near].sum())
        counts[u, chosen] = rng.multinomial(int(sizes[u]), rng.dirichlet(np.ones(k)))
    # the public part: class c's images dealt round-robin over the public users, class after class
    slot = np.arange(public_total) % spec["public_users"]
    label = np.repeat(np.arange(SOURCE_CLASSES), spec["public_per_class"])
    public = np.zeros((spec["public_users"], SOURCE_CLASSES), dtype=np.int64)
    np.add.at(public, (slot, label), 1)
    p = Plan(counts, popularity, public)
    available = np.asarray(CLASS_COUNTS[spec["source"]], dtype=np.int64)
    over = np.flatnonzero(p.class_demand() > available)
    if over.size:
        c = int(over[0])
        raise ConfigError(
            f"{key}.users",
            f"{users} users of median size {spec['size_median']} and the public part need "
            f"{int(p.class_demand()[c])} images of class {c}; {spec['source']} has {int(available[c])}: "
            "lower users, size_median or public_per_class",
        )
    return p


def _view_ranges(spec: dict) -> StyleRanges:
    return StyleRanges(**{f.name: spec[f.name] for f in dataclasses.fields(StyleRanges)})


def build(spec: dict, images: np.ndarray, labels: np.ndarray) -> tuple[Dataset, dict]:
    """The population from the source's raw images (steps 1–6).

    Args:
        spec: the normalized spec; images: uint8 ``[n, 1, 28, 28]`` (0..255); labels: int64 ``[n]``.

    Returns:
        the dataset (user by user, each user's photos in a drawn order, the public users last) and its record:
        each landmark's ``class``, ``popularity`` and view numbers, each user's ``size`` and ``landmarks``.
    """
    p = plan(spec)
    pick = _streams(spec["seed"], 1)
    queues = [pick.permutation(np.flatnonzero(labels == c)) for c in range(SOURCE_CLASSES)]
    taken = np.zeros(SOURCE_CLASSES, dtype=np.int64)

    def take(c: int, k: int) -> np.ndarray:
        rows = queues[c][taken[c] : taken[c] + k]
        taken[c] += k
        return rows

    shape = SAMPLE_SHAPE[1:]
    views = [
        draw_style(_streams(spec["seed"], (3, ell)), _view_ranges(spec), shape) for ell in range(p.landmarks)
    ]
    pixels = images / 255.0
    order_rng = _streams(spec["seed"], 2)
    xs, ys, users, user_records = [], [], [], []

    def add(u: int, x: np.ndarray, y: np.ndarray) -> None:
        perm = order_rng.permutation(len(y))
        xs.append(x[perm])
        ys.append(y[perm])
        users.append(np.full(len(y), u, dtype=np.int64))

    for u, row in enumerate(p.counts):
        owned = np.flatnonzero(row)
        parts = [render(pixels[take(ell % SOURCE_CLASSES, int(row[ell]))], views[ell]) for ell in owned]
        y = np.repeat(owned, row[owned]).astype(np.int64)
        add(u, np.concatenate(parts), y)
        user_records.append({"user": u, "size": int(row.sum()), "landmarks": owned.tolist()})
    for j, row in enumerate(p.public):
        rows = np.concatenate([take(c, int(row[c])) for c in range(SOURCE_CLASSES)])
        y = p.landmarks + np.repeat(np.arange(SOURCE_CLASSES), row).astype(np.int64)
        u = len(p.counts) + j
        add(u, pixels[rows], y)
        user_records.append({"user": u, "public": True, "size": int(row.sum())})
    x = normalize_pixels(np.concatenate(xs), spec["normalize"], 1.0)
    dataset = Dataset(
        "mnist_landmarks",
        x,
        np.concatenate(ys),
        p.landmarks + SOURCE_CLASSES,
        users=np.concatenate(users),
    )
    landmark_records = [
        {"landmark": ell, "class": ell % SOURCE_CLASSES, "popularity": float(p.popularity[ell])}
        | views[ell].summary()
        for ell in range(p.landmarks)
    ]
    return dataset, {"landmarks": landmark_records, "users": user_records}


@dataclasses.dataclass(frozen=True)
class Options(ConfigOptions):
    """The population's options (module docstring; the view ranges as ``hetfl.data.writer_style``'s)."""

    source: Literal[SOURCES] = "mnist"
    landmarks_per_class: int = option(10, lo=1, hi=100)
    users: int = option(200, lo=2, hi=10000)
    size_median: float = option(30.0, lo=1.0, hi=7000.0)
    size_sigma: float = option(0.5, lo=0.0, hi=3.0)
    size_min: int = option(10, lo=2)
    size_max: int = option(200, lo=2)
    user_classes: int = option(1, lo=1, hi=SOURCE_CLASSES)
    user_landmarks: float = option(4.0, lo=1.0, hi=100.0)
    popularity: float = option(1.0, lo=0.0, hi=5.0)
    public_per_class: int = option(200, lo=1, hi=6000)
    public_users: int = option(10, lo=1, hi=1000)
    rotation: float = option(15.0, lo=0.0, hi=90.0)
    shear: float = option(20.0, lo=0.0, hi=60.0)
    scale: float = option(0.15, lo=0.0, hi=1.0)
    aspect: float = option(0.15, lo=0.0, hi=1.0)
    thickness: float = option(0.5, lo=0.0, hi=1.0)
    elastic: float = option(1.5, lo=0.0, hi=10.0)
    elastic_sigma: float = option(4.0, lo=0.5, hi=28.0)
    normalize: Literal[NORMALIZATIONS] = "unit"
    seed: int = option(0, lo=0, hi=MAX_SEED)


class MNISTLandmarks(DatasetSource):
    """``mnist_landmarks``: a GLDv2-like population of users photographing a few landmarks, and a public
    part to pretrain on (module docstring)."""

    name = "mnist_landmarks"
    Options = Options

    @classmethod
    def info(cls, spec, key="dataset") -> DatasetInfo:
        """Sizes and label counts from the options alone (:func:`plan`; no image is read)."""
        p = plan(spec, key)
        counts = np.concatenate([p.counts.sum(0), p.public.sum(0)])
        return DatasetInfo(
            name=cls.name,
            num_samples=int(counts.sum()),
            num_classes=int(counts.size),
            class_counts=counts,
            sample_shape=SAMPLE_SHAPE,
            num_users=int(p.user_sizes.size),
            user_counts=p.user_sizes,
        )

    @classmethod
    def load(cls, spec, root) -> Dataset:
        """Build from the verified source images; writes ``root/landmarks.json`` (the record of :func:`build`).

        Raises:
            DataUnavailableError: the source images are not available (``hetfl.data.idx_sources``).
        """
        images, labels = load_idx_images(spec["source"], root)
        dataset, record = build(spec, images, labels)
        Path(root).mkdir(parents=True, exist_ok=True)
        (Path(root) / "landmarks.json").write_text(json.dumps(record, indent=1) + "\n")
        sizes = np.asarray([r["size"] for r in record["users"] if not r.get("public")])
        print(
            f"mnist_landmarks: {len(record['landmarks'])} landmarks, {sizes.size} users, {int(sizes.sum())} "
            f"photos of {spec['source']} (sizes min {sizes.min()}, median {int(np.median(sizes))}, max "
            f"{sizes.max()}), {len(dataset) - int(sizes.sum())} public images"
        )
        return dataset


DATASETS = [MNISTLandmarks]
