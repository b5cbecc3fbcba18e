"""Fed-Norm-SGDA and Fed-Norm-SGDA+: Algorithm 1 of Sharma, Panda, Joshi, "Federated Minimax
Optimization with Client Heterogeneity", TMLR 2023 (OpenReview NnUmg1chLL; docs/papers/fedminimax.md §2.3).

Each participant i ∈ C^(t) runs τ_i^(t) local SGDA steps (lines 8-13; the "+" variant takes the
y-gradient at the snapshot x̂^(s), refreshed every S rounds, lines 4-6, 11, 16) and sends its update
normalized by ‖ā_i‖₁ (lines 15-17). The server weights client i by w̃_i = p_i n/|C^(t)| (Eq. (3), w_i = p_i,
not renormalized) and scales by the effective number of local steps τ_eff = Σ_{j=1}^n p_j‖ā_j‖₁ (line 20):

    x^(t+1) = x^(t) − γ_s τ_eff Σ_{i∈C} w̃_i (x^(t) − x_i^(t,τ_i))/‖ā_i‖₁
    y^(t+1) = Π_Y( y^(t) + γ_s τ_eff Σ_{i∈C} w̃_i (y_i^(t,τ_i) − y^(t))/‖ā_i‖₁ )

This is lines 15-20 with the paper's server rate γ^s = γ_s η^c (docs/papers/fedminimax.md §2.4, D1:
Tables 3-4's γ^s = 1 read as FedNova's multiplier of the normalized model difference; with equal τ_i and
p_i, full participation and γ_s = 1 it is exactly Local SGDA). With w = p the iterates converge to a
stationary point of F itself, whatever the τ_i (Theorems 1-2, Corollary 1.1). Choices the paper leaves
open, as options: ``tau_eff`` (exact over all n clients | expected | participants), projections after
every y-step, local momentum (off; the paper's experiments use plain SGD for Fed-Norm).

Config names: ``fed_norm_sgda``, ``fed_norm_sgda_plus``, both on client data (the model is x) and on
the quadratic game ``quadratic_game`` (the study's environment picks the implementation).
"""

from __future__ import annotations

import dataclasses

from hetfl.algorithms.minimax.common import Normalized, Snapshot
from hetfl.algorithms.minimax.federated import FederatedMinimax, FederatedSGDAHyperparameters
from hetfl.algorithms.minimax.game import GameHyperparameters, MinimaxGame


@dataclasses.dataclass(frozen=True)
class FedNormSGDAHyperparameters(Normalized, FederatedSGDAHyperparameters):
    """Adds ``server_lr`` γ_s and ``tau_eff`` to ``FederatedSGDAHyperparameters``."""


@dataclasses.dataclass(frozen=True)
class FedNormSGDAPlusHyperparameters(Normalized, Snapshot, FederatedSGDAHyperparameters):
    """Adds ``snapshot_period`` S."""


@dataclasses.dataclass(frozen=True)
class FedNormSGDAGameHyperparameters(Normalized, GameHyperparameters):
    """Adds ``server_lr`` γ_s and ``tau_eff`` to ``GameHyperparameters``."""


@dataclasses.dataclass(frozen=True)
class FedNormSGDAPlusGameHyperparameters(Normalized, Snapshot, GameHyperparameters):
    """Adds ``snapshot_period`` S."""


class FedNormSGDA(FederatedMinimax):
    """Fed-Norm-SGDA on client data (Algorithm 1, lines 12 and 17)."""

    name = "fed_norm_sgda"
    Hyperparameters = FedNormSGDAHyperparameters
    normalized = True


class FedNormSGDAPlus(FederatedMinimax):
    """Fed-Norm-SGDA+ on client data (Algorithm 1, lines 4-6, 11 and 16)."""

    name = "fed_norm_sgda_plus"
    Hyperparameters = FedNormSGDAPlusHyperparameters
    normalized = True
    plus = True


class FedNormSGDAGame(MinimaxGame):
    """Fed-Norm-SGDA on the quadratic game."""

    name = "fed_norm_sgda"  # on the quadratic game (inputs)
    Hyperparameters = FedNormSGDAGameHyperparameters
    normalized = True


class FedNormSGDAPlusGame(MinimaxGame):
    """Fed-Norm-SGDA+ on the quadratic game."""

    name = "fed_norm_sgda_plus"  # on the quadratic game (inputs)
    Hyperparameters = FedNormSGDAPlusGameHyperparameters
    normalized = True
    plus = True


ALGORITHMS = [
    FedNormSGDA,
    FedNormSGDAPlus,
    FedNormSGDAGame,
    FedNormSGDAPlusGame,
]  # one name on client data and on the quadratic game
