"""Your own data through the whole workflow: an npz file and a LEAF JSON pair written here go through
data → partition → train → tables and figures; editing one byte of a file replans exactly its dataset's
jobs; adding an algorithm module and a dataset module changes no existing job's fingerprint."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.test_data_user_files import write_leaf, write_npz
from tests.workflow_repo import copy_repo, planned, snakemake

pytestmark = pytest.mark.workflow

COMMON = {
    "model": {"name": "mlr"},
    "rounds": 2,
    "seeds": [0],
    "defaults": {"lr": 0.1, "batch_size": 4},
    "figures": ["test_acc_personal"],
}
STUDIES = {
    "mine_npz": {
        **COMMON,
        "dataset": {"name": "npz", "path": "userdata/mine.npz"},
        "partition": {"scheme": "natural", "test_fraction": 0.25, "val_fraction": 0.2},
        "runs": {"fedavg": {"algorithm": "fedavg", "local_steps": 2}, "local": {"algorithm": "local"}},
        "claims": ["local.val_acc_personal >= 0"],
    },
    "mine_leaf": {
        **COMMON,
        "dataset": {"name": "leaf", "train": "userdata/leaf/train.json", "test": "userdata/leaf/test.json"},
        "partition": {"scheme": "natural"},
        "runs": {"fedavg": {"algorithm": "fedavg", "local_steps": 2}},
    },
}


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    root = copy_repo(tmp_path_factory.mktemp("own"), {"studies": STUDIES})
    (root / "userdata/leaf").mkdir(parents=True)
    write_npz(root / "userdata/mine.npz", per_client=20)
    write_leaf(root / "userdata/leaf")
    snakemake(root)
    return root


def test_both_files_run_through_to_tables_with_validation_metrics(repo):
    for study, runs in (("mine_npz", ("fedavg", "local")), ("mine_leaf", ("fedavg",))):
        assert (repo / f"results/tables/{study}/summary.md").stat().st_size > 0
        for run in runs:
            metrics = set(pd.read_csv(repo / f"results/runs/{study}/{run}/seed=0/metrics.csv")["metric"])
            assert {"test_acc_personal", "train_loss_personal"} <= metrics
            assert (
                ("val_acc_personal" in metrics) == ("val_loss_personal" in metrics) == (study == "mine_npz")
            )
    clients = np.load(next((repo / "results/partitions").glob("npz-*/*/seed=0/clients.npz")))
    assert "val_indices" in clients.files
    assert "Nothing to be done" in snakemake(repo, "-n").stdout


def test_editing_one_byte_replans_that_datasets_jobs_only(repo):
    path = repo / "userdata/mine.npz"
    original = path.read_bytes()
    arrays = dict(np.load(path))
    arrays["x"][0, 0] += 1.0  # one value of the features
    try:
        np.savez(path, **arrays)
        jobs = planned(repo)
        assert {rule for rule, _ in jobs} >= {"data", "partition", "train"}
        assert {w["study"] for rule, w in jobs if rule == "train"} == {"mine_npz"}
        assert {w["dataset"] for rule, w in jobs if rule in ("data", "partition")} == {
            next(p.name for p in (repo / "results/data").iterdir() if p.name.startswith("npz-"))
        }
    finally:
        path.write_bytes(original)


def test_a_new_algorithm_and_dataset_module_rerun_nothing(repo):
    new = {
        "src/hetfl/algorithms/baselines/fedavg_copy.py": (
            '"""A new algorithm module."""\n\nfrom hetfl.algorithms.baselines.fedavg import FedAvg\n\n\n'
            'class FedAvgCopy(FedAvg):\n    name = "fedavg_copy"\n\n\nALGORITHMS = {"fedavg_copy": FedAvgCopy}\n'
        ),
        "src/hetfl/data/tiny_extra.py": (
            '"""A new dataset module."""\n\nfrom hetfl.data.digits import Digits\n\n\n'
            'class Extra(Digits):\n    name = "tiny_extra"\n\n\nDATASETS = [Extra]\n'
        ),
    }
    try:
        for path, text in new.items():
            (repo / path).write_text(text)
        check = subprocess.run(
            [sys.executable, "-c", "from hetfl.data import dataset_names; from hetfl.algorithms import names; "
             "print('tiny_extra' in dataset_names(), 'fedavg_copy' in names())"],
            cwd=repo, env={"PYTHONPATH": str(repo / "src"), "PATH": ""}, capture_output=True, text=True,
        )  # fmt: skip
        assert check.stdout.split() == ["True", "True"], check.stderr  # both are discovered
        assert "Nothing to be done" in snakemake(repo, "-n").stdout
    finally:
        for path in new:
            (repo / path).unlink(missing_ok=True)
