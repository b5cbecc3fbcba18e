"""The server's sums over a round's clients, Σ_{i∈S} p_i x_i, taken a chunk of clients at a time.

A FedAvg-like server averages the S uploaded models (McMahan et al. 2017, Algorithm 1, line 9:
w_{t+1} ← Σ_k (n_k/m_t) w^k_{t+1}) and sums per-client updates (SCAFFOLD's Σ_i ω_i Δc_i, FedDyn's h, FedNova's
Σ_i coef_i (w_i − w_t)). Floating-point addition is not associative, so how the S terms are added decides the
last bits of the result, and training carries those bits on. Two orders (the run option ``aggregation``):

- ``batched`` (the default): torch's reduction over the stacked ``[S, ...]`` terms (``sum(0)``, ``mean(0)``,
  ``tensordot``), one call over all S clients. Its kernel adds the rows in an order of its own that depends
  on S (several interleaved partial sums from S = 5 on), so it cannot be taken over parts of the S: the
  round holds every client's local model until it aggregates.
- ``sequential``: a running sum in the clients' order, one term at a time, ((p_0 x_0 + p_1 x_1) + p_2 x_2)
  + ..., each term p_i x_i rounded to the parameters' dtype before it is added, as the official pFedMe code's
  ``aggregate_parameters`` adds its users' ``param * ratio`` (``FLAlgorithms/servers/serverbase.py``). Any
  split of the S clients into consecutive chunks adds the same terms in the same order: the same bits. A
  round can then train a chunk of clients, add it and drop it (``hetfl.algorithms.baselines.common``,
  Per-FedAvg, ``hetfl.algorithms.personalized.partial``), so its S local models are never resident at once, under any memory budget, with the numbers
  of the unchunked run.

The two orders give results that differ in the last bits (and, through training, beyond); each is
deterministic. ``tests/test_aggregation.py`` checks both against their definitions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from hetfl.engine.params import Params, average, weighted_sum

AGGREGATIONS = ("batched", "sequential")

Reduce = Callable[[Tensor, Tensor], Tensor]
"""``reduce(p [S], x [S, ...]) -> [1, ...]``: a batched weighted sum of one parameter (``p`` in its dtype)."""


class ClientSum:
    """Σ_{i∈S} p_i x_i over a round's S clients (``weights`` p ``[S]``), or their mean (1/S) Σ_i x_i
    (``weights`` None), taken a chunk of clients at a time (:meth:`add`).

    Args:
        clients: S, the round's number of clients.
        weights: p ``Tensor[S]`` (any float dtype; cast to each parameter's dtype, as the server's
            ``(p * x).sum(0)``), or None for the uniform mean.
        sequential: ``aggregation: sequential`` (a running sum in client order: any chunks, the same bits);
            False: ``batched``, torch's reduction of all S rows in one :meth:`add` (``mean(0)``, or ``reduce``).
        reduce: the batched weighted sum (:data:`Reduce`; :func:`weighted_sum`, or FedNova's ``tensordot``);
            ignored by the sequential order and by the mean.

    Raises:
        ValueError: weights of another length than ``clients``.
    """

    def __init__(self, clients: int, weights: Tensor | None, sequential: bool, reduce: Reduce = weighted_sum):
        if weights is not None and len(weights) != clients:
            raise ValueError(f"ClientSum: {len(weights)} weights for {clients} clients")
        self.clients, self.weights, self.sequential, self.reduce = clients, weights, sequential, reduce
        self.total: Params | None = None
        self.added = 0

    def add(self, s: slice, params: Params) -> None:
        """Adds the terms of the clients ``s`` (a slice of the S, following the ones added before):
        ``params [r, ...]``, their rows, in order; not modified.

        Raises:
            ValueError: ``s`` not the next rows, or over S; a second chunk in the batched order (it sums all
                S rows in one call).
        """
        r = s.stop - s.start
        if s.start != self.added or s.stop > self.clients or any(len(v) != r for v in params.values()):
            raise ValueError(f"ClientSum.add: rows {s.start}:{s.stop} after {self.added} of {self.clients}")
        if not self.sequential and r != self.clients:
            raise ValueError(
                f"ClientSum.add: the batched order sums all {self.clients} rows at once, got {r}"
            )
        self.added = s.stop
        if not self.sequential:
            self.total = {k: self._batched(v) for k, v in params.items()}
            return
        keys = list(params)
        first = params[keys[0]]
        p = None if self.weights is None else self.weights[s].to(device=first.device, dtype=first.dtype)
        for i in range(r):
            row = [params[k][i] for k in keys]
            if p is not None:  # the term p_i x_i, rounded to the dtype
                row = torch._foreach_mul(row, p[i])
            if self.total is None:
                self.total = {k: v.unsqueeze(0).clone() for k, v in zip(keys, row, strict=True)}
            else:
                torch._foreach_add_([self.total[k][0] for k in keys], row)

    def result(self) -> Params:
        """The sum ``[1, ...]`` (or the mean: the sum divided by S) once all S clients are added.

        Raises:
            ValueError: clients missing.
        """
        if self.added != self.clients or self.total is None:
            raise ValueError(f"ClientSum.result: {self.added} of {self.clients} clients added")
        if self.weights is None and self.sequential:
            return {k: v / self.clients for k, v in self.total.items()}
        return self.total

    def _batched(self, v: Tensor) -> Tensor:
        if self.weights is None:
            return v.mean(0, keepdim=True)
        return self.reduce(self.weights.to(device=v.device, dtype=v.dtype), v)


def sequential(hp) -> bool:
    """Whether the run's hyper-parameters ``hp`` ask the server to add the clients' terms in their order, a chunk
    of clients at a time (``aggregation: sequential``; hyper-parameters without the option: ``batched``)."""
    return getattr(hp, "aggregation", "batched") == "sequential"


def client_sum(hp, clients: Tensor, weights: Tensor | None, reduce: Reduce = weighted_sum) -> ClientSum:
    """A sum Σ_{i∈S} p_i x_i over a round's ``clients [S]`` (``weights`` p ``[S]``; None: the mean) in the order
    of the run's ``aggregation`` (:func:`sequential` of ``hp``), to be given the clients' terms a chunk of
    clients at a time (:class:`ClientSum`)."""
    return ClientSum(len(clients), weights, sequential(hp), reduce)


def aggregation_weights(fed: Any, hp: Any, sampled: Tensor) -> Tensor | None:
    """The weights of the sampled clients' models in the server's average, from the run's ``client_weights``
    (``hetfl.algorithms.hyperparameters.Federated``): None for ``uniform`` (or hyper-parameters without the
    option: 1/S each), or n_i / Σ_{j∈S} n_j for ``samples`` (``Tensor[S]`` float64, CPU; n_i the clients'
    training samples, ``fed.train.sizes``), in the order of ``sampled [S]``."""
    if getattr(hp, "client_weights", "uniform") == "uniform":
        return None
    w = fed.train.sizes[sampled.cpu()].double()
    return w / w.sum()


def aggregate(fed: Any, hp: Any, params: Params, sampled: Tensor) -> Params:
    """The server's average ``[1, ...]`` of the sampled clients' models ``params [S, ...]`` (row c:
    ``sampled[c]``'s), weighted by :func:`aggregation_weights` (McMahan et al. 2017, Algorithm 1, line 9)."""
    return average(params, aggregation_weights(fed, hp, sampled))
