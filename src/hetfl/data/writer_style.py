"""A writer's handwriting style: one fixed geometric and stroke transform applied to all of a writer's digits.

The style of ``mnist_writers`` (``hetfl.data.mnist_writers``), standing in for what differs between
FEMNIST's writers (Caldas et al. 2018): slant, size, orientation, stroke width and the small wobbles of a
hand. Each writer's style is drawn once, from the writer's own seeded stream, and is the same for every
image the writer holds; a label means the same digit for every writer.

A style is five numbers and a displacement field:

- ``rotation`` ρ (degrees, counter-clockwise) and ``shear`` s (degrees: the slant, x' = x + tan(s)·y);
- ``scale`` σ and ``aspect`` a: the glyph is scaled by σ·a horizontally and σ/a vertically;
- ``thickness`` t in [-1, 1]: t > 0 blends the image toward its 3×3 grey dilation (bolder strokes),
  t < 0 toward its 3×3 grey erosion (thinner ones), by |t|;
- an elastic field (Simard et al., ICDAR 2003): white noise smoothed by a Gaussian of ``elastic_sigma``
  pixels, scaled to a root-mean-square displacement of ``elastic`` pixels.

:func:`render` warps with bilinear sampling (``torch.nn.functional.grid_sample``, zeros outside the
image, float64), then applies the stroke width; pixels stay in [0, 1].
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class StyleRanges:
    """How far styles spread across writers (the ``mnist_writers`` options of the same names).

    ``rotation``, ``shear``: the largest |angle| in degrees (uniform); ``scale``: σ is log-uniform in
    [1/(1 + scale), 1 + scale]; ``aspect``: a is log-uniform in [1/(1 + aspect), 1 + aspect];
    ``thickness``: t uniform in [-thickness, thickness]; ``elastic``: the field's RMS displacement in
    pixels; ``elastic_sigma``: its smoothness in pixels.
    """

    rotation: float = 10.0
    shear: float = 20.0
    scale: float = 0.15
    aspect: float = 0.1
    thickness: float = 0.7
    elastic: float = 1.0
    elastic_sigma: float = 4.0


@dataclass(frozen=True)
class Style:
    """One writer's style (module docstring); ``field``: float64 ``[2, H, W]`` displacement in pixels
    (x then y), or None for none."""

    rotation: float
    shear: float
    scale: float
    aspect: float
    thickness: float
    field: np.ndarray | None

    def summary(self) -> dict[str, float]:
        """The style's numbers (the field as its RMS displacement in pixels), for the data's statistics."""
        rms = 0.0 if self.field is None else float(np.sqrt((self.field**2).sum(0).mean()))
        return {
            "rotation": self.rotation,
            "shear": self.shear,
            "scale": self.scale,
            "aspect": self.aspect,
            "thickness": self.thickness,
            "elastic_rms": rms,
        }


def _log_uniform(rng: np.random.Generator, spread: float) -> float:
    return math.exp(rng.uniform(-math.log1p(spread), math.log1p(spread)))


def draw_style(rng: np.random.Generator, ranges: StyleRanges, shape: tuple[int, int]) -> Style:
    """Draw one writer's style from ``rng`` (its own stream), for images of ``shape`` (H, W).

    The draws are made in a fixed order (rotation, shear, scale, aspect, thickness, then the field's
    ``2·H·W`` normals, drawn even when ``elastic`` is 0 so the other writers' styles do not depend on it).
    """
    from scipy.ndimage import gaussian_filter

    rotation = rng.uniform(-ranges.rotation, ranges.rotation)
    shear = rng.uniform(-ranges.shear, ranges.shear)
    scale = _log_uniform(rng, ranges.scale)
    aspect = _log_uniform(rng, ranges.aspect)
    thickness = rng.uniform(-ranges.thickness, ranges.thickness)
    noise = rng.standard_normal((2, *shape))
    field = None
    if ranges.elastic > 0:
        smooth = np.stack([gaussian_filter(n, ranges.elastic_sigma, mode="wrap") for n in noise])
        rms = float(np.sqrt((smooth**2).sum(0).mean()))
        field = smooth * (ranges.elastic / rms)
    return Style(rotation, shear, scale, aspect, thickness, field)


def _forward_matrix(style: Style) -> np.ndarray:
    """The 2×2 map from a glyph's coordinates to the writer's: rotation · shear · scale (x, y; y down)."""
    r = math.radians(style.rotation)
    rotate = np.array([[math.cos(r), math.sin(r)], [-math.sin(r), math.cos(r)]])  # counter-clockwise, y down
    shear = np.array([[1.0, -math.tan(math.radians(style.shear))], [0.0, 1.0]])  # top leans right for s > 0
    scale = np.diag([style.scale * style.aspect, style.scale / style.aspect])
    return rotate @ shear @ scale


def render(images: np.ndarray, style: Style) -> np.ndarray:
    """Write ``images`` in ``style``.

    Args:
        images: ``[n, 1, H, W]`` pixels in [0, 1] (any float dtype; the background 0).
        style: the writer's style.

    Returns:
        float64 ``[n, 1, H, W]`` in [0, 1].

    Raises:
        ValueError: ``images`` is not ``[n, 1, H, W]``, or the field's shape differs from (H, W).
    """
    x = torch.as_tensor(np.asarray(images, dtype=np.float64))
    if x.ndim != 4 or x.shape[1] != 1:
        raise ValueError(f"render needs images [n, 1, H, W], got shape {tuple(x.shape)}")
    n, _, h, w = x.shape
    if style.field is not None and style.field.shape != (2, h, w):
        raise ValueError(f"the style's field is {style.field.shape}, the images {(h, w)}")
    # output pixel centres in grid_sample's normalized coordinates (align_corners=False), then the input
    # point each one reads: inverse(forward) · (p - field), in pixels about the centre
    ys, xs = torch.meshgrid(
        torch.arange(h, dtype=torch.float64), torch.arange(w, dtype=torch.float64), indexing="ij"
    )
    px, py = xs - (w - 1) / 2, ys - (h - 1) / 2
    if style.field is not None:
        field = torch.as_tensor(style.field)
        px, py = px - field[0], py - field[1]
    inverse = torch.as_tensor(np.linalg.inv(_forward_matrix(style)))
    sx = inverse[0, 0] * px + inverse[0, 1] * py
    sy = inverse[1, 0] * px + inverse[1, 1] * py
    # pixel index i = s + (w - 1)/2 has the normalized coordinate (2i + 1)/w - 1 = 2s/w
    grid = torch.stack([2 * sx / w, 2 * sy / h], -1)
    out = F.grid_sample(
        x, grid.expand(n, h, w, 2), mode="bilinear", padding_mode="zeros", align_corners=False
    )
    t = style.thickness
    if t > 0:
        out = out + t * (F.max_pool2d(out, 3, 1, 1) - out)
    elif t < 0:
        out = out + (-t) * (-F.max_pool2d(-out, 3, 1, 1) - out)
    return out.clamp_(0.0, 1.0).numpy()
