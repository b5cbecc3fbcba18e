"""The FFGG paper's claims and the baselines' defining properties, checked on small problems."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hetfl.algorithms.quadratic.byzantine_ffgg import bucketed_median
from hetfl.algorithms.quadratic.common import QuadraticGD
from tests.quadratic_helpers import make, run, schedule_for, tiny_problem


def test_theorem1_bound_for_exact_ffgg():
    """Theorem 1: with exact w and γ_θ ≤ 1/L, min_{r<R} ‖F(θ^r)‖² ≤ L‖θ^0 − θ^*‖²/(γ_θ R) for every R."""
    problem = tiny_problem(num_clients=5)
    alg = make("ffgg", problem, fine_tuner="exact")
    rows = run(alg, 60)
    L = problem.constants["L"]
    start = float((problem.theta_star**2).sum())  # θ^0 = 0
    best = np.minimum.accumulate([r["F_norm_sq"] for r in rows])
    for R in range(1, 61):
        assert best[R - 1] <= L * start / (alg.lr_theta * R)
    assert alg.lr_theta == pytest.approx(1 / L)


def test_cg_floor_falls_with_tau_and_reaches_machine_precision():
    """Figure 1a: the more CG steps τ, the lower the floor; with enough steps (here 2·d_w) CG is exact to
    rounding and FFGG converges to machine precision, although w restarts from a random point every round."""
    problem = tiny_problem(d_w=6, n=40)
    floors = {}
    for tau in (1, 2, 4, 12):
        rows = run(
            make("ffgg", problem, fine_tuner="cg", local_steps=tau, lr_theta_factor=2.0), 500, every=10
        )
        floors[tau] = np.mean([r["F_norm"] for r in rows[-5:]])  # the last 50 rounds
    assert floors[1] > floors[2] > floors[4] > floors[12]
    assert floors[12] < 1e-13 < 1e-3 < floors[2]


def test_more_gd_steps_lower_the_floor():
    """Theorem 2 / Figures 1b–d: FFGG with the GD fine-tuner gets closer to θ^* as τ grows."""
    problem = tiny_problem()
    dist = [run(make("ffgg", problem, local_steps=tau), 300)[-1]["theta_dist_sq"] for tau in (2, 8, 32)]
    assert dist[0] > dist[1] > dist[2]


def test_byzantine_cm_bucketing_converges_linearly():
    """Appendix E.3 / Theorem 4: with sign-flipping Byzantines (here 2 of 10) and CM∘bucketing, exact
    FFGG on an overpersonalized problem still converges linearly to θ^*, slower than without attack."""
    problem = tiny_problem(num_clients=8, targets="overpersonalized", noise=0.0, n=60)
    robust = run(make("ffgg_byzantine", problem, byzantine=2, fine_tuner="exact"), 400, every=100)
    clean = run(
        make("ffgg_byzantine", problem, byzantine=0, aggregator="mean", fine_tuner="exact"), 400, every=100
    )
    d = [r["theta_dist_sq"] for r in robust]
    assert all(later < 1e-3 * earlier for earlier, later in zip(d, d[1:], strict=False))  # every 100 rounds
    assert d[4] < 1e-15 * d[0]
    assert clean[1]["theta_dist_sq"] < d[1]


def test_bucketed_median():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(7, 3, dtype=torch.float64)
    np.testing.assert_allclose(bucketed_median(x, 1, gen), np.median(x.numpy(), axis=0))
    x8 = torch.randn(8, 3, dtype=torch.float64)
    np.testing.assert_allclose(
        bucketed_median(x8, 1, gen), np.median(x8.numpy(), axis=0)
    )  # even: mean of the middle two
    honest = torch.zeros(6, 2, dtype=torch.float64)
    attacked = torch.cat([honest, torch.full((2, 2), 1e6, dtype=torch.float64)])
    assert float(bucketed_median(attacked, 2, gen).abs().max()) < 1e6 / 2  # 2 of 8 cannot carry the median


def test_async_round_robin_delays_are_workers_minus_one():
    """Equal speeds without jitter: the workers finish in turn and every steady-state delay is K − 1."""
    problem = tiny_problem()
    alg = make("ffgg_async", problem, speed_spread=0.0, jitter=0.0, assignment="fixed", local_steps=2)
    run(alg, 5)
    delays = alg.artifacts()["delay"]
    assert delays[:4].tolist() == [0, 1, 2, 3]
    assert set(delays[4:].tolist()) == {3}
    assert alg.artifacts()["client"][:8].tolist() == [0, 1, 2, 3, 0, 1, 2, 3]


def test_async_converges_on_an_overpersonalized_problem():
    """Theorem 3/7 (Assumptions 1, 2 and 5): asynchronous FFGG with exact w and the Theorem 7 stepsize
    converges to θ^* under the delays of heterogeneous workers, which exceed the number of workers;
    synchronous FFGG is faster per computed direction (Appendix E.2)."""
    problem = tiny_problem(targets="overpersonalized", noise=0.0)
    alg = make("ffgg_async", problem, fine_tuner="exact", speed_spread=1.0, tau_max=40)
    rows = run(alg, 300, every=100)
    F = [r["F_norm_sq"] for r in rows]
    assert (
        all(later < 0.5 * earlier for earlier, later in zip(F, F[1:], strict=False)) and F[-1] < 1e-2 * F[0]
    )
    assert rows[-1]["directions"] == 300 * 4 and alg.artifacts()["delay"].max() > 4 * 4
    sync = run(make("ffgg_async", problem, fine_tuner="exact", mode="sync"), 300, every=100)
    assert sync[-1]["F_norm_sq"] < 1e-6 * F[-1]


def test_l2gd_literal_stepsize_diverges_and_the_theory_one_converges():
    """docs/papers/ffgg.md §3.3: the printed α = (2M)^{-1} max{L/(1−p), λ/p} grows with L and diverges;
    L2GD's own α = M/(2 max{…}) is stable. A divergence is reported by finite(), not raised."""
    problem = tiny_problem(n=2000)
    literal = make("l2gd", problem, local_steps=10, stepsize_rule="literal")
    schedule = schedule_for(literal, 50)
    for t in range(1, 51):
        literal.round(t, schedule[t - 1])
    assert not literal.finite()
    theory = run(make("l2gd", problem, local_steps=10), 50, every=50)
    assert np.isfinite(theory[-1]["F_norm_sq"]) and theory[-1]["F_norm_sq"] < theory[0]["F_norm_sq"]


