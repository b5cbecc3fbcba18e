"""The training job: its files, byte-identical reruns, and divergence recorded as such."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

from hetfl.data import load_dataset, make_partition
from hetfl.pipeline.config import build_suite
from hetfl.pipeline.train import RunOutputs, pick_device, train
from tests.conftest import TINY_STUDY

STUDY = TINY_STUDY


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("train")
    study = build_suite({"studies": {"t": STUDY}}).studies["t"]
    dataset = load_dataset(study.dataset, root)
    data = root / "data.npz"
    dataset.save(data)
    parts = {}
    for seed in study.seeds:
        parts[seed] = root / f"part{seed}.npz"
        make_partition(study.partition, dataset, study.partition_seed(seed)).save(parts[seed])
    return study, data, parts, root


def run(setup, label, seed, name, memory_budget="auto"):
    study, data, parts, root = setup
    out = root / name
    out.mkdir()
    paths = RunOutputs(out / "metrics.csv", out / "clients.csv", out / "run.json", out / "final.pt")
    info = train(
        json.loads(study.run_json(label)), seed, data, parts[seed], paths, memory_budget=memory_budget
    )
    return info, paths


def test_outputs_and_record(setup):
    info, paths = run(setup, "pfedme", 0, "a")
    assert info.status == "ok" and info.rounds_done == 4 and info.diverged_round is None
    saved = json.loads(paths.info.read_text())
    assert saved["spec"]["hyperparameters"]["K"] == 2 and saved["device"] == "cpu" and saved["threads"] == 1
    metrics = pd.read_csv(paths.metrics)
    assert list(metrics.columns) == ["round", "metric", "value"]
    assert sorted(metrics["round"].unique()) == [0, 2, 4]  # round 0, every eval_every, the last
    assert {f"test_acc_{m}" for m in ("global", "personal", "local")} <= set(metrics["metric"])
    clients = pd.read_csv(paths.client_metrics)
    assert sorted(clients["client"].unique()) == list(range(6))
    final = torch.load(paths.model, weights_only=True)
    assert final["personal/fc1.weight"].shape == (6, 10, 64) and final["global/fc1.weight"].shape == (
        1,
        10,
        64,
    )


def test_same_seed_same_bytes_other_seed_other_bytes(setup):
    _, a = run(setup, "fedavg", 0, "b1")
    _, b = run(setup, "fedavg", 0, "b2")
    _, c = run(setup, "fedavg", 1, "b3")
    assert a.metrics.read_bytes() == b.metrics.read_bytes()
    assert a.client_metrics.read_bytes() == b.client_metrics.read_bytes()
    assert a.metrics.read_bytes() != c.metrics.read_bytes()


@pytest.mark.parametrize("label", ["pfedme", "fedavg"])
def test_a_small_memory_budget_chunks_the_calls_and_changes_no_byte(setup, label, capsys):
    whole, a = run(setup, label, 0, f"m-{label}-auto")
    mib = 2**20
    resident = whole.memory["resident_bytes"] / mib
    budget = resident + 2.5 * whole.memory["row_bytes"] / mib  # two rows per call
    chunked, b = run(setup, label, 0, f"m-{label}-small", memory_budget=budget)
    # within the small budget pFedMe's per-client stacks (θ̃_i, w_{i,R}) go to a memory-mapped file
    # (hetfl.engine.state) and leave the resident bytes; FedAvg has none: two rows per call
    state, memory = chunked.memory["client_state"], chunked.memory
    assert (state["mmap_bytes"] > 0) == (label == "pfedme") and state["host_bytes"] == 0
    said = "per-client state off the device within memory_budget" in capsys.readouterr().err
    assert said == (label == "pfedme")  # the job's log says where its state went
    assert whole.memory["client_state"]["mmap_bytes"] == 0
    assert whole.memory["resident_bytes"] - memory["resident_bytes"] == state["mmap_bytes"]
    left = memory["budget_bytes"] - memory["resident_bytes"]
    assert whole.memory["rows_per_call"] is None and memory["rows_per_call"] == left // memory["row_bytes"]
    assert memory["rows_per_call"] == 2 if label == "fedavg" else memory["rows_per_call"] > 2
    assert chunked.memory["fits"] and chunked.memory["budget_bytes"] == int(budget * mib)
    assert whole.memory["eval_fits"] and whole.memory["eval_bytes"] > 2.5 * whole.memory["row_bytes"]
    assert not chunked.memory["eval_fits"]  # two rows fit, an evaluation call does not: reported, not split
    assert chunked.memory["peak_rss_bytes"] >= chunked.memory["rss_before_bytes"] > 0
    for f in ("metrics", "client_metrics", "model"):
        assert getattr(a, f).read_bytes() == getattr(b, f).read_bytes(), f
    starved, c = run(setup, label, 0, f"m-{label}-starved", memory_budget=resident / 2)
    assert starved.memory["rows_per_call"] == 1 and not starved.memory["fits"]
    said = capsys.readouterr().err
    assert "one client per call" in said and ("aggregation: sequential" in said) == (label == "fedavg")
    budget_mib = starved.memory["budget_bytes"] / 2**20  # a fraction of a MiB: said as such, never "0 MiB"
    assert budget_mib < 1 and f"memory_budget {budget_mib:.3g} MiB is below" in said and " 0 MiB" not in said
    assert a.metrics.read_bytes() == c.metrics.read_bytes()


def test_runs_of_a_study_share_the_participation_stream(setup):
    fedavg, _ = run(setup, "fedavg", 1, "p1")
    pfedme, _ = run(setup, "pfedme", 1, "p2")
    other_seed, _ = run(setup, "pfedme", 0, "p3")
    assert fedavg.participation_sha256 == pfedme.participation_sha256 != other_seed.participation_sha256


def test_divergence_is_recorded_not_raised(setup):
    info, paths = run(setup, "pfedme_big_lambda", 0, "d")
    assert info.status == "diverged"
    assert 1 <= info.diverged_round <= 4
    metrics = pd.read_csv(paths.metrics)
    last = metrics[metrics["round"] == metrics["round"].max()]
    assert last["round"].iloc[0] == info.diverged_round
    assert (
        not last[last["metric"].str.contains("loss")]["value"]
        .map(lambda v: pd.notna(v) and abs(v) < 1e30)
        .all()
    )


def test_a_float32_cnn_is_split_only_under_the_budget_of_its_spec(tmp_path):
    cnn = {"name": "cnn", "channels": [2, 3], "hidden": 4}
    base = {**STUDY, "model": cnn, "runs": {"fedavg": {"algorithm": "fedavg"}}, "seeds": [0], "rounds": 2}
    auto = build_suite({"studies": {"t": base}}).studies["t"]
    dataset = load_dataset(auto.dataset, tmp_path)
    dataset.save(tmp_path / "data.npz")
    make_partition(auto.partition, dataset, 0).save(tmp_path / "part.npz")

    def rows(study, name, **kw):
        (tmp_path / name).mkdir()
        out = tmp_path / name
        paths = RunOutputs(out / "m.csv", out / "c.csv", out / "run.json", out / "final.pt")
        info = train(
            json.loads(study.run_json("fedavg")), 0, tmp_path / "data.npz", tmp_path / "part.npz", paths, **kw
        )
        return info.memory["rows_per_call"]

    assert rows(auto, "cli", memory_budget=0.01) is None  # a command-line budget: not in the spec, not split
    small = build_suite({"studies": {"t": {**base, "memory_budget": 0.01}}}).studies["t"]
    assert rows(small, "spec") == 1  # the spec's budget: split (and part of the job's params)


def test_a_cuda_job_computes_float32_without_tf32(monkeypatch):
    """``pick_device`` turns TensorFloat-32 off on CUDA (cuDNN's default is on), and leaves it on the CPU."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # flags only: nothing touches a GPU
    flags = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = True
        assert pick_device("cpu") == torch.device("cpu") and torch.backends.cudnn.allow_tf32
        assert pick_device("auto") == torch.device("cuda")
        assert not torch.backends.cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = flags
