"""Heterogeneous local work: the number of local steps τ_i each client takes in a round.

Clients of a federation rarely do the same amount of local work: with E local epochs of minibatches of B,
client i takes τ_i = E⌈n_i/B⌉ steps, and slower or busier clients do fewer (Wang, Liu, Liang, Joshi, Poor,
"Tackling the Objective Inconsistency Problem in Heterogeneous Federated Optimization", NeurIPS 2020,
introduction; Li et al., "Federated Optimization in Heterogeneous Networks", MLSys 2020: systems
heterogeneity, devices that do variable amounts of work).
The FedAvg-like algorithms (FedAvg, FedProx, SCAFFOLD, FedNova) take the rule as hyper-parameters
(``hetfl.algorithms.hyperparameters.HeterogeneousSteps``, config/README.md):

- ``local_steps_per_client``: ``equal`` (every client τ = ``local_steps``: the default, each paper's
  setting), ``spread`` (deterministic, fixed: client i of N gets u_i = τ_min + round(i (τ − τ_min)/(N − 1)),
  evenly spread over [τ_min, τ] by client index), ``uniform`` (u_i drawn uniformly from {τ_min, ..., τ} for
  every client anew each round: FedNova's experiments draw local epochs E_i ~ U(2, 5)), with τ_min =
  ``local_steps_min``;
- ``local_steps_unit``: ``steps`` (τ_i = u_i) or ``epochs`` (τ_i = u_i ⌈n_i/B⌉: u_i passes over the
  client's n_i training samples in minibatches of B, the original FedAvg's E epochs).

The uniform draws come from the run's ``local_steps`` random stream for all N clients each round, sampled
or not: every algorithm of a study sees the same τ_i in the same round.
"""

from __future__ import annotations

import torch
from torch import Tensor

from hetfl.engine.rng import generator

PER_CLIENT = ("equal", "spread", "uniform")
UNITS = ("steps", "epochs")


class LocalSteps:
    """τ_i for every client, in SGD steps, and the order in which a batched round runs them.

    Args:
        hp: hyper-parameters with ``local_steps`` τ (the most units a client takes) and optionally
            ``local_steps_per_client`` (absent: ``equal``), ``local_steps_min`` τ_min, ``local_steps_unit``
            (absent: ``steps``) and ``batch_size`` B (for ``epochs``).
        sizes: ``LongTensor[N]``, each client's training samples n_i.
        seed: the run seed (stream ``local_steps``, used by ``uniform`` only).

    Raises:
        ValueError: an unknown rule or unit, or not 1 ≤ τ_min ≤ τ for ``spread`` and ``uniform``.
    """

    def __init__(self, hp, sizes: Tensor, seed: int):
        self.tau = int(hp.local_steps)
        self.per_client = getattr(hp, "local_steps_per_client", "equal")
        self.unit = getattr(hp, "local_steps_unit", "steps")
        self.tau_min = int(getattr(hp, "local_steps_min", 1) or 1)
        if self.per_client not in PER_CLIENT or self.unit not in UNITS:
            raise ValueError(f"local steps: per client one of {PER_CLIENT}, unit one of {UNITS}")
        if self.per_client != "equal" and not 1 <= self.tau_min <= self.tau:
            raise ValueError(
                f"local steps: need 1 <= local_steps_min <= local_steps, got {self.tau_min}, {self.tau}"
            )
        n = sizes.long().cpu()
        batch = int(getattr(hp, "batch_size", 1))
        self.steps_per_unit = (n + batch - 1) // batch if self.unit == "epochs" else torch.ones_like(n)
        self.generator = generator(seed, "local_steps") if self.per_client == "uniform" else None

    @property
    def num_clients(self) -> int:
        return len(self.steps_per_unit)

    def units(self) -> Tensor:
        """u_i of this round for all N clients (local steps or epochs): ``LongTensor[N]``; ``uniform``
        draws anew at each call (call once per round)."""
        n = self.num_clients
        if self.per_client == "equal":
            return torch.full((n,), self.tau, dtype=torch.long)
        if self.per_client == "spread":
            span = self.tau - self.tau_min
            return (
                self.tau_min + torch.round(torch.arange(n, dtype=torch.float64) * span / max(n - 1, 1)).long()
            )
        return torch.randint(self.tau_min, self.tau + 1, (n,), generator=self.generator)

    def steps(self) -> Tensor:
        """τ_i of this round for all N clients, in SGD steps: ``LongTensor[N]`` (call once per round)."""
        return self.units() * self.steps_per_unit

    def order(self, sampled: Tensor) -> tuple[Tensor, Tensor]:
        """This round's participants, longest first, and their local steps (call once per round).

        The clients are sorted by τ_i, descending and stable (equal τ_i keep the server's order: with
        ``equal`` the order is ``sampled`` itself), so that the clients still working at a local step are a
        prefix of the stack (``hetfl.engine.grad.local_sgd``).

        Args:
            sampled: ``LongTensor[S]``, the server's clients of this round.

        Returns:
            ``(clients [S], steps [S])``: ``LongTensor``s, steps non-increasing.
        """
        sampled = sampled.cpu()
        tau = self.steps()[sampled]
        steps, index = torch.sort(tau, descending=True, stable=True)
        return sampled[index], steps
