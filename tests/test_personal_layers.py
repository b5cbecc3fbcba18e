"""The layer-wise personalization baselines: FedPer, FedRep, FedBABU (personal head, ``split: output``) and
LG-FedAvg (personal body, ``split: input``).

Each matches its per-client reference loop (``hetfl.reference.personal_layers``) on ``dnn`` and ``cnn`` (a
one-layer ``mlr`` has no head and body: refused by the config, tested here); FedPer, FedRep and LG-FedAvg
agree byte for byte with FedSim / FedAlt / FedSim with the options that make them the same algorithm, and
FedBABU with head fine-tuning with FedAlt to rounding; and each paper's property holds.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hetfl.algorithms import get_algorithm
from hetfl.algorithms.personalized.layers import layer_part
from hetfl.engine.aggregation import ClientSum
from hetfl.engine.federation import ClientSplit, Federation
from hetfl.engine.grad import client_grads
from hetfl.engine.params import broadcast
from hetfl.engine.participation import participation_schedule
from hetfl.engine.sampler import BatchSampler
from hetfl.errors import ConfigError
from hetfl.models import build_model, normalize_model_spec
from hetfl.pipeline.config import build_suite
from hetfl.reference import references
from hetfl.testing import follow_reference, tiny_federation
from tests.test_algorithm_properties import permuted_blobs
from tests.test_equivalence import OPTIMIZER, params, with_optimizer
from tests.test_personalized_properties import accuracy

ROUNDS = 3
STEPS = {"lr": 0.1, "batch_size": 4}

CASES = {  # name -> (algorithm, hyper-parameters, model split, minibatch sampling)
    "fedper-sampled": ("fedper", {**STEPS, "local_steps": 2, "clients_per_round": 2}, "output", "epoch"),
    "fedper-uniform-finetune-sequential": (
        "fedper",
        {**STEPS, "local_steps": 3, "client_weights": "uniform", "finetune_steps": 2, "finetune_lr": 0.3},
        "output",
        "sequential",
    ),
    "fedrep-sampled": (
        "fedrep",
        {**STEPS, "personal_steps": 3, "local_steps": 2, "clients_per_round": 2},
        "output",
        "epoch",
    ),
    "fedrep-weighted-finetune-replacement": (
        "fedrep",
        {**STEPS, "personal_steps": 2, "local_steps": 1, "client_weights": "samples", "finetune_steps": 2},
        "output",
        "replacement",
    ),
    "fedbabu-sampled": (
        "fedbabu",
        {**STEPS, "local_steps": 2, "clients_per_round": 2, "finetune_steps": 3},
        "output",
        "epoch",
    ),
    "fedbabu-head-weighted-sequential": (
        "fedbabu",
        {
            **STEPS,
            "local_steps": 2,
            "client_weights": "samples",
            "finetune": "personal",
            "finetune_steps": 2,
            "finetune_lr": 0.3,
        },
        "output",
        "sequential",
    ),
    "lg_fedavg-sampled": ("lg_fedavg", {**STEPS, "local_steps": 2, "clients_per_round": 2}, "input", "epoch"),
    "lg_fedavg-weighted-finetune-replacement": (
        "lg_fedavg",
        {**STEPS, "local_steps": 3, "client_weights": "samples", "finetune_steps": 2, "clients_per_round": 3},
        "input",
        "replacement",
    ),
}
# the client optimizer: momentum (the personal part's buffers kept across a client's rounds), weight decay,
# clipping, each schedule
CASES.update(
    with_optimizer(CASES, "fedper-sampled", "fedrep-sampled", "fedbabu-sampled", "lg_fedavg-sampled")
)
CHECKPOINT = {  # the resume cases of tests/test_checkpoint.py: name -> (algorithm, hyper-parameters, split)
    c: (n, hp, split)
    for c, (n, hp, split, _) in CASES.items()
    if c.endswith("-sampled") or c.endswith("-sampled-opt-step")
}


def _make(name: str, fed, hp: dict, seed: int = 0, sampling: str = "epoch"):
    cls = get_algorithm(name)
    return cls(fed, cls.Hyperparameters.from_dict(hp, "test"), seed, sampling)


def _train(name: str, hp: dict, split: str, model: str = "dnn", rounds: int = 4, seed: int = 2):
    """The algorithm after ``rounds`` rounds on the tiny federation (the schedule a training job draws)."""
    alg = _make(name, tiny_federation(model, split=split), hp, seed)
    alg.rounds = rounds
    schedule = participation_schedule(alg.fed.num_clients, alg.clients_per_round, rounds, seed)
    for t in range(1, rounds + 1):
        alg.round(t, schedule[t - 1])
    return alg


def _clone(params: dict) -> dict:
    return {k: v.clone() for k, v in params.items()}


# --- each algorithm equals its per-client reference loop --------------------------------------------------


@pytest.mark.parametrize("model", ["dnn", "cnn"])
@pytest.mark.parametrize("name,hp,split,sampling", params(CASES))
def test_batched_matches_reference(name, hp, split, sampling, model):
    fed = tiny_federation(model, split=split)
    follow_reference(fed, name, hp, references()[name], sampling=sampling, seed=5, rounds=ROUNDS)


# --- where a baseline is FedSim or FedAlt ----------------------------------------------------------------

TWINS = {  # name -> (baseline, its hyper-parameters, FedSim/FedAlt, theirs, split): the same algorithm
    "fedper-is-stateful-fedsim": (
        "fedper",
        {"lr": 0.1, "local_steps": 3, "batch_size": 4, "clients_per_round": 3},
        "fedsim",
        {
            "lr": 0.1,
            "local_steps": 3,
            "batch_size": 4,
            "clients_per_round": 3,
            "stateful": True,
            "server_lr": 1.0,
            "client_weights": "samples",
            "finetune_steps": 0,
        },
        "output",
    ),
    "fedrep-is-stateful-fedalt": (
        "fedrep",
        {"lr": 0.1, "personal_steps": 4, "local_steps": 2, "batch_size": 4, "clients_per_round": 2},
        "fedalt",
        {
            "lr": 0.1,
            "personal_steps": 4,
            "local_steps": 2,
            "batch_size": 4,
            "clients_per_round": 2,
            "stateful": True,
            "server_lr": 1.0,
            "finetune_steps": 0,
        },
        "output",
    ),
    "lg_fedavg-is-stateful-fedsim-on-the-body": (
        "lg_fedavg",
        {"lr": 0.1, "local_steps": 3, "batch_size": 4, "clients_per_round": 3, "finetune_steps": 2},
        "fedsim",
        {
            "lr": 0.1,
            "local_steps": 3,
            "batch_size": 4,
            "clients_per_round": 3,
            "stateful": True,
            "server_lr": 1.0,
            "finetune_steps": 2,
        },
        "input",
    ),
}


def _assert_equal(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


@pytest.mark.parametrize(
    "options", [{}, OPTIMIZER["step"], OPTIMIZER["cosine"]], ids=["plain", "step", "cosine"]
)
@pytest.mark.parametrize("model", ["dnn", "cnn"])
@pytest.mark.parametrize("twin", list(TWINS))
def test_baseline_is_byte_for_byte_its_fedsim_or_fedalt_twin(twin, model, options):
    """FedPer (a personal head trained with the base) is stateful FedSim on the ``output`` split, FedRep (the
    head's steps first) stateful FedAlt with τ_h = ``personal_steps``, LG-FedAvg (a personal body trained
    with the shared head) stateful FedSim on the ``input`` split; with the server's plain averaging and the
    same evaluation, and every client optimizer option (the personal part's momentum kept by the client):
    the same models, the same stored personal parts, byte for byte, over 4 rounds."""
    name, hp, other, their_hp, split = TWINS[twin]
    ours = _train(name, {**hp, **options}, split, model)
    theirs = _train(other, {**their_hp, **options}, split, model)
    _assert_equal(ours.theta, theirs.theta)
    _assert_equal(ours.personal, theirs.personal)
    _assert_equal(ours.eval_models()["personal"], theirs.eval_models()["personal"])
    if options.get("momentum"):
        _assert_equal(ours.personal_momentum, theirs.personal_momentum)


def test_fedper_is_not_stateless_fedsim():
    """FedSim's default (``stateful: false``, FFGG's "FedSim (Stateless)") restarts the head every round from
    the initial one: not FedPer, whose personalization layers stay with their client."""
    name, hp, other, their_hp, split = TWINS["fedper-is-stateful-fedsim"]
    ours = _train(name, hp, split)
    theirs = _train(other, {**their_hp, "stateful": False}, split)
    assert any(not torch.equal(ours.theta[k], theirs.theta[k]) for k in ours.theta)
    mine, stateless = ours.eval_models()["personal"], theirs.eval_models()["personal"]
    assert any(not torch.equal(mine[k], stateless[k]) for k in mine)


@pytest.mark.parametrize("options", [{}, OPTIMIZER["step"]], ids=["plain", "step"])
@pytest.mark.parametrize("model", ["dnn", "cnn"])
def test_fedbabu_with_head_fine_tuning_is_fedalt_without_head_steps(model, options):
    """FedBABU fine-tuning the head only is stateless FedAlt with no personal steps: the same body, the same
    fine-tuned heads; to rounding (1e-12), FedAlt's server step being θ − 1·(θ − mean) and FedBABU's the
    mean. Its global model is FedAlt's θ with the initial head."""
    hp = {
        "lr": 0.1,
        "local_steps": 3,
        "batch_size": 4,
        "clients_per_round": 2,
        "finetune_steps": 3,
        **options,
    }
    babu = _train("fedbabu", {**hp, "finetune": "personal"}, "output", model)
    alt = _train("fedalt", {**hp, "personal_steps": 0, "stateful": False, "server_lr": 1.0}, "output", model)
    ours, theirs = babu.eval_models(), alt.eval_models()
    for k, v in ours["personal"].items():
        torch.testing.assert_close(v, theirs["personal"][k], rtol=0, atol=1e-12)
    for k, v in ours["global"].items():
        want = alt.theta[k] if k in alt.theta else alt.default_personal[k]
        torch.testing.assert_close(v, want, rtol=0, atol=1e-12)
    assert any((ours["personal"][k] - ours["global"][k]).abs().max() > 1e-3 for k in alt.personal_keys)


