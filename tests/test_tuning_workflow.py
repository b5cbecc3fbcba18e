"""A ``tune:`` block through the workflow: the grid points train on the tuning seeds, the ``tune`` stage picks
on validation data, the run trains with the choice; changing the grid reruns only that run's tuning."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from hetfl.data.clients import Partition
from hetfl.data.partition import partition_id
from hetfl.pipeline.records import RunRecord
from tests.conftest import TINY_STUDY
from tests.workflow_repo import REPO, copy_repo, planned, snakemake

pytestmark = pytest.mark.workflow

STUDY = {
    **{k: TINY_STUDY[k] for k in ("dataset", "model", "eval_every")},
    "partition": {**TINY_STUDY["partition"], "val_fraction": 0.2},
    "rounds": 3,
    "seeds": [0],
    "defaults": {"lr": 0.05, "batch_size": 8, "local_steps": 3, "clients_per_round": 3},
    "runs": {
        # a step of 1e-4 barely moves the model in 3 rounds: validation must pick 0.3
        "fedavg": {
            "algorithm": "fedavg",
            "tune": {"grid": {"lr": [0.0001, 0.3]}, "seeds": [5, 6], "metric": "val_loss_global"},
        },
        "local": {"algorithm": "local"},
    },
    "figures": ["test_acc_personal"],
}
# validation held out of the grid points only (tune.val_fraction): the run trains on every training sample
HELD_OUT = {
    **{k: v for k, v in STUDY.items() if k not in ("partition", "runs", "figures")},
    "partition": TINY_STUDY["partition"],
    # the grid's order is not its labels' text order ("fedavg@lr=0.0001" sorts first): the selection must pair
    # each point with its own records, and keep the grid's order
    "runs": {"fedavg": {"algorithm": "fedavg", "tune": {
        "grid": {"lr": [0.3, 0.0001]}, "seeds": [5], "metric": "val_loss_global", "val_fraction": 0.25}}},
}  # fmt: skip


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    root = copy_repo(tmp_path_factory.mktemp("tune"), {"studies": {"t": STUDY, "v": HELD_OUT}})
    snakemake(root)
    return root


def test_the_grid_trains_on_the_tuning_seeds_and_the_run_trains_with_the_choice(repo):
    for point in ("fedavg@lr=0.0001", "fedavg@lr=0.3"):
        for seed in (5, 6):
            assert (repo / f"results/runs/t/{point}/seed={seed}/metrics.csv").exists()
        assert not (repo / f"results/runs/t/{point}/seed=0").exists()  # not on the study's seeds
    choice = json.loads((repo / "results/tuning/t/fedavg/choice.json").read_text())
    assert choice["point"] == "fedavg@lr=0.3" and choice["hyperparameters"] == {"lr": 0.3}
    info = RunRecord.read(repo / "results/runs/t/fedavg/seed=0/run.json")
    assert info.spec["hyperparameters"]["lr"] == 0.3 and info.spec["tuned"]["point"] == "fedavg@lr=0.3"
    table = pd.read_csv(repo / "results/tables/t/tuning.csv")
    assert table["point"].tolist() == ["fedavg@lr=0.0001", "fedavg@lr=0.3"]
    assert table["chosen"].tolist() == ["no", "yes"] and (table["metric"] == "val_loss_global").all()
    runs = set(pd.read_csv(repo / "results/tables/t/metrics.csv")["run"])
    assert runs == {"fedavg", "local"}  # the grid points are not runs of the study's tables
    summary = (repo / "results/tables/t/summary.md").read_text()
    assert "| fedavg ‡ |" in summary and "‡ fedavg: hyper-parameters chosen on validation data" in summary
    assert "test_acc_personal val-selected (%)" in summary  # the round chosen on validation data too
    assert "Nothing to be done" in snakemake(repo, "-n").stdout


def test_tune_val_fraction_holds_validation_out_of_the_grid_points_only(repo):
    point = RunRecord.read(repo / "results/runs/v/fedavg@lr=0.3/seed=5/run.json").spec
    run = RunRecord.read(repo / "results/runs/v/fedavg/seed=0/run.json").spec
    assert point["partition"]["val_fraction"] == 0.25 and "val_fraction" not in run["partition"]
    assert run["hyperparameters"]["lr"] == 0.3 and run["tune"]["val_fraction"] == 0.25
    choice = json.loads((repo / "results/tuning/v/fedavg/choice.json").read_text())
    assert choice["point"] == "fedavg@lr=0.3" and choice["val_fraction"] == 0.25
    table = pd.read_csv(repo / "results/tables/v/tuning.csv")
    assert table["point"].tolist() == ["fedavg@lr=0.3", "fedavg@lr=0.0001"]  # the grid's order
    assert table["chosen"].tolist() == ["yes", "no"]
    point_metrics = set(pd.read_csv(repo / "results/runs/v/fedavg@lr=0.3/seed=5/metrics.csv")["metric"])
    run_metrics = set(pd.read_csv(repo / "results/runs/v/fedavg/seed=0/metrics.csv")["metric"])
    assert "val_loss_global" in point_metrics and not {m for m in run_metrics if m.startswith("val_")}
    files = {
        name: Partition.load(repo / f"results/partitions/digits/{pid}/seed={seed}/clients.npz")
        for name, spec, seed in (("point", point, 5), ("run", run, 0))
        for pid in [partition_id({k: v for k, v in spec["partition"].items() if k != "seed"})]
    }
    assert files["run"].val is None  # the run's clients train on all of their training samples
    held, kept = map(np.array, ([v.size for v in files["point"].val], [t.size for t in files["point"].train]))
    assert (held == np.maximum(1, ((held + kept) * 0.25).astype(int))).all()  # a quarter held out per client


def test_changing_the_grid_reruns_only_that_runs_tuning(repo):
    override = repo / "more.yaml"
    grid = {"lr": [0.0001, 0.3, 0.1]}
    override.write_text(yaml.safe_dump({"studies": {"t": {"runs": {"fedavg": {**STUDY["runs"]["fedavg"], "tune": {
        **STUDY["runs"]["fedavg"]["tune"], "grid": grid}}}}}}))  # fmt: skip
    jobs = planned(repo, "--configfile", "config/config.yaml", str(override))
    trains = sorted((w["run"], w["seed"]) for rule, w in jobs if rule == "train")
    assert trains == [("fedavg", "0"), ("fedavg@lr=0.1", "5"), ("fedavg@lr=0.1", "6")]
    assert sorted(w.get("run", "") for rule, w in jobs if rule == "tune") == ["fedavg"]


def test_editing_apply_choice_retrains_with_the_choice(repo):
    """`apply_choice`, which puts the chosen values into the tuned run's spec in its training job, is in the
    training jobs' code fingerprint (it lives in hetfl.pipeline.train, which every training job runs): a code change
    to it replans the training (the tuned run's among them), and nothing upstream of it."""
    path = repo / "src/hetfl/pipeline/train.py"
    original = path.read_text()
    old = '    unknown = sorted(set(choice["hyperparameters"]) - set(spec["hyperparameters"]))\n'
    assert original.count(old) == 1
    try:
        path.write_text(original.replace(old, old + "    unknown = list(unknown)\n"))
        jobs = planned(repo)
        trains = sorted((w["run"], w["seed"]) for rule, w in jobs if rule == "train" and w["study"] == "t")
        points = [(f"fedavg@lr={lr}", str(seed)) for lr in (0.0001, 0.3) for seed in (5, 6)]
        assert trains == sorted([("fedavg", "0"), ("local", "0"), *points])
        assert not [rule for rule, _ in jobs if rule in ("data", "partition", "partition_stats")]
    finally:
        path.write_text(original)
    assert "Nothing to be done" in snakemake(repo, "-n").stdout


def test_a_tuned_run_stays_out_of_the_short_jobs_groups(repo):
    """profiles/slurm submits short training jobs in groups; a tuned run waits on its grid points through the
    `tune` stage, so it is a job of its own (in a group with them, the group would wait on itself, which
    Snakemake refuses)."""
    out = snakemake(repo, "-n", "--forceall", "--group-components", "train_short=8").stdout
    groups = re.findall(r"Group job train_short .*?\n\n(.*?)(?=\n\[|\Z)", out, re.S)
    assert len(groups) == 1
    grouped = re.findall(r"wildcards: (?:key|study)=t/?([^,\n]*)", groups[0])
    assert "fedavg" not in grouped and "local" in str(groups[0]) and "fedavg@lr=0.3" in str(groups[0])
    assert re.search(r"\nrule train:\n(?:.*\n)*?\s+wildcards: study=t, run=fedavg, seed=0", out)


def test_the_selection_stage_runs_on_the_submitting_node():
    text = (REPO / "Snakefile").read_text()
    local = text[text.index("localrules:") : text.index("include:")]
    assert "tune," in local and "tuning_table," in local and "train" not in local  # the grid: train jobs
