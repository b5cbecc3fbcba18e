"""What the FedAvg-like algorithms share: one server model, stateless clients that start every round from it
and take their local steps through the engine, and the server optimizer.

FedAvg, FedProx, SCAFFOLD, FedNova and FedDyn differ in what a client adds to its minibatch gradient (a
:data:`hetfl.engine.grad.Correction`: FedProx's proximal term, SCAFFOLD's control variates, FedDyn's linear
and quadratic terms) and in what the server does with the clients' models; the round's skeleton is this
class's: :meth:`FedAvgLike.participants` orders the sampled clients by their numbers of local steps τ_i
(``hetfl.engine.local_steps``), :meth:`FedAvgLike.local_chunks` runs every client's τ_i steps from the
server model in one batched loop (``hetfl.engine.grad.trained_chunks``) and hands the local models over a
chunk of clients at a time, the server's sums take them as they come (:meth:`FedAvgLike.client_sum`,
``hetfl.engine.aggregation.ClientSum``), and the server optimizer (``hetfl.engine.server.ServerOptimizer``,
kept as ``server``) applies the run's server step. With ``aggregation: batched`` (the default) there is one chunk, the S clients; with
``sequential`` and a memory budget that limits the clients per call, one chunk per call, so the round's S
local models are never resident at once (the same numbers as the unchunked ``sequential`` run).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import torch
from torch import Tensor

from hetfl.algorithms.base import FederatedAlgorithm
from hetfl.algorithms.hyperparameters import FedAvgFamily
from hetfl.engine.aggregation import aggregation_weights, client_sum, sequential
from hetfl.engine.grad import Correction, trained_chunks
from hetfl.engine.local_steps import LocalSteps
from hetfl.engine.memory import MemoryProfile
from hetfl.engine.optim import client_optimizer, scheduled_lr
from hetfl.engine.params import Params, broadcast
from hetfl.engine.server import ServerOptimizer


class FedAvgLike(FederatedAlgorithm):
    """Base of the FedAvg-like algorithms, and the start of a new algorithm whose clients start each round from
    the server's model (docs/guides/adding-an-algorithm.md). State: the server model ``w: [1, ...]`` and the
    clients' local step counts (``work``: the ``local_steps`` random stream, for ``local_steps_per_client:
    uniform``).

    A subclass sets ``name`` and ``Hyperparameters`` (derived from ``FedAvgFamily``, the default, for the shared
    options) and changes what it needs: :meth:`correction` (a local objective: FedProx), or :meth:`round`,
    written with :meth:`participants` (S_t and each client's τ_i), :meth:`local_chunks` (their local models, a
    chunk at a time), ``client_sum`` (the server's sums in the run's ``aggregation`` order), ``self.server.step``
    (the server optimizer) and ``self.evaluator.client_scores`` (losses and accuracies of the sampled clients: q-FedAvg).
    The memory plan's defaults fit it (``FederatedAlgorithm.memory_profile``).

    FedAvg-like algorithms have no personalization: their ``personal`` model is the global one (an alias,
    evaluated once), so that they sit beside personalized algorithms in the same figures and claims.
    """

    models = ("global", "personal")
    Hyperparameters = FedAvgFamily

    def __init__(self, fed, hp, seed, sampling="epoch"):
        super().__init__(fed, hp, seed, sampling)
        self.w = self.fed.initial_model(self.seed)
        self.server = ServerOptimizer(hp)  # the run's server optimizer (the plain average by default)
        self.work = LocalSteps(hp, fed.train.sizes, seed)

    def participants(self, sampled: Tensor) -> tuple[Tensor, Tensor]:
        """This round's clients ``sampled [S]``, longest first, and their local steps τ_i (``LongTensor[S]``
        each; :meth:`hetfl.engine.local_steps.LocalSteps.order`). With equal τ_i the order is ``sampled``'s.
        Call once per round (``uniform`` draws)."""
        return self.work.order(sampled)

    def population_weights(self) -> Tensor:
        """ω_i of every client in the objective Σ_i ω_i f_i: 1/N (``client_weights: uniform``) or n_i/n
        (``samples``): ``Tensor[N]`` float64 (SCAFFOLD's server control, FedDyn's h)."""
        if getattr(self.hp, "client_weights", "uniform") == "samples":
            return self.fed.weights
        return torch.full((self.fed.num_clients,), 1.0 / self.fed.num_clients, dtype=torch.float64)

    def correction(self, clients: Tensor) -> Correction | None:
        """What the clients ``clients [S]`` (longest first) add to their minibatch gradients this round: an
        algorithm's local objective (:data:`hetfl.engine.grad.Correction`); None (FedAvg's): nothing."""
        return None

    def round(self, t: int, sampled: Tensor) -> None:
        """FedAvg's round (McMahan et al. 2017, Algorithm 1, lines 5-9; FedProx's, Li et al. 2020, Algorithm 2,
        with its local objective as :meth:`correction`): every client of S_t takes its local steps from w_t,
        the server takes the (weighted) mean of their models, w_{t+1} ← Σ_k p_k w^k_{t+1}, through the run's
        server optimizer."""
        clients, steps = self.participants(sampled)  # S_t, longest first (the server's order when τ_i equal)
        keys = self.trained_keys() or list(self.w)
        mean = client_sum(self.hp, clients, aggregation_weights(self.fed, self.hp, clients))
        for s, local in self.local_chunks(t, clients, steps):  # ClientUpdate(k, w_t) for each k ∈ S_t
            mean.add(s, {k: local[k] for k in keys})
        mean = {**self.w, **mean.result()}  # Σ_k (n_k/m_t) w^k_{t+1}
        self.w = self.server.step(self.w, mean)  # w_{t+1}: the mean, or the server optimizer's

    def trained_keys(self) -> list[str] | None:
        """The parameters the clients step and the server averages (None: all; FedBABU: the body, the others
        stay the server's)."""
        return None

    def local_chunks(self, t: int, clients: Tensor, steps: Tensor) -> Iterator[tuple[slice, Params]]:
        """The clients' models after their local steps from the server model w_t: ``(s, models [r, ...])`` of
        the clients ``clients[s]``, a chunk at a time (``hetfl.engine.grad.trained_chunks``): one chunk of all
        S with ``aggregation: batched``; with ``sequential``, one per call under the run's row limit (each
        handed over before the next chunk starts: drop it).

        Each client starts from w_t with zero momentum (stateless clients; the shared client optimizer at
        round ``t``'s step size) and takes ``steps`` (``[S]``, non-increasing, from :meth:`participants`)
        steps on its own minibatches, adding :meth:`correction` (of the chunk's clients) to each minibatch
        gradient; the parameters outside :meth:`trained_keys` are not stepped.
        """
        return self._trained(t, clients, steps, whole=not sequential(self.hp))

    def local_training(self, t: int, clients: Tensor, steps: Tensor) -> Params:
        """The clients' models ``[S, ...]`` after their local steps from w_t, all S at once (what
        :meth:`local_chunks` yields in one chunk)."""
        ((_, local),) = self._trained(t, clients, steps, whole=True)
        return local

    def _trained(self, t: int, clients: Tensor, steps: Tensor, whole: bool) -> Iterator[tuple[slice, Params]]:
        lr = scheduled_lr(self.hp.lr, t, self.hp, self.rounds)

        def setup(s: slice, local: Params):  # w_i ← w_t for each i of the chunk, zero momentum
            return client_optimizer(self.fed, self.hp, local, self.trained_keys()), self.correction(
                clients[s]
            )

        def start(s: slice) -> Params:
            return broadcast(self.w, s.stop - s.start)

        return trained_chunks(self.fed, self.sampler, start, clients, steps, lr, setup, whole=whole)

    def memory_profile(self) -> MemoryProfile:
        """FedAvg's round (``FederatedAlgorithm.memory_profile``) of τ_max minibatches a client, the most local
        steps a client takes (``local_steps``, in epochs of its largest client's minibatches with
        ``local_steps_unit: epochs``)."""
        tau_max = self.work.tau * int(self.work.steps_per_unit.max())
        return dataclasses.replace(super().memory_profile(), drawn_steps=tau_max)

    def eval_models(self) -> dict[str, Params]:
        return {"global": self.w, "personal": self.w}