# --- the papers' properties ------------------------------------------------------------------------------


@pytest.mark.parametrize("finetune", ["all", "personal"])
@pytest.mark.parametrize("options", [{}, OPTIMIZER["step"]], ids=["plain", "step"])
def test_fedbabu_head_stays_at_its_initialization_until_fine_tuning(options, finetune):
    """FedBABU (Oh et al. 2022, Algorithm 1): during federated training the head is the random initial one,
    bitwise, every round (also under momentum, weight decay and clipping, which act on the body only); the
    body learns; only the evaluation's fine-tuning moves the head, per client (``finetune: personal``: the
    head only, the body left as the global one)."""
    fed = tiny_federation("cnn", split="output")
    hp = {"lr": 0.2, "local_steps": 3, "batch_size": 4, "clients_per_round": 3, "client_weights": "samples"}
    alg = _make("fedbabu", fed, {**hp, **options, "finetune": finetune, "finetune_steps": 3}, seed=1)
    alg.rounds = 4
    w0 = _clone(fed.initial_model(1))
    head = fed.model.personal_keys()
    schedule = participation_schedule(4, 3, 4, 1)
    for t in range(1, 5):
        alg.round(t, schedule[t - 1])
        for k in head:
            assert torch.equal(alg.w[k], w0[k]), (t, k)
    assert all((alg.w[k] - w0[k]).abs().max() > 1e-4 for k in alg.body_keys)
    models = alg.eval_models()
    for k in head:
        assert torch.equal(models["global"][k], w0[k])
        moved = (models["personal"][k] - w0[k]).reshape(4, -1).abs().amax(1)
        assert bool((moved > 1e-6).all()), k  # every client's head is fine-tuned
    for k in alg.body_keys:
        same = torch.equal(models["personal"][k], alg.w[k].expand_as(models["personal"][k]))
        assert same == (finetune == "personal"), k


