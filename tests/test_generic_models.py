"""Any ``nn.Module`` as a batched model (``hetfl.models.generic``): the torch.func path equals the hand-written
batched MLP and CNN (forward, gradients, FedAvg and pFedMe rounds, float32, 1e-6), the registered
``resnet18`` (GroupNorm) and ``char_lstm`` run on the engine and match their per-client references, the
config refuses what the engine cannot run (naming the key), and a user's module is fingerprinted."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from hetfl.algorithms import get_algorithm
from hetfl.engine.federation import Federation
from hetfl.engine.participation import participation_schedule
from hetfl.errors import ConfigError
from hetfl.models import build_model, model_modules, normalize_model_spec
from hetfl.models.char_lstm import CharLSTMModule
from hetfl.models.generic import ModelOptionError
from hetfl.pipeline.config import build_suite, train_fingerprint
from hetfl.pipeline.train import pick_device
from hetfl.reference import references
from hetfl.testing import follow_reference, tiny_federation

SHAPE, K = (1, 8, 8), 4
TOL = 1e-6  # float32


def hand_written(name: str, split: str = "none"):
    extra = {"hidden": 16} if name == "dnn" else {"channels": [3, 5], "hidden": 8}
    return build_model(normalize_model_spec({"name": name, "split": split, **extra}, "m"), SHAPE, K)


def generic_twin(name: str, split: str = "none"):
    """The hand-written model's own single-client module (``_MLPModule``, ``_CNNModule``) as a ``torch`` model,
    configured as a user would, with the hand-written models' initialization rule."""
    if name == "dnn":
        module, kwargs = "hetfl.models.mlp:_MLPModule", {"sizes": [[64, 16], [16, K]]}
    else:
        module = "hetfl.models.cnn:_CNNModule"
        kwargs = {"ch": 1, "channels": [3, 5], "kernel": 3, "flat": 5 * 2 * 2, "hidden": 8, "k": K}
    spec = {"name": "torch", "module": module, "kwargs": kwargs, "init": "uniform", "split": split}
    return build_model(normalize_model_spec(spec, "m"), SHAPE, K)


def max_diff(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a)


@pytest.mark.parametrize("per_client_grad", [False, True], ids=["autograd", "vmap-grad"])
@pytest.mark.parametrize("name", ["dnn", "cnn"])
def test_forward_and_gradients_equal_the_hand_written_model(name, per_client_grad):
    ref, gen = hand_written(name), generic_twin(name)
    gen.per_client_grad = per_client_grad
    assert list(gen.shapes()) == list(ref.shapes())
    params = ref.init(torch.Generator().manual_seed(1), torch.float32, count=3)
    same_init = gen.init(torch.Generator().manual_seed(1), torch.float32, count=3)
    assert max_diff(params, same_init) == 0.0  # init: uniform draws the hand-written numbers
    g = torch.Generator().manual_seed(2)
    x = torch.randn(3, 6, *SHAPE, generator=g)
    y = torch.randint(0, K, (3, 6), generator=g)
    mask = torch.ones(3, 6, dtype=torch.bool)
    mask[0, 4:] = False  # padded rows, as a client with fewer samples than the batch
    mask[2, 1:] = False
    out_ref, out_gen = ref.forward(params, x), gen.forward(params, x)
    assert out_gen.shape == (3, K, 6)
    forward = float((out_ref - out_gen).abs().max())
    for m in (None, mask):
        loss_ref, grads_ref = ref.loss_grads(params, x, y, m)
        loss_gen, grads_gen = gen.loss_grads(params, x, y, m)
        assert float((loss_ref - loss_gen).abs().max()) <= TOL
        grads = max_diff(grads_ref, grads_gen)
        assert grads <= TOL, grads
    print(f"{name} ({per_client_grad=}): forward max |diff| {forward:.2e}, gradients {grads:.2e}")
    assert forward <= TOL


ROUNDS_CASES = {
    "fedavg": {"lr": 0.1, "local_steps": 3, "batch_size": 4, "clients_per_round": 2},
    "pfedme": {"lr": 0.05, "local_steps": 2, "batch_size": 4, "K": 3, "personal_lr": 0.05, "lam": 5.0},
    "fedavg-momentum": {  # the client optimizer (momentum, weight decay, clipping) on the generic gradients
        "lr": 0.1,
        "local_steps": 3,
        "batch_size": 4,
        "momentum": 0.9,
        "weight_decay": 0.01,
        "clip_norm": 1.0,
    },
}


