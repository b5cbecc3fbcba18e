"""Models that an evaluation adapts for every client, computed a chunk of clients at a time.

Per-FedAvg's personalization step, FedAvg+FT's fine-tuning and the personal fine-tuning of FFGG, FedAlt and
FedSim adapt every client's model before each evaluation: ``[N, ...]`` models that exist only to be scored.
Without a row limit they are computed in one stack, as the algorithm's ``eval_models``. Under a memory budget
that splits the N clients into row chunks (``hetfl.engine.chunks.row_chunks``) they are
:class:`ClientModels`: every local step's minibatches are drawn first, for all N clients in client order (the
same draws as the one stack), then each chunk of clients is adapted through all its steps, scored
(``hetfl.engine.evaluate.Evaluator.scores`` on those clients) and dropped before the next chunk starts, so
that one chunk's adapted models are resident, never N. Each client's numbers are the same either way (the
same kernels on its rows; ``tests/test_memory.py`` runs every algorithm both ways).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from hetfl.engine.federation import Federation
from hetfl.engine.grad import trained_chunks
from hetfl.engine.optim import ClientOptimizer
from hetfl.engine.params import Params
from hetfl.engine.sampler import BatchSampler

Chunks = Iterator[tuple[slice, Params]]


class ClientModels:
    """Per-client models ``[N, ...]`` computed a chunk of clients at a time (stacked only by :meth:`stack`).

    Iterating yields ``(s, params)``: ``s`` a slice of the clients (in order, together every client once) and
    ``params [s.stop - s.start, ...]`` their models, valid until the next chunk is asked for.

    Args:
        num_clients: N.
        chunks: called once per iteration; returns the chunks' iterator (a fresh computation each time).
        views: the parameters every client only reads, one row viewed by every row of a chunk
            (``hetfl.engine.params.broadcast``'s ``views``: a partially personalized model's global part).
    """

    def __init__(self, num_clients: int, chunks: Callable[[], Chunks], views: Iterable[str] = ()):
        self.num_clients = num_clients
        self.views = set(views)
        self._chunks = chunks

    def __iter__(self) -> Chunks:
        return self._chunks()

    def stack(self, zeros: Callable[[Params], Params]) -> Params:
        """The N models in one stack ``[N, ...]``: the single chunk itself where one chunk holds every
        client (no copy); else each chunk's rows copied into ``zeros(like)`` (a placed stack,
        ``hetfl.engine.state.ClientStates.zeros``) as it comes, the :attr:`views` one row viewed N times.

        Raises:
            ValueError: no chunk came.
        """
        out: Params | None = None
        for s, part in self:
            if out is None and s.start == 0 and s.stop == self.num_clients:
                return part
            if out is None:
                expanded = {k: v[:1].expand(self.num_clients, *v.shape[1:]) for k, v in part.items()}
                out = {**expanded, **zeros({k: v for k, v in expanded.items() if k not in self.views})}
            for k, v in part.items():
                if k not in self.views:
                    out[k][s] = v
        if out is None:
            raise ValueError("ClientModels: no chunk came")
        return out


def adapted_chunks(
    fed: Federation,
    sampler: BatchSampler,
    start: Callable[[slice], Params],
    lrs: list[float],
    split: str = "train",
    optimizer: Callable[[Params], ClientOptimizer] | None = None,
) -> Chunks:
    """Every client adapted by ``len(lrs)`` local SGD steps, step k of size ``lrs[k]`` (``local_sgd``'s steps,
    ``hetfl.engine.grad.sgd_step``), a row chunk of clients at a time.

    The steps are ``hetfl.engine.grad.trained_chunks``' over the N clients, a chunk handed over at a time (the draws of
    ``local_sgd`` over all N clients, step by step, or of consecutive ``local_sgd`` calls of one step each;
    under a row limit every step drawn first, then chunk by chunk). For each chunk ``s`` of
    ``row_chunks(fed.model, N)`` (every client at once without a row limit), ``start(s)`` gives its models
    (new tensors the steps may write; a parameter only read may be a view), ``optimizer(models)`` their
    client optimizer (None: plain steps of every parameter), and the chunk takes all its steps (none where no
    parameter is trained, as ``local_sgd``) and is yielded.

    Args:
        start: ``s -> Params [r, ...]``, the models the clients ``s`` start from.
        lrs: the step sizes, one per step.
        split: the data the steps draw from (``train``; ``test`` for Per-FedAvg's ``adaptation: official``).

    Returns:
        the chunks' iterator of ``(s, params)``: the clients ``s`` and their adapted models ``[r, ...]``.
    """

    def setup(s: slice, params: Params) -> tuple[ClientOptimizer | None, None]:
        return (optimizer(params) if optimizer is not None else None), None

    clients = fed.all_clients()
    return trained_chunks(fed, sampler, start, clients, len(lrs), list(lrs), setup, whole=False, split=split)
