"""Properties the All-for-one paper (and its baselines' papers) claim, checked on tiny problems (each could fail)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import hetfl.algorithms.collaborative.cobo as cobo_pairs
from hetfl.algorithms import get_algorithm
from hetfl.algorithms.collaborative.all_for_one import collaboration_weights, similarity_ratio
from hetfl.algorithms.collaborative.common import in_cluster_weight
from hetfl.data import load_dataset, make_partition
from hetfl.engine.federation import Federation
from hetfl.engine.optim import client_optimizer, scheduled_lr
from hetfl.errors import ConfigError
from hetfl.models import build_model, normalize_model_spec
from tests.conftest import tiny_federation


def make(name, fed, seed=0, sampling="epoch", **hp):
    cls = get_algorithm(name)
    return cls(fed, cls.Hyperparameters.from_dict(hp, "test"), seed, sampling)


def lsr_federation(tmp_path, users=8, d=2, n=400, seed=0) -> Federation:
    """Noise-free least squares, two clusters (client i in cluster i mod 2), float64 (Figure 2's setting)."""
    spec = {"name": "synthetic_lsr", "num_users": users, "dimension": d, "samples_per_user": n, "seed": seed}
    data = load_dataset(spec, tmp_path)
    part = make_partition({"scheme": "natural", "test_fraction": 0.2}, data, 0)
    model = build_model(normalize_model_spec({"name": "linear", "bias": False}, "m"), (d,), 1, "regression")
    return Federation.from_partition(data, part, model, torch.device("cpu"), torch.float64)


def excess(alg) -> float:
    """Pooled test loss of the personal models (= excess loss up to sampling)."""
    rows, _ = alg.evaluate()
    return dict(rows)["test_loss_personal"]


def run(alg, rounds):
    for t in range(1, rounds + 1):
        alg.round(t, None)
    return alg


# --- Definitions 1 and 3 -------------------------------------------------------------------------------


@pytest.mark.parametrize("rule,lam", [("binary", 0.3), ("binary", 0.05), ("continuous", 0.0)])
def test_closed_form_weights_are_definition_1(rule, lam):
    """Definition 3's closed forms equal Definition 1, α_ik = φ(r_ik)(σ_{i,ψ}/σ_k)² with σ_k² = σ²/n_k
    (Remark 1), and the weights sum to (σ_{i,ψ}/σ_{i,φ})² ≥ 1 (proof of Theorem 1)."""
    g = torch.Generator().manual_seed(1)
    n_clients = 7
    r = torch.rand(n_clients, n_clients, generator=g, dtype=torch.float64)
    r[r < 0.3] = 0.0
    r.fill_diagonal_(1.0)
    n = torch.randint(1, 50, (n_clients,), generator=g).double()
    phi = (lambda x: lam * (x >= lam).double()) if rule == "binary" else (lambda x: x)
    psi = lambda x: x * phi(x)  # noqa: E731
    sigma_sq = 1.0 / n  # σ_k² = σ²/n_k with σ = 1
    for i in range(n_clients):
        sigma_psi_sq = 1.0 / (psi(r[i]) / sigma_sq).sum()
        sigma_phi_sq = 1.0 / (phi(r[i]) / sigma_sq).sum()
        expected = phi(r[i]) * sigma_psi_sq / sigma_sq
        theory = collaboration_weights(r, n, rule, lam, "theory")[i]
        torch.testing.assert_close(theory, expected, rtol=1e-12, atol=0)
        torch.testing.assert_close(theory.sum(), sigma_psi_sq / sigma_phi_sq, rtol=1e-12, atol=0)
        assert theory.sum() >= 1.0 - 1e-12
        normalized = collaboration_weights(r, n, rule, lam, "normalized")[i]
        torch.testing.assert_close(normalized, theory / theory.sum(), rtol=1e-12, atol=1e-15)


def test_binary_threshold_zero_means_strictly_positive_ratio():
    """φ(0) = 0 (Definition 1): with λ = 0 a client with r̂ = 0 gets no weight; r̂ > 0 gets n_k / Σ."""
    r = torch.tensor([[1.0, 0.0, 1e-9], [0.5, 1.0, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
    alpha = collaboration_weights(r, torch.ones(3), "binary", 0.0, "normalized")
    torch.testing.assert_close(alpha[0], torch.tensor([0.5, 0.0, 0.5], dtype=torch.float64))
    torch.testing.assert_close(alpha[2], torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64))


def test_similarity_ratio_conventions():
    """r̂_ik = (1 − Z_ik/Z_i)_+ ∈ [0, 1]; r̂_ii = 1; a collaborator at least as far as ‖ĝ_i‖² gets 0."""
    z_pair = torch.tensor([[0.0, 0.5, 2.0], [1.0, 0.0, 0.0], [3.0, 1.0, 0.0]], dtype=torch.float64)
    z_own = torch.tensor([1.0, 0.0, 4.0], dtype=torch.float64)
    r = similarity_ratio(z_pair, z_own)
    expected = torch.tensor([[1.0, 0.5, 0.0], [0.0, 1.0, 1.0], [0.25, 0.75, 1.0]], dtype=torch.float64)
    torch.testing.assert_close(r, expected)


# --- the criterion with exact gradients (§3, Lemma 1) ------------------------------------------------------


@pytest.mark.parametrize("rule", ["binary", "continuous"])
def test_criterion_keeps_exactly_the_collaborators_that_help_lemma_1(tmp_path, rule):
    """With full-batch gradients (b_α ≥ every client's size), α_ik > 0 iff ‖∇R_k(θ_i) − ∇R_i(θ_i)‖² < ‖∇R_i(θ_i)‖²:
    the collaborators whose term in Lemma 1's descent bound is negative (§3). Gradients recomputed with numpy."""
    fed = lsr_federation(tmp_path, users=6, n=30)
    alg = make("all_for_one", fed, lr=0.1, batch_size=4, local_steps=3, b_alpha=64, tau=3, rule=rule)
    run(alg, 2)  # estimated at iterations 0 and 3, stepped 6 times
    alpha, _ = alg.estimate()
    x, y = fed.train.x.numpy(), fed.train.y.numpy()[:, 0]
    off = fed.train.offsets.tolist()
    w = alg.theta["fc1.weight"].numpy()[:, 0, :]  # θ_i [N, d]
    for i in range(6):
        grads = [
            2 * x[a:b].T @ (x[a:b] @ w[i] - y[a:b]) / (b - a) for a, b in zip(off[:-1], off[1:], strict=True)
        ]
        helps = [np.sum((g - grads[i]) ** 2) < np.sum(grads[i] ** 2) for g in grads]
        assert list((alpha[i] > 0).numpy()) == helps
        ratio = [max(0.0, 1 - np.sum((g - grads[i]) ** 2) / np.sum(grads[i] ** 2)) for g in grads]
        if rule == "continuous":
            np.testing.assert_allclose(alpha[i].numpy(), np.array(ratio) / np.sum(ratio), rtol=1e-9)


# --- Figure 2: variance reduction on clustered noise-free least squares ----------------------------------


def test_all_for_one_reduces_variance_on_two_clusters_where_fedavg_plateaus(tmp_path):
    """Figure 2(a): All-for-one (binary, continuous) converges faster than Local, the oracle fastest, FedAvg
    saturates at the bias between the clusters (mean over clients of log10 excess loss, the paper's curves,
    averaged over 3 seeds); the criterion puts its weight inside the true cluster."""
    fed = lsr_federation(tmp_path, users=20, d=2)
    hp = {"lr": 0.25, "batch_size": 2, "local_steps": 1}
    runs = (
        ("bin", "all_for_one", {"b_alpha": 1}),
        ("cont", "all_for_one", {"b_alpha": 1, "rule": "continuous"}),
        ("opt", "all_for_one_oracle", {}),
        ("local", "local_sgdm", {}),
        ("fedavg", "fedavg_sgdm", {}),
    )
    loss = {label: 0.0 for label, _, _ in runs}
    for seed in range(3):
        for label, name, extra in runs:
            alg = run(make(name, fed, seed=seed, **hp, **extra), 30)
            loss[label] += dict(alg.evaluate()[0])["test_log10_loss"] / 3
            if label == "bin":
                share = in_cluster_weight(alg.alpha, fed.cluster).mean()
                assert (
                    share > 0.9 and (alg.alpha > 0).sum() > fed.num_clients
                )  # inside the cluster, collaborating
    assert loss["opt"] < loss["bin"] - 1 and loss["opt"] < loss["cont"] - 1
    assert loss["bin"] < loss["local"] - 1 and loss["cont"] < loss["local"] - 1
    assert loss["fedavg"] > 0 > loss["local"] + 5  # FedAvg's single model stays between the two optima


def test_oracle_weights_are_uniform_inside_the_true_cluster(tmp_path):
    fed = lsr_federation(tmp_path, users=6)
    alpha = make("all_for_one_oracle", fed, batch_size=2).alpha
    same = fed.cluster.unsqueeze(0) == fed.cluster.unsqueeze(1)
    torch.testing.assert_close(alpha, same.double() / 3)


# --- the baselines reduce to Local / FedAvg where their papers say so -------------------------------------


def _models(alg, model="personal"):
    return {k: v.clone() for k, v in alg.eval_models()[model].items()}


def _same(a, b, atol=1e-12):
    for k in a:
        torch.testing.assert_close(*torch.broadcast_tensors(a[k], b[k]), rtol=0, atol=atol)


@pytest.mark.parametrize(
    "name,extra,reference",
    [
        ("ditto", {"lam": 0.0}, "local_sgdm"),  # Ditto with λ = 0: the personal model is trained alone
        ("apfl", {"mix_alpha": 1.0}, "local_sgdm"),  # APFL with α = 1: v̄ = v, trained alone
        ("cobo", {"rho": 0.0}, "local_sgdm"),  # CoBo without the consensus penalty
    ],
)
def test_baselines_reduce_to_local(name, extra, reference):
    fed = tiny_federation("mlr")
    hp = {"lr": 0.2, "batch_size": 3, "local_steps": 2, "momentum": 0.5}
    a = run(make(name, fed, **hp, **extra), 3)
    b = run(make(reference, fed, **hp), 3)
    _same(_models(a), _models(b))


def test_apfl_with_zero_mixing_is_fedavg():
    """APFL with α = 0: the personalized model is the global model, trained by FedAvg."""
    fed = tiny_federation("mlr")
    hp = {"lr": 0.2, "batch_size": 3, "local_steps": 2}
    a = run(make("apfl", fed, mix_alpha=0.0, **hp), 3)
    b = run(make("fedavg_sgdm", fed, client_weights="uniform", **hp), 3)
    _same(_models(a), _models(b, "global"))


def test_local_and_fedavg_sgdm_without_momentum_are_the_shared_baselines():
    """``local_sgdm`` / ``fedavg_sgdm`` with momentum 0 equal the shared ``local`` / ``fedavg`` batch for batch."""
    fed = tiny_federation("dnn")
    hp = {"lr": 0.2, "batch_size": 3, "local_steps": 2}
    _same(_models(run(make("local_sgdm", fed, **hp), 3)), _models(run(make("local", fed, **hp), 3)))
    a = run(make("fedavg_sgdm", fed, **hp), 3)
    b = make("fedavg", fed, client_weights="samples", **hp)
    for t in range(1, 4):
        b.round(t, torch.arange(4))
    _same(_models(a, "global"), _models(b, "global"))


def test_ditto_personal_models_approach_the_global_one_as_lambda_grows():
    """Ditto's personal objective f_k(v) + λ/2‖v − w‖²: a larger λ keeps v closer to the global model."""
    fed = tiny_federation("mlr")
    gaps = []
    for lam in (0.1, 10.0):
        alg = run(make("ditto", fed, lr=0.05, batch_size=3, local_steps=3, lam=lam), 4)
        models = alg.eval_models()
        gaps.append(
            float(sum(((models["personal"][k] - models["global"][k]) ** 2).sum() for k in models["global"]))
        )
    assert gaps[1] < 0.1 * gaps[0]


def test_cobo_cuts_the_weights_between_clusters(tmp_path):
    """CoBo (Hashemi et al. 2024): on two clusters of least-squares clients the bilevel weights of clients from
    different clusters go to 0 (their gradients at the midpoint point apart), those inside a cluster stay at 1
    (they agree), under the authors' schedule: every iteration, each pair with probability 2/N, batches of b."""
    fed = lsr_federation(tmp_path, users=6)
    alg = run(make("cobo", fed, lr=0.1, batch_size=8, local_steps=1, gamma_c=0.01), 40)
    same = (fed.cluster.unsqueeze(0) == fed.cluster.unsqueeze(1)) & ~torch.eye(6, dtype=torch.bool)
    cross = fed.cluster.unsqueeze(0) != fed.cluster.unsqueeze(1)
    assert float(alg.alpha[cross].max()) == 0.0
    assert float(alg.alpha[same].min()) > 0.9
    assert 10 < alg.updates == 40  # one update an iteration, ~1/3 of the pairs each


def test_cobo_samples_pairs_as_the_authors_code():
    """The authors' code (epfml/CoBo, grouping.py) samples each pair with probability 2/N, then 1/sqrt(s) once
    more than 800 updates have been made; a number fixes it."""
    hp = get_algorithm("cobo").Hyperparameters.from_dict({}, "t")
    assert cobo_pairs.pair_probability(hp, 20, 0) == cobo_pairs.pair_probability(hp, 20, 800) == 0.1
    assert cobo_pairs.pair_probability(hp, 20, 801) == pytest.approx(801**-0.5)
    assert cobo_pairs.pair_probability(hp, 2, 0) == 1.0
    fixed = get_algorithm("cobo").Hyperparameters.from_dict({"pair_probability": 0.25}, "t")
    assert cobo_pairs.pair_probability(fixed, 20, 5000) == 0.25


def test_wga_bias_correction_removes_the_collaborators_bias(tmp_path):
    """Chayti et al. 2021: weighted gradient averaging with uniform weights is biased towards the others'
    optima; the bias correction (c_i tracking the gradient differences) removes it."""
    fed = lsr_federation(tmp_path, users=4)
    final = {}
    for beta in (1e-12, 0.3):  # β → 0: c_i stays 0, plain weighted gradient averaging
        alg = run(make("wga_bc", fed, lr=0.1, batch_size=64, local_steps=1, beta=beta), 150)
        final[beta] = excess(alg)
    assert final[0.3] < 1e-3 * final[1e-12]


# --- the optimizer ----------------------------------------------------------------------------------------


def test_client_optimizer_is_torch_sgd_with_steplr():
    """The family's optimizer (the shared ClientOptimizer at ``lr_at(t)``) = torch.optim.SGD(momentum,
    weight_decay) + StepLR, stepped once per round, as the paper's code."""
    alg = make(
        "local_sgdm",
        tiny_federation("mlr"),
        lr=0.3,
        momentum=0.9,
        weight_decay=0.01,
        lr_schedule="step",
        lr_step_size=2,
        lr_gamma=0.5,
    )
    g = torch.Generator().manual_seed(0)
    theta = {"w": torch.randn(2, 3, generator=g, dtype=torch.float64)}
    ref = [torch.nn.Parameter(theta["w"][i].clone()) for i in range(2)]
    opts = [torch.optim.SGD([p], lr=0.3, momentum=0.9, weight_decay=0.01) for p in ref]
    scheds = [torch.optim.lr_scheduler.StepLR(o, 2, 0.5) for o in opts]
    ours = client_optimizer(alg.fed, alg.hp, theta)
    for t in range(1, 6):
        for _ in range(3):
            grads = torch.randn(2, 3, generator=g, dtype=torch.float64)
            ours.step(theta, {"w": grads.clone()}, scheduled_lr(alg.hp.lr, t, alg.hp, alg.rounds))
            for i in range(2):
                ref[i].grad = grads[i].clone()
                opts[i].step()
        for s in scheds:
            s.step()
    torch.testing.assert_close(theta["w"], torch.stack([p.detach() for p in ref]), rtol=0, atol=1e-13)


def test_tau_epochs_keeps_the_papers_share_of_an_epoch():
    """MNIST's τ = 50 of I = 175 iterations (Table S1) on a stand-in of I = 12: ⌊50/175 · 12 + 1/2⌋ = 3."""
    from hetfl.algorithms.collaborative.all_for_one import AllForOne

    hp = AllForOne.Hyperparameters.from_dict({"lr": 0.1, "local_steps": 12, "tau_epochs": 50 / 175}, "k")
    assert hp.period() == 3
    assert (
        AllForOne.Hyperparameters.from_dict(
            {"lr": 0.1, "local_steps": 175, "tau_epochs": 50 / 175}, "k"
        ).period()
        == 50
    )
    assert (
        AllForOne.Hyperparameters.from_dict({"lr": 0.1, "local_steps": 2, "tau_epochs": 0.01}, "k").period()
        == 1
    )
    with pytest.raises(ConfigError, match=r"k\.tau_epochs.*replaces tau"):
        AllForOne.Hyperparameters.from_dict({"lr": 0.1, "local_steps": 12, "tau": 50, "tau_epochs": 0.3}, "k")
    with pytest.raises(ConfigError, match=r"k\.tau_epochs"):
        AllForOne.Hyperparameters.from_dict({"lr": 0.1, "local_steps": 12, "tau_epochs": 0.0}, "k")