@pytest.mark.parametrize("algorithm", list(ROUNDS_CASES))
@pytest.mark.parametrize("name", ["dnn", "cnn"])
def test_rounds_of_fedavg_and_pfedme_equal_the_hand_written_model(name, algorithm):
    """Both federations hold the same float32 data; both models start from the same draw (``init: uniform``)
    and see the same participation and minibatches: the trained models agree to 1e-6 after 3 rounds."""
    fed = tiny_federation("mlr", sample_shape=SHAPE, classes=K, dtype=torch.float32)
    feds = [Federation(fed.train, fed.test, m) for m in (hand_written(name), generic_twin(name))]
    cls = get_algorithm(algorithm.split("-")[0])
    hp = cls.Hyperparameters.from_dict(ROUNDS_CASES[algorithm], "test")
    algs = [cls(f, hp, 5, "epoch") for f in feds]
    schedule = participation_schedule(fed.num_clients, algs[0].clients_per_round, 3, 5)
    worst = 0.0
    for t in range(1, 4):
        for alg in algs:
            alg.round(t, schedule[t - 1])
        models = [alg.eval_models() for alg in algs]
        assert models[0].keys() == models[1].keys()
        for which in models[0]:
            worst = max(worst, max_diff(models[0][which], models[1][which]))
    print(f"{name} {algorithm}: 3 rounds, max |diff| {worst:.2e}")
    assert worst <= TOL


SMALL = {
    "resnet18": ({"name": "resnet18", "width": 4, "norm_groups": 2}, (3, 8, 8), 3),
    "char_lstm": ({"name": "char_lstm", "vocab": 10, "embed": 3, "hidden": 5, "layers": 2}, (6,), 10),
}


def small(name: str, split: str = "none", dtype=torch.float64):
    """A federation of 4 clients on the small ``resnet18`` or ``char_lstm`` (character sequences of length 6)."""
    spec, shape, classes = SMALL[name]
    fed = tiny_federation("mlr", sample_shape=shape, classes=classes, dtype=dtype)
    if name == "char_lstm":  # character indices, stored as floats as the leaf dataset gives them
        for data in (fed.train, fed.test):
            data.x = torch.randint(0, classes, data.x.shape, generator=torch.Generator().manual_seed(0)).to(
                dtype
            )
    model = build_model(normalize_model_spec({**spec, "split": split}, "m"), shape, classes)
    return Federation(fed.train, fed.test, model)


@pytest.mark.parametrize("per_client_grad", [False, True], ids=["autograd", "vmap-grad"])
@pytest.mark.parametrize("name,split", [("resnet18", "none"), ("resnet18", "adapter"), ("char_lstm", "none")])
def test_registered_models_match_their_module_client_by_client(name, split, per_client_grad):
    """vmap over clients of GroupNorm, of ResNet-18's residual adapters and of the LSTM recurrence (and grad
    under vmap): outputs and gradients equal the plain module run on each client alone (float64)."""
    fed = small(name, split)
    model = fed.model
    model.per_client_grad = per_client_grad
    params = model.init(torch.Generator().manual_seed(0), torch.float64, count=3)
    x = fed.train.x[:12].reshape(3, 4, *fed.train.x.shape[1:])
    y = fed.train.y[:12].reshape(3, 4)
    out = model.forward(params, x)
    loss, grads = model.loss_grads(params, x, y, None)
    module = model.reference_module().double()
    for c in range(3):
        module.load_state_dict({k: v[c] for k, v in params.items()})
        logits = module(x[c])
        torch.testing.assert_close(out[c].T, logits, rtol=0, atol=1e-12)
        expected = torch.autograd.grad(
            torch.nn.functional.cross_entropy(logits, y[c]), list(module.parameters())
        )
        for (k, _), g in zip(module.named_parameters(), expected, strict=True):
            torch.testing.assert_close(grads[k][c], g, rtol=0, atol=1e-12)
        assert abs(float(loss[c]) - float(torch.nn.functional.cross_entropy(logits.detach(), y[c]))) < 1e-12


