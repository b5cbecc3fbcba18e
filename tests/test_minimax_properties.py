"""Properties Sharma, Panda, Joshi (TMLR 2023) claim for Local SGDA and Fed-Norm-SGDA, on tiny problems."""

from __future__ import annotations

import itertools

import pytest
import torch

from hetfl.algorithms import get_algorithm
from hetfl.algorithms.minimax.local_work import LocalWork, a_l1
from hetfl.algorithms.minimax.projections import project_ball, project_simplex
from hetfl.engine.participation import participation_schedule
from hetfl.engine.runner import run_rounds
from hetfl.errors import ConfigError
from hetfl.pipeline.config import build_suite
from hetfl.problems import build_problem, normalize_problem_spec
from hetfl.reference.local_sgda import a_norm
from tests.conftest import tiny_federation

FIG1 = {
    "name": "quadratic_game",
    "instance": "figure1",
    "num_clients": 2,
    "dim_x": 1,
    "dim_y": 1,
    "init_scale": 1.0,
}
SPREAD = {"tau_min": 2, "tau_max": 5, "tau_draw": "spread", "tau_redraw": "fixed"}


def game(problem=FIG1, seed=0):
    return build_problem(normalize_problem_spec(problem, "p"), seed, torch.device("cpu"), torch.float64)


def make(name, env, seed=0, sampling="epoch", **hp):
    cls = get_algorithm(name, environment=getattr(env, "name", "federation"))
    return cls(env, cls.Hyperparameters.from_dict(hp, "test"), seed, sampling)


def train(alg, rounds, seed=0):
    schedule = participation_schedule(alg.env.num_clients, alg.clients_per_round, rounds, seed)
    for t in range(1, rounds + 1):
        alg.round(t, schedule[t - 1])
    return dict(alg.evaluate()[0])


def test_local_sgda_converges_to_the_surrogate_and_fed_norm_to_the_saddle():
    """Sec. 4.1 / Fig. 1 / Theorem 1: with τ = (2, 5), Local SGDA's fixed point is the saddle of
    F̃ = (2/7) f_1 + (5/7) f_2, (−9/14, −3/14), Fed-Norm-SGDA's that of F, (0, 0); both biases shrink as O(η)."""
    errors = {}
    for lr in (0.04, 0.01):
        local = train(make("local_sgda", game(), lr_x=lr, lr_y=lr, **SPREAD), int(6 / lr))
        norm = train(make("fed_norm_sgda", game(), lr_x=lr, lr_y=lr, **SPREAD), int(6 / lr))
        assert local["dist_saddle"] > 0.6 and norm["dist_surrogate"] == norm["dist_saddle"]
        errors[lr] = (local["dist_surrogate"], norm["dist_saddle"])
    assert errors[0.01][0] < 0.02 and errors[0.01][1] < 0.02
    for big, small in zip(errors[0.04], errors[0.01], strict=True):
        assert 3.0 < big / small < 5.0  # η ÷ 4 → error ÷ ~4
    x, y = game().saddle(torch.tensor([2 / 7, 5 / 7]))
    torch.testing.assert_close(torch.cat([x, y], 1), torch.tensor([[-9 / 14, -3 / 14]], dtype=torch.float64))


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_equal_work_and_weights_make_fed_norm_local_sgda(momentum):
    """docs/papers/fedminimax.md §8, C7: equal τ_i, equal p_i, full participation, γ_s = 1: Fed-Norm-SGDA
    = Local SGDA."""
    hp = dict(objective="robust", tau_min=3, tau_max=3, tau_unit="steps", client_weights="uniform",
              batch_size=4, lr_x=0.1, lr_y=0.3, momentum=momentum)  # fmt: skip
    runs = [make(name, tiny_federation("dnn"), **hp) for name in ("local_sgda", "fed_norm_sgda")]
    for alg in runs:
        train(alg, 3)
    for k in runs[0].x:
        torch.testing.assert_close(runs[0].x[k], runs[1].x[k], atol=1e-12, rtol=0)
    torch.testing.assert_close(runs[0].y, runs[1].y, atol=1e-12, rtol=0)
    assert runs[0].y.norm() > 0