def test_fedrep_updates_the_representation_at_the_head_after_its_head_steps():
    """FedRep (Collins et al. 2021, Algorithm 1): τ_h head steps at the round's representation φ^t, then the
    representation's steps at the new head. With full-batch steps (B ≥ every client's size), one
    representation step and full participation, φ^{t+1} = φ^t − α mean_i ∇_φ f_i(φ^t, h_i) with h_i the head
    after its τ_h steps; not with the head the round started from."""
    fed = tiny_federation("dnn", split="output")
    alg = _make("fedrep", fed, {"lr": 0.3, "personal_steps": 4, "local_steps": 1, "batch_size": 16})
    phi, head0 = _clone(alg.theta), broadcast(alg.default_personal, 4)
    full = fed.batch(BatchSampler(fed.train.sizes, 16, torch.Generator(), "sequential"), fed.all_clients())
    heads = _clone(head0)
    for _ in range(4):  # τ_h full-batch gradient steps on the head, φ^t fixed
        _, g = client_grads(fed.model, {**broadcast(phi, 4), **heads}, full)
        heads = {k: v - 0.3 * g[k] for k, v in heads.items()}
    alg.round(1, fed.all_clients())
    for k in heads:
        torch.testing.assert_close(alg.personal[k], heads[k], rtol=0, atol=1e-12)

    def step_at(h):
        _, g = client_grads(fed.model, {**broadcast(phi, 4), **h}, full)
        return {k: v - 0.3 * g[k].mean(0, keepdim=True) for k, v in phi.items()}

    after, before = step_at(heads), step_at(head0)
    for k in phi:
        torch.testing.assert_close(alg.theta[k], after[k], rtol=0, atol=1e-12)
    assert max(float((alg.theta[k] - before[k]).abs().max()) for k in phi) > 1e-4