@pytest.mark.parametrize(
    "name,algorithm,hp,split",
    [
        (
            "resnet18",
            "fedavg",
            {"lr": 0.1, "local_steps": 2, "batch_size": 4, "clients_per_round": 2},
            "none",
        ),
        ("char_lstm", "fedavg", {"lr": 0.5, "local_steps": 2, "batch_size": 4}, "none"),
        (
            "char_lstm",
            "pfedme",
            {"lr": 0.1, "local_steps": 2, "batch_size": 4, "K": 2, "personal_lr": 0.05, "lam": 5.0},
            "none",
        ),
        ("resnet18", "fedalt", {"lr": 0.1, "local_steps": 2, "batch_size": 4, "finetune_steps": 1}, "output"),
        (
            "resnet18",
            "fedalt",
            {"lr": 0.1, "local_steps": 2, "batch_size": 4, "finetune_steps": 1},
            "adapter",
        ),
        (
            "resnet18",
            "ffgg",
            {
                "lr_theta": 0.1,
                "lr_w": 0.1,
                "tau": 2,
                "local_theta_steps": 2,
                "batch_size": 4,
                "finetune_steps": 1,
            },
            "adapter",
        ),
        ("char_lstm", "fedalt", {"lr": 0.1, "local_steps": 2, "batch_size": 4, "finetune_steps": 1}, "input"),
    ],
)
def test_algorithms_on_registered_models_match_their_references(name, algorithm, hp, split):
    follow_reference(small(name, split), algorithm, hp, references()[algorithm], seed=1, rounds=2)


def test_char_lstm_equals_torch_lstm_on_the_same_weights():
    torch.manual_seed(0)
    mine = CharLSTMModule(vocab=10, embed=3, hidden=5, layers=2, num_classes=10).double()
    lstm = torch.nn.LSTM(3, 5, num_layers=2, batch_first=True).double()
    with torch.no_grad():
        for layer, cell in enumerate(mine.lstm):
            for p in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                getattr(lstm, f"{p}_l{layer}").copy_(getattr(cell, p))
    x = torch.randint(0, 10, (4, 7)).double()
    y = torch.randint(0, 10, (4,))
    expected = mine.fc(lstm(mine.embed(x.long()))[0][:, -1])
    out = mine(x)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)
    # gradients through the recurrence against those through nn.LSTM's kernel, parameter by parameter
    gates = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
    reference = {"embed.weight": mine.embed.weight, "fc.weight": mine.fc.weight, "fc.bias": mine.fc.bias}
    reference |= {f"lstm.{layer}.{p}": getattr(lstm, f"{p}_l{layer}") for layer in range(2) for p in gates}
    loss = torch.nn.functional.cross_entropy
    theirs = dict(
        zip(reference, torch.autograd.grad(loss(expected, y), list(reference.values())), strict=True)
    )
    ours = dict(mine.named_parameters())
    ours = dict(zip(ours, torch.autograd.grad(loss(out, y), list(ours.values())), strict=True))
    assert ours.keys() == theirs.keys()
    for name, g in ours.items():
        torch.testing.assert_close(g, theirs[name], rtol=0, atol=1e-12, msg=name)


def test_resnet18_has_the_paper_size_and_personal_stem_or_classifier():
    full = build_model(normalize_model_spec({"name": "resnet18"}, "m"), (3, 32, 32), 10)
    assert full.num_parameters() == 11_173_962
    assert build_model(
        normalize_model_spec({"name": "resnet18"}, "m"), (3, 32, 32), 100
    ).num_parameters() == (11_173_962 + 90 * 513)
    assert full.sample_cost() == 64 * 32 * 32
    out = build_model(normalize_model_spec({"name": "resnet18", "split": "output"}, "m"), (3, 32, 32), 10)
    assert out.personal_keys() == ["fc.weight", "fc.bias"]
    stem = build_model(normalize_model_spec({"name": "resnet18", "split": "input"}, "m"), (3, 32, 32), 10)
    assert stem.personal_keys() == ["conv1.weight"]