def test_unequal_work_separates_them():
    """The same run with τ ∈ {1, 2, 3}: the two servers differ (the equality above is not vacuous)."""
    hp = dict(objective="robust", tau_min=1, tau_max=3, tau_draw="spread", tau_unit="steps", batch_size=4)
    runs = [make(name, tiny_federation("mlr"), **hp) for name in ("local_sgda", "fed_norm_sgda")]
    for alg in runs:
        train(alg, 2)
    assert (runs[0].x["fc1.weight"] - runs[1].x["fc1.weight"]).abs().max() > 1e-4


@pytest.mark.parametrize("name", ["local_sgda", "fed_norm_sgda"])
def test_partial_participation_is_unbiased(name):
    """Eq. (3): with w̃_i = p_i n/P, the mean of the server step over all C(n, P) client sets equals the
    full-participation step (deterministic gradients, fixed τ_i, unequal p_i)."""
    problem = {"name": "quadratic_game", "num_clients": 5, "dim_x": 2, "dim_y": 2, "weights": "lognormal"}
    hp = dict(lr_x=0.05, lr_y=0.05, tau_min=1, tau_max=4, tau_draw="spread", tau_redraw="fixed")
    full = make(name, game(problem), **hp)
    full.round(1, torch.arange(5))
    steps = []
    for subset in itertools.combinations(range(5), 2):
        alg = make(name, game(problem), clients_per_round=2, **hp)
        alg.round(1, torch.tensor(subset))
        steps.append(torch.cat([alg.x["x"], alg.y], 1))
    torch.testing.assert_close(
        torch.stack(steps).mean(0), torch.cat([full.x["x"], full.y], 1), atol=1e-12, rtol=0
    )
    assert torch.stack(steps).std(0).max() > 1e-3  # the subsets do differ


def test_fed_norm_with_momentum_keeps_the_true_fixed_point():
    """Appendix A.1 / docs/papers/fedminimax.md §8, C6: local momentum is another ā_i; normalizing by
    ‖ā_i(ρ)‖₁ keeps w = p."""
    alg = train(make("fed_norm_sgda", game(), lr_x=0.004, lr_y=0.004, momentum=0.5, **SPREAD), 800)
    local = train(make("local_sgda", game(), lr_x=0.004, lr_y=0.004, momentum=0.5, **SPREAD), 800)
    assert alg["dist_saddle"] < 0.03 < 0.5 < local["dist_saddle"]
    assert local["dist_surrogate"] < 0.03  # the surrogate with w ∝ p_i ‖ā_i(ρ)‖₁


def test_momentum_coefficients_sum_to_a_l1():
    """Appendix A.1: ‖ā‖₁ of heavy-ball momentum, closed form vs the coefficients term by term."""
    steps = torch.arange(1, 12)
    for rho in (0.0, 0.5, 0.9):
        expected = torch.tensor([a_norm(int(t), rho) for t in steps], dtype=torch.float64)
        torch.testing.assert_close(a_l1(steps, rho), expected)


