"""The execution paths (``hetfl.engine.execution``): ``loop`` computes what ``batched`` does, one client at a
time through the ordinary module, and the settings ``execution`` and ``precision`` reach the run's spec and
record.

Every registered algorithm that trains on client data runs each of its checkpoint cases
(``tests/test_checkpoint.py``) batched and looped, in float64, and must end within 1e-9 (relative) of
itself: the loop's module computes ``x @ Wᵀ`` row-major and differentiates by autograd where the batched
models compute ``W @ x`` column-major (and the MLP by its hand-written backward), so the sums round
differently and the two paths agree to float64 rounding, not to the byte (measured: 9e-16 at most).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from hetfl.engine.execution import (
    LOOP_FLOPS,
    LoopModel,
    forward_flops,
    resolve_execution,
    with_execution,
)
from hetfl.models import build_model, normalize_model_spec
from hetfl.pipeline.config import ConfigError, build_suite
from hetfl.testing import tiny_federation
from tests.conftest import TINY_STUDY, train_study_run
from tests.test_cuda import _assert_close
from tests.test_memory import EXACT_CASES, FEDERATION_CASES, build, federation, train


class CountingLoop(LoopModel):
    """A loop that counts its calls: a test of the loop must see it used."""

    calls = 0

    def forward(self, params, x):
        CountingLoop.calls += 1
        return super().forward(params, x)

    def loss_grads(self, params, x, y, mask):
        CountingLoop.calls += 1
        return super().loss_grads(params, x, y, mask)


def _run(name, hp, sampling, make, loop, dtype=torch.float64, model=None, sample_shape=(1, 4, 4)):
    if model is None:
        fed = federation(make, dtype)
    else:
        fed = tiny_federation(model, split=make.split, dtype=dtype, sample_shape=sample_shape)
        fed.cluster = torch.tensor([0, 1, 0, 1])
    if loop:
        fed.model = CountingLoop(fed.model)
    return train(fed, build(fed, name, hp, sampling))


@pytest.mark.parametrize("case", EXACT_CASES)
def test_the_loop_computes_what_the_batched_engine_does(case):
    name, _, hp, sampling, make = FEDERATION_CASES[case]
    want = _run(name, hp, sampling, make, loop=False)
    before = CountingLoop.calls
    got = _run(name, hp, sampling, make, loop=True)
    assert CountingLoop.calls > before
    _assert_close(got, want)


MODEL_CASES = [  # (case, model, sample shape): convolutions, adapters and torch.func models
    ("fedavg-sampled-epoch", "cnn", (1, 4, 4)),
    ("fedalt-stateful-adapter", "cnn", (1, 4, 4)),
    ("pfedme-epoch", "cnn", (1, 4, 4)),
    ("local_sgda_plus-robust-epochs-sequential", "cnn", (1, 4, 4)),
    ("fed_norm_sgda_plus-robust-momentum", "mlr", (1, 4, 4)),
    ("all_for_one-binary", "cnn", (1, 4, 4)),
    ("fedavg-sampled-epoch", "resnet18", (3, 8, 8)),
]


@pytest.mark.parametrize("case,model,shape", MODEL_CASES)
def test_the_loop_of_other_models(case, model, shape):
    name, _, hp, sampling, make = FEDERATION_CASES[case]
    want = _run(name, hp, sampling, make, loop=False, model=model, sample_shape=shape)
    _assert_close(_run(name, hp, sampling, make, loop=True, model=model, sample_shape=shape), want)


@pytest.mark.parametrize("model,outputs", [("linear", 1), ("dnn", 2)])
def test_the_loop_of_a_regression_model(model, outputs):
    """Squared error on regression targets ``[B, K]``, one client at a time (``sample_losses``'s rule)."""
    from tests.test_regression import regression_federation

    def run(loop):
        fed = regression_federation(model, outputs=outputs)
        if loop:
            fed.model = CountingLoop(fed.model)
        hp = {"lr": 0.05, "local_steps": 2, "batch_size": 4, "clients_per_round": 3}
        return train(fed, build(fed, "fedavg", hp, "epoch"))

    _assert_close(run(True), run(False))


def test_the_loop_in_float32_is_within_float32_rounding():
    name, _, hp, sampling, make = FEDERATION_CASES["fedavg-sampled-epoch"]
    want = _run(name, hp, sampling, make, loop=False, dtype=torch.float32, model="cnn")
    got = _run(name, hp, sampling, make, loop=True, dtype=torch.float32, model="cnn")
    _assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_the_loop_keeps_the_batched_model_and_shares_one_row():
    fed = tiny_federation("dnn")
    loop = LoopModel(fed.model)
    assert loop.batched is fed.model and loop.personal_keys() == fed.model.personal_keys()
    assert loop.linear_input_layer() is None and fed.model.linear_input_layer() is not None
    params = fed.model.init(torch.Generator().manual_seed(0), torch.float64, count=1)
    x = fed.train.x[:6].reshape(3, 2, *fed.train.x.shape[1:])  # 3 clients, 2 samples each
    out = loop.forward(params, x)  # one parameter row for every client
    assert out.shape == (3, 3, 2)
    stacked = {k: v.expand(3, *v.shape[1:]) for k, v in params.items()}
    torch.testing.assert_close(out, fed.model.forward(stacked, x), rtol=1e-12, atol=1e-12)


def test_auto_takes_the_loop_for_the_models_it_was_measured_faster_on():
    def model(name, shape):
        return build_model(normalize_model_spec({"name": name}, "m"), shape, 10)

    dnn, cnn, vgg = model("dnn", (1, 28, 28)), model("cnn", (1, 28, 28)), model("vgg11", (3, 32, 32))
    assert forward_flops(dnn) < LOOP_FLOPS["cpu"] <= forward_flops(cnn) < forward_flops(vgg)
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert [resolve_execution("auto", m, cpu) for m in (dnn, cnn, vgg)] == ["batched", "loop", "loop"]
    # on a GPU the batched path was measured faster for every model (LOOP_FLOPS's docstring)
    assert [resolve_execution("auto", m, cuda) for m in (dnn, cnn, vgg)] == ["batched"] * 3
    assert (
        resolve_execution("loop", dnn, cpu) == "loop" and resolve_execution("batched", vgg, cuda) == "batched"
    )
    with pytest.raises(ValueError, match="allowed: auto, batched, loop"):
        resolve_execution("fast", dnn, cpu)
    with pytest.raises(ValueError, match="auto"):
        with_execution(dnn, "auto")


def test_vgg11_flops_are_the_known_figure():
    """VGG-11 on 32×32 (configuration A with the 3-layer CIFAR classifier): 0.153 G multiply-adds in its
    convolutions and 0.53 M in its classifier, so 0.307 GFLOPs a sample."""
    vgg = build_model(normalize_model_spec({"name": "vgg11"}, "m"), (3, 32, 32), 10)
    assert forward_flops(vgg) == pytest.approx(2 * 153.6e6, rel=0.01)


def _study(**settings):
    return {**TINY_STUDY, **settings, "runs": {"fedavg": {"algorithm": "fedavg"}}}


def test_execution_and_precision_enter_the_spec_only_when_set():
    plain = build_suite({"studies": {"s": _study()}}).studies["s"]
    spec = json.loads(plain.run_json("fedavg"))
    assert "execution" not in spec and "precision" not in spec
    for settings in ({"execution": "loop"}, {"execution": "auto"}, {"precision": "tf32"}):
        study = build_suite({"studies": {"s": _study(**settings)}}).studies["s"]
        spec = json.loads(study.run_json("fedavg"))
        assert {k: spec[k] for k in settings} == settings


@pytest.mark.parametrize(
    "settings,key",
    [
        ({"execution": "fast"}, "studies.s.execution"),
        ({"execution": 1}, "studies.s.execution"),
        ({"precision": "bf16"}, "studies.s.precision"),
        ({"precision": "tf32", "dtype": "float64"}, "studies.s.precision"),
    ],
)
def test_a_bad_execution_or_precision_names_its_key(settings, key):
    with pytest.raises(ConfigError) as err:
        build_suite({"studies": {"s": _study(**settings)}})
    assert err.value.key == key


def test_a_looped_tf32_job_on_the_cpu_records_its_path_and_no_tf32(tmp_path):
    info, paths, _ = train_study_run(
        {**_study(execution="loop", precision="tf32"), "rounds": 2}, "fedavg", tmp_path / "loop"
    )
    assert info.status == "ok" and info.execution == "loop" and info.tf32 is False
    assert info.memory["rows_per_call"] == 1
    batched, _, _ = train_study_run({**_study(), "rounds": 2}, "fedavg", tmp_path / "batched")
    assert batched.execution == "batched"
    loop_state = torch.load(paths.model, weights_only=True)
    batched_state = torch.load(tmp_path / "batched" / "run" / "final.pt", weights_only=True)
    for k in batched_state:  # float32 MLR: the same model up to float32 rounding
        torch.testing.assert_close(loop_state[k], batched_state[k], rtol=1e-4, atol=1e-5)


def test_the_tf32_overlay_sets_every_gpu_study_of_the_paper_suite_and_nothing_else():
    """``config/paper_tf32.yaml`` merged over ``config/paper.yaml`` (as ``--configfile`` merges them): every study
    with ``device: cuda`` computes in TF32, and its runs' specs say so."""
    import yaml

    from hetfl.pipeline.config import load_config

    root = Path(__file__).resolve().parents[1] / "config"
    paper = yaml.safe_load((root / "paper.yaml").read_text())["studies"]
    gpu = sorted(name for name, study in paper.items() if study.get("device") == "cuda")
    overlay = yaml.safe_load((root / "paper_tf32.yaml").read_text())["studies"]
    assert sorted(overlay) == gpu and all(v == {"precision": "tf32"} for v in overlay.values())
    config = load_config(
        [root / "config.yaml", root / "paper.yaml", root / "paper_tf32.yaml"], root=root.parent
    )
    config["select"] = gpu[:2] + ["minimax_paper_robust"]
    suite = build_suite(config)
    for name in config["select"]:
        study = suite.studies[name]
        assert {json.loads(study.run_json(label)).get("precision") for label in study.runs} == {"tf32"}
