"""Batched calls in row chunks: a federation's model takes at most ``max_rows`` clients' rows per call.

A training job's memory plan (``hetfl.engine.memory.plan_memory``) sets how many client rows one batched model
call may take; :class:`ChunkedModel`, the federation's model (``Federation.model``), splits the calls over more
rows into chunks of at most that many and stitches the results. Every client's rows are computed by the same
kernels either way, so chunking changes no number wherever the batched kernels compute each row independently
of the others (``hetfl.engine.memory``'s docstring says where; ``tests/test_memory.py`` runs every algorithm
both ways). The engine's own loops over chunks (a chunk of clients through all its local steps,
``hetfl.engine.grad``; an evaluation's adapted models, ``hetfl.engine.adapt``) ask :func:`row_chunks` for the
same slices and :func:`stitch` their results.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from hetfl.engine.params import Params, param_rows


def _rows(tensors: dict[str, Tensor], s: slice) -> dict[str, Tensor]:
    return {k: v[s] for k, v in tensors.items()}


def row_chunks(model, rows: int, group: int = 1) -> list[slice] | None:
    """The row slices of a call on ``rows`` rows under ``model.max_rows`` (None: one call): the fewest
    chunks of at most ``max_rows`` rows, of sizes as equal as they can be (10 rows under 8: 5 and 5).

    With ``group`` > 1 the rows come in groups of ``group`` consecutive rows that a chunk never splits (the
    N pairs (i, 0..N−1) of one model in the collaborative family): chunks of whole groups, at most
    ``max_rows // group`` groups each and never fewer than one group (which may exceed ``max_rows``).

    Raises:
        ValueError: ``group`` below 1 or not dividing ``rows``.
    """
    if group < 1 or rows % group:
        raise ValueError(f"row_chunks: group must be >= 1 and divide the {rows} rows, got {group}")
    limit = getattr(model, "max_rows", None)  # a model without a limit (not a ChunkedModel) has none
    if limit is None or rows <= limit:
        return None
    groups = rows // group
    count = -(-groups // max(1, limit // group))
    edges = [group * (groups * i // count) for i in range(count + 1)]
    return [slice(a, b) for a, b in zip(edges, edges[1:], strict=False)]


def stitch(parts, rows: int):
    """The chunks' results ``parts`` (an iterable of ``(s, results)``: ``s`` a slice of the ``rows`` rows,
    ``results`` a tuple of tensors ``[len(s), ...]``, dicts of them or None) copied into ``[rows, ...]``
    outputs as each chunk comes, so that one chunk's results and the outputs are resident at once; a single
    chunk of every row is returned as it is (no copy)."""
    out = None
    for s, part in parts:
        if out is None and s.start == 0 and s.stop == rows:
            return part
        if out is None:
            out = tuple(_empty(p, rows) for p in part)
        for o, p in zip(out, part, strict=True):
            if isinstance(p, dict):
                for k, v in p.items():
                    o[k][s] = v
            elif p is not None:
                o[s] = p
        del part
    return out


def _empty(part, rows: int):
    if part is None:
        return None
    if isinstance(part, dict):
        return {k: v.new_empty((rows, *v.shape[1:])) for k, v in part.items()}
    return part.new_empty((rows, *part.shape[1:]))


class ChunkedModel:
    """A batched model (``hetfl.models.base.BatchedModel``, or ``hetfl.engine.execution.LoopModel``) whose
    calls over ``[C, ...]`` client rows run in chunks of at most :attr:`max_rows` rows, the results stitched
    into ``[C, ...]`` (:func:`stitch`): :meth:`forward`, :meth:`loss_grads`, :meth:`loss_grads_preact` take
    and return what the model's do. A call on one row of parameters (a shared server model) is never split.
    Every other attribute (shapes, ``init``, ``personal_keys``, ``task``, ...) is the model's.

    Args:
        model: the model (:attr:`inner`).
        max_rows: the most client rows per call; None: every call whole (the federation's default until a
            training job's memory plan sets a limit, ``Federation.set_call_limits``).

    Raises:
        ValueError: ``max_rows`` below 1.
    """

    def __init__(self, model, max_rows: int | None = None):
        if isinstance(model, ChunkedModel):
            raise ValueError("ChunkedModel: the model is chunked already")
        self.inner = model
        self.max_rows = check_rows(max_rows)

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (unpickling, copy): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"ChunkedModel({self.inner!r}, max_rows={self.max_rows})"

    def _call(self, name: str, per_row: int, params: Params, *args, **kwargs):
        """``inner.<name>(params, *args)`` in row chunks of ``params`` and its first ``per_row`` arguments
        (``[C, ...]`` or None), the others passed unchanged to every chunk.

        Raises:
            ValueError: ``params`` not one ``Params`` of a server row or one row per row of the data
                (``hetfl.engine.params.param_rows``).
        """
        method = getattr(self.inner, name)
        data = args[0]  # [C, ...], or one row that serves every client
        clients = data.shape[0] if data is not None and data.shape[0] > 1 else None
        rows = param_rows(params, f"model.{name}", clients)
        chunks = row_chunks(self, rows)
        if chunks is None:
            return method(params, *args, **kwargs)
        single = []  # whether the method returns one tensor (forward) rather than a tuple

        def part(s: slice):
            cut = [None if a is None else a[s] for a in args[:per_row]]
            out = method(_rows(params, s), *cut, *args[per_row:], **kwargs)
            single[:] = [isinstance(out, Tensor)]
            return s, ((out,) if single[0] else out)

        out = stitch((part(s) for s in chunks), rows)
        return out[0] if single[0] else out

    def forward(self, params: Params, x: Tensor) -> Tensor:
        """The model's outputs ``[C, K, B]`` of ``params [C, ...]`` on ``x [C, B, ...]``, in row chunks."""
        return self._call("forward", 1, params, x)

    def loss_grads(self, params: Params, x: Tensor, y: Tensor, mask: Tensor | None) -> tuple[Tensor, Params]:
        """The model's ``(loss [C], grads [C, ...])`` on ``x, y, mask`` (``[C, B, ...]``), in row chunks."""
        return self._call("loss_grads", 3, params, x, y, mask)

    def loss_grads_preact(self, params: Params, z1: Tensor, y: Tensor, mask: Tensor | None, **kwargs):
        """The model's ``loss_grads_preact`` (``BatchedModel.loss_grads_preact``) in row chunks of ``params``,
        ``z1``, ``y`` and ``mask``."""
        return self._call("loss_grads_preact", 3, params, z1, y, mask, **kwargs)


def check_rows(rows: int | None) -> int | None:
    """``rows`` as a row limit: None or at least 1.

    Raises:
        ValueError: ``rows`` below 1.
    """
    if rows is not None and rows < 1:
        raise ValueError(f"rows per call must be >= 1 or None, got {rows}")
    return rows


def limit_rows(model: ChunkedModel, rows: int | None) -> ChunkedModel:
    """Limit the calls of ``model`` (a :class:`ChunkedModel`, changed in place: every holder of it sees the
    change) to at most ``rows`` client rows (None: no limit). Returns ``model``.

    Raises:
        TypeError: ``model`` is not a ``ChunkedModel`` (a federation's model is one).
        ValueError: ``rows`` below 1.
    """
    if not isinstance(model, ChunkedModel):
        raise TypeError(
            f"limit_rows: a ChunkedModel (a federation's model) is needed, got {type(model).__name__}"
        )
    model.max_rows = check_rows(rows)
    return model


__all__ = ["ChunkedModel", "check_rows", "limit_rows", "row_chunks", "stitch"]