def test_resnet18_adapters_are_pillutla_et_als_and_start_near_the_model_without_them():
    """``split: adapter``: two residual adapters a block (1×1 convolution after a GroupNorm, weights of std
    1e-4) and the stem's and blocks' gn1, gn2 personal, not the shortcuts'; the base parameters are those of the
    model without adapters, and with the adapters' weights at zero the two models compute the same."""
    spec = {"name": "resnet18", "width": 4, "norm_groups": 2}
    plain = build_model(normalize_model_spec(spec, "m"), (3, 8, 8), 3)
    adapted = build_model(normalize_model_spec({**spec, "split": "adapter"}, "m"), (3, 8, 8), 3)
    personal = adapted.personal_keys()
    assert all(".adapter" in k or k.split(".")[-2] in ("gn1", "gn2") for k in personal)
    assert {k for k in adapted.shapes() if ".adapter" in k} <= set(personal)
    assert "layer1.0.adapter2.conv.weight" in personal and "gn1.weight" in personal
    assert "layer2.0.shortcut.1.weight" not in personal and "conv1.weight" not in personal
    assert sum(".adapter" in k and k.endswith("conv.weight") for k in personal) == 16  # 8 blocks × 2
    a = adapted.init(torch.Generator().manual_seed(3), torch.float64, count=2)
    b = plain.init(torch.Generator().manual_seed(3), torch.float64, count=2)
    assert list(b) == [k for k in a if ".adapter" not in k]
    assert all(torch.equal(a[k], b[k]) for k in b)
    weights = torch.cat([v.flatten() for k, v in a.items() if k.endswith("conv.weight") and ".adapter" in k])
    assert 0.5e-4 < float(weights.std()) < 2e-4
    x = torch.randn(2, 5, 3, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    near = adapted.forward(a, x)
    assert 0 < float((near - plain.forward(b, x)).abs().max()) < 1e-2
    zeroed = {
        k: torch.zeros_like(v) if ".adapter" in k and k.endswith("conv.weight") else v for k, v in a.items()
    }
    torch.testing.assert_close(adapted.forward(zeroed, x), plain.forward(b, x), rtol=0, atol=1e-12)
    y = torch.randint(0, 3, (2, 5), generator=torch.Generator().manual_seed(1))
    _, grads = adapted.loss_grads(a, x, y, None)
    assert all(float(grads[k].abs().sum()) > 0 for k in personal)  # every adapter is on the forward path


def test_module_init_is_deterministic_leaves_the_global_rng_alone_and_draws_per_copy():
    model = small("resnet18").model
    state = torch.get_rng_state()
    a = model.init(torch.Generator().manual_seed(7), torch.float32, count=2)
    b = model.init(torch.Generator().manual_seed(7), torch.float32, count=2)
    assert torch.equal(torch.get_rng_state(), state)
    assert max_diff(a, b) == 0.0
    assert not torch.equal(a["conv1.weight"][0], a["conv1.weight"][1])  # two independent copies
    assert torch.equal(a["gn1.weight"], torch.ones_like(a["gn1.weight"]))  # the module's own rule
    only = model.init(torch.Generator().manual_seed(7), torch.float32, count=2, keys=["fc.bias"])
    assert list(only) == ["fc.bias"] and torch.equal(only["fc.bias"], a["fc.bias"])


def torch_spec(cls: str, **extra) -> dict:
    return {"name": "torch", "module": f"tests.generic_modules:{cls}", **extra}


def test_a_user_class_or_factory_gets_num_classes_and_sample_shape_and_buffers_are_constants():
    net = build_model(normalize_model_spec(torch_spec("TanhNet", kwargs={"hidden": 3}), "m"), SHAPE, K)
    assert net.shapes()["fc1.weight"][0] == (3, 64) and net.shapes()["fc2.bias"][0] == (K,)
    factory = build_model(normalize_model_spec(torch_spec("tanh_net"), "m"), SHAPE, K)
    assert factory.shapes()["fc2.weight"][0] == (K, 6)
    scaled = build_model(normalize_model_spec(torch_spec("ScaledNet"), "m"), SHAPE, K)
    params = scaled.init(torch.Generator().manual_seed(0), torch.float64, count=2)
    x = torch.randn(2, 3, *SHAPE, dtype=torch.float64)
    plain = factory.forward(params, x)
    torch.testing.assert_close(scaled.forward(params, x), 2 * plain)
    assert list(scaled.reference_module().state_dict()) == list(params)  # buffers are not state


@pytest.mark.parametrize(
    "spec,option,fragment",
    [
        (torch_spec("WithBatchNorm"), "module", "use nn.GroupNorm"),
        (torch_spec("WithDropout"), "module", "set p=0"),
        (torch_spec("WithNoise"), "module", "randomness"),
        (torch_spec("WithLSTM"), "module", "write the recurrence with tensor operations"),
        (torch_spec("WrongShape"), "module", "to [3, 1, 10]; expected [B, K] = [3, 10]"),
        (torch_spec("TanhNet", kwargs={"width": 3}), "kwargs", "unexpected keyword argument 'width'"),
        (torch_spec("TanhNet", split="adapter"), "split", "split none, input or output"),
        (torch_spec("WithGroupNorm", init="uniform"), "init", "gn.weight, gn.bias has none"),
        ({"name": "resnet18", "width": 6, "norm_groups": 4}, "norm_groups", "does not divide"),
        ({"name": "char_lstm"}, "name", "sequences of character indices"),
    ],
)
def test_the_config_refuses_what_the_engine_cannot_run_naming_the_key(spec, option, fragment):
    cfg = copy.deepcopy(CONFIG)
    cfg["studies"]["s"]["model"] = spec
    with pytest.raises(ConfigError) as info:
        build_suite(cfg)
    assert info.value.key == f"studies.s.model.{option}"
    assert fragment in str(info.value)


def test_a_run_with_its_own_model_is_blamed_at_the_run():
    cfg = copy.deepcopy(CONFIG)
    cfg["studies"]["s"]["runs"]["bn"] = {"algorithm": "fedavg", "model": torch_spec("WithBatchNorm")}
    with pytest.raises(ConfigError) as info:
        build_suite(cfg)
    assert info.value.key == "studies.s.runs.bn.model.module"


@pytest.mark.parametrize(
    "spec,key,fragment",
    [
        ({"name": "torch"}, "module", "needs module"),
        (
            {"name": "torch", "module": "no_such_package.models:Net"},
            "module",
            "No module named 'no_such_package'",
        ),
        (torch_spec("Missing"), "module", "has no attribute 'Missing'"),
        (torch_spec("NotAModule"), "module", "not a torch.nn.Module"),
        (torch_spec("NOT_A_MODULE"), "module", "not an nn.Module class or factory"),
        (torch_spec("TanhNet", kwargs={"hidden": math.nan}), "kwargs.hidden", "finite"),
        (torch_spec("TanhNet", kwargs=[1]), "kwargs", "mapping"),
        (torch_spec("TanhNet", init="xavier"), "init", "allowed: module, uniform"),
        (torch_spec("TanhNet", depth=2), "depth", "allowed: adapter_rank, init, kwargs, module, name, split"),
    ],
)
def test_bad_torch_model_options_name_the_key(spec, key, fragment):
    with pytest.raises(ConfigError) as info:
        normalize_model_spec(spec, "studies.s.model")
    assert info.value.key == f"studies.s.model.{key}"
    assert fragment in str(info.value)


def test_a_failing_constructor_is_a_model_option_error():
    with pytest.raises(ModelOptionError) as info:
        build_model(normalize_model_spec(torch_spec("TanhNet", kwargs={"hidden": -1}), "m"), SHAPE, K)
    assert info.value.option == "module" and "building model 'torch'" in str(info.value)


CONFIG = {
    "studies": {
        "s": {
            "dataset": {"name": "digits"},
            "partition": {"scheme": "iid", "clients": 4},
            "model": torch_spec("TanhNet"),
            "rounds": 2,
            "seeds": [0],
            "defaults": {"lr": 0.05, "batch_size": 8, "local_steps": 2},
            "runs": {"fedavg": {"algorithm": "fedavg"}, "pfedme": {"algorithm": "pfedme", "K": 2}},
        }
    }
}


def test_a_torch_model_study_validates_and_records_its_spec():
    study = build_suite(copy.deepcopy(CONFIG)).studies["s"]
    model = study.spec("fedavg").settings["model"]
    assert model == {
        "name": "torch",
        "module": "tests.generic_modules:TanhNet",
        "kwargs": {},
        "init": "module",
        "split": "none",
        "adapter_rank": 4,
    }
    assert model_modules(model) == ["hetfl.models.generic", "tests.generic_modules"]


USER_MODEL = """
import torch
from torch import nn

from {package}.layers import Block


class Net(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.block = Block()
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        return self.fc(self.block(x.flatten(1)))
"""

USER_LAYERS = """
import torch
from torch import nn


class Block(nn.Module):
    def forward(self, x):
        return torch.tanh(x)
"""


def test_editing_a_user_model_file_changes_exactly_the_fingerprints_of_its_runs(tmp_path, monkeypatch):
    import hetfl.fingerprint as fp

    for package in ("usermodels_a", "usermodels_b"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
        (tmp_path / package / "nets.py").write_text(USER_MODEL.format(package=package))
        (tmp_path / package / "layers.py").write_text(USER_LAYERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    specs = {
        p: normalize_model_spec({"name": "torch", "module": f"{p}.nets:Net"}, "m")
        for p in ("usermodels_a", "usermodels_b")
    }

    def fingerprints():
        fp.clear_cache()
        out = {p: train_fingerprint("fedavg", model=spec) for p, spec in specs.items()}
        return {
            **out,
            "mlr": train_fingerprint("fedavg", model="mlr"),
            "cnn": train_fingerprint("fedavg", model="cnn"),
        }

    before = fingerprints()
    assert len(set(before.values())) == 4
    nets = tmp_path / "usermodels_a" / "nets.py"
    nets.write_text(nets.read_text() + "\n# a comment does not count\n")
    assert fingerprints() == before
    nets.write_text(nets.read_text().replace("torch.tanh", "torch.relu") + "\n_EXTRA = 1\n")
    after = fingerprints()
    assert {k for k in before if before[k] != after[k]} == {"usermodels_a"}
    layers = tmp_path / "usermodels_b" / "layers.py"  # a module of the user's package that the model imports
    layers.write_text(layers.read_text().replace("torch.tanh", "torch.relu"))
    again = fingerprints()
    assert {k for k in after if after[k] != again[k]} == {"usermodels_b"}
    fp.clear_cache()


def test_editing_the_generic_path_reruns_its_models_only(tmp_path, monkeypatch):
    """The hand-written models' runs do not fingerprint hetfl.models.generic; resnet18's and torch's do."""
    import shutil

    import hetfl.fingerprint as fp

    root = tmp_path / "hetfl"
    shutil.copytree(fp.ROOT, root, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(fp, "ROOT", root)
    torch_model = normalize_model_spec(torch_spec("TanhNet"), "m")

    def fingerprints():
        fp.clear_cache()
        names = ("mlr", "dnn", "cnn", "vgg11", "resnet18", "char_lstm")
        return {
            **{n: train_fingerprint("fedavg", model=n) for n in names},
            "torch": train_fingerprint("fedavg", model=torch_model),
        }

    before = fingerprints()
    path = root / "models" / "generic.py"
    path.write_text(path.read_text() + "\n_EXTRA = 1\n")
    after = fingerprints()
    fp.clear_cache()
    assert {k for k in before if before[k] != after[k]} == {"resnet18", "char_lstm", "torch"}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_the_generic_path_runs_on_cuda_and_equals_the_cpu():
    pick_device("cuda")  # as a training job: float32 without TF32
    fed = small("resnet18", dtype=torch.float32)
    model = fed.model
    params = model.init(torch.Generator().manual_seed(0), torch.float32, count=3)
    x, y = fed.train.x[:12].reshape(3, 4, 3, 8, 8), fed.train.y[:12].reshape(3, 4)
    loss, grads = model.loss_grads(params, x, y, None)
    cuda = {k: v.cuda() for k, v in params.items()}
    loss_c, grads_c = model.loss_grads(cuda, x.cuda(), y.cuda(), None)
    torch.testing.assert_close(loss_c.cpu(), loss, rtol=1e-4, atol=1e-5)
    for k in grads:
        torch.testing.assert_close(grads_c[k].cpu(), grads[k], rtol=1e-3, atol=1e-4)


def test_char_lstm_trains_on_leaf_shakespeare_text_end_to_end(tmp_path):
    """LEAF-format text (characters encoded by LEAF's 80-letter alphabet, the next character as label) ->
    a study with ``char_lstm`` validates and a training job runs on it."""
    import pandas as pd

    from tests.conftest import train_study_run
    from tests.test_data_user_files import write_leaf

    files = write_leaf(tmp_path, text=True)
    study_cfg = {
        "dataset": {"name": "leaf", "train": str(files["train"]), "test": str(files["test"])},
        "partition": {"scheme": "natural"},
        "model": {"name": "char_lstm", "embed": 4, "hidden": 8},
        "rounds": 2,
        "seeds": [0],
        "defaults": {"lr": 0.5, "batch_size": 4, "local_steps": 2},
        "runs": {"fedavg": {"algorithm": "fedavg"}},
    }
    info, paths, dataset = train_study_run(study_cfg, "fedavg", tmp_path)
    assert dataset.x.shape[1:] == (8,) and dataset.num_classes == 80
    assert info.status == "ok" and info.rounds_done == 2
    metrics = pd.read_csv(paths.metrics)
    loss = metrics[metrics.metric == "train_loss_global"].set_index("round")["value"]
    assert loss[0] == pytest.approx(math.log(80), abs=0.3)  # about uniform over 80 characters at the start
    assert loss[2] < loss[0]  # and training lowers it
    final = torch.load(paths.model, weights_only=True)
    assert final["global/lstm.1.weight_hh"].shape == (1, 32, 8)
