"""Local SGDA and Local SGDA+ (with optional local momentum): the baselines of Sharma et al. 2023.

Local SGDA: Deng & Mahdavi, "Local Stochastic Gradient Descent Ascent: Convergence Analysis and
Communication Efficiency", AISTATS 2021; Sharma, Panda, Joshi, Varshney, "Federated Minimax
Optimization: Improved Convergence Analyses and Algorithms", ICML 2022 (with local momentum).
Local SGDA+: Deng & Mahdavi 2021 (the y-gradient at a snapshot x̂ refreshed every S rounds).
As run in Sharma, Panda, Joshi, "Federated Minimax Optimization with Client Heterogeneity", TMLR 2023,
Figs 3, 5, 6 (docs/papers/fedminimax.md §2.5): each participant runs τ_i^(t) local SGDA steps
(``common.GeneralizedSGDA.local_updates``), and the server averages the local iterates,

    x^(t+1) = x^(t) − Σ_{i∈C} w̃_i (x^(t) − x_i^(t,τ_i)),   y^(t+1) = Π_Y(y^(t) + Σ_{i∈C} w̃_i (y_i^(t,τ_i) − y^(t))),

w̃_i = p_i n/|C| (= Σ_i p_i x_i with full participation; the difference form under partial participation is
this project's choice: the paper does not say). With unequal τ_i it converges to a stationary point of the
surrogate Σ_i w_i f_i, w_i ∝ p_i‖ā_i‖₁ (Eq. (2), Theorem 1), not of F. "Local SGDA (M)" is ``momentum: 0.9``
(heavy-ball, buffer reset each round).

Config names: ``local_sgda``, ``local_sgda_plus``, both on client data (the model is x) and on the
quadratic game ``quadratic_game`` (the study's environment picks the implementation).
"""

from __future__ import annotations

import dataclasses

from hetfl.algorithms.minimax.common import Snapshot
from hetfl.algorithms.minimax.federated import FederatedMinimax, FederatedSGDAHyperparameters
from hetfl.algorithms.minimax.game import GameHyperparameters, MinimaxGame


@dataclasses.dataclass(frozen=True)
class LocalSGDAHyperparameters(FederatedSGDAHyperparameters):
    """See ``FederatedSGDAHyperparameters`` (learning rates, τ_i, P, momentum ρ, objective)."""


@dataclasses.dataclass(frozen=True)
class LocalSGDAPlusHyperparameters(Snapshot, FederatedSGDAHyperparameters):
    """Adds ``snapshot_period`` S."""


@dataclasses.dataclass(frozen=True)
class LocalSGDAGameHyperparameters(GameHyperparameters):
    """See ``GameHyperparameters``."""


@dataclasses.dataclass(frozen=True)
class LocalSGDAPlusGameHyperparameters(Snapshot, GameHyperparameters):
    """Adds ``snapshot_period`` S."""


class LocalSGDA(FederatedMinimax):
    """Local SGDA on client data."""

    name = "local_sgda"
    Hyperparameters = LocalSGDAHyperparameters


class LocalSGDAPlus(FederatedMinimax):
    """Local SGDA+ on client data: y-gradients at the snapshot x̂."""

    name = "local_sgda_plus"
    Hyperparameters = LocalSGDAPlusHyperparameters
    plus = True


class LocalSGDAGame(MinimaxGame):
    """Local SGDA on the quadratic game."""

    name = "local_sgda"  # on the quadratic game (inputs)
    Hyperparameters = LocalSGDAGameHyperparameters


class LocalSGDAPlusGame(MinimaxGame):
    """Local SGDA+ on the quadratic game."""

    name = "local_sgda_plus"  # on the quadratic game (inputs)
    Hyperparameters = LocalSGDAPlusGameHyperparameters
    plus = True


ALGORITHMS = [
    LocalSGDA,
    LocalSGDAPlus,
    LocalSGDAGame,
    LocalSGDAPlusGame,
]  # one name on client data and on the quadratic game
