"""All-for-one-opt: the oracle collaboration, uniform weights inside each client's true cluster.

Philippenko, Le Bars, Scaman, Massoulié, arXiv:2507.06844, 2025, §5: "each client collaborates exclusively
with clients from the same cluster using uniform weights", "a theoretical lower bound for the true
All-for-one" (docs/papers/all_for_one.md §2.2). Used where ground-truth clusters exist (the ``clusters``
partition, or a ``natural`` split of a dataset that records them: ``Federation.cluster``):

    α_ik = n_k 1{c(k) = c(i)} / Σ_{j: c(j)=c(i)} n_j        (constant; n_k = 1 by default: 1/|C(i)|)

and the All-for-one update θ_i ← θ_i − η Σ_k α_ik ∇ℓ(θ_i; B_ik) (``AllForOneBase``). Without clusters (all
clients in cluster 0) it is All-for-one with uniform weights over everyone.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from hetfl.algorithms.collaborative.common import AllForOneBase, CollaborativeHyperparameters, client_sizes


@dataclasses.dataclass(frozen=True)
class AllForOneOracleHyperparameters(CollaborativeHyperparameters):
    """``client_size`` n_k (``batch``: uniform, the paper; ``samples``: train sizes) and the shared setting."""

    client_size: Literal["batch", "samples"] = "batch"


class AllForOneOracle(AllForOneBase):
    """All-for-one with the oracle weights. State: ``theta [N, ...]``, ``alpha [N, N]`` (fixed)."""

    name = "all_for_one_oracle"
    Hyperparameters = AllForOneOracleHyperparameters

    def __init__(self, fed, hp, seed, sampling="epoch"):
        super().__init__(fed, hp, seed, sampling)
        cluster = fed.cluster.cpu()
        same = (cluster.unsqueeze(0) == cluster.unsqueeze(1)).double()
        a = same * client_sizes(fed, hp.client_size).unsqueeze(0)
        self.record(a / a.sum(1, keepdim=True))


ALGORITHMS = {"all_for_one_oracle": AllForOneOracle}