def test_local_work_epochs_and_redraws():
    """τ_i ∼ Unif{2..E} epochs = τ_i ⌈n_i/B⌉ steps, redrawn each round (or fixed)."""
    unit = torch.tensor([1, 3, 7])
    work = LocalWork(unit, 2, 5, "uniform", "round", torch.Generator().manual_seed(0))
    draws = torch.stack([work.steps() for _ in range(200)])
    assert ((draws % unit) == 0).all() and set((draws // unit).unique().tolist()) == {2, 3, 4, 5}
    fixed = LocalWork(unit, 2, 5, "uniform", "fixed", torch.Generator().manual_seed(0))
    assert torch.equal(fixed.steps(), fixed.steps())
    torch.testing.assert_close(work.expected_a_l1(0.0), 3.5 * unit.double())


def test_projections():
    g = torch.Generator().manual_seed(0)
    y = 3 * torch.randn(50, 6, generator=g, dtype=torch.float64)
    p = project_simplex(y)
    assert (p >= 0).all() and torch.allclose(p.sum(1), torch.ones(50, dtype=torch.float64))
    others = torch.distributions.Dirichlet(torch.ones(6, dtype=torch.float64)).sample((200,))
    for row, proj in zip(y, p, strict=True):  # the projection is the closest point of the simplex
        assert (row - proj).norm() <= (row - others).norm(dim=1).min() + 1e-12
    b = project_ball(y.view(50, 2, 3), 1.5)
    assert (b.flatten(1).norm(dim=1) <= 1.5 + 1e-12).all()
    inside = y.view(50, 2, 3) * 0.01
    torch.testing.assert_close(project_ball(inside, 1.5), inside)


def test_fair_y_solves_the_inner_maximization():
    """Eq. (8): for fixed x, argmax_{y∈Δ} Σ_c y_c F_c(x) − λ/2‖y‖² = Π_Δ(F(x)/λ). With x frozen, full
    client batches and w = p, the clients' unbiased y-gradients drive y^(t) there, up to the O(η) drift
    of the per-client projections."""
    errors = []
    for lr in (0.04, 0.01):
        fed = tiny_federation("mlr", sizes=(6, 9, 4, 8))
        alg = make("fed_norm_sgda", fed, sampling="sequential", objective="fair", fair_lambda=2.0, lr_x=1e-300,
                   lr_y=lr, tau_min=1, tau_max=2, tau_unit="epochs", batch_size=16, lr_milestones=[])  # fmt: skip
        train(alg, int(8 / lr))
        per, _ = alg.objective.per_sample(alg.x, fed.train)
        k, labels = fed.model.num_classes, fed.train.y.cpu()
        class_loss = torch.zeros(k, dtype=torch.float64).index_add_(0, labels, per) / torch.bincount(
            labels, minlength=k
        )
        target = project_simplex((class_loss / 2.0).unsqueeze(0))
        assert (target - 1 / k).abs().max() > 0.01  # not the uniform start
        errors.append(float((alg.y.double() - target).abs().max()))
    assert errors[1] < 1e-3 and errors[1] < errors[0] / 2


def test_robust_attack_and_constraint():
    """Robust accuracy: y stays in the ball, and the attack finds a perturbation at least as harmful as y."""
    fed = tiny_federation("dnn")
    alg = make("fed_norm_sgda_plus", fed, objective="robust", radius=0.05, lr_y=5.0, batch_size=4,
               tau_unit="steps", attack_lr=0.05, attack_steps=10)  # fmt: skip
    train(alg, 3)
    rows = dict(alg.evaluate()[0])
    assert 0.0 < rows["y_norm"] <= 0.05 + 1e-9  # the clients' y_i are projected, so is their average
    loss_at_y, _ = alg.objective.per_sample(alg.x, fed.test, alg.y[0])
    assert rows["robust_loss_global"] > float(loss_at_y.mean())
    assert rows["robust_acc_global"] <= rows["test_acc_at_y_global"] + 1e-9


def test_robust_phi_estimates_the_primal_functions_from_below_and_above_the_current_objective():
    """The robust objective's Φ(x) = max_{‖y‖≤r} Σ_i p_i f_i(x, y) (Corollary 1.1) and Φ̃ (weights w̃): the
    estimate is the training objective at the best iterate of the ascent, so it is at least F(x, y) at the
    current y (computed here client by client, one model call per client), grows with more steps and more
    starts, stays within the ball's reach, and Φ̃ weighs the clients by w̃ (differs from Φ when τ_i differ)."""
    fed = tiny_federation("dnn")
    hp = dict(objective="robust", radius=0.5, lr_y=5.0, batch_size=4, tau_min=1, tau_max=4, tau_unit="steps",
              attack_lr=0.2, attack_steps=5)  # fmt: skip
    alg = make("local_sgda", fed, **hp)
    rows = train(alg, 3)
    objective, x, y = alg.objective, alg.x, alg.y
    f_i = []
    for c in range(fed.num_clients):  # a plain loop: client c's mean loss at its own samples shifted by y
        s = slice(int(fed.train.sizes[:c].sum()), int(fed.train.sizes[: c + 1].sum()))
        logits = fed.model.forward(x, (fed.train.x[s] + y[0]).unsqueeze(0))[0]
        f_i.append(float(torch.nn.functional.cross_entropy(logits.T, fed.train.y[s]).double()))
    at_y = float(objective.p @ torch.tensor(f_i, dtype=torch.float64))
    assert at_y == pytest.approx(rows["train_loss_minimax_global"], rel=1e-6)
    assert rows["phi_global"] >= at_y * (1 - 1e-6)
    assert rows["phi_surrogate_global"] >= float(
        objective.surrogate @ torch.tensor(f_i, dtype=torch.float64)
    ) * (1 - 1e-6)
    assert rows["phi_surrogate_global"] != rows["phi_global"]  # w̃ ≠ p: the clients' τ_i differ
    longer = make("local_sgda", fed, **{**hp, "attack_steps": 15}).objective
    restarted = make("local_sgda", fed, **{**hp, "phi_restarts": 3}).objective
    assert longer.phi(x, y, objective.p) >= rows["phi_global"]
    assert restarted.phi(x, y, objective.p) >= rows["phi_global"]
    skipped = make("local_sgda", fed, **{**hp, "phi_steps": 0})  # not estimated, not reported, not declared
    assert "phi_global" not in train(skipped, 1) and "phi_global" not in skipped.metric_names(skipped.hp)
    with pytest.raises(ConfigError, match="objective"):
        build_suite({"studies": {"s": {"dataset": {"name": "digits"}, "partition": {"scheme": "iid", "clients": 3},
                                       "model": {"name": "mlr"}, "rounds": 1, "seeds": [0],
                                       "runs": {"r": {"algorithm": "local_sgda", "objective": "fair",
                                                      "phi_restarts": 2}}}}})  # fmt: skip


def test_divergence_is_recorded_not_raised():
    alg = make("local_sgda", game({**FIG1, "init_scale": 1.0}), lr_x=3.0, lr_y=3.0, **SPREAD)
    outcome = run_rounds(alg, participation_schedule(2, 2, 500, 0), 50, lambda *a: None)
    assert outcome.status == "diverged" and outcome.diverged_round < 500


@pytest.mark.parametrize(
    "run,problem,key,fragment",
    [
        ({"algorithm": "fed_norm_sgda", "tau_max": 1}, {}, "runs.r.tau_max", "must be >= tau_min"),
        ({"algorithm": "local_sgda", "momentum": 1.0}, {}, "runs.r.momentum", "[0, 1)"),
        ({"algorithm": "local_sgda", "lr_milestones": [5, 2]}, {}, "runs.r.lr_milestones", "increasing"),
        ({"algorithm": "fed_norm_sgda", "tau_eff": "mean"}, {}, "runs.r.tau_eff", "exact"),
        ({"algorithm": "fedavg"}, {}, "runs.r.algorithm", "does not run on problem"),
        ({"algorithm": "local_sgda"}, {"instance": "figure1"}, "problem.instance", "num_clients: 2"),
    ],
)
def test_bad_config_names_the_key(run, problem, key, fragment):
    study = {"problem": {"name": "quadratic_game", **problem}, "rounds": 2, "seeds": [0], "runs": {"r": run}}
    with pytest.raises(ConfigError) as info:
        build_suite({"studies": {"s": study}})
    assert info.value.key == f"studies.s.{key}" and fragment in str(info.value)


def test_bad_data_options_name_the_key():
    from hetfl.algorithms.minimax.fed_norm_sgda import FedNormSGDAHyperparameters as H

    for values, key in (
        ({"objective": "adversarial"}, "k.objective"),
        ({"active_clients": 3, "clients_per_round": 2}, "k.clients_per_round"),
        ({"target_acc": 70}, "k.target_acc"),
        ({"radius": 0.0}, "k.radius"),
    ):
        with pytest.raises(ConfigError) as info:
            H.from_dict(values, "k")
        assert info.value.key == key
