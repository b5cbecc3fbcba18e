"""``mnist_writers``: the FEMNIST-like writer population and the writer style it renders."""

from __future__ import annotations

import numpy as np
import pytest

from hetfl.data.mnist_writers import build, choose_images, measure, plan
from hetfl.data.registry import dataset_info, normalize_dataset_spec
from hetfl.data.writer_style import Style, StyleRanges, draw_style, render
from hetfl.errors import ConfigError


def spec(**options):
    return normalize_dataset_spec({"name": "mnist_writers", **options}, "dataset")


def stroke_images(n=40, seed=0):
    """``n`` 28×28 images of one random thick stroke each (uint8), labels 0..9 in turn."""
    rng = np.random.default_rng(seed)
    x = np.zeros((n, 1, 28, 28), dtype=np.uint8)
    for i in range(n):
        r, c = rng.integers(6, 20, size=2)
        x[i, 0, r - 4 : r + 5, c - 1 : c + 2] = 255
    return x, np.arange(n, dtype=np.int64) % 10


def plain(**changes):
    values = {"rotation": 0.0, "shear": 0.0, "scale": 1.0, "aspect": 1.0, "thickness": 0.0, "field": None}
    return Style(**(values | changes))


def test_identity_style_leaves_the_image():
    x, _ = stroke_images(5)
    assert np.allclose(render(x / 255.0, plain()), x / 255.0, atol=1e-12)


def test_quarter_turn_is_rot90():
    x, _ = stroke_images(5)
    out = render(x / 255.0, plain(rotation=90.0))
    assert np.allclose(out, np.rot90(x / 255.0, 1, axes=(-2, -1)), atol=1e-9)


def test_shear_slants_and_thickness_changes_ink():
    bar = np.zeros((1, 1, 28, 28))
    bar[0, 0, 4:24, 13:15] = 1.0
    slanted = render(bar, plain(shear=25.0))
    slant, ink = measure(slanted)
    assert slant[0] < -0.2  # the top leans right: x grows as y falls
    assert measure(bar)[0][0] == pytest.approx(0.0, abs=1e-12)
    bold, thin = render(bar, plain(thickness=0.8)), render(bar, plain(thickness=-0.8))
    assert bold.sum() > bar.sum() > thin.sum() > 0


def test_style_draw_is_seeded_and_the_field_has_its_rms():
    ranges = StyleRanges(elastic=1.5)
    a = draw_style(np.random.default_rng(3), ranges, (28, 28))
    b = draw_style(np.random.default_rng(3), ranges, (28, 28))
    assert a.summary() == b.summary() and np.array_equal(a.field, b.field)
    assert a.summary()["elastic_rms"] == pytest.approx(1.5)
    assert abs(a.rotation) <= ranges.rotation and abs(a.shear) <= ranges.shear
    none = draw_style(np.random.default_rng(3), StyleRanges(elastic=0.0), (28, 28))
    assert none.field is None and none.rotation == a.rotation  # the other draws do not depend on it


def test_plan_sizes_are_heavy_tailed_and_bounded():
    s = spec(writers=400)
    p = plan(s)
    assert p.counts.shape == (400, 10) and p.sizes.min() >= s["size_min"] and p.sizes.max() <= s["size_max"]
    assert np.median(p.sizes) == pytest.approx(s["size_median"], rel=0.15)
    assert p.sizes.max() > 5 * np.median(p.sizes)  # log-normal with sigma 0.9: a heavy tail
    assert np.array_equal(plan(s).counts, p.counts)  # deterministic from the seed
    assert not np.array_equal(plan(spec(writers=400, seed=1)).counts, p.counts)
    skew = (p.counts / p.sizes[:, None]).max(1)
    assert np.median(skew) > 0.2  # Dir(1) label skew: a writer's commonest digit is well above 1/10


def test_info_matches_the_plan():
    s = spec(writers=50)
    info = dataset_info(s)
    p = plan(s)
    assert info.num_users == 50 and info.predefined_split
    assert np.array_equal(info.user_counts, p.sizes)
    assert np.array_equal(info.class_counts, p.counts.sum(0))


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"writers": 1}, "dataset.writers"),
        ({"writers": 9000, "size_median": 500.0}, "dataset.writers"),
        ({"size_min": 1}, "dataset.size_min"),
        ({"size_min": 50, "size_max": 20}, "dataset.size_min"),
        ({"label_alpha": 0.0}, "dataset.label_alpha"),
        ({"shear": float("nan")}, "dataset.shear"),
        ({"source": "emnist"}, "dataset.source"),
    ],
)
def test_bad_options_name_their_key(options, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        dataset_info(spec(**options))


def test_build_keeps_labels_splits_within_writers_and_one_style_each():
    x, y = stroke_images(600)
    x[1::2] = x[0::2]  # pairs of identical images (same label parity is not needed: compare by source)
    s = spec(writers=8, size_median=20.0, size_sigma=0.5, size_min=8, size_max=40, strata=1)
    ds, records = build(s, x, y)
    again, _ = build(s, x, y)
    assert np.array_equal(ds.x, again.x) and np.array_equal(ds.y, again.y)  # to the byte
    assert [r["size"] for r in records] == np.bincount(ds.users).tolist()
    for w, record in enumerate(records):
        rows = np.flatnonzero(ds.users == w)
        assert ds.split[rows].tolist() == [0] * record["train"] + [1] * (record["size"] - record["train"])
        assert 1 <= record["train"] < record["size"]
    # a label keeps its meaning: every image of a writer comes from the source with the same label
    chosen = choose_images(plan(s), y, np.zeros(y.size, dtype=np.int64), 1, s["seed"])
    flat = np.concatenate(chosen)
    assert flat.size == np.unique(flat).size  # no image is given twice
    assert sorted(ds.y.tolist()) == sorted(y[flat].tolist())


def test_a_writers_identical_images_render_identically_and_writers_differ():
    x, y = stroke_images(10)
    x[:] = x[0]
    y[:] = 0
    s = spec(writers=2, size_median=5.0, size_sigma=0.0, size_min=5, size_max=5, strata=1)
    ds, _ = build(s, x, np.zeros(10, dtype=np.int64))
    first, second = ds.x[ds.users == 0], ds.x[ds.users == 1]
    assert all(np.array_equal(first[0], img) for img in first)
    assert not np.allclose(first[0], second[0])


def test_a_writers_style_does_not_depend_on_the_number_of_writers():
    x, y = stroke_images(600)
    small = build(spec(writers=3, size_median=10.0, size_min=8, size_max=20, strata=1), x, y)[1]
    large = build(spec(writers=6, size_median=10.0, size_min=8, size_max=20, strata=1), x, y)[1]
    for a, b in zip(small, large[:3], strict=False):
        assert {k: a[k] for k in ("rotation", "shear", "scale", "thickness")} == {
            k: b[k] for k in ("rotation", "shear", "scale", "thickness")
        }


def test_writers_draw_from_their_stratum_first():
    x, y = stroke_images(2000, seed=4)
    s = spec(writers=20, size_median=10.0, size_sigma=0.3, size_min=8, size_max=20, strata=2)
    p = plan(s)
    rng = np.random.default_rng(0)
    stratum = rng.integers(0, 4, size=y.size)
    chosen = choose_images(p, y, stratum, 2, s["seed"])
    for w, idx in enumerate(chosen):
        own = p.strata[w, 0] * 2 + p.strata[w, 1]
        assert (stratum[idx] == own).all()  # plenty of every (stratum, label): never topped up
    assert np.bincount(np.concatenate([stratum[i] for i in chosen]), minlength=4).min() > 0