def test_scaffold_removes_client_drift_local_gd_does_not():
    """Karimireddy et al. 2020: Scaffold converges to the minimizer of Σ_m f_m(θ, w) (one shared w) with
    τ local steps on heterogeneous clients; Local GD with τ > 1 stops at a drifted point."""
    problem = tiny_problem()
    Q, q = (t.sum(0) for t in problem.joint())
    x_opt = torch.linalg.solve(Q, q)
    scaffold = make("scaffold", problem, local_steps=5, lr=0.05)
    local = make("local_gd", problem, local_steps=5, lr=0.05)
    run(scaffold, 3000, every=3000)
    run(local, 3000, every=3000)
    assert float((scaffold.x - x_opt).norm()) < 1e-9
    assert float((local.x - x_opt).norm()) > 1e-4


def test_local_gd_with_one_step_is_gradient_descent_on_the_average():
    problem = tiny_problem()
    alg = make("local_gd", problem, local_steps=1, lr=0.01)
    Q, q = (t.mean(0) for t in problem.joint())
    alg.round(1, torch.arange(4))
    x = torch.zeros_like(alg.x)
    torch.testing.assert_close(alg.x, x - 0.01 * (Q @ x - q), rtol=0, atol=1e-14)


@pytest.mark.parametrize("lr,steps", [(0.1, 7), (0.5, 3), (1.0, 5), (0.05, 0), (2.5, 4)])
def test_closed_form_gd_equals_the_loop(lr, steps):
    """k GD steps in closed form equal the loop, including γλ ≥ 1 (oscillating or diverging) and λ = 0."""
    gen = torch.Generator().manual_seed(1)
    X = torch.randn(3, 4, 4, generator=gen, dtype=torch.float64)
    K = X @ X.transpose(1, 2) / 4
    K[0] = torch.diag(torch.tensor([0.0, 0.3, 1.0, 2.0], dtype=torch.float64))  # a zero eigenvalue
    x0, r = (
        torch.randn(3, 4, generator=gen, dtype=torch.float64),
        torch.randn(3, 4, generator=gen, dtype=torch.float64),
    )
    x = x0.clone()
    for _ in range(steps):
        x = x - lr * ((K @ x.unsqueeze(-1)).squeeze(-1) - r)
    torch.testing.assert_close(QuadraticGD(K, lr)(x0, r, steps), x, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(
        QuadraticGD(K, lr)(x0[1:], r[1:], steps, torch.tensor([1, 2])), x[1:], rtol=1e-12, atol=1e-12
    )


def test_l2gd_approaches_the_mixture_solution_closer_with_smaller_stepsize():
    """Hanzely & Richtárik 2020: L2GD is SGD on min Σ_i f_i(x_i) + (λ/2) Σ_i ‖x_i − x̄‖² and
    converges linearly to a neighborhood of its solution whose size shrinks with α."""
    problem = tiny_problem()
    Q, q = problem.joint()
    M, D = q.shape
    lam = 1.0
    # stationarity: (Q_i + λI) x_i − (λ/M) Σ_j x_j = q_i for every i
    A = torch.block_diag(*[Q[i] + lam * torch.eye(D, dtype=Q.dtype) for i in range(M)])
    A -= lam / M * torch.eye(D, dtype=Q.dtype).repeat(M, M)
    x_mix = torch.linalg.solve(A, q.reshape(-1)).reshape(M, D)
    gaps = []
    for lr in (0.2, 0.05):
        alg = make("l2gd", problem, local_steps=4, lam=lam, lr=lr)
        schedule = schedule_for(alg, 600)
        tail = []
        for t in range(1, 601):
            alg.round(t, schedule[t - 1])
            if t > 400:
                tail.append(float((alg.x - x_mix).norm()))
        gaps.append(np.mean(tail))
    assert gaps[1] < 0.5 * gaps[0] and gaps[1] < 0.1 * float(x_mix.norm())