def test_lg_fedavg_averages_only_the_global_layers(monkeypatch):
    """LG-FedAvg (Liang et al. 2020, Algorithm 1): the server averages the global layers (the head, here
    the layer after the local one) and nothing else; the local representations stay on their clients: a
    trained client's body is its own (not an average), an untrained one's unchanged."""
    fed = tiny_federation("dnn", split="input")
    alg = _make("lg_fedavg", fed, {"lr": 0.2, "local_steps": 3, "batch_size": 4})
    averaged = []
    add = ClientSum.add
    monkeypatch.setattr(
        ClientSum, "add", lambda self, s, local: averaged.append(sorted(local)) or add(self, s, local)
    )
    before = _clone(alg.personal)
    alg.round(1, torch.tensor([0, 2]))
    assert averaged == [["fc2.bias", "fc2.weight"]]
    assert sorted(alg.theta) == ["fc2.bias", "fc2.weight"] and sorted(alg.personal) == [
        "fc1.bias",
        "fc1.weight",
    ]
    for k, v in alg.personal.items():
        assert torch.equal(v[[1, 3]], before[k][[1, 3]])
        assert not torch.equal(v[0], before[k][0]) and not torch.equal(v[2], before[k][2])
        assert not torch.equal(v[0], v[2])


def label_skewed_blobs(split: str = "none", clients: int = 6, n: int = 60, seed: int = 0) -> Federation:
    """Pure label skew: classes 0 and 2 are one Gaussian blob at (3, 0), class 1 another at (−3, 0); even
    clients hold labels {0, 1}, odd ones {2, 1}, in equal shares. The features never tell 0 from 2: a
    single model is right on at most half of the blob at (3, 0) (about 75 % overall), a client's own head
    can be right on all of it. A ``dnn`` (hidden width 8) with the given ``split``."""
    rng = np.random.default_rng(seed)

    def client(i, m):
        y = rng.integers(0, 2, size=m)  # 0: the blob at (3, 0), 1: class 1
        x = (np.where(y[:, None] == 0, 3.0, -3.0) * np.array([1.0, 0.0]) + rng.normal(size=(m, 2))).astype(
            np.float32
        )
        return x, np.where(y == 1, 1, 2 * (i % 2))

    train = [client(i, n) for i in range(clients)]
    test = [client(i, n // 2) for i in range(clients)]
    model = build_model(normalize_model_spec({"name": "dnn", "hidden": 8, "split": split}, "m"), (2,), 3)
    cpu = torch.device("cpu")
    return Federation(
        ClientSplit([x for x, _ in train], [y for _, y in train], cpu, torch.float64),
        ClientSplit([x for x, _ in test], [y for _, y in test], cpu, torch.float64),
        model,
    )


def _blobs(problem: str, split: str = "none") -> Federation:
    if problem == "rotated":
        return permuted_blobs(model={"name": "dnn", "hidden": 8, "split": split})
    return label_skewed_blobs(split)


def _fit(name: str, fed: Federation, rounds: int = 40, **hp):
    alg = _make(name, fed, {"clients_per_round": 6, "batch_size": 10, **hp})
    alg.rounds = rounds
    schedule = participation_schedule(6, 6, rounds, 0)
    for t in range(1, rounds + 1):
        alg.round(t, schedule[t - 1])
    return alg


PROBLEMS = ("rotated", "label-skew")


@pytest.fixture(scope="module")
def fedavg_accuracy():
    return {
        p: accuracy(_fit("fedavg", fed, lr=0.1, local_steps=10), fed, "global")
        for p in PROBLEMS
        for fed in [_blobs(p)]
    }


@pytest.mark.parametrize("problem", PROBLEMS)
@pytest.mark.parametrize(
    "name,split,hp",
    [
        ("fedper", "output", {"lr": 0.3, "local_steps": 10}),
        ("fedrep", "output", {"lr": 0.3, "personal_steps": 10, "local_steps": 10}),
        ("lg_fedavg", "input", {"lr": 0.3, "local_steps": 10}),
        ("fedbabu", "output", {"lr": 0.3, "local_steps": 10, "finetune_steps": 20}),
    ],
)
def test_personalization_beats_fedavg_on_a_label_skewed_federation(name, split, hp, problem, fedavg_accuracy):
    """The claim of each paper's experiments, on two planted problems where no single model can fit every
    client (FedAvg's global model below 80 %) and a personal head or body can: the labels rotated on half of
    six clients (``permuted_blobs``), and a pure label skew (``label_skewed_blobs``). Each client's personal
    model reaches above 90 % test accuracy, 0.15 over FedAvg's global model."""
    fed = _blobs(problem, split)
    alg = _fit(name, fed, **hp)
    assert fedavg_accuracy[problem] < 0.8
    assert accuracy(alg, fed, "personal") > 0.9
    assert accuracy(alg, fed, "personal") > fedavg_accuracy[problem] + 0.15


# --- the split: a personal head, or a personal body --------------------------------------------------------


def _model(name: str, split: str):
    extra = {"hidden": 5} if name == "dnn" else {"channels": [2, 3], "hidden": 4} if name == "cnn" else {}
    spec = normalize_model_spec({"name": name, "split": split, **extra}, "m")
    return build_model(spec, (1, 6, 6), 3)


@pytest.mark.parametrize(
    "model,split,part",
    [
        ("dnn", "output", "head"),
        ("cnn", "output", "head"),
        ("dnn", "input", "body"),
        ("cnn", "input", "body"),
        ("mlr", "output", None),
        ("mlr", "input", None),
        ("dnn", "adapter", None),
        ("cnn", "none", None),
    ],
)
def test_layer_part(model, split, part):
    assert layer_part(_model(model, split)) == part


@pytest.mark.parametrize("name", ["fedper", "fedrep", "fedbabu", "lg_fedavg"])
@pytest.mark.parametrize("model", ["mlr", "dnn", "cnn"])
@pytest.mark.parametrize("split", ["none", "input", "output", "adapter"])
def test_the_split_must_make_the_head_or_the_body_personal(name, model, split):
    """FedPer, FedRep and FedBABU take a personal head (``output``), LG-FedAvg a personal body (``input``), on
    a model of two layers or more; anything else is refused, naming the model's split key."""
    cls = get_algorithm(name)
    hp = cls.Hyperparameters.from_dict({}, "runs.r")
    want = "input" if name == "lg_fedavg" else "output"

    def checks():
        cls.check(hp, {"model": {"split": split}}, "runs.r")
        cls.check_model(_model(model, split), "runs.r")

    if split == want and model != "mlr":
        checks()
        return
    with pytest.raises(ConfigError) as err:
        checks()
    assert err.value.key == "runs.r.model.split"
    assert name in str(err.value)
    if model == "mlr" and split == want:
        assert "one-layer model" in str(err.value)
    else:
        assert err.value.allowed == [want]


def test_a_study_names_the_split_key():
    base = {
        "dataset": {"name": "digits"},
        "partition": {"scheme": "pathological", "clients": 4, "labels_per_client": 2},
        "model": {"name": "mlr", "split": "output"},
        "rounds": 2,
        "seeds": [0],
        "runs": {"per": {"algorithm": "fedper"}},
    }
    with pytest.raises(ConfigError, match="one-layer model") as err:
        build_suite({"studies": {"s": base}})
    assert err.value.key == "studies.s.runs.per.model.split"
    lg = {**base, "model": {"name": "dnn", "split": "output"}, "runs": {"lg": {"algorithm": "lg_fedavg"}}}
    with pytest.raises(ConfigError, match="body personal") as err:
        build_suite({"studies": {"s": lg}})
    assert err.value.key == "studies.s.runs.lg.model.split" and err.value.allowed == ["input"]
    ok = {**base, "model": {"name": "dnn", "split": "output"}}
    assert build_suite({"studies": {"s": ok}}).studies["s"]
