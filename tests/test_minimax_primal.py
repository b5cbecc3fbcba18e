"""The fair objective's primal functions (Corollary 1.1): Φ(x) = max_{y∈Δ} F(x, y) and Φ̃ of the surrogate
F̃ = Σ_i w̃_i f_i, w̃_i ∝ p_i E‖ā_i‖₁, in closed form (``hetfl.algorithms.minimax.objectives.simplex_max``)."""

from __future__ import annotations

import pytest
import torch

from hetfl.algorithms.minimax.federated import surrogate_weights
from hetfl.algorithms.minimax.local_work import LocalWork, a_l1
from hetfl.algorithms.minimax.objectives import simplex_max
from tests.conftest import tiny_federation
from tests.test_minimax_properties import make, train


@pytest.mark.parametrize("lam", [0.0, 0.05, 0.3, 5.0])
def test_the_closed_form_is_the_maximum_over_the_simplex(lam):
    """No point of the simplex (20,000 Dirichlet draws and the vertices) beats Π_Δ(v/λ), and the best draw
    comes close."""
    g = torch.Generator().manual_seed(0)
    v = torch.randn(5, generator=g, dtype=torch.float64)
    ys = torch.distributions.Dirichlet(torch.full((5,), 0.3, dtype=torch.float64)).sample((20000,))
    ys = torch.cat([ys, torch.eye(5, dtype=torch.float64)])
    values = ys @ v - 0.5 * lam * (ys * ys).sum(1)
    best = simplex_max(v, lam)
    assert float(values.max()) <= best + 1e-12
    assert best - float(values.max()) < 1e-2
    if lam == 0.0:
        assert best == float(v.max())


def test_surrogate_weights_follow_the_local_work():
    """w̃_i ∝ p_i‖ā_i‖₁: with τ fixed per client it is p_i τ_i normalized; momentum ρ weighs by Appendix A.1's
    ‖ā_i‖₁; with the same work everywhere it is p."""
    p = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    spread = LocalWork(torch.ones(4, dtype=torch.long), 2, 5, "spread", "fixed", torch.Generator())
    steps = torch.tensor([2, 3, 4, 5])

    class HP:
        momentum = 0.0

    torch.testing.assert_close(surrogate_weights(p, spread, HP), p * steps / (p * steps).sum())
    HP.momentum = 0.9
    want = p * a_l1(steps, 0.9)
    torch.testing.assert_close(surrogate_weights(p, spread, HP), want / want.sum())
    same = LocalWork(torch.ones(4, dtype=torch.long), 3, 3, "uniform", "round", torch.Generator())
    torch.testing.assert_close(surrogate_weights(p, same, HP), p)


@pytest.mark.parametrize("equal", [True, False], ids=["equal-work", "unequal-work"])
def test_fair_runs_report_phi_and_its_surrogate(equal):
    """Φ ≥ F(x, y^(t)) (it maximizes over y); Φ̃ = Φ when every client does the same work (w̃ = p), and
    differs when the clients' work differs."""
    fed = tiny_federation("mlr", sizes=(6, 9, 4, 8))
    work = {"tau_min": 2, "tau_max": 2} if equal else {"tau_min": 1, "tau_max": 4, "tau_draw": "spread"}
    alg = make("local_sgda", fed, objective="fair", fair_lambda=0.5, tau_unit="steps", batch_size=4,
               lr_milestones=[], tau_redraw="fixed", **work)  # fmt: skip
    metrics = train(alg, 3)
    assert metrics["phi_global"] >= metrics["train_loss_minimax_global"] - 1e-12
    if equal:
        assert metrics["phi_surrogate_global"] == pytest.approx(metrics["phi_global"], rel=1e-12)
    else:
        assert abs(metrics["phi_surrogate_global"] - metrics["phi_global"]) > 1e-6
