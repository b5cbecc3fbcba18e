"""Properties the papers claim, checked on tiny problems (each could fail)."""

from __future__ import annotations

import numpy as np
import torch

from hetfl.algorithms import get_algorithm
from hetfl.engine.evaluate import Evaluator
from hetfl.engine.federation import ClientSplit, Federation
from hetfl.engine.participation import participation_schedule
from hetfl.models import build_model, normalize_model_spec
from tests.conftest import tiny_federation


def make(name, fed, seed=0, sampling="epoch", **hp):
    cls = get_algorithm(name)
    return cls(fed, cls.Hyperparameters.from_dict(hp, "test"), seed, sampling)


def permuted_blobs(clients=6, n=60, seed=0, model=None) -> Federation:
    """3 Gaussian blobs in 2-D; clients in cluster 1 see the labels rotated (0->1->2->0).

    No single model fits both clusters; a personalized one can (the heterogeneity pFedMe targets).
    """
    rng = np.random.default_rng(seed)
    centers = np.array([[3.0, 0.0], [-1.5, 2.6], [-1.5, -2.6]])

    def client(i, m):
        y = rng.integers(0, 3, size=m)
        x = (centers[y] + rng.normal(scale=0.7, size=(m, 2))).astype(np.float32)
        return x, (y + (i % 2)) % 3

    train = [client(i, n) for i in range(clients)]
    test = [client(i, n // 2) for i in range(clients)]
    cpu = torch.device("cpu")
    model = build_model(normalize_model_spec(model or {"name": "mlr"}, "m"), (2,), 3)
    return Federation(
        ClientSplit([x for x, _ in train], [y for _, y in train], cpu, torch.float64),
        ClientSplit([x for x, _ in test], [y for _, y in test], cpu, torch.float64),
        model,
    )


def test_fedavg_with_one_full_batch_step_is_fedsgd():
    """McMahan et al. 2017, Sec. 2: FedSGD is FedAvg with E = 1 local step on the full client batch (B = ∞)."""
    fed = tiny_federation("dnn", sizes=(8, 8, 8, 8))
    alg = make("fedavg", fed, sampling="sequential", lr=0.3, local_steps=1, batch_size=8)
    w0 = {k: v.clone() for k, v in alg.w.items()}
    alg.round(1, torch.arange(4))
    module = fed.model.reference_module().double()
    module.load_state_dict({k: v[0] for k, v in w0.items()})
    off = fed.train.offsets.tolist()
    loss = (
        sum(
            torch.nn.functional.cross_entropy(module(fed.train.x[a:b]), fed.train.y[a:b])
            for a, b in zip(off[:-1], off[1:], strict=True)
        )
        / 4
    )
    grads = torch.autograd.grad(loss, list(module.parameters()))
    for (name, _), g in zip(module.named_parameters(), grads, strict=True):
        torch.testing.assert_close(alg.w[name][0], w0[name][0] - 0.3 * g, rtol=0, atol=1e-12)


def test_local_clients_never_see_each_other():
    """Local training: a client's model depends on its own data only (FedAvg's does not)."""
    a, b = tiny_federation("mlr", seed=0), tiny_federation("mlr", seed=0)
    b.train.x[b.train.offsets[1] :] += 1.0  # change every client's data except client 0's
    models = {}
    for name in ("local", "fedavg"):
        runs = [make(name, fed, lr=0.2, local_steps=3, batch_size=4) for fed in (a, b)]
        for alg in runs:
            for t in range(1, 4):
                alg.round(t, torch.arange(4))
        models[name] = [alg.eval_models()["personal"]["fc1.weight"][0] for alg in runs]
    torch.testing.assert_close(models["local"][0], models["local"][1], rtol=0, atol=0)
    assert not torch.allclose(models["fedavg"][0], models["fedavg"][1])


def test_pfedme_personal_model_solves_the_prox_problem():
    """pFedMe eq. (7)-(8): θ̃_i ≈ argmin_θ f_i(θ) + λ/2 ‖θ − w‖², i.e. ∇f_i(θ̃) + λ(θ̃ − w) ≈ 0 (ν-accuracy).

    With one local round on the full client batch, θ̃ solves the prox at w_t; more inner steps K solve it
    better, and the residual falls far below the gradient at w_t.
    """
    residuals = []
    for k in (2, 200):
        fed = tiny_federation("mlr", sizes=(8, 8, 8, 8))
        alg = make(
            "pfedme",
            fed,
            sampling="sequential",
            lr=0.01,
            local_steps=1,
            batch_size=8,
            K=k,
            personal_lr=0.02,
            lam=15.0,
        )
        w = {key: v.clone() for key, v in alg.w.items()}
        alg.round(1, torch.arange(4))
        theta = alg.eval_models()["personal"]
        batch = fed.batch(
            alg.sampler.__class__(fed.train.sizes, 8, torch.Generator(), "sequential"), torch.arange(4)
        )
        _, g_theta = fed.model.loss_grads(theta, batch.x, batch.y, None)
        _, g_w = fed.model.loss_grads(
            {key: v.expand_as(theta[key]) for key, v in w.items()}, batch.x, batch.y, None
        )
        res = sum(((g_theta[key] + 15.0 * (theta[key] - w[key])) ** 2).sum() for key in theta).sqrt()
        residuals.append(float(res / sum((g**2).sum() for g in g_w.values()).sqrt()))
    assert residuals[1] < 1e-6 < residuals[0]


def test_pfedme_personalizes_where_fedavg_cannot():
    """pFedMe, Table 1 / Sec. 5: on heterogeneous clients the personalized models beat FedAvg's global model."""
    accs = {}
    for name, hp in (("fedavg", {}), ("pfedme", {"K": 5, "personal_lr": 0.05, "lam": 2.0})):
        fed = permuted_blobs()
        alg = make(name, fed, lr=0.1, local_steps=10, batch_size=10, clients_per_round=6, **hp)
        schedule = participation_schedule(6, 6, 30, 0)
        for t in range(1, 31):
            alg.round(t, schedule[t - 1])
        model = "personal" if name == "pfedme" else "global"
        accs[name] = Evaluator(fed).scores(alg.eval_models()[model], "test").weighted()[1]
    assert accs["fedavg"] < 0.8  # one model cannot fit both labelings
    assert accs["pfedme"] > accs["fedavg"] + 0.15
