"""The engine's one parameter type, :data:`Params`, and the operations on it.

``Params = dict[str, Tensor]``: parameter name -> a stack with one row per model, ``Tensor[C, *shape]``. Its
row conventions:

- **a server row**: ``[1, ...]``, one shared model (the global model, a server's state);
- **a client stack**: ``[C, ...]``, row i the model of the i-th client of the call (the sampled ``S_t``, or all
  N), each row its own storage;
- **shared rows**: ``[C, ...]`` viewed from one row (stride 0 on the first dimension, :func:`broadcast`'s
  ``views``, :func:`shared_rows`): read-only, every client reads the same values.

Every tensor of one ``Params`` has the same number of rows; a batched model's call (``BatchedModel.forward``,
``loss_grads``) takes a client stack, or a server row for every client. The engine's entry points check it
(:func:`param_rows`: the federation's model calls, ``hetfl.engine.chunks.ChunkedModel``; the server's average,
:func:`average`; the evaluation, ``hetfl.engine.evaluate.Evaluator``).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor

Params = dict[str, Tensor]
"""Name -> ``Tensor[rows, *shape]``: a server row, a client stack or shared rows (module docstring)."""


def param_rows(params: Params, where: str, rows: int | None = None) -> int:
    """The number of rows of ``params``, checked against the row conventions (module docstring) at the engine
    entry point ``where``: a non-empty dict of tensors of at least one dimension, all with the same number of
    rows; with ``rows``, a server row (1) or ``rows`` rows (a client stack or shared rows).

    Raises:
        ValueError: naming ``where``, the parameter and its rows.
    """
    if not params:
        raise ValueError(f"{where}: no parameters")
    counts = {}
    for k, v in params.items():
        if not isinstance(v, Tensor) or v.dim() == 0:
            raise ValueError(f"{where}: parameter {k!r} must be a tensor [rows, ...], got {type(v).__name__}")
        counts[k] = v.shape[0]
    first, n = next(iter(counts.items()))
    for k, c in counts.items():
        if c != n:
            raise ValueError(
                f"{where}: parameter {k!r} has {c} rows, {first!r} {n}: one Params, one row count"
            )
    if rows is not None and n not in (1, rows):
        raise ValueError(
            f"{where}: parameters of {n} rows for {rows} clients: a server row [1, ...] or one row per client"
        )
    return n


def broadcast(params: Params, clients: int, views: Iterable[str] = ()) -> Params:
    """Copies of a shared model ``[1, ...]`` for ``clients`` clients: ``[clients, ...]`` (new storage); the
    parameters named in ``views`` are its one row viewed ``clients`` times instead (``expand``: no memory, the
    same values; read-only: nothing may write them), for models whose shared part every client only reads
    (an evaluation's fine-tuning of the personal parameters alone)."""
    views = set(views)
    return {
        k: v.expand(clients, *v.shape[1:]) if k in views else v.expand(clients, *v.shape[1:]).clone()
        for k, v in params.items()
    }


def shared_rows(tensor: Tensor) -> bool:
    """Whether ``tensor [C, ...]`` is one row viewed C > 1 times (:func:`broadcast`'s ``views``)."""
    return tensor.dim() > 0 and tensor.shape[0] > 1 and tensor.stride(0) == 0


def select(params: Params, index: Tensor, device: torch.device | None = None) -> Params:
    """Rows ``index [S]`` of per-client parameters: ``[S, ...]`` (a copy), on ``device`` (None: where
    ``params`` are; a per-client state placed off the device is read with the compute device here:
    ``hetfl.engine.state``)."""
    index = index.to(next(iter(params.values())).device)
    return {k: v.index_select(0, index).to(device or v.device) for k, v in params.items()}


def rows(params: Params, s: slice) -> Params:
    """Views of the rows ``s`` of per-client parameters ``[C, ...]``: ``[r, ...]`` (no copy)."""
    return {k: v[s] for k, v in params.items()}


def average(params: Params, weights: Tensor | None = None) -> Params:
    """Weighted mean over the client dimension, kept as ``[1, ...]``.

    Args:
        params: ``[S, ...]``.
        weights: ``Tensor[S]`` summing to 1; ``None`` for the uniform mean 1/S.

    Raises:
        ValueError: ``params`` not one ``Params`` (:func:`param_rows`) or not one weight per row.
    """
    rows = param_rows(params, "average")
    if weights is not None and len(weights) != rows:
        raise ValueError(f"average: {len(weights)} weights for {rows} rows of parameters")
    if weights is None:
        return {k: v.mean(0, keepdim=True) for k, v in params.items()}
    return {k: weighted_sum(weights.to(device=v.device, dtype=v.dtype), v) for k, v in params.items()}


def weighted_sum(p: Tensor, x: Tensor) -> Tensor:
    """Σ_i p_i x_i over the rows of ``x [S, ...]`` (``p [S]``, the dtype of ``x``): ``[1, ...]``, torch's
    ``sum(0)`` of the products (the server's weighted average, :func:`average`)."""
    return (p.reshape(-1, *([1] * (x.dim() - 1))) * x).sum(0, keepdim=True)


def lerp(a: Params, b: Params, beta: float) -> Params:
    """``(1 - beta) * a + beta * b`` for every parameter (shapes broadcast)."""
    return {k: a[k] + beta * (b[k] - a[k]) for k in a}


def all_finite(params: Params) -> bool:
    """True if no parameter holds NaN or ±inf (one device sync)."""
    return bool(torch.stack([torch.isfinite(v).all() for v in params.values()]).all())


def clone(params: Params) -> Params:
    return {k: v.clone() for k, v in params.items()}
