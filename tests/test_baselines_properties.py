"""The papers' properties of the FedAvg-like baselines, each checked on a tiny problem where it could fail.

- FedProx (Li et al. 2020): μ = 0 is FedAvg, bit for bit; a larger μ keeps the local models closer to w_t.
- SCAFFOLD (Karimireddy et al. 2020): on heterogeneous least squares it reaches the exact minimizer of the
  average objective where FedAvg with the same local steps stalls at a drifted fixed point; the server
  control is the mean of the client controls (c ← c + (|S|/N) mean Δc_i), on a Dirichlet split.
- FedNova (Wang et al. 2020): with unequal τ_i FedAvg ends at the minimizer of the τ-weighted surrogate
  Σ p_i ‖a_i‖₁ f_i, FedNova at that of Σ p_i f_i; its momentum-corrected ‖a_i‖₁ is what makes it so.
- Server optimizers (Reddi et al. 2021): FedAdam's step is bounded by about η per coordinate, FedAvgM with
  β1 = 0 is FedAvg with a server learning rate, which scales the mean update.
- FedDyn (Acar et al. 2021): with full participation it reaches the exact minimizer of the average
  objective, where FedAvg does not.

The least-squares problems are ``synthetic_lsr`` (noise-free, two clusters of optima, 12 training samples
per client, so that the clients' Hessians differ too) on the ``linear`` model in float64, with minibatches
larger than any client (full-batch local steps): every fixed point is exact and the minimizers are closed
forms.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from hetfl.algorithms import get_algorithm
from hetfl.algorithms.minimax.local_work import a_l1
from hetfl.data import load_dataset, make_partition
from hetfl.engine.federation import Federation
from hetfl.engine.local_steps import LocalSteps
from hetfl.engine.participation import participation_schedule
from hetfl.errors import ConfigError
from hetfl.models import build_model, normalize_model_spec
from hetfl.testing import tiny_federation


def make(name: str, fed: Federation, seed: int = 0, sampling: str = "epoch", **hp):
    cls = get_algorithm(name)
    algorithm = cls(fed, cls.Hyperparameters.from_dict(hp, "test"), seed, sampling)
    algorithm.rounds = 1000
    return algorithm


def train(algorithm, rounds: int, sampled=None):
    """``rounds`` rounds with a schedule (None: the participation a job would draw)."""
    n = algorithm.fed.num_clients
    schedule = participation_schedule(n, algorithm.clients_per_round, rounds, algorithm.seed)
    for t in range(1, rounds + 1):
        algorithm.round(t, schedule[t - 1] if sampled is None else sampled)
    return algorithm


@pytest.fixture(scope="module")
def lsr(tmp_path_factory) -> Federation:
    """6 clients of noise-free least squares in R^4 (2 clusters of optima), 12 training samples each."""
    spec = {"name": "synthetic_lsr", "num_users": 6, "dimension": 4, "samples_per_user": 16, "seed": 0}
    data = load_dataset(spec, tmp_path_factory.mktemp("lsr"))
    part = make_partition({"scheme": "natural", "test_fraction": 0.25}, data, 0)
    model = build_model(normalize_model_spec({"name": "linear", "bias": False}, "m"), (4,), 1, "regression")
    return Federation.from_partition(data, part, model, torch.device("cpu"), torch.float64)


def minimizer(fed: Federation, weights) -> torch.Tensor:
    """argmin_θ Σ_i ω_i f_i(θ), f_i(θ) = (1/n_i) ‖X_i θ − y_i‖² (the linear model's squared loss), by the
    normal equations Σ_i (ω_i/n_i) X_iᵀX_i θ = Σ_i (ω_i/n_i) X_iᵀ y_i: ``Tensor[d]``."""
    off = fed.train.offsets.tolist()
    d = fed.train.x.shape[1]
    a, b = torch.zeros(d, d, dtype=torch.float64), torch.zeros(d, dtype=torch.float64)
    for w, lo, hi in zip(weights, off[:-1], off[1:], strict=True):
        x, y = fed.train.x[lo:hi], fed.train.y[lo:hi, 0]
        a += float(w) / (hi - lo) * x.T @ x
        b += float(w) / (hi - lo) * x.T @ y
    return torch.linalg.solve(a, b)


def theta(algorithm) -> torch.Tensor:
    """The server model of the linear model without bias: ``Tensor[d]``."""
    return algorithm.w["fc1.weight"][0, 0]


FULL_BATCH = {"batch_size": 64}  # larger than every client: each local step is a full gradient step


# --- FedProx -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "hp,sampling",
    [
        ({"lr": 0.1, "local_steps": 3, "batch_size": 4, "clients_per_round": 2}, "epoch"),
        (
            {
                "lr": 0.1,
                "local_steps": 4,
                "batch_size": 5,
                "momentum": 0.9,
                "weight_decay": 0.01,
                "local_steps_per_client": "spread",
                "client_weights": "samples",
                "server_optimizer": "adam",
                "server_lr": 0.1,
            },
            "sequential",
        ),
    ],
)
def test_fedprox_with_mu_0_is_fedavg_bit_for_bit(hp, sampling):
    fedavg = train(make("fedavg", tiny_federation("dnn"), 3, sampling, **hp), 4)
    fedprox = train(make("fedprox", tiny_federation("dnn"), 3, sampling, **hp, mu=0.0), 4)
    for k, v in fedavg.w.items():
        assert torch.equal(fedprox.w[k], v), k


def test_a_larger_mu_keeps_the_local_models_closer_to_the_server_model():
    """‖w_i − w_t‖ after the local steps of round 1 (same w_t, same minibatches), for increasing μ."""
    drift = []
    for mu in (0.0, 0.1, 1.0, 10.0):
        fedprox = make("fedprox", tiny_federation("dnn"), 1, lr=0.1, local_steps=10, batch_size=4, mu=mu)
        clients, steps = fedprox.participants(torch.arange(4))
        local = fedprox.local_training(1, clients, steps)
        sq = sum(((v - fedprox.w[k]) ** 2).flatten(1).sum(1) for k, v in local.items())  # [S]
        drift.append(sq.sqrt())
    for smaller, larger in zip(drift[1:], drift[:-1], strict=True):
        assert (smaller < larger).all(), drift
    assert (drift[-1] < 0.5 * drift[0]).all(), drift  # τ = 10 steps at η μ = 1: pulled back every step


# --- SCAFFOLD and FedDyn: no client drift ------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,hp,rounds",
    [
        ("scaffold", {"control": "II"}, 120),
        ("scaffold", {"control": "I"}, 120),
        ("feddyn", {"alpha": 1.0}, 200),
    ],
)
def test_reaches_the_minimizer_of_the_average_objective_where_fedavg_stalls(lsr, name, hp, rounds):
    """Full participation, 5 full-batch local steps: FedAvg converges (it no longer moves) to a point away
    from x* = argmin (1/N) Σ f_i (client drift: the clients' Hessians differ); SCAFFOLD (Theorem III) and
    FedDyn (its convergence theorems) reach x* to machine precision."""
    n = lsr.num_clients
    x_star = minimizer(lsr, [1.0 / n] * n)
    common = {"lr": 0.05, "local_steps": 5, **FULL_BATCH}
    fedavg = train(make("fedavg", lsr, **common), rounds - 1, torch.arange(n))
    before = theta(fedavg).clone()
    train(fedavg, 1, torch.arange(n))
    assert float((theta(fedavg) - before).norm()) < 1e-10  # a fixed point
    drifted = float((theta(fedavg) - x_star).norm())
    assert drifted > 1e-2 * float(x_star.norm())
    ours = train(make(name, lsr, **common, **hp), rounds, torch.arange(n))
    assert float((theta(ours) - x_star).norm()) < 1e-10 * float(x_star.norm())


def test_scaffold_and_feddyn_minimize_the_sample_weighted_objective_with_sample_weights(lsr):
    """With ``client_weights: samples`` the objective is Σ (n_i/n) f_i: unequal sizes (drop samples)."""
    keep = [lsr.train.offsets[i] + torch.arange(int(s)) for i, s in enumerate([12, 3, 7, 12, 5, 9])]
    x = [lsr.train.x[k].numpy() for k in keep]
    y = [lsr.train.y[k].numpy() for k in keep]
    from hetfl.engine.federation import ClientSplit

    fed = Federation(
        ClientSplit(x, y, torch.device("cpu"), torch.float64), lsr.test, lsr.model, lsr.cluster, None
    )
    x_star = minimizer(fed, fed.weights.tolist())
    common = {"lr": 0.05, "local_steps": 5, "client_weights": "samples", **FULL_BATCH}
    for name, hp in (("scaffold", {}), ("feddyn", {"alpha": 1.0})):
        ours = train(make(name, fed, **common, **hp), 250, torch.arange(6))
        assert float((theta(ours) - x_star).norm()) < 1e-9 * float(x_star.norm()), name


@pytest.fixture(scope="module")
def dirichlet(tmp_path_factory) -> Federation:
    """scikit-learn's digits on 8 clients, Dirichlet(0.3) label skew, the mlr model, float64."""
    data = load_dataset({"name": "digits"}, tmp_path_factory.mktemp("digits"))
    part = make_partition({"scheme": "dirichlet", "clients": 8, "alpha": 0.3, "min_size": 10}, data, 0)
    model = build_model(normalize_model_spec({"name": "mlr"}, "m"), data.x.shape[1:], 10)
    return Federation.from_partition(data, part, model, torch.device("cpu"), torch.float64)


@pytest.mark.parametrize(
    "hp",
    [
        {"control": "II"},
        {"control": "I", "clients_per_round": 3},
        {"control": "II", "clients_per_round": 5, "client_weights": "samples", "momentum": 0.5},
        {"control": "II", "clients_per_round": 4, "local_steps_per_client": "uniform", "local_steps_min": 1},
    ],
)
def test_the_server_control_is_the_mean_of_the_client_controls(dirichlet, hp):
    """Algorithm 1, line 17: c ← c + (|S|/N) (1/|S|) Σ_{i∈S} Δc_i keeps c = (1/N) Σ_i c_i (every client's,
    also those not sampled), with full or partial participation (Σ_i (n_i/n) c_i with sample weights); the
    controls are not trivial (they differ across clients)."""
    scaffold = make("scaffold", dirichlet, 2, lr=0.05, local_steps=4, batch_size=16, **hp)
    omega = dirichlet.weights if hp.get("client_weights") == "samples" else torch.full((8,), 1 / 8.0)
    for _ in range(4):
        train(scaffold, 1)
        for k, c in scaffold.c.items():
            mean = torch.tensordot(omega.to(c.dtype), scaffold.c_i[k], dims=1)
            torch.testing.assert_close(c[0], mean, rtol=0, atol=1e-12)
    spread = scaffold.c_i["fc1.weight"].flatten(1).std(0).max()
    assert spread > 1e-3


# --- FedNova: objective consistency under unequal local steps ----------------------------------------------

NOVA = {"lr": 0.004, "local_steps": 6, "local_steps_min": 1, "local_steps_per_client": "spread", **FULL_BATCH}


def _distances(fed, algorithm, surrogate_weights) -> tuple[float, float]:
    """(‖x − x*‖, ‖x − x̃‖): x* = argmin (1/N) Σ f_i, x̃ = argmin Σ ω_i f_i (the surrogate)."""
    n = fed.num_clients
    x = theta(algorithm)
    return (
        float((x - minimizer(fed, [1.0 / n] * n)).norm()),
        float((x - minimizer(fed, surrogate_weights)).norm()),
    )


def test_fedavg_converges_to_the_tau_weighted_surrogate_and_fednova_to_the_true_optimum(lsr):
    """τ_i = 1..6 spread over the 6 clients, fixed, full participation, small η (the surrogate and the true
    optimum are fixed points up to O(η τ)): FedAvg ends near x̃ = argmin Σ p_i τ_i f_i (Wang et al., Theorem
    1), FedNova near x* (Theorem 2), each an order of magnitude closer to its own than to the other."""
    n = lsr.num_clients
    tau = LocalSteps(dataclasses.replace(make("fedavg", lsr, **NOVA).hp), lsr.train.sizes, 0).steps()
    assert tau.tolist() == [1, 2, 3, 4, 5, 6]
    weights = (tau / tau.sum()).tolist()  # p_i τ_i / Σ p_j τ_j, p_i = 1/N
    x_star, x_tilde = minimizer(lsr, [1.0 / n] * n), minimizer(lsr, weights)
    assert float((x_star - x_tilde).norm()) > 0.5  # the two objectives' minimizers are apart
    fedavg = train(make("fedavg", lsr, **NOVA), 400, torch.arange(n))
    fednova = train(make("fednova", lsr, **NOVA), 400, torch.arange(n))
    avg_true, avg_surrogate = _distances(lsr, fedavg, weights)
    nova_true, nova_surrogate = _distances(lsr, fednova, weights)
    assert avg_surrogate < 0.1 * avg_true
    assert nova_true < 0.1 * nova_surrogate
    assert nova_true < 0.1 * avg_true


def test_fednova_with_local_momentum_normalizes_by_the_momentum_a_i(lsr, monkeypatch):
    """With local momentum ρ the client's update is η G_i a_i with
    ‖a_i‖₁ = [τ_i − ρ(1 − ρ^τ_i)/(1 − ρ)]/(1 − ρ) (the paper's local-momentum example): normalizing by it
    reaches x*; normalizing by τ_i instead leaves the inconsistency ‖a_i‖₁/τ_i."""
    n, rho = lsr.num_clients, 0.5
    hp = {**NOVA, "lr": 0.002, "momentum": rho}
    fednova = train(make("fednova", lsr, **hp), 400, torch.arange(n))
    steps = torch.tensor([1, 2, 3, 4, 5, 6])
    a = a_l1(steps, rho)
    assert a.tolist() == pytest.approx(
        [sum(sum(rho**j for j in range(k)) for k in range(1, t + 1)) for t in range(1, 7)]
    )
    right, _ = _distances(lsr, fednova, (a / a.sum()).tolist())
    monkeypatch.setattr(type(fednova), "normalizers", lambda self, steps: steps.double())
    plain = train(make("fednova", lsr, **hp), 400, torch.arange(n))
    wrong, _ = _distances(lsr, plain, (a / a.sum()).tolist())
    assert right < wrong / 3


def test_fednova_with_equal_steps_is_fedavg():
    hp = {"lr": 0.1, "local_steps": 3, "batch_size": 4, "clients_per_round": 3, "client_weights": "samples"}
    fedavg = train(make("fedavg", tiny_federation("dnn"), 2, **hp), 3)
    fednova = train(make("fednova", tiny_federation("dnn"), 2, **hp), 3)
    for k, v in fedavg.w.items():
        torch.testing.assert_close(fednova.w[k], v, rtol=0, atol=1e-12)


# --- unequal local steps: the shared option ----------------------------------------------------------------


def test_local_step_rules():
    fed = tiny_federation("mlr", sizes=(7, 12, 3, 9, 20))
    spread = make(
        "fedavg", fed, local_steps=5, local_steps_min=2, local_steps_per_client="spread", batch_size=4
    )
    assert spread.work.steps().tolist() == [2, 3, 4, 4, 5] == spread.work.steps().tolist()  # fixed
    epochs = make("fedavg", fed, local_steps=2, local_steps_unit="epochs", batch_size=4)
    assert epochs.work.steps().tolist() == [2 * 2, 2 * 3, 2 * 1, 2 * 3, 2 * 5]  # E ⌈n_i / B⌉
    clients, steps = spread.participants(torch.tensor([0, 2, 3, 4]))
    assert clients.tolist() == [4, 2, 3, 0] and steps.tolist() == [5, 4, 4, 2]  # longest first, stable
    equal = make("fedavg", fed, local_steps=3)
    assert equal.participants(torch.tensor([3, 1, 4]))[0].tolist() == [3, 1, 4]  # the server's order
    hp = {"local_steps": 6, "local_steps_min": 2, "local_steps_per_client": "uniform"}
    draws = torch.stack([make("fedavg", fed, 4, **hp).work.steps() for _ in range(2)])
    assert torch.equal(draws[0], draws[1])  # from the seed: every algorithm of a study draws the same τ_i
    a, b = make("fedavg", fed, 4, **hp), make("fednova", fed, 4, **hp)
    rounds = torch.stack([a.work.steps() for _ in range(30)])
    assert torch.equal(rounds, torch.stack([b.work.steps() for _ in range(30)]))
    assert rounds.min() == 2 and rounds.max() == 6 and len(rounds.unique(dim=0)) > 20  # redrawn each round


def test_clients_that_finished_keep_their_models():
    """With τ = (1, 3) only the client still working steps: the other's model is the one after its 1 step."""
    fed = tiny_federation("mlr", sizes=(8, 8))
    hp = {
        "lr": 0.1,
        "local_steps": 3,
        "local_steps_min": 1,
        "local_steps_per_client": "spread",
        "batch_size": 8,
    }
    short = make("fedavg", fed, **{**hp, "local_steps_per_client": "equal", "local_steps": 1})
    clients, steps = short.participants(torch.tensor([0]))
    one = short.local_training(1, clients, steps)
    both = make("fedavg", fed, **hp)
    clients, steps = both.participants(torch.arange(2))
    assert clients.tolist() == [1, 0] and steps.tolist() == [3, 1]
    local = both.local_training(1, clients, steps)
    for k in one:  # full batches: the same data (in another order), so the same step
        torch.testing.assert_close(local[k][1], one[k][0], rtol=0, atol=1e-14)


# --- server optimizers -------------------------------------------------------------------------------------

BASE = {"lr": 0.1, "local_steps": 3, "batch_size": 4, "clients_per_round": 3}


def test_fedadam_moves_each_coordinate_by_about_eta_at_most():
    """x_{t+1} − x_t = η m_t/(√v_t + τ): with v_{−1} = τ² the first step is below η (m_0/√v_0 ≤
    (1 − β1)/√(1 − β2) = 1 at the defaults) and every step below η (1 − β1)/√((1 − β2)(1 − β1²/β2)) (≈ 2.3 η,
    Cauchy-Schwarz on m_t = (1 − β1) Σ_k β1^k Δ_{t−k}), however large the clients' updates; and it is
    adaptive: the largest coordinate step is close to η, not proportional to the update."""
    eta = 1e-3
    bound = (1 - 0.9) / np.sqrt((1 - 0.99) * (1 - 0.9**2 / 0.99))
    for lr in (0.1, 1.0):  # clients' updates 10x apart
        fedadam = make(
            "fedavg", tiny_federation("dnn"), 0, **{**BASE, "lr": lr}, server_optimizer="adam", server_lr=eta
        )
        for t in range(1, 6):
            before = {k: v.clone() for k, v in fedadam.w.items()}
            train(fedadam, 1)
            step = max(float((fedadam.w[k] - v).abs().max()) for k, v in before.items())
            assert step <= (1.0 if t == 1 else bound) * eta * (1 + 1e-9)
            if t == 1:
                assert step > 0.5 * eta


def test_fedavgm_with_beta1_0_is_fedavg_with_a_server_learning_rate():
    sgd = train(make("fedavg", tiny_federation("dnn"), 1, **BASE, server_lr=0.7), 4)
    avgm = train(
        make(
            "fedavg",
            tiny_federation("dnn"),
            1,
            **BASE,
            server_optimizer="avgm",
            server_lr=0.7,
            server_momentum=0.0,
        ),
        4,
    )
    for k, v in sgd.w.items():
        assert torch.equal(avgm.w[k], v), k
    momentum = train(
        make("fedavg", tiny_federation("dnn"), 1, **BASE, server_optimizer="avgm", server_lr=0.7), 4
    )
    assert any(not torch.equal(momentum.w[k], v) for k, v in sgd.w.items())


@pytest.mark.parametrize("name", ["fedavg", "fedprox", "scaffold", "fednova"])
def test_the_server_learning_rate_scales_the_mean_update(name):
    """One round from the same x_0: x_1 − x_0 is η_g times the update at η_g = 1 (FedOpt with server SGD)."""
    x0 = make(name, tiny_federation("dnn"), **BASE).w
    plain = train(make(name, tiny_federation("dnn"), **BASE), 1).w
    scaled = train(make(name, tiny_federation("dnn"), **BASE, server_lr=2.5), 1).w
    for k in x0:
        torch.testing.assert_close(scaled[k] - x0[k], 2.5 * (plain[k] - x0[k]), rtol=0, atol=1e-12)


def test_yogi_and_adagrad_take_bounded_steps_and_differ_from_adam():
    """Adagrad's v only grows (v_t ≥ v_{t−1}), Yogi's moves by at most (1 − β2)Δ² per round; the three
    adaptive rules give three different models."""
    models = {}
    for kind in ("adagrad", "adam", "yogi"):
        alg = make("fedavg", tiny_federation("dnn"), 1, **BASE, server_optimizer=kind, server_lr=0.01)
        previous = None
        for _ in range(4):
            train(alg, 1)
            v = {k: x.clone() for k, x in alg.server.v.items()}
            if previous is not None and kind == "adagrad":
                assert all((v[k] >= previous[k]).all() for k in v)
            previous = v
        models[kind] = alg.w
    for a, b in (("adagrad", "adam"), ("adam", "yogi"), ("adagrad", "yogi")):
        assert any(not torch.equal(models[a][k], models[b][k]) for k in models[a]), (a, b)


# --- hyper-parameters ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,values,key,fragment",
    [
        ("fedprox", {"mu": -0.1}, "mu", "≥ 0"),
        ("feddyn", {"alpha": 0.0}, "alpha", "> 0"),
        ("fedavg", {"server_lr": 0.0}, "server_lr", "> 0"),
        ("scaffold", {"server_momentum": 1.0}, "server_momentum", "[0, 1)"),
        ("fednova", {"server_beta2": -0.1}, "server_beta2", "[0, 1)"),
        ("fedprox", {"server_eps": 0.0}, "server_eps", "> 0"),
        ("fedavg", {"server_optimizer": "lamb"}, "server_optimizer", "one of"),
        (
            "fednova",
            {"local_steps": 3, "local_steps_min": 4, "local_steps_per_client": "spread"},
            "local_steps_min",
            "<= local_steps",
        ),
        ("scaffold", {"local_steps_min": 0}, "local_steps_min", "> 0"),
        ("scaffold", {"control": "III"}, "control", "one of"),
        ("fedavg", {"local_steps_unit": "passes"}, "local_steps_unit", "one of"),
        ("feddyn", {"server_optimizer": "adam"}, "server_optimizer", "unknown option"),
    ],
)
def test_out_of_range_hyperparameters_name_the_key(name, values, key, fragment):
    with pytest.raises(ConfigError) as err:
        get_algorithm(name).Hyperparameters.from_dict(values, "studies.s.runs.r")
    assert err.value.key == f"studies.s.runs.r.{key}"
    assert fragment in str(err.value)


def test_the_paper_defaults():
    defaults = {
        n: get_algorithm(n).Hyperparameters.from_dict({}, "t") for n in ("fedprox", "scaffold", "feddyn")
    }
    assert defaults["fedprox"].mu == 0.01
    assert defaults["scaffold"].control == "II" and defaults["scaffold"].server_lr == 1.0
    assert defaults["feddyn"].alpha == 0.01
    fedavg = get_algorithm("fedavg").Hyperparameters.from_dict({}, "t")
    assert (fedavg.server_optimizer, fedavg.server_lr, fedavg.server_momentum, fedavg.server_beta2) == (
        "sgd",
        1.0,
        0.9,
        0.99,
    )
    assert fedavg.server_eps == 1e-3 and fedavg.local_steps_per_client == "equal"
