"""The Example 1 problem: Grams equal the n-row products, the oracle is exact, the constants are right,
generation is deterministic, bad options are rejected with the key."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hetfl.errors import ConfigError
from hetfl.problems import normalize_problem_spec
from hetfl.reference.quadratic_client import clients, example1_L
from tests.quadratic_helpers import tiny_problem


def test_grams_are_the_products_of_the_raw_data():
    problem = tiny_problem(matrices="zeta", zeta=2.0)
    for m, c in enumerate(clients(problem)):
        np.testing.assert_allclose(problem.G[m], c.H.T @ c.H + c.A.T @ c.A, rtol=1e-13)
        np.testing.assert_allclose(problem.AtB[m], c.A.T @ c.B, rtol=1e-13)
        np.testing.assert_allclose(problem.BtB[m], c.B.T @ c.B, rtol=1e-13)
        np.testing.assert_allclose(problem.g[m], c.H.T @ c.b + c.A.T @ c.y, rtol=1e-13)
        np.testing.assert_allclose(problem.c[m], 0.5 * (c.b @ c.b + c.y @ c.y), rtol=1e-13)


def test_operator_matches_the_n_row_definition():
    problem = tiny_problem()
    cs = clients(problem)
    theta = np.random.default_rng(0).normal(size=problem.d_theta)
    F_m = problem.F_clients(torch.from_numpy(theta))
    for m, c in enumerate(cs):
        np.testing.assert_allclose(F_m[m], c.F(theta), atol=1e-11)
        w = np.random.default_rng(m).normal(size=problem.d_w)
        np.testing.assert_allclose(
            problem.grad_w(torch.from_numpy(theta), torch.from_numpy(w)[None], torch.tensor([m]))[0],
            c.grad_w(theta, w),
            atol=1e-11,
        )
    loss = np.mean(
        [
            0.5 * np.sum((c.H @ theta - c.b) ** 2) + 0.5 * np.sum(c.residual(theta, c.w_star(theta)) ** 2)
            for c in cs
        ]
    )
    assert float(problem.loss(torch.from_numpy(theta))) == pytest.approx(loss, rel=1e-10)


def test_theta_star_solves_F_and_minimizes_the_personalized_risk():
    """Theorem 5 (φ as in Example 1): θ^* with F(θ^*) = 0 minimizes (1/M) Σ_m f_m(θ, w_m^*(θ)), which is the
    least-squares problem of the stacked rows [H_m; (I − B_mB_m^†)A_m] θ ≈ [b_m; (I − B_mB_m^†)y_m]."""
    problem = tiny_problem(num_clients=5)
    cs = clients(problem)
    assert float(problem.F_clients(problem.theta_star).mean(0).norm()) < 1e-12
    rows, rhs = [], []
    for c in cs:
        P = np.eye(len(c.B)) - c.B @ np.linalg.pinv(c.B)
        rows += [c.H, P @ c.A]
        rhs += [c.b, P @ c.y]
    direct = np.linalg.lstsq(np.concatenate(rows), np.concatenate(rhs), rcond=None)[0]
    np.testing.assert_allclose(problem.theta_star, direct, atol=1e-10)
    near = problem.theta_star + 1e-3 * torch.ones(problem.d_theta, dtype=torch.float64)
    assert float(problem.loss(near)) > float(problem.loss(problem.theta_star))


def test_overpersonalized_every_client_is_solved_by_theta_true():
    """Assumption 2: F_m(θ_true) = 0 for every m, not only on average."""
    problem = tiny_problem(targets="overpersonalized", noise=0.0)
    assert float(problem.F_clients(problem.theta_star).abs().max()) < 1e-12
    heterogeneous = tiny_problem()
    F_m = heterogeneous.F_clients(heterogeneous.theta_star)
    assert float(F_m.mean(0).norm()) < 1e-12 < float(F_m.norm(dim=1).min())


def test_example1_constant_and_cocoercivity():
    """Example 1: L = 2 max(L_φ, ‖A_mᵀ(I − B_mB_m^†)A_m‖) (from the n-row data) and each F_m is
    1/L-cocoercive: ⟨F_m(a) − F_m(b), a − b⟩ ≥ ‖F_m(a) − F_m(b)‖²/L."""
    problem = tiny_problem(matrices="zeta", zeta=1.0)
    L = problem.constants["L"]
    assert L == pytest.approx(example1_L(clients(problem)), rel=1e-10)
    gen = torch.Generator().manual_seed(0)
    for _ in range(20):
        a, b = (torch.randn(problem.d_theta, generator=gen, dtype=torch.float64) for _ in range(2))
        dF = problem.F_clients(a) - problem.F_clients(b)
        assert bool(((dF @ (a - b)) >= (dF * dF).sum(1) / L - 1e-12).all())
    c = problem.constants
    assert c["mu_w"] > 0 and c["L_w"] >= c["mu_w"] and problem.L_f >= c["L_w"]
    assert 0 < c["mu_F"] <= c["L_F"] <= L


def test_generation_is_deterministic_and_the_data_seed_is_separate():
    a, b = tiny_problem(run_seed=0), tiny_problem(run_seed=7)
    torch.testing.assert_close(
        a.G, b.G, rtol=0, atol=0
    )  # the fixed data seed: one problem for every run seed
    c, d = tiny_problem(run_seed=0, seed=None), tiny_problem(run_seed=7, seed=None)
    assert not torch.equal(c.G, d.G)  # seed: null follows the run seed
    torch.testing.assert_close(tiny_problem(run_seed=7, seed=None).G, d.G, rtol=0, atol=0)
    e = tiny_problem(num_clients=6)
    torch.testing.assert_close(a.G, e.G[:4], rtol=0, atol=0)  # a client's data do not depend on M


def test_noise_quirk_shifts_every_row_by_one_draw():
    """The notebooks' ``noise_scale * rng.normal(n)``: ι times one draw of N(n, 1), added to every row."""
    exact = tiny_problem(noise=0.0).raw_client(0)
    quirk = tiny_problem(noise=1e-3, noise_quirk=True).raw_client(0)
    plain = tiny_problem(noise=1e-3).raw_client(0)
    shift = quirk.b - exact.b
    assert np.ptp(shift) < 1e-12 and 1e-3 * 25 < shift[0] < 1e-3 * 35  # n = 30
    assert np.ptp(plain.b - exact.b) > 1e-4  # the paper's noise: a vector


@pytest.mark.parametrize(
    "options,key,fragment",
    [
        ({"targets": "overpersonalized"}, "problem.noise", "noise: 0"),
        ({"zeta": 2.0}, "problem.zeta", "matrices: zeta"),
        ({"zeta_H": 1.0}, "problem.zeta_H", "matrices: zeta"),
        ({"matrices": "gauss"}, "problem.matrices", "one of independent, zeta"),
        ({"n": 2, "d_w": 3}, "problem.n", "singular"),
        ({"num_clients": 0}, "problem.num_clients", "> 0"),
        ({"zeta_norm": "l1", "matrices": "zeta"}, "problem.zeta_norm", "fro, spectral"),
    ],
)
def test_bad_options_name_the_key(options, key, fragment):
    with pytest.raises(ConfigError) as info:
        normalize_problem_spec({"name": "ffgg_quadratic", **options}, "problem")
    assert info.value.key == key and fragment in str(info.value)
