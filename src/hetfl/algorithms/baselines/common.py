"""What the FedAvg-like algorithms share: one server model, stateless clients that start every round from it
and take their local steps through the engine, and the server optimizer.

FedAvg, FedProx, SCAFFOLD, FedNova and FedDyn differ in what a client adds to its minibatch gradient (a
:data:`hetfl.engine.grad.Correction`: FedProx's proximal term, SCAFFOLD's control variates, FedDyn's linear
and quadratic terms) and in what the server does with the clients' models; the round's skeleton is this
class's: :meth:`FedAvgLike.participants` orders the sampled clients by their numbers of local steps τ_i
(``hetfl.engine.local_steps``), :meth:`FedAvgLike.local_training` runs every client's τ_i steps from the
server model in one batched loop (``hetfl.engine.grad.local_sgd``), and ``server_step``
(``FederatedAlgorithm``) applies the run's server optimizer.
"""

from __future__ import annotations

import torch
from torch import Tensor

from hetfl.algorithms.base import FederatedAlgorithm
from hetfl.engine.grad import Correction, local_sgd
from hetfl.engine.local_steps import LocalSteps
from hetfl.engine.params import Params, broadcast


class FedAvgLike(FederatedAlgorithm):
    """Base of the FedAvg-like algorithms. State: the server model ``w: [1, ...]`` and the clients' local step
    counts (``work``: the ``local_steps`` random stream, for ``local_steps_per_client: uniform``).

    FedAvg-like algorithms have no personalization: their ``personal`` model is the global one (an alias,
    evaluated once), so that they sit beside personalized algorithms in the same figures and claims.
    """

    models = ("global", "personal")

    def __init__(self, fed, hp, seed, sampling="epoch"):
        super().__init__(fed, hp, seed, sampling)
        self.w = self.initial_model()
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

    def local_training(self, t: int, clients: Tensor, steps: Tensor) -> Params:
        """The clients' models ``[S, ...]`` after their local steps from the server model w_t.

        Each client starts from w_t with zero momentum (stateless clients; the shared client optimizer at
        round ``t``'s step size) and takes ``steps`` (``[S]``, non-increasing, from :meth:`participants`)
        steps on its own minibatches, adding :meth:`correction` to each minibatch gradient.
        """
        local = broadcast(self.w, len(clients))  # w_i ← w_t for each i ∈ S_t, [S, ...]
        opt = self.client_optimizer(local)  # stateless clients: zero momentum each round
        lr, correction = self.lr_at(t), self.correction(clients)
        local_sgd(self.fed, self.sampler, local, clients, steps, lr, optimizer=opt, correction=correction)
        return local

    def eval_models(self) -> dict[str, Params]:
        return {"global": self.w, "personal": self.w}
